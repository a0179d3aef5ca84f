//! What operators do to a breaker: force it open, disable it, reset it.

use super::state::Word;
use super::{CallStats, Cause, CircuitBreaker, State, Transition};
use crate::time::Moment;

impl CircuitBreaker {
    /// Forces the breaker open at `now`: every call is refused, and nothing is counted, until
    /// a [`reset`](CircuitBreaker::reset). `None` if it was forced open already.
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::breaker::{CircuitBreaker, State};
    /// let breaker = CircuitBreaker::builder().error_ratio(0.5).build(Moment::ZERO)?;
    /// let transition = breaker.force_open(Moment::from_secs(3)).unwrap();
    /// assert_eq!(transition.to_string(), "closed -> forced-open at 3s: forced open (0 calls, 0 errors, 0 slow)");
    /// assert!(breaker.force_open(Moment::from_secs(4)).is_none());
    /// let refused = breaker.try_acquire(Moment::from_secs(3_600)).unwrap_err();
    /// assert_eq!((refused.state, refused.retry_after), (State::ForcedOpen, None));
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn force_open(&self, now: Moment) -> Option<Transition> {
        self.operate(now, State::ForcedOpen, Cause::ForcedOpen)
    }

    /// Disables the breaker at `now`: every call passes, and nothing is counted, until a
    /// [`reset`](CircuitBreaker::reset). `None` if it was disabled already.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::{CircuitBreaker, State};
    /// let breaker = CircuitBreaker::builder().error_count(1).min_calls(1).build(Moment::ZERO)?;
    /// assert!(breaker.disable(Moment::ZERO).is_some());
    /// assert!(breaker.on_error(Moment::ZERO, Duration::ZERO).is_none());
    /// assert!(breaker.try_acquire(Moment::ZERO).is_ok());
    /// assert_eq!(breaker.state(Moment::ZERO), State::Disabled);
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn disable(&self, now: Moment) -> Option<Transition> {
        self.operate(now, State::Disabled, Cause::Disabled)
    }

    /// Resets the breaker at `now`: closed, with an empty window, whatever its state (closed
    /// too: the window restarts).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::{CircuitBreaker, State};
    /// let breaker = CircuitBreaker::builder().error_count(2).min_calls(1).build(Moment::ZERO)?;
    /// let _ = breaker.on_error(Moment::from_millis(10), Duration::ZERO);
    /// let reset = breaker.reset(Moment::from_millis(20));
    /// assert_eq!((reset.from, reset.to), (State::Closed, State::Closed));
    /// assert_eq!(reset.stats.errors, 1);
    /// // The error before the reset no longer counts: one more does not trip it.
    /// assert!(breaker.on_error(Moment::from_millis(30), Duration::ZERO).is_none());
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn reset(&self, now: Moment) -> Transition {
        loop {
            if let Some(transition) =
                self.try_operate(self.cell.load(), now, State::Closed, Cause::Reset)
            {
                return transition;
            }
        }
    }

    /// Moves the breaker to `to` unless it is there already.
    fn operate(&self, now: Moment, to: State, cause: Cause) -> Option<Transition> {
        loop {
            let word = self.cell.load();
            if word.state() == to {
                return None;
            }
            if let Some(transition) = self.try_operate(word, now, to, cause) {
                return Some(transition);
            }
        }
    }

    /// The operator's transition from `word`, with the calls it leaves behind: the window if
    /// closed, the probes if half-open. `None`: the word moved, read it again.
    fn try_operate(&self, word: Word, now: Moment, to: State, cause: Cause) -> Option<Transition> {
        let stats = match word.state() {
            State::Closed => self.window_stats(now, &self.cell.aux(word)?),
            State::HalfOpen => word.probes().stats(),
            State::Open | State::ForcedOpen | State::Disabled => CallStats::default(),
        };
        self.make(word, to, now, cause, stats)
    }
}
