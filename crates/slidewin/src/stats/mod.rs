//! Statistics over a sliding window, in buckets: how much, how fast, lately.
//!
//! Both structures fold events into buckets aligned on the timeline, so memory follows the
//! number of buckets, not of events, and every figure is within one bucket of the exact
//! window. When each event matters, or a count must be exact, use an
//! [`EventWindow`](crate::EventWindow) instead.
//!
//! | structure | pick it for | figures | threads |
//! |---|---|---|---|
//! | [`MovingStat`] | any number: bytes, latencies, reconnects | sum, count, rate, min, max, mean ([`Tally`]) | one owner (`&mut`) |
//! | [`WindowMetrics`] | requests: [`MetricEvent`]s and response times | counts and rates per event, RT avg/min/max, exception ratio, buckets ([`MetricStats`]) | shared (`&self`), lock-free |
//!
//! [`SampleError`] is a sample `MovingStat` refused (NaN, an infinity, a sum past `f64::MAX`).
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use slidewin::stats::MetricEvent;
//! use slidewin::{Moment, MovingStat, WindowMetrics};
//!
//! // A reconnect loop: 20 closes in the first 3 s of a 30 s window is a rate of 6.67/s.
//! let mut reconnects = MovingStat::new(Duration::from_secs(30), Duration::from_secs(1), Moment::ZERO)?;
//! for i in 0..20 {
//!     reconnects.add(Moment::from_millis(i * 150), 1.0)?;
//! }
//! assert!(reconnects.tally(Moment::from_secs(3)).rate() >= 1.0); // back off
//!
//! // Sentinel's default window: 2 buckets of 500 ms, shared by threads.
//! let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
//! metrics.add(Moment::from_millis(10), MetricEvent::Pass, 1);
//! metrics.add_rt(Moment::from_millis(10), Duration::from_millis(25));
//! let stats = metrics.stats(Moment::from_millis(20));
//! assert_eq!(stats.count(MetricEvent::Pass), 1);
//! assert_eq!(stats.avg_rt(), Some(Duration::from_millis(25)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod moving_stat;
mod window_metrics;

pub use moving_stat::{MovingStat, SampleError, Tally};
pub use window_metrics::{MetricEvent, MetricStats, WindowMetrics};
