//! slidewin-redis's integration tests, one module a file, in one binary: one link instead of
//! one a file. Each test starts Redis servers of its own (`support`).

mod batching;
mod cluster;
mod concurrency;
mod limit_edges;
mod lua;
mod outage;
mod same_answers;
mod sentinel;
mod settle;
mod shared_login_throttle;
mod single;
mod support;
