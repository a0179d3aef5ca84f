//! Nothing here: the package is its bench, `benches/engine_vs_limitador.rs`.
