//! What an [`AdaptiveLimit`] answers: a [`Token`] for an admitted call or [`Shed`], and the
//! [`Change`]s of its limit that the calls' reports make.

use std::fmt;
use std::time::Duration;

use super::AdaptiveLimit;
use crate::time::{Clock, Moment};

/// An admitted call, in flight until its outcome is reported with [`done`](Token::done).
///
/// Dropped without a report, it counts as a failed call at the time it was acquired: a
/// cancelled call (a client that gave up) is the commonest sign of overload, and a token
/// forgotten on an error path must not hold its place for ever.
///
/// `R` is what gives the limit: `&AdaptiveLimit` from
/// [`try_acquire`](AdaptiveLimit::try_acquire), or the holder given to
/// [`try_acquire_owned`](AdaptiveLimit::try_acquire_owned).
///
/// ```
/// use std::time::Duration;
/// use slidewin::Moment;
/// use slidewin::shed::AdaptiveLimit;
/// let limit = AdaptiveLimit::builder(Duration::from_millis(100)).initial(10).build()?;
/// let token = limit.try_acquire(Moment::from_secs(1))?;
/// assert_eq!(token.start(), Moment::from_secs(1));
/// drop(token); // unreported: a failure, at 1 s
/// assert_eq!((limit.limit(), limit.in_flight()), (9, 0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a token is reported with `done`; dropped, it counts as a failed call"]
pub struct Token<R: AsRef<AdaptiveLimit>> {
    holder: R,
    start: Moment,
    reported: bool,
}

impl<R: AsRef<AdaptiveLimit>> Token<R> {
    pub(super) fn new(holder: R, start: Moment) -> Token<R> {
        Token {
            holder,
            start,
            reported: false,
        }
    }

    /// When the call was admitted.
    #[must_use]
    pub fn start(&self) -> Moment {
        self.start
    }

    /// What the token holds to reach its limit: the holder given to
    /// [`try_acquire_owned`](AdaptiveLimit::try_acquire_owned).
    #[must_use]
    pub fn holder(&self) -> &R {
        &self.holder
    }

    /// Reports the call, ended at `now` after `latency`, succeeded (`ok`) or failed; returns
    /// the change of the limit it made, if its whole number moved. The latency is given, not
    /// taken from `now - start`, so that the caller measures it as it sees fit; `now` only
    /// dates the change and the cooldown.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::shed::{AdaptiveLimit, Cause};
    /// let limit = AdaptiveLimit::builder(Duration::from_millis(100)).initial(10).build()?;
    /// let token = limit.try_acquire(Moment::ZERO)?;
    /// let change = token.done(Moment::from_millis(40), Duration::from_millis(40), false).unwrap();
    /// assert_eq!((change.from, change.to, change.cause), (10, 9, Cause::Failed));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn done(mut self, now: Moment, latency: Duration, ok: bool) -> Option<Change> {
        self.reported = true;
        self.holder.as_ref().report(now, latency, ok)
    }

    /// [`done`](Token::done) at `clock.now()`, the latency measured from the token's start.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::shed::AdaptiveLimit;
    /// use slidewin::time::ManualClock;
    /// let clock = ManualClock::new(Moment::ZERO);
    /// let limit = AdaptiveLimit::builder(Duration::from_millis(100)).initial(10).build()?;
    /// let token = limit.try_acquire_now(&clock)?;
    /// clock.advance(Duration::from_millis(101));
    /// assert!(token.done_now(&clock, true).is_some()); // slow: cut to 9
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn done_now(self, clock: &impl Clock, ok: bool) -> Option<Change> {
        let now = clock.now();
        let latency = now.saturating_duration_since(self.start);
        self.done(now, latency, ok)
    }
}

impl<R: AsRef<AdaptiveLimit>> Drop for Token<R> {
    fn drop(&mut self) {
        if !self.reported {
            let _ = self
                .holder
                .as_ref()
                .report(self.start, Duration::ZERO, false);
        }
    }
}

impl<R: AsRef<AdaptiveLimit>> fmt::Debug for Token<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("start", &self.start)
            .finish_non_exhaustive()
    }
}

/// A call the limit did not admit: as many calls as the limit were in flight.
///
/// ```
/// use std::time::Duration;
/// use slidewin::Moment;
/// use slidewin::shed::{AdaptiveLimit, Shed};
/// let limit = AdaptiveLimit::builder(Duration::from_millis(100)).initial(1).build()?;
/// let _token = limit.try_acquire(Moment::ZERO)?;
/// assert_eq!(limit.try_acquire(Moment::ZERO).unwrap_err(), Shed { limit: 1, in_flight: 1 });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shed {
    /// The limit when the call came.
    pub limit: u32,
    /// The calls in flight then (more than the limit after a cut).
    pub in_flight: u64,
}

impl fmt::Display for Shed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "shed: {} calls in flight, at the limit of {}",
            self.in_flight, self.limit
        )
    }
}

impl std::error::Error for Shed {}

/// What moved the limit: the outcome of the call reported.
///
/// ```
/// use slidewin::shed::Cause;
/// assert_eq!(Cause::Slow.to_string(), "a slow call");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cause {
    /// A call no slower than the threshold, with the limit in use: `L + 1/L`.
    Fast,
    /// A call slower than the threshold: `L * backoff`.
    Slow,
    /// A failed call, or a token dropped unreported: `L * backoff`.
    Failed,
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Cause::Fast => "a fast call",
            Cause::Slow => "a slow call",
            Cause::Failed => "a failed call",
        })
    }
}

/// The limit's whole number moved, returned by the report that moved it, for the caller to
/// log or count.
///
/// ```
/// use slidewin::Moment;
/// use slidewin::shed::{Cause, Change};
/// let change = Change { from: 20, to: 18, at: Moment::from_millis(1_500), cause: Cause::Slow };
/// assert_eq!(change.to_string(), "limit 20 -> 18 at 1.5s: a slow call");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Change {
    /// The limit before.
    pub from: u32,
    /// The limit after.
    pub to: u32,
    /// The time of the report.
    pub at: Moment,
    /// The report's outcome.
    pub cause: Cause,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "limit {} -> {} at {}: {}",
            self.from, self.to, self.at, self.cause
        )
    }
}
