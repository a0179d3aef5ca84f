//! [`MovingStat`]: sum, count, rate, min, max and mean over a sliding window, folded into
//! buckets (Facebook's `MovingStat`, with its three bugs fixed). Its answer, [`Tally`], is in
//! `tally`.

mod tally;

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use crate::error::ConfigError;
use crate::time::{Clock, Moment, duration_nanos};

pub use tally::Tally;

/// Statistics of the samples of the last `span`, folded into buckets of `bucket` length:
/// sum, count, rate, min, max and mean, in memory bounded by `span / bucket + 1` buckets
/// however many samples arrive.
///
/// Buckets are aligned on the timeline (`[k * bucket, (k + 1) * bucket)`). A sample at `t`
/// is inside the window at `now` when `now - span < t <= now`; a bucket is counted while any
/// instant of it is inside, so a figure includes at most one bucket's worth of samples that
/// have already left (the oldest bucket, partly outside), and never misses one that is inside.
///
/// What Facebook's version got wrong, and this one does not (each has a regression test):
///
/// * it never dropped its last bucket, so after any silence its figures stayed stale; here
///   every bucket leaves, and after `span` of silence every figure is zero;
/// * it dropped a bucket when its **start** passed the cutoff, losing samples still inside the
///   window; here a bucket leaves when its **end** does;
/// * it divided the rate by the whole window even just after it was created (30 events in the
///   first 3 s of a 30 s window read as 1/s, not 10/s); here the rate divides by the time the
///   counted buckets actually cover since `start`, at least one bucket.
///
/// Time is a parameter: [`add`](MovingStat::add) takes the sample's time and
/// [`tally`](MovingStat::tally) the time to read at. A clock that goes backwards does no
/// harm: the stat keeps a timeline of its own that never goes back (the latest time added). A
/// sample older than the window on that timeline is counted at the latest time, as if it had
/// just arrived, and a read at an earlier time reads at the latest one.
///
/// Samples are finite numbers, and a bucket's sum stays finite: [`add`](MovingStat::add)
/// refuses NaN, an infinity, or a sample that would take its bucket's sum past `f64::MAX`
/// ([`SampleError`]), and changes nothing then. So no figure is ever NaN; the window's sum (of
/// finite bucket sums) reads as an infinity only if it passes `f64::MAX`.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::{Moment, MovingStat};
///
/// // 30 events 100 ms apart, in a stat of 60 s in buckets of 1 s.
/// let mut stat = MovingStat::new(Duration::from_secs(60), Duration::from_secs(1), Moment::ZERO)?;
/// for i in 0..30 {
///     stat.add(Moment::from_millis(i * 100), 1.0)?;
/// }
/// let tally = stat.tally(Moment::from_secs(3));
/// assert_eq!((tally.sum(), tally.count()), (30.0, 30));
/// assert_eq!(tally.rate(), 10.0); // per second over the 3 s covered, not over 60 s
///
/// // 61 s of silence later, nothing is left.
/// let tally = stat.tally(Moment::from_secs(64));
/// assert_eq!((tally.sum(), tally.count(), tally.buckets()), (0.0, 0, 0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct MovingStat {
    /// In nanoseconds; a whole number of buckets, never zero.
    span: u64,
    /// In nanoseconds; never zero.
    bucket: u64,
    /// `span / bucket + 1`: the most buckets that can hold samples inside the window.
    max_buckets: usize,
    /// Rates count time from here.
    start: Moment,
    /// The stat's own timeline: the latest time added (or `start`). Never goes back.
    newest: Moment,
    /// Sorted by epoch; only buckets with an instant inside the window at `newest`.
    buckets: VecDeque<Bucket>,
}

/// The samples of one aligned bucket: `[epoch * len, (epoch + 1) * len)`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Bucket {
    epoch: u64,
    sum: f64,
    count: u64,
    min: f64,
    max: f64,
}

impl Bucket {
    /// A bucket of one sample, if it is finite.
    fn new(epoch: u64, x: f64) -> Result<Bucket, SampleError> {
        if !x.is_finite() {
            return Err(SampleError::NotFinite { sample: x });
        }
        Ok(Bucket {
            epoch,
            sum: x,
            count: 1,
            min: x,
            max: x,
        })
    }

    /// Adds `x`, unless it or the sum would not be finite (one test covers both: a sum of a
    /// finite number and a NaN or an infinity is not finite).
    fn fold(&mut self, x: f64) -> Result<(), SampleError> {
        let sum = self.sum + x;
        if !sum.is_finite() {
            return Err(if x.is_finite() {
                SampleError::SumOverflow { sample: x }
            } else {
                SampleError::NotFinite { sample: x }
            });
        }
        self.sum = sum;
        self.count += 1;
        self.min = self.min.min(x);
        self.max = self.max.max(x);
        Ok(())
    }
}

