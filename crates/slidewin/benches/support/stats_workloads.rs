//! The statistics' workloads, shared by the criterion bench (`stats`) and the interleaved one
//! (`stats_ab`): each runs `ops` operations and returns something to keep the work alive.

// Shared by several bench crates, each of which uses a part.
#![allow(dead_code, unreachable_pub)]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::Duration;

use sentinel_core::base::{MetricEvent as SentinelEvent, ReadStat, ResourceType, WriteStat};
use slidewin::stats::MetricEvent;
use slidewin::{Clock, Moment, MovingStat, WindowMetrics};

#[path = "stats_baselines.rs"]
mod stats_baselines;
pub use stats_baselines::{MutexMetrics, NaiveStat};

/// Events are recorded 1 µs apart: 1,000,000 per second, a bucket recycled every 500,000.
pub const STEP: u64 = 1_000;

/// Sentinel's default window: 2 buckets of 500 ms.
pub fn sentinel_default() -> WindowMetrics {
    WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO).unwrap()
}

pub fn mutex_default() -> MutexMetrics {
    MutexMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)
}

/// `ops` events at explicit times from `base`, `STEP` apart. Returns the next base.
pub fn record_ours(m: &WindowMetrics, base: u64, ops: u64) -> u64 {
    for i in 0..ops {
        m.add(Moment::from_nanos(base + i * STEP), MetricEvent::Pass, 1);
    }
    base + ops * STEP
}

pub fn record_mutex(m: &MutexMetrics, base: u64, ops: u64) -> u64 {
    for i in 0..ops {
        m.add(Moment::from_nanos(base + i * STEP), MetricEvent::Pass, 1);
    }
    base + ops * STEP
}

/// The clock sentinel-core reads: its cached milliseconds (a background thread stores the time
/// in an atomic every millisecond, its default configuration), as a slidewin `Clock`.
#[derive(Clone, Copy)]
pub struct SentinelClock;

impl Clock for SentinelClock {
    fn now(&self) -> Moment {
        Moment::from_millis(sentinel_core::utils::curr_time_millis())
    }
}

/// sentinel-core's resource node (its `BucketLeapArray`, 20 buckets of 500 ms, behind a
/// sliding-window metric of 2 buckets), with its time ticker started. Its leap array is
/// crate-private; this is the public way to write to it.
pub fn sentinel_node() -> Arc<impl WriteStat + ReadStat> {
    static TICKER: OnceLock<()> = OnceLock::new();
    TICKER.get_or_init(sentinel_core::utils::start_time_ticker);
    sentinel_core::stat::get_or_create_resource_node(
        &"slidewin-bench".to_string(),
        &ResourceType::Common,
    )
}

pub fn record_sentinel(node: &impl WriteStat, ops: u64) {
    for _ in 0..ops {
        node.add_count(SentinelEvent::Pass, 1);
    }
}

pub fn record_ours_sentinel_clock(m: &WindowMetrics, ops: u64) {
    for _ in 0..ops {
        m.add_now(&SentinelClock, MetricEvent::Pass, 1);
    }
}

pub fn sentinel_qps(node: &impl ReadStat) -> f64 {
    node.qps(SentinelEvent::Pass)
}

/// A ring of `buckets` buckets over `buckets` seconds with every bucket recorded in, and the
/// time to read it at (mid-bucket).
pub fn filled(buckets: u32) -> (WindowMetrics, MutexMetrics, Moment) {
    let span = Duration::from_secs(u64::from(buckets));
    let ours = WindowMetrics::new(span, buckets, Moment::ZERO).unwrap();
    let mutex = MutexMetrics::new(span, u64::from(buckets), Moment::ZERO);
    for ms in 0..u64::from(buckets) * 1_000 {
        let t = Moment::from_millis(ms);
        ours.add(t, MetricEvent::Pass, 1);
        mutex.add(t, MetricEvent::Pass, 1);
    }
    (
        ours,
        mutex,
        Moment::from_millis(u64::from(buckets) * 1_000 - 500),
    )
}

/// `MovingStat`'s workload: one sample per millisecond for 120 s (a window of 60 s in buckets
/// of 1 s), the figures read after every `every` samples.
pub const MOVING_EVENTS: u64 = 120_000;

pub fn moving_ours(every: u64) -> f64 {
    let mut stat = MovingStat::new(
        Duration::from_secs(60),
        Duration::from_secs(1),
        Moment::ZERO,
    )
    .unwrap();
    let mut acc = 0.0;
    for i in 0..MOVING_EVENTS {
        let t = Moment::from_millis(i);
        stat.add(t, (i % 100) as f64).unwrap();
        if i % every == 0 {
            let tally = stat.tally(t);
            acc += tally.sum() + tally.rate() + tally.max().unwrap_or(0.0);
        }
    }
    black_box(acc)
}

pub fn moving_naive(every: u64) -> f64 {
    let mut stat = NaiveStat::new(Duration::from_secs(60), Moment::ZERO);
    let mut acc = 0.0;
    for i in 0..MOVING_EVENTS {
        let t = Moment::from_millis(i);
        stat.add(t, (i % 100) as f64);
        if i % every == 0 {
            let f = stat.tally(t);
            acc += f.sum + f.rate + f.max.unwrap_or(0.0);
        }
    }
    black_box(acc)
}

/// Runs `work(thread)` on `threads` threads at once; the wall time.
pub fn on_threads(threads: u64, work: &(dyn Fn(u64) + Sync)) -> Duration {
    let start = std::time::Instant::now();
    std::thread::scope(|scope| {
        for thread in 0..threads {
            scope.spawn(move || work(thread));
        }
    });
    start.elapsed()
}
