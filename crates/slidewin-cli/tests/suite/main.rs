//! The `slidewin` command's tests, run on the built binary, one module a file, in one binary:
//! one link instead of one a file.

mod deploy;
mod envoy;
mod otlp;
mod period;
mod replay;
mod serve;
