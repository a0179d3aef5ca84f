//! slidewin-shape's integration tests, one module a file, in one binary: one link instead of
//! one a file. Apart: `memory.rs`, which installs a counting global allocator.

mod debouncer;
mod delay;
mod keyed_model;
mod latest;
mod runtime;
#[allow(clippy::module_inception)] // its example, included as a module of the same name
mod search_box;
mod support;
mod until_ready;
