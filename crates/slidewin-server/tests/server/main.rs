//! slidewin-server's tests through its public API and its real ports, one module per subject,
//! in one binary: one link instead of one a module. `tests/hostile/` keeps a binary of its own,
//! since its counting allocator is global and would count every other test's allocations too.

mod access;
mod dashboard_live;
mod envoy_examples;
mod health;
mod listeners;
mod redis_tls;
mod service;
mod tls;

/// The helpers the modules share, in `tests/support/` beside `tests/hostile/`'s.
mod support {
    pub(crate) use super::{browser, server};
}
#[path = "../support/browser.rs"]
mod browser;
#[path = "../support/server.rs"]
mod server;
