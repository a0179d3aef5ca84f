//! [`Decision`], the one answer of every limiter, and [`LimitError`], for requests that can
//! never be answered yes.

use std::fmt;
use std::time::Duration;

/// What a limiter decided about one request, with what a client needs to back off well
/// (the fields of the IETF `RateLimit` headers, and `Retry-After`).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::{Limiter, Moment, SlidingLog};
///
/// let mut limiter = Limiter::<SlidingLog>::new("2/10s".parse()?)?;
/// limiter.check(Moment::from_secs(1), 1)?;
/// let second = limiter.check(Moment::from_secs(4), 1)?;
/// assert!(second.allowed());
/// assert_eq!((second.limit(), second.remaining()), (2, 0));
/// assert_eq!(second.reset_after(), Duration::from_secs(10)); // until 14 s, when 4 s has left
///
/// let third = limiter.check(Moment::from_secs(5), 1)?;
/// assert!(!third.allowed());
/// assert_eq!(third.retry_after(), Some(Duration::from_secs(6))); // at 11 s, 1 s has left
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    // Plain nanoseconds: a check builds one of these on its hot path, and a `Duration` costs
    // a division to build.
    allowed: bool,
    limit: u64,
    remaining: u64,
    reset_after: u64,
    /// When denied; `u64::MAX` for never.
    retry_after: u64,
}

impl Decision {
    /// An admission, in nanoseconds.
    #[inline]
    pub(crate) fn allow_nanos(limit: u64, remaining: u64, reset_after: u64) -> Decision {
        Decision {
            allowed: true,
            limit,
            remaining,
            reset_after,
            retry_after: 0,
        }
    }

    /// A denial, which consumed nothing, in nanoseconds. A `retry_after` of `u64::MAX` is never.
    #[inline]
    pub(crate) fn deny_nanos(
        limit: u64,
        remaining: u64,
        reset_after: u64,
        retry_after: u64,
    ) -> Decision {
        Decision {
            allowed: false,
            limit,
            remaining,
            reset_after,
            retry_after,
        }
    }

    /// An admission, for a backend of your own (or another crate's, as `slidewin-redis`).
    /// Durations past 584 years are taken as 584 years.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Decision;
    /// let d = Decision::allow(10, 9, Duration::from_secs(1));
    /// assert!(d.allowed());
    /// assert_eq!((d.limit(), d.remaining(), d.reset_after()), (10, 9, Duration::from_secs(1)));
    /// ```
    #[must_use]
    pub fn allow(limit: u64, remaining: u64, reset_after: Duration) -> Decision {
        Decision::allow_nanos(limit, remaining, saturating_nanos(reset_after))
    }

    /// A denial, for a backend of your own; `Duration::MAX` as `retry_after` means never.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Decision;
    /// let d = Decision::deny(10, 0, Duration::from_secs(5), Duration::from_millis(100));
    /// assert!(!d.allowed());
    /// assert_eq!(d.retry_after(), Some(Duration::from_millis(100)));
    /// ```
    #[must_use]
    pub fn deny(
        limit: u64,
        remaining: u64,
        reset_after: Duration,
        retry_after: Duration,
    ) -> Decision {
        Decision::deny_nanos(
            limit,
            remaining,
            saturating_nanos(reset_after),
            saturating_nanos(retry_after),
        )
    }

    /// Whether the request was admitted. A denied request consumes nothing.
    ///
    /// ```
    /// use slidewin::{Gcra, Limiter, Moment};
    /// let mut limiter = Limiter::<Gcra>::new("1/s".parse()?)?;
    /// assert!(limiter.check(Moment::ZERO, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn allowed(&self) -> bool {
        self.allowed
    }

    /// The most cost the limiter admits: the quota's limit (for [`Gcra`](crate::Gcra), its
    /// burst, the most it admits at once).
    ///
    /// ```
    /// use slidewin::{Gcra, Limiter, Moment};
    /// let mut limiter = Limiter::<Gcra>::new("10/s burst 3".parse()?)?;
    /// assert_eq!(limiter.check(Moment::ZERO, 1)?.limit(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// How much more cost would be admitted right now, after this decision.
    ///
    /// ```
    /// use slidewin::{Limiter, Moment, SlidingLog};
    /// let mut limiter = Limiter::<SlidingLog>::new("10/s".parse()?)?;
    /// assert_eq!(limiter.check(Moment::ZERO, 3)?.remaining(), 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// How long until the full quota is back, if nothing more is admitted.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{FixedWindow, Limiter, Moment};
    /// let mut limiter = Limiter::<FixedWindow>::new("10/s".parse()?)?;
    /// let decision = limiter.check(Moment::from_millis(250), 1)?;
    /// assert_eq!(decision.reset_after(), Duration::from_millis(750)); // the window's end
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.reset_after)
    }

    /// When denied: the exact time after which the same cost would be admitted, if nothing
    /// else is admitted meanwhile (`Duration::MAX` if never, which only happens at the end of
    /// the timeline). `None` when allowed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Gcra, Limiter, Moment};
    /// let mut limiter = Limiter::<Gcra>::new("4/s burst 1".parse()?)?;
    /// assert_eq!(limiter.check(Moment::ZERO, 1)?.retry_after(), None);
    /// assert_eq!(limiter.check(Moment::ZERO, 1)?.retry_after(), Some(Duration::from_millis(250)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        match (self.allowed, self.retry_after) {
            (true, _) => None,
            (false, u64::MAX) => Some(Duration::MAX),
            (false, nanos) => Some(Duration::from_nanos(nanos)),
        }
    }
}

fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl fmt::Debug for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decision")
            .field("allowed", &self.allowed)
            .field("limit", &self.limit)
            .field("remaining", &self.remaining)
            .field("reset_after", &self.reset_after())
            .field("retry_after", &self.retry_after())
            .finish()
    }
}

/// A request a limiter can never answer with yes, or cannot take on right now for a reason
/// other than its quota. A denial is not an error: it is a [`Decision`].
///
/// # Example
///
/// ```
/// use slidewin::{LimitError, Limiter, Moment, SlidingLog};
///
/// let mut limiter = Limiter::<SlidingLog>::new("5/s".parse()?)?;
/// let err = limiter.check(Moment::ZERO, 6).unwrap_err();
/// assert_eq!(err, LimitError::CostTooHigh { cost: 6, max: 5 });
/// assert_eq!(err.to_string(), "a cost of 6 can never be admitted: the most at once is 5");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitError {
    /// The cost is more than the limiter ever admits at once (the limit, or a GCRA's burst).
    CostTooHigh {
        /// The cost asked for.
        cost: u64,
        /// The most the limiter admits at once.
        max: u64,
    },
    /// A [`Keyed`](crate::Keyed) limiter holds its cap of keys (in all its shards), none of
    /// which is back at full quota, so a new key cannot be tracked. Refusing it (rather than evicting a key that is
    /// being limited) keeps every key within its limit; it clears as keys go quiet.
    KeysFull {
        /// The cap on live keys.
        cap: usize,
    },
}

impl fmt::Display for LimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitError::CostTooHigh { cost, max } => write!(
                f,
                "a cost of {cost} can never be admitted: the most at once is {max}"
            ),
            LimitError::KeysFull { cap } => write!(
                f,
                "the limiter holds its cap of {cap} key{} and none is idle; a new key must wait",
                if *cap == 1 { "" } else { "s" }
            ),
        }
    }
}

impl std::error::Error for LimitError {}
