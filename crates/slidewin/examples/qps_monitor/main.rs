//! A service's request metrics, second by second: QPS, response times and exception ratio from
//! a `WindowMetrics` (Sentinel's default window, 2 buckets of 500 ms), beside what Sentinel's
//! formula (the valid buckets' sum over the whole interval) would have shown and the exact
//! count of the last second. Simulated traffic; deterministic.
//!
//! ```text
//! cargo run --example qps_monitor
//! ```

mod monitor;

fn main() {
    print!("{}", monitor::render());
}
