//! slidewin's integration tests, one module a file, in one binary: one link instead of one
//! a file. Apart: `keyed.rs` and `event_window_memory.rs` (each installs a counting global
//! allocator) and the loom models (`--cfg loom`, run by scripts/test by name).

mod api_quota;
mod breaker;
mod breaker_props;
mod breaker_sentinel;
mod calendar;
mod calendar_props;
mod carry;
mod carry_props;
mod debounce_props;
mod event_window_props;
mod interval_props;
#[allow(clippy::module_inception)] // its example, included as a module of the same name
mod joined;
mod leases;
mod limit_concurrency;
mod limit_extremes;
mod limit_props;
mod login_throttle;
mod metrics_concurrency;
mod metrics_edges;
mod metrics_props;
mod moving_stat;
mod moving_stat_props;
mod period;
mod period_props;
mod qps_monitor;
mod quota;
mod quota_props;
mod reconnect_backoff;
// As in the two files that use it, which it was a module of before.
#[allow(
    clippy::cast_possible_truncation,
    reason = "counts and indices in tests are far below 2^32"
)]
mod reference;
mod reserve;
mod reserve_edges;
mod reserve_props;
mod rule_set;
mod shed;
mod shed_props;
