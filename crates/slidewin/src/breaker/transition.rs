//! What a breaker answers: a [`Permit`] or a [`Rejected`] call, and the [`Transition`]s a
//! caller logs, with their [`Cause`] and the [`CallStats`] behind it.

use std::fmt;
use std::time::Duration;

use super::State;
use crate::time::Moment;

/// Calls counted by a breaker: in its window while closed, or the probes while half-open.
///
/// Counts saturate at `u64::MAX`; they never wrap.
///
/// # Example
///
/// ```
/// use slidewin::breaker::CallStats;
/// let stats = CallStats { calls: 8, errors: 2, slow: 4 };
/// assert_eq!(stats.error_ratio(), Some(0.25));
/// assert_eq!(stats.slow_ratio(), Some(0.5));
/// assert_eq!(CallStats::default().error_ratio(), None);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CallStats {
    /// Completed calls.
    pub calls: u64,
    /// Of those, the calls that failed.
    pub errors: u64,
    /// Of those, the calls slower than the slow-call threshold (failed or not).
    pub slow: u64,
}

impl CallStats {
    /// `errors / calls`, if any call completed.
    ///
    /// ```
    /// use slidewin::breaker::CallStats;
    /// assert_eq!(CallStats { calls: 3, errors: 3, slow: 0 }.error_ratio(), Some(1.0));
    /// ```
    #[must_use]
    pub fn error_ratio(&self) -> Option<f64> {
        ratio(self.errors, self.calls)
    }

    /// `slow / calls`, if any call completed.
    ///
    /// ```
    /// use slidewin::breaker::CallStats;
    /// assert_eq!(CallStats { calls: 4, errors: 0, slow: 1 }.slow_ratio(), Some(0.25));
    /// ```
    #[must_use]
    pub fn slow_ratio(&self) -> Option<f64> {
        ratio(self.slow, self.calls)
    }
}

/// `part / whole` in `f64`, if `whole` is not zero: correctly rounded, so `3 / 10` is the
/// `f64` nearest 0.3 and compares equal to `0.3`.
pub(super) fn ratio(part: u64, whole: u64) -> Option<f64> {
    #[allow(
        clippy::cast_precision_loss,
        reason = "a ratio needs no more than 53 bits"
    )]
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// One of a breaker's rules for tripping (see
/// [`CircuitBreakerBuilder`](super::CircuitBreakerBuilder)).
///
/// ```
/// use slidewin::breaker::Rule;
/// assert_eq!(Rule::SlowCallRatio.to_string(), "slow-call ratio");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// The failed calls' share of the calls reached the threshold.
    ErrorRatio,
    /// The number of failed calls reached the threshold.
    ErrorCount,
    /// The slow calls' share of the calls reached the threshold.
    SlowCallRatio,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rule::ErrorRatio => "error ratio",
            Rule::ErrorCount => "error count",
            Rule::SlowCallRatio => "slow-call ratio",
        })
    }
}

/// Why a breaker changed state.
///
/// ```
/// use slidewin::breaker::{Cause, Rule};
/// assert_eq!(Cause::Tripped(Rule::ErrorRatio).to_string(), "error ratio reached");
/// assert_eq!(Cause::WaitElapsed.to_string(), "wait elapsed");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Cause {
    /// Closed to open: the window, with at least the minimum number of calls, reached a rule.
    Tripped(Rule),
    /// Open to half-open: the wait has passed and a call came (it is the first probe).
    WaitElapsed,
    /// Half-open to closed: every probe completed, and none of the rules was reached.
    ProbesPassed,
    /// Half-open to open: every probe completed, and the probes reached a rule.
    ProbesFailed(Rule),
    /// An operator forced the breaker open.
    ForcedOpen,
    /// An operator disabled the breaker.
    Disabled,
    /// An operator reset the breaker: closed, with an empty window.
    Reset,
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Tripped(rule) => write!(f, "{rule} reached"),
            Cause::WaitElapsed => f.write_str("wait elapsed"),
            Cause::ProbesPassed => f.write_str("probes passed"),
            Cause::ProbesFailed(rule) => write!(f, "probes reached the {rule}"),
            Cause::ForcedOpen => f.write_str("forced open"),
            Cause::Disabled => f.write_str("disabled"),
            Cause::Reset => f.write_str("reset"),
        }
    }
}

