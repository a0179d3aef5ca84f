//! [`WindowMetrics`]: request metrics over a sliding window, shared by threads without a lock
//! (Sentinel's `LeapArray` done right).

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
use slot::{RT_COUNT, RT_SUM, Slot, SlotRead};

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

    /// The slot of `epoch`, if it holds that epoch.
    fn read_epoch(&self, epoch: u64) -> Option<SlotRead> {
        self.slot(epoch).read_if(|e| e == epoch)
    }

    /// The figures of the window at `now`: the valid buckets summed, and the time they cover.
    /// O(`buckets`).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::{Moment, WindowMetrics};
    ///
    /// let metrics = WindowMetrics::new(Duration::from_secs(10), 10, Moment::ZERO)?;
    /// for s in 0..20 {
    ///     metrics.add(Moment::from_secs(s), MetricEvent::Success, 9);
    ///     metrics.add(Moment::from_secs(s), MetricEvent::Exception, 1);
    /// }
    /// let stats = metrics.stats(Moment::from_millis(19_500));
    /// assert_eq!(stats.start(), Moment::from_secs(10));
    /// assert_eq!(stats.covered(), Duration::from_millis(9_500));
    /// assert_eq!(stats.count(MetricEvent::Success), 90);
    /// assert_eq!(stats.exception_ratio(), Some(0.1));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn stats(&self, now: Moment) -> MetricStats {
        let (top, now) = self.read_at(now);
        let bottom = top.saturating_sub(self.bucket_count - 1);
        let from = self.start.max(Moment::from_nanos(bottom * self.bucket));
        let covered = (now - from).max(Duration::from_nanos(self.bucket));
        let mut stats = MetricStats::empty(from, covered);
        for (i, slot) in (0_u64..).zip(self.slots.iter()) {
            if let Some(read) = slot.read_if(|e| (bottom..=top).contains(&e) && e & self.mask == i)
            {
                stats.merge(&read);
            }
        }
        stats
    }

    /// [`stats`](WindowMetrics::stats) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Moment, WindowMetrics};
    /// let clock = ManualClock::new(Moment::ZERO);
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add_now(&clock, MetricEvent::Pass, 2);
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(metrics.stats_now(&clock).count(MetricEvent::Pass), 0);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn stats_now(&self, clock: &impl Clock) -> MetricStats {
        self.stats(clock.now())
    }

    /// How many `event`s in the window at `now`: [`stats`](WindowMetrics::stats)`(now).count(event)`,
    /// reading only that counter.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add(Moment::from_millis(100), MetricEvent::Block, 2);
    /// metrics.add(Moment::from_millis(700), MetricEvent::Block, 3);
    /// assert_eq!(metrics.sum(Moment::from_millis(900), MetricEvent::Block), 5);
    /// assert_eq!(metrics.sum(Moment::from_millis(1_000), MetricEvent::Block), 3);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn sum(&self, now: Moment, event: MetricEvent) -> u64 {
        self.window_count(now, event).0
    }

    /// [`sum`](WindowMetrics::sum) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Moment, WindowMetrics};
    /// let clock = ManualClock::new(Moment::from_millis(100));
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add_now(&clock, MetricEvent::Block, 2);
    /// assert_eq!(metrics.sum_now(&clock, MetricEvent::Block), 2);
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(metrics.sum_now(&clock, MetricEvent::Block), 0);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn sum_now(&self, clock: &impl Clock, event: MetricEvent) -> u64 {
        self.sum(clock.now(), event)
    }

    /// `event`s per second in the window at `now`, over the time the window covers:
    /// [`stats`](WindowMetrics::stats)`(now).rate(event)`, reading only that counter.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// for ms in (0..1_000).step_by(10) {
    ///     metrics.add(Moment::from_millis(ms), MetricEvent::Pass, 1);
    /// }
    /// assert_eq!(metrics.rate(Moment::from_millis(990), MetricEvent::Pass), 100.0 / 0.99);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn rate(&self, now: Moment, event: MetricEvent) -> f64 {
        let (count, covered) = self.window_count(now, event);
        #[allow(
            clippy::cast_precision_loss,
            reason = "a rate needs no more than 53 bits"
        )]
        let count = count as f64;
        count / covered.as_secs_f64()
    }

    /// [`rate`](WindowMetrics::rate) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Moment, WindowMetrics};
    /// let clock = ManualClock::new(Moment::from_millis(250));
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add_now(&clock, MetricEvent::Pass, 50);
    /// assert_eq!(metrics.rate_now(&clock, MetricEvent::Pass), 100.0); // 50 over one bucket, 500 ms
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn rate_now(&self, clock: &impl Clock, event: MetricEvent) -> f64 {
        self.rate(clock.now(), event)
    }

    fn window_count(&self, now: Moment, event: MetricEvent) -> (u64, Duration) {
        let (top, now) = self.read_at(now);
        let bottom = top.saturating_sub(self.bucket_count - 1);
        let from = self.start.max(Moment::from_nanos(bottom * self.bucket));
        let covered = (now - from).max(Duration::from_nanos(self.bucket));
        let mut count = 0_u64;
        for (i, slot) in (0_u64..).zip(self.slots.iter()) {
            let valid = |e: u64| (bottom..=top).contains(&e) && e & self.mask == i;
            if let Some(n) = slot.read_counter_if(event.index(), valid) {
                count = count.saturating_add(n);
            }
        }
        (count, covered)
    }

    /// The bucket holding `now` (or the newest recorded, if later), if it has been recorded in.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add(Moment::from_millis(700), MetricEvent::Pass, 4);
    /// let bucket = metrics.current_bucket(Moment::from_millis(900)).unwrap();
    /// assert_eq!(bucket.start(), Moment::from_millis(500));
    /// assert_eq!(bucket.count(MetricEvent::Pass), 4);
    /// assert!(metrics.current_bucket(Moment::from_millis(1_000)).is_none());
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn current_bucket(&self, now: Moment) -> Option<MetricStats> {
        let (top, _) = self.read_at(now);
        self.bucket_stats(top)
    }

    /// [`current_bucket`](WindowMetrics::current_bucket) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Moment, WindowMetrics};
    /// let clock = ManualClock::new(Moment::from_millis(700));
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add_now(&clock, MetricEvent::Pass, 4);
    /// let bucket = metrics.current_bucket_now(&clock).unwrap();
    /// assert_eq!((bucket.start(), bucket.count(MetricEvent::Pass)), (Moment::from_millis(500), 4));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn current_bucket_now(&self, clock: &impl Clock) -> Option<MetricStats> {
        self.current_bucket(clock.now())
    }

    /// The bucket before the one holding `now`, if the ring still holds it. With one bucket it
    /// is outside the window, and it is gone as soon as the current bucket is recorded in
    /// (never the current bucket passed off as the previous one: Sentinel #3309).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add(Moment::from_millis(300), MetricEvent::Pass, 6);
    /// let previous = metrics.previous_bucket(Moment::from_millis(800)).unwrap();
    /// assert_eq!(previous.count(MetricEvent::Pass), 6);
    /// assert!(metrics.previous_bucket(Moment::from_millis(1_200)).is_none()); // nothing in [500 ms, 1 s)
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn previous_bucket(&self, now: Moment) -> Option<MetricStats> {
        let (top, _) = self.read_at(now);
        self.bucket_stats(top.checked_sub(1)?)
    }

    /// [`previous_bucket`](WindowMetrics::previous_bucket) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Moment, WindowMetrics};
    /// let clock = ManualClock::new(Moment::from_millis(300));
    /// let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
    /// metrics.add_now(&clock, MetricEvent::Pass, 6);
    /// clock.set(Moment::from_millis(800));
    /// let previous = metrics.previous_bucket_now(&clock).unwrap();
    /// assert_eq!(previous.count(MetricEvent::Pass), 6);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn previous_bucket_now(&self, clock: &impl Clock) -> Option<MetricStats> {
        self.previous_bucket(clock.now())
    }

    /// Every valid bucket at `now` that has been recorded in, oldest first: the snapshot the
    /// window's figures are summed from.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::{Moment, WindowMetrics};
    /// let metrics = WindowMetrics::new(Duration::from_secs(3), 3, Moment::ZERO)?;
    /// for s in [0, 2, 3] {
    ///     metrics.add(Moment::from_secs(s), MetricEvent::Pass, s + 1);
    /// }
    /// let buckets = metrics.buckets(Moment::from_secs(3));
    /// let starts: Vec<_> = buckets.iter().map(|b| b.start().as_nanos() / 1_000_000_000).collect();
    /// assert_eq!(starts, [2, 3]); // [0 s, 1 s) has left; nothing was recorded in [1 s, 2 s)
    /// assert_eq!(buckets[1].count(MetricEvent::Pass), 4);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn buckets(&self, now: Moment) -> Vec<MetricStats> {
        let (top, _) = self.read_at(now);
        let bottom = top.saturating_sub(self.bucket_count - 1);
        (bottom..=top)
            .filter_map(|e| self.bucket_stats(e))
            .collect()
    }

    /// [`buckets`](WindowMetrics::buckets) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::MetricEvent;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Moment, WindowMetrics};
    /// let clock = ManualClock::new(Moment::ZERO);
    /// let metrics = WindowMetrics::new(Duration::from_secs(3), 3, Moment::ZERO)?;
    /// for n in 1..=4 {
    ///     metrics.add_now(&clock, MetricEvent::Pass, n);
    ///     clock.advance(Duration::from_secs(1));
    /// }
    /// // At 4 s the window holds [2 s, 3 s) and [3 s, 4 s); [4 s, 5 s) has no event yet.
    /// let counts: Vec<u64> = metrics.buckets_now(&clock).iter().map(|b| b.count(MetricEvent::Pass)).collect();
    /// assert_eq!(counts, [3, 4]);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn buckets_now(&self, clock: &impl Clock) -> Vec<MetricStats> {
        self.buckets(clock.now())
    }

    fn bucket_stats(&self, epoch: u64) -> Option<MetricStats> {
        let read = self.read_epoch(epoch)?;
        let mut stats = MetricStats::empty(
            Moment::from_nanos(epoch * self.bucket),
            Duration::from_nanos(self.bucket),
        );
        stats.merge(&read);
        Some(stats)
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

/// The figures of a [`WindowMetrics`] window or of one of its buckets: counts per
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
    fn empty(start: Moment, covered: Duration) -> MetricStats {
        MetricStats {
            start,
            covered,
            counts: [0; RT_SUM],
            rt_sum: Some(0),
            min_rt: None,
            max_rt: None,
        }
    }

    fn merge(&mut self, read: &SlotRead) {
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
