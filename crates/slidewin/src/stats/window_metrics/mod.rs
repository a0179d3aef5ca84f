//! [`WindowMetrics`]: request metrics over a sliding window, shared by threads without a lock
//! (Sentinel's `LeapArray` done right).
//!
//! The type and its writes are here; its reads are in `read`, the figures they answer
//! ([`MetricStats`]) in `metric_stats`, and a bucket's lock-free slot in `slot`.

mod metric_stats;
mod read;
mod slot;

use std::fmt;
use std::time::Duration;

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering};

use crate::divisor::Divisor;
use crate::error::ConfigError;
use crate::time::{Clock, Moment, duration_nanos};
pub use metric_stats::MetricStats;
use slot::Slot;

/// What happened to a request, as [`WindowMetrics`] counts it.
///
/// # Example
///
/// ```
/// use slidewin::stats::MetricEvent;
/// assert_eq!(MetricEvent::ALL.len(), 4);
/// assert_eq!(MetricEvent::Block.to_string(), "block");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MetricEvent {
    /// A request was let through.
    Pass,
    /// A request was refused (by a limit, a circuit breaker).
    Block,
    /// A request completed normally.
    Success,
    /// A request completed with an error.
    Exception,
}

impl MetricEvent {
    /// Every event, in declaration order.
    pub const ALL: [MetricEvent; 4] = [
        MetricEvent::Pass,
        MetricEvent::Block,
        MetricEvent::Success,
        MetricEvent::Exception,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for MetricEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MetricEvent::Pass => "pass",
            MetricEvent::Block => "block",
            MetricEvent::Success => "success",
            MetricEvent::Exception => "exception",
        })
    }
}

/// Request metrics over a sliding window, shared by threads: a ring of `buckets` buckets over
/// `span`, each counting [`MetricEvent`]s and response times (sum, min, max).
///
/// `Send + Sync`, with no lock: recording an event is one division, two loads and one atomic
/// add; a bucket is recycled for a new time with a compare-and-swap and never by zeroing, so
/// an event is counted in exactly the bucket of its time, or in a fresher one, and never
/// erased while its bucket is current (see ARCHITECTURE.md). Reads are O(`buckets`).
///
/// Buckets are aligned on the timeline (`[k * len, (k + 1) * len)`, `len = span / buckets`).
/// At `now`, the window is the bucket holding `now` and the `buckets - 1` before it: a bucket
/// is valid while `now < start + span`, the half-open rule of Sentinel PR #3480. The oldest
/// part of `(now - span, now]` (less than a bucket) is thus not
/// counted: reads are within one bucket of the exact window, and rates divide by the time the
/// valid buckets cover (from the oldest one's start, or from `start`, to `now`; at least one
/// bucket), not by the whole span, so they do not under-read just after a boundary.
///
/// Time is a parameter. The ring keeps a timeline of its own that never goes back (the newest
/// bucket recorded): an event older than the window on it is counted in the newest bucket, and
/// a read at an earlier time reads at the newest bucket's end, so a clock that jumps back
/// neither loses events nor breaks reads.
///
/// Counts **saturate**, they never wrap: a bucket counts each event, and the nanoseconds of its
/// response times, exactly below 2^63 (9.2 × 10^18, 292 years of nanoseconds); a bucket that
/// reaches 2^63 reads `u64::MAX` for that figure, and so does a window whose sum passes it (see
/// [`MetricStats`]). Below the bound, nothing is rounded or dropped.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::stats::MetricEvent;
/// use slidewin::{Moment, WindowMetrics};
///
/// // Sentinel's default: two buckets of 500 ms.
/// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
/// for ms in 0..1_000 {
///     metrics.add(Moment::from_millis(ms), MetricEvent::Pass, 1);
///     metrics.add_rt(Moment::from_millis(ms), Duration::from_millis(20 + ms % 10));
/// }
/// metrics.add(Moment::from_millis(999), MetricEvent::Exception, 5);
///
/// // Just after a boundary only [500 ms, 1 s) and [1 s, 1.5 s) are valid; they cover 500 ms.
/// let stats = metrics.stats(Moment::from_secs(1));
/// assert_eq!(stats.count(MetricEvent::Pass), 500);
/// assert_eq!(stats.rate(MetricEvent::Pass), 1_000.0); // Sentinel's formula reads 500
/// assert_eq!(stats.min_rt(), Some(Duration::from_millis(20)));
/// assert_eq!(stats.max_rt(), Some(Duration::from_millis(29)));
/// # Ok::<(), slidewin::ConfigError>(())
/// ```
pub struct WindowMetrics {
    /// Bucket length in nanoseconds; at least 2.
    bucket: u64,
    /// Divides by `bucket` without a division instruction (see `Divisor`).
    divisor: Divisor,
    /// The number of valid buckets (the window).
    bucket_count: u64,
    /// The ring has a power of two of slots (at least `bucket_count`), found by a mask.
    mask: u64,
    /// Rates count time from here.
    start: Moment,
    /// The newest epoch (bucket number) recorded: the ring's timeline.
    newest: AtomicU64,
    slots: Box<[Slot]>,
}