impl MovingStat {
    /// An empty stat over the last `span`, in buckets of `bucket` length, whose rates count
    /// time from `start` (usually the time it is created).
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroSpan`] for a zero span, [`ConfigError::ZeroBucket`] for a zero
    /// bucket, [`ConfigError::BucketLongerThanSpan`],
    /// [`ConfigError::SpanNotMultipleOfBucket`], and [`ConfigError::SpanTooLong`] for a span
    /// past 584 years.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{ConfigError, Moment, MovingStat};
    ///
    /// let stat = MovingStat::new(Duration::from_secs(30), Duration::from_secs(1), Moment::ZERO)?;
    /// assert_eq!(stat.span(), Duration::from_secs(30));
    ///
    /// let err = MovingStat::new(Duration::from_secs(10), Duration::from_secs(3), Moment::ZERO);
    /// assert_eq!(
    ///     err.unwrap_err().to_string(),
    ///     "the span 10s is not a whole number of buckets of 3s"
    /// );
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn new(span: Duration, bucket: Duration, start: Moment) -> Result<MovingStat, ConfigError> {
        let span_nanos = duration_nanos(span).ok_or(ConfigError::SpanTooLong { span })?;
        if span_nanos == 0 {
            return Err(ConfigError::ZeroSpan);
        }
        // A bucket no longer than a span that fits has a length that fits too.
        let bucket_nanos = duration_nanos(bucket).unwrap_or(u64::MAX);
        if bucket_nanos == 0 {
            return Err(ConfigError::ZeroBucket);
        }
        if bucket_nanos > span_nanos {
            return Err(ConfigError::BucketLongerThanSpan { bucket, span });
        }
        if span_nanos % bucket_nanos != 0 {
            return Err(ConfigError::SpanNotMultipleOfBucket { span, bucket });
        }
        let max_buckets = usize::try_from(span_nanos / bucket_nanos)
            .unwrap_or(usize::MAX)
            .saturating_add(1);
        Ok(MovingStat {
            span: span_nanos,
            bucket: bucket_nanos,
            max_buckets,
            start,
            newest: start,
            buckets: VecDeque::new(),
        })
    }

    /// The span of the window.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, MovingStat};
    /// let stat = MovingStat::new(Duration::from_secs(60), Duration::from_secs(1), Moment::ZERO)?;
    /// assert_eq!(stat.span(), Duration::from_secs(60));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn span(&self) -> Duration {
        Duration::from_nanos(self.span)
    }

    /// The length of a bucket.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, MovingStat};
    /// let stat = MovingStat::new(Duration::from_secs(60), Duration::from_secs(1), Moment::ZERO)?;
    /// assert_eq!(stat.bucket(), Duration::from_secs(1));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn bucket(&self) -> Duration {
        Duration::from_nanos(self.bucket)
    }

    /// How many buckets are held: at most `span / bucket + 1`. Buckets that have left the
    /// window are dropped by the next [`add`](MovingStat::add).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, MovingStat};
    /// let mut stat = MovingStat::new(Duration::from_secs(2), Duration::from_secs(1), Moment::ZERO)?;
    /// for s in 0..10 {
    ///     stat.add(Moment::from_secs(s), 1.0)?;
    /// }
    /// // [7 s, 8 s) is held too: it has instants inside (7 s, 9 s], at most span / bucket + 1.
    /// assert_eq!(stat.len(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Whether no bucket is held.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, MovingStat};
    /// let stat = MovingStat::new(Duration::from_secs(2), Duration::from_secs(1), Moment::ZERO)?;
    /// assert!(stat.is_empty());
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// Adds a sample `x` at `t`. Amortized O(1) for samples in time order; a late sample still
    /// inside the window goes into its own bucket (O(log n) to find it, O(n) if the bucket must
    /// be made). A sample older than the window (on the stat's timeline, see the type's docs)
    /// counts at the latest time added.
    ///
    /// # Errors
    ///
    /// [`SampleError::NotFinite`] for a NaN or infinite `x`, and [`SampleError::SumOverflow`]
    /// if `x` would take its bucket's sum past `f64::MAX` (either way): a NaN would spread to
    /// every figure of its bucket until the bucket left, and an infinite sum would turn into
    /// NaN with the first infinity of the other sign. The sample is not counted and the stat
    /// is unchanged (its timeline included).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::stats::SampleError;
    /// use slidewin::{Moment, MovingStat};
    ///
    /// let mut stat = MovingStat::new(Duration::from_secs(10), Duration::from_secs(1), Moment::ZERO)?;
    /// stat.add(Moment::from_secs(0), 5.0)?;
    /// stat.add(Moment::from_secs(5), 7.0)?;
    /// // At 11.5 s the bucket [0 s, 1 s) has left (1.5 s is the cutoff); [5 s, 6 s) has not.
    /// assert_eq!(stat.tally(Moment::from_millis(11_500)).sum(), 7.0);
    ///
    /// let err = stat.add(Moment::from_secs(6), f64::NAN).unwrap_err();
    /// assert_eq!(err.to_string(), "a sample must be a finite number, got NaN");
    /// assert_eq!(stat.tally(Moment::from_secs(6)).count(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn add(&mut self, t: Moment, x: f64) -> Result<(), SampleError> {
        if t < self.newest {
            // Older than the window on our timeline, it would count nowhere: count it now.
            let t = if self.inside(t, self.newest) {
                t
            } else {
                self.newest
            };
            return self.add_late(t.as_nanos() / self.bucket, x);
        }
        // In time order, the only bucket that can hold `t` is the newest. A refused sample
        // changes nothing, not even the timeline.
        let epoch = t.as_nanos() / self.bucket;
        match self.buckets.back_mut() {
            Some(last) if last.epoch == epoch => {
                last.fold(x)?;
                self.newest = t;
                self.evict();
            }
            _ => {
                let bucket = Bucket::new(epoch, x)?;
                self.newest = t;
                self.evict();
                self.push(bucket);
            }
        }
        Ok(())
    }

    /// [`add`](MovingStat::add) at `clock.now()`.
    ///
    /// # Errors
    ///
    /// As [`add`](MovingStat::add)'s: a sample that is not finite, or that would take its
    /// bucket's sum past `f64::MAX`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Clock, Moment, MovingStat};
    /// let clock = ManualClock::new(Moment::from_secs(5));
    /// let mut stat = MovingStat::new(Duration::from_secs(10), Duration::from_secs(1), clock.now())?;
    /// stat.add_now(&clock, 2.0)?;
    /// assert_eq!(stat.tally_now(&clock).sum(), 2.0);
    /// assert!(stat.add_now(&clock, f64::INFINITY).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn add_now(&mut self, clock: &impl Clock, x: f64) -> Result<(), SampleError> {
        self.add(clock.now(), x)
    }

    /// The figures at `now`: every bucket with an instant inside `(now - span, now]`. O(number
    /// of buckets held). Reads nothing newer than `now`, and reads at the latest time added if
    /// `now` is earlier.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, MovingStat};
    ///
    /// let mut latency = MovingStat::new(Duration::from_secs(60), Duration::from_secs(1), Moment::ZERO)?;
    /// for (s, ms) in [(1, 120.0), (2, 80.0), (3, 100.0)] {
    ///     latency.add(Moment::from_secs(s), ms)?;
    /// }
    /// let tally = latency.tally(Moment::from_secs(4));
    /// assert_eq!((tally.min(), tally.max(), tally.mean()), (Some(80.0), Some(120.0), Some(100.0)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn tally(&self, now: Moment) -> Tally {
        let now = now.max(self.newest);
        let mut tally = Tally {
            sum: 0.0,
            count: 0,
            min: None,
            max: None,
            covered: Duration::ZERO,
            buckets: 0,
        };
        for b in self.buckets.iter().filter(|b| self.bucket_inside(b, now)) {
            tally.sum += b.sum;
            tally.count += b.count;
            tally.min = Some(tally.min.map_or(b.min, |m: f64| m.min(b.min)));
            tally.max = Some(tally.max.map_or(b.max, |m: f64| m.max(b.max)));
            tally.buckets += 1;
        }
        // The counted buckets cover from the first that can hold a sample inside the window
        // (or from `start`) to `now`; at least one bucket, so that one early sample is not a
        // rate of billions per second.
        let first = match now.as_nanos().checked_sub(self.span) {
            Some(cutoff) => (cutoff + 1) / self.bucket * self.bucket,
            None => 0,
        };
        let from = self.start.max(Moment::from_nanos(first));
        tally.covered = (now - from).max(Duration::from_nanos(self.bucket));
        tally
    }

    /// [`tally`](MovingStat::tally) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Clock, Moment, MovingStat};
    /// let clock = ManualClock::new(Moment::ZERO);
    /// let mut stat = MovingStat::new(Duration::from_secs(10), Duration::from_secs(1), clock.now())?;
    /// stat.add_now(&clock, 1.0)?;
    /// clock.advance(Duration::from_secs(11));
    /// assert_eq!(stat.tally_now(&clock).count(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn tally_now(&self, clock: &impl Clock) -> Tally {
        self.tally(clock.now())
    }

    /// Forgets every sample; the timeline and `start` stay.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, MovingStat};
    /// let mut stat = MovingStat::new(Duration::from_secs(10), Duration::from_secs(1), Moment::ZERO)?;
    /// stat.add(Moment::from_secs(1), 1.0)?;
    /// stat.clear();
    /// assert_eq!(stat.tally(Moment::from_secs(1)).count(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clear(&mut self) {
        self.buckets.clear();
    }

    /// Whether `t` is inside the window at `now`: `now - span < t <= now`.
    fn inside(&self, t: Moment, now: Moment) -> bool {
        t <= now
            && now
                .as_nanos()
                .checked_sub(self.span)
                .is_none_or(|cutoff| t.as_nanos() > cutoff)
    }

    /// Whether any instant of the bucket is inside the window at `now`, and none after `now`
    /// is counted (the bucket starts at or before `now`).
    fn bucket_inside(&self, b: &Bucket, now: Moment) -> bool {
        let first = b.epoch * self.bucket;
        let last = first.saturating_add(self.bucket - 1);
        first <= now.as_nanos()
            && now
                .as_nanos()
                .checked_sub(self.span)
                .is_none_or(|cutoff| last > cutoff)
    }

    /// Drops the buckets that have left the window at `newest`, oldest first.
    fn evict(&mut self) {
        while let Some(first) = self.buckets.front() {
            if self.bucket_inside(first, self.newest) {
                break;
            }
            self.buckets.pop_front();
        }
    }

    fn push(&mut self, bucket: Bucket) {
        // Grow by doubling, but never past the most buckets that can be live, so that memory
        // stays within `span / bucket + 1` buckets.
        if self.buckets.len() == self.buckets.capacity() {
            let len = self.buckets.len();
            let target = len
                .saturating_mul(2)
                .max(4)
                .min(self.max_buckets)
                .max(len + 1);
            self.buckets.reserve_exact(target - len);
        }
        self.buckets.push_back(bucket);
    }

    /// A sample at a time before the newest: into its bucket, made if need be.
    #[cold]
    fn add_late(&mut self, epoch: u64, x: f64) -> Result<(), SampleError> {
        match self.buckets.binary_search_by_key(&epoch, |b| b.epoch) {
            Ok(at) => self.buckets[at].fold(x)?,
            Err(at) => {
                let bucket = Bucket::new(epoch, x)?;
                if self.buckets.len() == self.buckets.capacity() {
                    self.buckets.reserve_exact(1);
                }
                self.buckets.insert(at, bucket);
            }
        }
        Ok(())
    }
}

impl fmt::Debug for MovingStat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MovingStat")
            .field("span", &self.span())
            .field("bucket", &self.bucket())
            .field("start", &self.start)
            .field("newest", &self.newest)
            .field("buckets", &self.buckets.len())
            .finish()
    }
}

/// A sample [`MovingStat::add`] refused; the stat is unchanged.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::stats::SampleError;
/// use slidewin::{Moment, MovingStat};
///
/// let mut stat = MovingStat::new(Duration::from_secs(10), Duration::from_secs(1), Moment::ZERO)?;
/// let err = stat.add(Moment::ZERO, f64::NEG_INFINITY).unwrap_err();
/// assert_eq!(err, SampleError::NotFinite { sample: f64::NEG_INFINITY });
///
/// stat.add(Moment::ZERO, f64::MAX)?;
/// let err = stat.add(Moment::ZERO, f64::MAX).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "the sample 1.7976931348623157e308 would take its bucket's sum past f64::MAX"
/// );
/// assert_eq!(stat.tally(Moment::ZERO).sum(), f64::MAX);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum SampleError {
    /// The sample was NaN or an infinity.
    NotFinite {
        /// The sample that was given.
        sample: f64,
    },
    /// The sample would take its bucket's sum past `f64::MAX`, or below `-f64::MAX`.
    SumOverflow {
        /// The sample that was given.
        sample: f64,
    },
}

impl fmt::Display for SampleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SampleError::NotFinite { sample } => {
                write!(f, "a sample must be a finite number, got {sample:?}")
            }
            SampleError::SumOverflow { sample } => {
                let bound = if sample.is_sign_negative() {
                    "-f64::MAX"
                } else {
                    "f64::MAX"
                };
                write!(
                    f,
                    "the sample {sample:?} would take its bucket's sum past {bound}"
                )
            }
        }
    }
}

impl std::error::Error for SampleError {}
