//! [`Tally`], the figures of a [`MovingStat`](super::MovingStat)'s window at one moment.

use std::time::Duration;

/// The figures of a [`MovingStat`](super::MovingStat) at one time: what
/// [`tally`](super::MovingStat::tally) returns.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::{Moment, MovingStat};
///
/// let mut stat = MovingStat::new(Duration::from_secs(30), Duration::from_secs(1), Moment::ZERO)?;
/// stat.add(Moment::from_secs(1), 4.0)?;
/// stat.add(Moment::from_secs(2), 2.0)?;
/// let tally = stat.tally(Moment::from_secs(2));
/// assert_eq!(tally.covered(), Duration::from_secs(2));
/// assert_eq!(tally.rate(), 3.0); // 6 over 2 s
/// assert_eq!(tally.rate_per(Duration::from_secs(60)), 180.0);
/// assert_eq!(tally.mean(), Some(3.0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tally {
    pub(super) sum: f64,
    pub(super) count: u64,
    pub(super) min: Option<f64>,
    pub(super) max: Option<f64>,
    pub(super) covered: Duration,
    pub(super) buckets: usize,
}

impl Tally {
    /// The sum of the samples: each bucket's sum is finite (see
    /// [`MovingStat::add`](super::MovingStat::add)), so this is never NaN, and an infinity only if
    /// the window's sum passes `f64::MAX`.
    #[must_use]
    pub fn sum(&self) -> f64 {
        self.sum
    }

    /// How many samples.
    #[must_use]
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The smallest sample, if any.
    #[must_use]
    pub fn min(&self) -> Option<f64> {
        self.min
    }

    /// The largest sample, if any.
    #[must_use]
    pub fn max(&self) -> Option<f64> {
        self.max
    }

    /// The mean of the samples, if any.
    #[must_use]
    pub fn mean(&self) -> Option<f64> {
        #[allow(
            clippy::cast_precision_loss,
            reason = "a count past 2^53 is not exact anyway"
        )]
        (self.count > 0).then(|| self.sum / self.count as f64)
    }

    /// The time the counted buckets cover: from the first bucket that can hold a sample inside
    /// the window (or from the stat's `start`, if later) to the time read, and at least one
    /// bucket. Up to a bucket longer than the window, since the oldest bucket is counted whole.
    #[must_use]
    pub fn covered(&self) -> Duration {
        self.covered
    }

    /// How many buckets were counted.
    #[must_use]
    pub fn buckets(&self) -> usize {
        self.buckets
    }

    /// The sum per second of [`covered`](Tally::covered) time (events per second, when each
    /// sample is 1).
    #[must_use]
    pub fn rate(&self) -> f64 {
        self.sum / self.covered.as_secs_f64()
    }

    /// The sum per `per` of covered time.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, MovingStat};
    /// let mut stat = MovingStat::new(Duration::from_secs(10), Duration::from_secs(1), Moment::ZERO)?;
    /// stat.add(Moment::from_millis(500), 1.0)?;
    /// assert_eq!(stat.tally(Moment::from_secs(2)).rate_per(Duration::from_millis(100)), 0.05);
    /// assert_eq!(stat.tally(Moment::from_secs(2)).rate_per(Duration::ZERO), 0.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn rate_per(&self, per: Duration) -> f64 {
        if per.is_zero() {
            // Nothing in no time, even from an infinite sum (whose product with 0 is NaN).
            return 0.0;
        }
        self.sum * per.as_secs_f64() / self.covered.as_secs_f64()
    }
}
