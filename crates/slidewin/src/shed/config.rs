//! [`AdaptiveLimitBuilder`]: an adaptive limit's bounds and rules, checked before anything is
//! built ([`ShedConfigError`] names the bound a value broke).

use std::fmt;
use std::time::Duration;

use super::AdaptiveLimit;
use crate::time::duration_nanos;

/// The highest `max` accepted: far above any useful concurrency, and low enough that the
/// limit's `f64` holds every whole number and its `1 / L` steps exactly enough.
pub const MAX_LIMIT: u32 = 1_000_000;

/// The initial limit when none is set, clamped into `[min, max]`: Netflix's
/// concurrency-limits starts its AIMD limit at 20 too.
const DEFAULT_INITIAL: u32 = 20;

/// An adaptive limit's settings, checked: see [`AdaptiveLimitBuilder`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Config {
    pub(super) min: u32,
    pub(super) max: u32,
    pub(super) initial: u32,
    pub(super) backoff: f64,
    pub(super) slower_than: Duration,
    /// In nanoseconds, saturated at `u64::MAX` (a cooldown past the timeline cuts once).
    pub(super) cooldown: u64,
}

/// Builds an [`AdaptiveLimit`]: from [`AdaptiveLimit::builder`], with the latency above which
/// a call is slow.
///
/// | setting | default | bound |
/// |---|---|---|
/// | `slower_than` (the builder's argument) | none | longer than zero |
/// | [`min`](Self::min) | 1 | at least 1, at most `max` |
/// | [`max`](Self::max) | 1,000 | at most 1,000,000 |
/// | [`initial`](Self::initial) | 20, clamped into `[min, max]` | from `min` to `max` |
/// | [`backoff`](Self::backoff) | 0.9 | in `[0.5, 1)` |
/// | [`cooldown`](Self::cooldown) | `slower_than` | any |
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::shed::{AdaptiveLimit, ShedConfigError};
///
/// let limit = AdaptiveLimit::builder(Duration::from_millis(250))
///     .min(4)
///     .max(200)
///     .initial(10)
///     .backoff(0.8)
///     .cooldown(Duration::from_secs(1))
///     .build()?;
/// assert_eq!(limit.limit(), 10);
///
/// let err = AdaptiveLimit::builder(Duration::from_millis(250)).min(300).max(200).build().unwrap_err();
/// assert_eq!(err, ShedConfigError::MinAboveMax { min: 300, max: 200 });
/// assert_eq!(err.to_string(), "min must be at most max: got min 300 and max 200");
/// # Ok::<(), ShedConfigError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build`"]
pub struct AdaptiveLimitBuilder {
    min: u32,
    max: u32,
    initial: Option<u32>,
    backoff: f64,
    slower_than: Duration,
    cooldown: Option<Duration>,
}

impl AdaptiveLimitBuilder {
    pub(super) fn new(slower_than: Duration) -> AdaptiveLimitBuilder {
        AdaptiveLimitBuilder {
            min: 1,
            max: 1000,
            initial: None,
            backoff: 0.9,
            slower_than,
            cooldown: None,
        }
    }

    /// The lowest the limit goes, however slow the calls (Netflix's `minLimit`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::shed::AdaptiveLimit;
    /// let limit = AdaptiveLimit::builder(Duration::from_millis(100)).min(5).initial(5).build()?;
    /// assert_eq!(limit.min(), 5);
    /// # Ok::<(), slidewin::shed::ShedConfigError>(())
    /// ```
    pub fn min(mut self, min: u32) -> Self {
        self.min = min;
        self
    }

    /// The highest the limit goes, however fast the calls (Netflix's `maxLimit`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::shed::AdaptiveLimit;
    /// let limit = AdaptiveLimit::builder(Duration::from_millis(100)).max(8).build()?;
    /// assert_eq!((limit.max(), limit.limit()), (8, 8)); // the initial 20, clamped
    /// # Ok::<(), slidewin::shed::ShedConfigError>(())
    /// ```
    pub fn max(mut self, max: u32) -> Self {
        self.max = max;
        self
    }

    /// The limit to start from (20, clamped into `[min, max]`, when not set).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::shed::AdaptiveLimit;
    /// let limit = AdaptiveLimit::builder(Duration::from_millis(100)).initial(3).build()?;
    /// assert_eq!(limit.limit(), 3);
    /// # Ok::<(), slidewin::shed::ShedConfigError>(())
    /// ```
    pub fn initial(mut self, initial: u32) -> Self {
        self.initial = Some(initial);
        self
    }

    /// What a slow or failed call multiplies the limit by (Netflix's `backoffRatio`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::shed::AdaptiveLimit;
    /// let limit = AdaptiveLimit::builder(Duration::from_millis(100)).initial(10).backoff(0.5).build()?;
    /// let token = limit.try_acquire(Moment::ZERO).unwrap();
    /// token.done(Moment::from_secs(1), Duration::from_secs(1), true); // slow
    /// assert_eq!(limit.limit(), 5);
    /// # Ok::<(), slidewin::shed::ShedConfigError>(())
    /// ```
    pub fn backoff(mut self, ratio: f64) -> Self {
        self.backoff = ratio;
        self
    }