/// A change of state, returned by the call that made it, for the caller to log or count.
///
/// Exactly one call returns each transition, even when threads race to make it.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::Moment;
/// use slidewin::breaker::{CircuitBreaker, State};
///
/// let breaker = CircuitBreaker::builder().error_ratio(0.5).min_calls(2).build(Moment::ZERO)?;
/// let t = Moment::from_millis(1_500);
/// assert!(breaker.on_error(t, Duration::from_millis(3)).is_none());
/// let transition = breaker.on_error(t, Duration::from_millis(3)).unwrap();
/// assert_eq!((transition.from, transition.to, transition.at), (State::Closed, State::Open, t));
/// assert_eq!(transition.to_string(), "closed -> open at 1.5s: error ratio reached (2 calls, 2 errors, 0 slow)");
/// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Transition {
    /// The state before.
    pub from: State,
    /// The state after.
    pub to: State,
    /// The time of the call that made it.
    pub at: Moment,
    /// Why.
    pub cause: Cause,
    /// The calls the decision was made on: the window (closed to open; an operator's change
    /// from closed), the probes (from half-open), or none.
    pub stats: CallStats,
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let CallStats {
            calls,
            errors,
            slow,
        } = self.stats;
        write!(
            f,
            "{} -> {} at {:?}: {} ({calls} calls, {errors} errors, {slow} slow)",
            self.from,
            self.to,
            self.at.since_origin(),
            self.cause
        )
    }
}

/// A call may go ahead: from [`try_acquire`](super::CircuitBreaker::try_acquire).
///
/// Report how it ended with [`on_success`](super::CircuitBreaker::on_success) or
/// [`on_error`](super::CircuitBreaker::on_error), or hand the permit back with
/// [`release`](super::CircuitBreaker::release) if the call is not made after all (a half-open
/// probe would otherwise stay out for ever).
///
/// ```
/// use slidewin::Moment;
/// use slidewin::breaker::CircuitBreaker;
/// let breaker = CircuitBreaker::builder().error_count(5).build(Moment::ZERO)?;
/// let permit = breaker.try_acquire(Moment::ZERO).unwrap();
/// assert!(!permit.is_probe());
/// assert!(permit.transition().is_none());
/// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "report the call's outcome, or release the permit"]
pub struct Permit {
    /// The generation of the state the permit was taken in, if it is a probe.
    pub(super) probe_of: Option<u64>,
    pub(super) transition: Option<Transition>,
}

impl Permit {
    /// Whether the call is one of a half-open breaker's probes.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::CircuitBreaker;
    /// let breaker = CircuitBreaker::builder().error_count(1).min_calls(1).build(Moment::ZERO)?;
    /// let _ = breaker.on_error(Moment::ZERO, Duration::ZERO); // open for 60 s
    /// assert!(breaker.try_acquire(Moment::from_secs(60)).unwrap().is_probe());
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    #[must_use]
    pub fn is_probe(&self) -> bool {
        self.probe_of.is_some()
    }

    /// The transition this acquire made (open to half-open, when the wait has passed).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::{Cause, CircuitBreaker, State};
    /// let breaker = CircuitBreaker::builder().error_count(1).min_calls(1).build(Moment::ZERO)?;
    /// let _ = breaker.on_error(Moment::ZERO, Duration::ZERO);
    /// let permit = breaker.try_acquire(Moment::from_secs(61)).unwrap();
    /// let transition = permit.transition().unwrap();
    /// assert_eq!((transition.to, transition.cause), (State::HalfOpen, Cause::WaitElapsed));
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    #[must_use]
    pub fn transition(&self) -> Option<&Transition> {
        self.transition.as_ref()
    }
}

/// A call refused: the breaker is open, forced open, or half-open with every probe out.
///
/// ```
/// use std::time::Duration;
/// use slidewin::Moment;
/// use slidewin::breaker::{CircuitBreaker, State};
/// let breaker = CircuitBreaker::builder().error_count(1).min_calls(1).build(Moment::ZERO)?;
/// let _ = breaker.on_error(Moment::ZERO, Duration::ZERO);
/// let rejected = breaker.try_acquire(Moment::from_secs(45)).unwrap_err();
/// assert_eq!(rejected.state, State::Open);
/// assert_eq!(rejected.retry_after, Some(Duration::from_secs(15)));
/// assert_eq!(rejected.to_string(), "the circuit breaker is open; retry after 15s");
/// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rejected {
    /// The state that refused the call.
    pub state: State,
    /// For an open breaker, the time until the next call would be a probe; `None` when no
    /// time is known (forced open; half-open with every probe out).
    pub retry_after: Option<Duration>,
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the circuit breaker is {}", self.state)?;
        match self.retry_after {
            Some(after) => write!(f, "; retry after {after:?}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for Rejected {}
