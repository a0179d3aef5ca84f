//! slidewin-http's integration tests, one module a file, in one binary: one link instead of
//! one a file.

mod breaker;
mod client_ip;
mod fields;
mod in_flight;
mod layer;
mod layer_edges;
mod partition;
mod reserve;
mod shed;
mod support;
