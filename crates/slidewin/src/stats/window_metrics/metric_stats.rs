//! [`MetricStats`], the figures of a window or of one bucket, as read from a
//! [`WindowMetrics`](super::WindowMetrics).

use std::time::Duration;

use super::MetricEvent;
use super::slot::{RT_COUNT, RT_SUM, SlotRead};
use crate::time::Moment;

/// The figures of a [`WindowMetrics`](crate::WindowMetrics) window or of one of its buckets: counts per
/// [`MetricEvent`], response times, and the time they cover.
///
/// Counts saturate rather than wrap: a count is exact unless it reads `u64::MAX`, which means
/// at least 2^63 (a bucket reached 2^63, or the buckets' sum passed `u64::MAX`). The RT sum
/// adds the buckets' sums exactly (in 128 bits) and reads [`Duration::MAX`] only when a
/// bucket's sum reached 2^63 ns (292 years).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::stats::MetricEvent;
/// use slidewin::{Moment, WindowMetrics};
///
/// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
/// metrics.add(Moment::from_millis(100), MetricEvent::Success, 3);
/// metrics.add(Moment::from_millis(100), MetricEvent::Exception, 1);
/// let stats = metrics.stats(Moment::from_millis(400));
/// assert_eq!(stats.covered(), Duration::from_millis(500)); // at least one bucket
/// assert_eq!(stats.rate(MetricEvent::Success), 6.0);
/// assert_eq!(stats.exception_ratio(), Some(0.25));
/// assert_eq!(stats.avg_rt(), None);
/// # Ok::<(), slidewin::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricStats {
    start: Moment,
    covered: Duration,
    /// Per event, then the number of RTs; saturating.
    counts: [u64; RT_SUM],
    /// The RT sum in nanoseconds; `None` once a bucket's saturated.
    rt_sum: Option<u128>,
    /// In nanoseconds; `u64::MAX` is saturated (past 78 hours).
    min_rt: Option<u64>,
    max_rt: Option<u64>,
}

impl MetricStats {
    pub(super) fn empty(start: Moment, covered: Duration) -> MetricStats {
        MetricStats {
            start,
            covered,
            counts: [0; RT_SUM],
            rt_sum: Some(0),
            min_rt: None,
            max_rt: None,
        }
    }

    pub(super) fn merge(&mut self, read: &SlotRead) {
        for (sum, n) in self.counts.iter_mut().zip(read.counts) {
            *sum = sum.saturating_add(n);
        }
        // A bucket's unsaturated sum is below 2^63, and there are at most 2^16 buckets.
        let bucket_sum = read.counts[RT_SUM];
        self.rt_sum = self
            .rt_sum
            .filter(|_| bucket_sum != u64::MAX)
            .map(|sum| sum + u128::from(bucket_sum));
        self.min_rt = self.min_rt.into_iter().chain(read.min_rt).min();
        self.max_rt = self.max_rt.into_iter().chain(read.max_rt).max();
    }