impl WindowMetrics {
    /// The most buckets [`new`](WindowMetrics::new) accepts: the ring is allocated up front,
    /// 128 bytes a bucket.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, WindowMetrics};
    /// let too_many = WindowMetrics::MAX_BUCKETS + 1;
    /// let err = WindowMetrics::new(Duration::from_secs(60), too_many, Moment::ZERO).unwrap_err();
    /// assert_eq!(err.to_string(), "buckets must be at most 65536, got 65537");
    /// ```
    pub const MAX_BUCKETS: u32 = 1 << 16;

    /// An empty ring of `buckets` buckets over `span`, whose rates count time from `start`
    /// (usually the time it is created).
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroSpan`] for a zero span, [`ConfigError::SpanTooLong`] past 584 years,
    /// [`ConfigError::ZeroBuckets`], [`ConfigError::TooManyBuckets`] past
    /// [`MAX_BUCKETS`](WindowMetrics::MAX_BUCKETS), and [`ConfigError::SpanNotDivisible`]
    /// unless `span` splits into `buckets` buckets of a whole number of nanoseconds, at least 2
    /// each.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{ConfigError, Moment, WindowMetrics};
    ///
    /// let metrics = WindowMetrics::new(Duration::from_secs(60), 60, Moment::ZERO)?;
    /// assert_eq!(metrics.bucket(), Duration::from_secs(1));
    ///
    /// let err = WindowMetrics::new(Duration::from_nanos(100), 3, Moment::ZERO).unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "the span 100ns does not split into 3 buckets of a whole number of nanoseconds \
    ///      (at least 2ns each)"
    /// );
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn new(span: Duration, buckets: u32, start: Moment) -> Result<WindowMetrics, ConfigError> {
        let nanos = duration_nanos(span).ok_or(ConfigError::SpanTooLong { span })?;
        if nanos == 0 {
            return Err(ConfigError::ZeroSpan);
        }
        if buckets == 0 {
            return Err(ConfigError::ZeroBuckets);
        }
        if buckets > WindowMetrics::MAX_BUCKETS {
            return Err(ConfigError::TooManyBuckets {
                buckets,
                max: WindowMetrics::MAX_BUCKETS,
            });
        }
        let bucket_count = u64::from(buckets);
        let bucket = nanos / bucket_count;
        // Two nanoseconds at least: the stamp keeps the epoch in 63 bits (and a division by
        // 1 needs no divisor).
        let divisor = match Divisor::new(bucket) {
            Some(divisor) if nanos % bucket_count == 0 => divisor,
            _ => return Err(ConfigError::SpanNotDivisible { span, buckets }),
        };
        let slots = bucket_count.next_power_of_two();
        let newest = start.as_nanos() / bucket;
        Ok(WindowMetrics {
            bucket,
            divisor,
            bucket_count,
            mask: slots - 1,
            start,
            newest: AtomicU64::new(newest),
            // Every slot starts empty at epoch 0; reads skip a slot whose epoch is not its own.
            slots: (0..slots).map(|_| Slot::new(0)).collect(),
        })
    }

    /// The span of the window.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(10), 20, Moment::ZERO)?;
    /// assert_eq!(metrics.span(), Duration::from_secs(10));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn span(&self) -> Duration {
        Duration::from_nanos(self.bucket * self.bucket_count)
    }

    /// The length of a bucket: `span / buckets`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(10), 20, Moment::ZERO)?;
    /// assert_eq!(metrics.bucket(), Duration::from_millis(500));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn bucket(&self) -> Duration {
        Duration::from_nanos(self.bucket)
    }

    /// The number of buckets in the window.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// assert_eq!(metrics.bucket_count(), 2);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn bucket_count(&self) -> u32 {
        // `new` accepted it as a u32.
        u32::try_from(self.bucket_count).unwrap_or(u32::MAX)
    }

    /// Counts `n` events at `t`.
    ///
    /// A bucket counts each event exactly below 2^63; an add that takes it to 2^63 or past
    /// saturates its count, which then reads `u64::MAX` (and so does every sum that includes
    /// it) until the bucket leaves. Never a wrapped, smaller number. An add below 2^36 is one
    /// atomic add; a larger one is a compare-and-swap, and may wait while another thread
    /// recycles its bucket (a few stores).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::{Moment, WindowMetrics};
    ///
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add(Moment::from_millis(100), MetricEvent::Pass, 3);
    /// metrics.add(Moment::from_millis(600), MetricEvent::Block, 1);
    /// let stats = metrics.stats(Moment::from_millis(700));
    /// assert_eq!((stats.count(MetricEvent::Pass), stats.count(MetricEvent::Block)), (3, 1));
    ///
    /// // Saturated, not wrapped: u64::MAX and then 5 more read u64::MAX.
    /// metrics.add(Moment::from_millis(800), MetricEvent::Pass, u64::MAX);
    /// metrics.add(Moment::from_millis(800), MetricEvent::Pass, 5);
    /// let bucket = metrics.current_bucket(Moment::from_millis(800)).unwrap();
    /// assert_eq!(bucket.count(MetricEvent::Pass), u64::MAX);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[inline]
    pub fn add(&self, t: Moment, event: MetricEvent, n: u64) {
        let k = event.index();
        self.record(t, |slot, epoch| slot.try_add(epoch, k, n));
    }

    /// Counts a response time at `t`: its sum, the number of them, the min and the max.
    ///
    /// A bucket's sum is exact below 2^63 nanoseconds (292 years), and the window's sum adds
    /// the buckets' exactly; a bucket whose sum reaches 2^63 ns saturates, and then
    /// [`MetricStats::rt_sum`] and [`MetricStats::avg_rt`] read [`Duration::MAX`]. Min and max
    /// are exact up to 78 hours; a longer RT reads as [`Duration::MAX`] (saturated, never
    /// as a shorter one). An RT of 2^36 ns (68.7 s) or more is added with a compare-and-swap
    /// rather than one atomic add.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, WindowMetrics};
    ///
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add_rt(Moment::from_millis(10), Duration::from_millis(30));
    /// metrics.add_rt(Moment::from_millis(20), Duration::from_millis(10));
    /// let stats = metrics.stats(Moment::from_millis(20));
    /// assert_eq!(stats.avg_rt(), Some(Duration::from_millis(20)));
    /// assert_eq!(stats.rt_count(), 2);
    ///
    /// // Two RTs of Duration::MAX saturate the sum; nothing wraps.
    /// metrics.add_rt(Moment::from_millis(600), Duration::MAX);
    /// metrics.add_rt(Moment::from_millis(600), Duration::MAX);
    /// let bucket = metrics.current_bucket(Moment::from_millis(600)).unwrap();
    /// assert_eq!((bucket.rt_count(), bucket.rt_sum()), (2, Duration::MAX));
    /// assert_eq!(bucket.max_rt(), Some(Duration::MAX));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[inline]
    pub fn add_rt(&self, t: Moment, rt: Duration) {
        // Past u64::MAX nanoseconds is past 2^63: saturated either way.
        let rt = duration_nanos(rt).unwrap_or(u64::MAX);
        self.record(t, |slot, epoch| slot.try_add_rt(epoch, rt));
    }

    /// [`add`](WindowMetrics::add) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Clock, Moment, WindowMetrics};
    /// let clock = ManualClock::new(Moment::from_secs(9));
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, clock.now())?;
    /// metrics.add_now(&clock, MetricEvent::Success, 1);
    /// assert_eq!(metrics.stats_now(&clock).count(MetricEvent::Success), 1);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[inline]
    pub fn add_now(&self, clock: &impl Clock, event: MetricEvent, n: u64) {
        self.add(clock.now(), event, n);
    }

    /// [`add_rt`](WindowMetrics::add_rt) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Clock, Moment, WindowMetrics};
    /// let clock = ManualClock::new(Moment::ZERO);
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, clock.now())?;
    /// metrics.add_rt_now(&clock, Duration::from_millis(7));
    /// assert_eq!(metrics.stats_now(&clock).max_rt(), Some(Duration::from_millis(7)));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[inline]
    pub fn add_rt_now(&self, clock: &impl Clock, rt: Duration) {
        self.add_rt(clock.now(), rt);
    }

    /// Finds the bucket for `t` and runs `write` on it: the bucket of `t` if it is still in the
    /// window on the ring's timeline, else the newest; a slot holding an older epoch is
    /// claimed first; a slot already moved past `t`'s epoch takes the write in its fresher one.
    // Always: inlined, `add`'s event and amount are constants for the slot's add; left to
    // itself the compiler calls it.
    #[inline(always)]
    fn record(&self, t: Moment, write: impl Fn(&Slot, u64) -> Result<(), u64>) {
        let mut epoch = self.divisor.divide(t.as_nanos());
        loop {
            let newest = self.newest.load(Ordering::Relaxed);
            if epoch + self.bucket_count <= newest {
                // Older than the window: counted now, as the type's docs say.
                epoch = newest;
            }
            let slot = self.slot(epoch);
            match write(slot, epoch) {
                Ok(()) => return,
                Err(held) if held < epoch => {
                    slot.claim(epoch);
                    self.newest.fetch_max(epoch, Ordering::Relaxed);
                }
                Err(held) => epoch = held,
            }
        }
    }

    fn slot(&self, epoch: u64) -> &Slot {
        // The mask keeps the index below the number of slots, a usize.
        #[allow(
            clippy::cast_possible_truncation,
            reason = "masked below the slot count"
        )]
        &self.slots[(epoch & self.mask) as usize]
    }

    /// The epoch to read at for `now` (never before the newest recorded), and the time: `now`,
    /// or the newest bucket's last instant when `now` is before it (how far into that bucket
    /// time went is not kept; its end never overstates a rate).
    fn read_at(&self, now: Moment) -> (u64, Moment) {
        let newest = self.newest.load(Ordering::Acquire);
        let epoch = now.as_nanos() / self.bucket;
        if epoch >= newest {
            (epoch, now)
        } else {
            let last = (newest * self.bucket).saturating_add(self.bucket - 1);
            (newest, Moment::from_nanos(last))
        }
    }
}

impl fmt::Debug for WindowMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WindowMetrics")
            .field("span", &self.span())
            .field("buckets", &self.bucket_count)
            .field("start", &self.start)
            .field(
                "newest_bucket",
                &Moment::from_nanos(self.newest.load(Ordering::Relaxed) * self.bucket),
            )
            .finish_non_exhaustive()
    }
}