    /// The least time between two cuts of the limit (`slower_than` when not set): the calls
    /// in flight when the limit is cut were admitted under the old limit, and their slowness
    /// says nothing of the new one, so they must not cut it again. Zero: every slow or failed
    /// call cuts it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::shed::AdaptiveLimit;
    /// let limit = AdaptiveLimit::builder(Duration::from_millis(100))
    ///     .initial(100)
    ///     .backoff(0.5)
    ///     .cooldown(Duration::from_secs(1))
    ///     .build()?;
    /// let (a, b) = (limit.try_acquire(Moment::ZERO).unwrap(), limit.try_acquire(Moment::ZERO).unwrap());
    /// a.done(Moment::from_millis(500), Duration::from_millis(500), false);
    /// b.done(Moment::from_millis(600), Duration::from_millis(600), false); // within the cooldown
    /// assert_eq!(limit.limit(), 50);
    /// # Ok::<(), slidewin::shed::ShedConfigError>(())
    /// ```
    pub fn cooldown(mut self, cooldown: Duration) -> Self {
        self.cooldown = Some(cooldown);
        self
    }

    /// The limit, at its initial value with nothing in flight.
    ///
    /// # Errors
    ///
    /// A [`ShedConfigError`] naming the first setting out of its bound (see the table above).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::shed::{AdaptiveLimit, ShedConfigError};
    /// let err = AdaptiveLimit::builder(Duration::ZERO).build().unwrap_err();
    /// assert_eq!(err, ShedConfigError::ZeroThreshold);
    /// ```
    pub fn build(self) -> Result<AdaptiveLimit, ShedConfigError> {
        Ok(AdaptiveLimit::from_config(self.check()?))
    }

    fn check(&self) -> Result<Config, ShedConfigError> {
        let (min, max) = (self.min, self.max);
        if self.slower_than.is_zero() {
            return Err(ShedConfigError::ZeroThreshold);
        }
        if min == 0 {
            return Err(ShedConfigError::ZeroMin);
        }
        if max > MAX_LIMIT {
            return Err(ShedConfigError::MaxTooHigh { max });
        }
        if min > max {
            return Err(ShedConfigError::MinAboveMax { min, max });
        }
        let initial = self.initial.unwrap_or(DEFAULT_INITIAL.clamp(min, max));
        if !(min..=max).contains(&initial) {
            return Err(ShedConfigError::InitialOutOfRange { initial, min, max });
        }
        if !(0.5..1.0).contains(&self.backoff) {
            return Err(ShedConfigError::BackoffOutOfRange {
                ratio: self.backoff,
            });
        }
        let cooldown = self.cooldown.unwrap_or(self.slower_than);
        Ok(Config {
            min,
            max,
            initial,
            backoff: self.backoff,
            slower_than: self.slower_than,
            cooldown: duration_nanos(cooldown).unwrap_or(u64::MAX),
        })
    }
}

/// An adaptive limit's setting out of its bound, found by [`AdaptiveLimitBuilder::build`]
/// before anything is built. The message names the setting, the bound and the value.
///
/// ```
/// use std::time::Duration;
/// use slidewin::shed::AdaptiveLimit;
/// let err = AdaptiveLimit::builder(Duration::from_secs(1)).backoff(1.0).build().unwrap_err();
/// assert_eq!(err.to_string(), "the backoff ratio must be in [0.5, 1), got 1");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ShedConfigError {
    /// A latency threshold of zero: every call would be slow.
    ZeroThreshold,
    /// A `min` of zero: the limit could shut every call out for good.
    ZeroMin,
    /// A `max` above [`MAX_LIMIT`].
    MaxTooHigh {
        /// The `max` that was given.
        max: u32,
    },
    /// A `min` above the `max`.
    MinAboveMax {
        /// The `min` that was given.
        min: u32,
        /// The `max` that was given (or the default).
        max: u32,
    },
    /// An initial limit outside `[min, max]`.
    InitialOutOfRange {
        /// The initial limit that was given.
        initial: u32,
        /// The lowest accepted.
        min: u32,
        /// The highest accepted.
        max: u32,
    },
    /// A backoff ratio outside `[0.5, 1)` (or NaN): at 1 or above the limit would never go
    /// down, below 0.5 one slow call would more than halve it.
    BackoffOutOfRange {
        /// The ratio that was given.
        ratio: f64,
    },
}

impl fmt::Display for ShedConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShedConfigError::ZeroThreshold => {
                f.write_str("the latency threshold must be longer than zero, got 0ns")
            }
            ShedConfigError::ZeroMin => f.write_str("min must be at least 1, got 0"),
            ShedConfigError::MaxTooHigh { max } => {
                write!(f, "max must be at most {MAX_LIMIT}, got {max}")
            }
            ShedConfigError::MinAboveMax { min, max } => {
                write!(f, "min must be at most max: got min {min} and max {max}")
            }
            ShedConfigError::InitialOutOfRange { initial, min, max } => write!(
                f,
                "the initial limit must be from min {min} to max {max}, got {initial}"
            ),
            ShedConfigError::BackoffOutOfRange { ratio } => {
                write!(f, "the backoff ratio must be in [0.5, 1), got {ratio}")
            }
        }
    }
}

impl std::error::Error for ShedConfigError {}