    /// Where the covered time begins: the start of the oldest valid bucket, or the ring's
    /// `start` if later (for one bucket, its start).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::from_millis(200))?;
    /// metrics.add(Moment::from_millis(300), MetricEvent::Pass, 1);
    /// assert_eq!(metrics.stats(Moment::from_millis(300)).start(), Moment::from_millis(200));
    /// assert_eq!(metrics.stats(Moment::from_millis(1_300)).start(), Moment::from_millis(500));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn start(&self) -> Moment {
        self.start
    }

    /// The time the figures cover: from [`start`](MetricStats::start) to the time read, at
    /// least one bucket (for one bucket, its length).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// assert_eq!(metrics.stats(Moment::from_millis(700)).covered(), Duration::from_millis(700));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn covered(&self) -> Duration {
        self.covered
    }

    /// How many `event`s: exact, or `u64::MAX` when saturated (at least 2^63).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add(Moment::from_millis(100), MetricEvent::Block, 1 << 62);
    /// metrics.add(Moment::from_millis(600), MetricEvent::Block, 1 << 62);
    /// // Two buckets of 2^62: the sum is exact.
    /// assert_eq!(metrics.stats(Moment::from_millis(600)).count(MetricEvent::Block), 1 << 63);
    /// // A third 2^62 in one bucket takes it to 2^63: saturated.
    /// metrics.add(Moment::from_millis(600), MetricEvent::Block, 1 << 62);
    /// assert_eq!(metrics.stats(Moment::from_millis(600)).count(MetricEvent::Block), u64::MAX);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn count(&self, event: MetricEvent) -> u64 {
        self.counts[event.index()]
    }

    /// `event`s per second of [`covered`](MetricStats::covered) time (from a saturated count,
    /// `u64::MAX` of them).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add(Moment::from_millis(100), MetricEvent::Pass, 50);
    /// assert_eq!(metrics.stats(Moment::from_millis(500)).rate(MetricEvent::Pass), 100.0);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn rate(&self, event: MetricEvent) -> f64 {
        #[allow(
            clippy::cast_precision_loss,
            reason = "a rate needs no more than 53 bits"
        )]
        let count = self.count(event) as f64;
        count / self.covered.as_secs_f64()
    }

    /// How many response times were recorded: exact, or `u64::MAX` when saturated.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add_rt(Moment::from_millis(100), Duration::from_millis(4));
    /// assert_eq!(metrics.stats(Moment::from_millis(100)).rt_count(), 1);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn rt_count(&self) -> u64 {
        self.counts[RT_COUNT]
    }

    /// The sum of the response times: exact (the buckets' sums are added in 128 bits), or
    /// [`Duration::MAX`] when a bucket's sum reached 2^63 ns (292 years): saturated.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// let century = Duration::from_secs(100 * 365 * 86_400);
    /// for _ in 0..2 {
    ///     metrics.add_rt(Moment::from_millis(100), century); // 200 years in [0, 500 ms)
    ///     metrics.add_rt(Moment::from_millis(600), century); // 200 years in [500 ms, 1 s)
    /// }
    /// assert_eq!(metrics.stats(Moment::from_millis(600)).rt_sum(), century * 4);
    /// metrics.add_rt(Moment::from_millis(600), century); // 300 years in one bucket
    /// assert_eq!(metrics.stats(Moment::from_millis(600)).rt_sum(), Duration::MAX);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn rt_sum(&self) -> Duration {
        self.rt_sum.map_or(Duration::MAX, nanos_to_duration)
    }

    /// The mean response time, if any was recorded (rounded down to the nanosecond);
    /// [`Duration::MAX`] when the sum is saturated.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// assert_eq!(metrics.stats(Moment::ZERO).avg_rt(), None);
    /// metrics.add_rt(Moment::from_millis(100), Duration::from_millis(3));
    /// metrics.add_rt(Moment::from_millis(100), Duration::from_millis(4));
    /// assert_eq!(metrics.stats(Moment::from_millis(100)).avg_rt(), Some(Duration::from_micros(3_500)));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn avg_rt(&self) -> Option<Duration> {
        let count = self.rt_count();
        (count > 0).then(|| {
            self.rt_sum.map_or(Duration::MAX, |sum| {
                nanos_to_duration(sum / u128::from(count))
            })
        })
    }

    /// The smallest response time, if any was recorded: exact up to 78 hours, and
    /// [`Duration::MAX`] (saturated) when every one was longer.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add_rt(Moment::from_millis(100), Duration::from_secs(100 * 3_600));
    /// assert_eq!(metrics.stats(Moment::from_millis(100)).min_rt(), Some(Duration::MAX));
    /// metrics.add_rt(Moment::from_millis(100), Duration::from_millis(8));
    /// assert_eq!(metrics.stats(Moment::from_millis(100)).min_rt(), Some(Duration::from_millis(8)));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn min_rt(&self) -> Option<Duration> {
        self.min_rt.map(extreme_duration)
    }

    /// The largest response time, if any was recorded: exact up to 78 hours, and
    /// [`Duration::MAX`] (saturated) when one was longer.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add_rt(Moment::from_millis(100), Duration::from_secs(78 * 3_600));
    /// assert_eq!(metrics.stats(Moment::from_millis(100)).max_rt(), Some(Duration::from_secs(78 * 3_600)));
    /// metrics.add_rt(Moment::from_millis(100), Duration::from_secs(79 * 3_600));
    /// assert_eq!(metrics.stats(Moment::from_millis(100)).max_rt(), Some(Duration::MAX));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn max_rt(&self) -> Option<Duration> {
        self.max_rt.map(extreme_duration)
    }

    /// Exceptions over completions (`Success + Exception`), if any completed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// assert_eq!(metrics.stats(Moment::ZERO).exception_ratio(), None);
    /// metrics.add(Moment::ZERO, MetricEvent::Success, 3);
    /// metrics.add(Moment::ZERO, MetricEvent::Exception, 1);
    /// assert_eq!(metrics.stats(Moment::ZERO).exception_ratio(), Some(0.25));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn exception_ratio(&self) -> Option<f64> {
        let exceptions = self.count(MetricEvent::Exception);
        let completed = self.count(MetricEvent::Success).saturating_add(exceptions);
        #[allow(
            clippy::cast_precision_loss,
            reason = "a ratio needs no more than 53 bits"
        )]
        (completed > 0).then(|| exceptions as f64 / completed as f64)
    }
}

/// Nanoseconds as a `Duration`; any `u128` below 2^64 seconds fits (a window's RT sum is below
/// 2^79 ns).
fn nanos_to_duration(nanos: u128) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    match u64::try_from(nanos / NANOS_PER_SEC) {
        #[allow(clippy::cast_possible_truncation, reason = "below 10^9")]
        Ok(secs) => Duration::new(secs, (nanos % NANOS_PER_SEC) as u32),
        Err(_) => Duration::MAX,
    }
}

/// A min or max RT as read: `u64::MAX` nanoseconds is saturated.
fn extreme_duration(nanos: u64) -> Duration {
    if nanos == u64::MAX {
        Duration::MAX
    } else {
        Duration::from_nanos(nanos)
    }
}
