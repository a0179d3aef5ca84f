//! Reporting how a call ended: counted in the window while closed (which may trip the
//! breaker), or as a probe while half-open (the last one decides).

use std::time::Duration;

use super::state::Word;
use super::{CallStats, Cause, CircuitBreaker, State, Transition, outcome_event};
use crate::time::{Clock, Moment};

impl CircuitBreaker {
    /// Reports a call that succeeded at `now` after `duration` (slow if longer than the
    /// slow-call threshold). Returns the transition it made, if any: closed to open (a slow
    /// call), or half-open to closed or open (the last probe).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::{CircuitBreaker, State};
    /// let breaker = CircuitBreaker::builder()
    ///     .slow_call_ratio(0.5, Duration::from_secs(1))
    ///     .min_calls(2)
    ///     .build(Moment::ZERO)?;
    /// assert!(breaker.on_success(Moment::ZERO, Duration::from_secs(1)).is_none()); // not slower
    /// let tripped = breaker.on_success(Moment::ZERO, Duration::from_secs(2)).unwrap();
    /// assert_eq!((tripped.from, tripped.to), (State::Closed, State::Open)); // 1 slow of 2
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn on_success(&self, now: Moment, duration: Duration) -> Option<Transition> {
        self.on_result(now, duration, false)
    }

    /// Reports a call that failed at `now` after `duration`. Returns the transition it made,
    /// if any: closed to open, or half-open to closed or open (the last probe).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::{Cause, CircuitBreaker, Rule, State};
    /// let breaker = CircuitBreaker::builder().error_count(2).min_calls(1).build(Moment::ZERO)?;
    /// assert!(breaker.on_error(Moment::ZERO, Duration::ZERO).is_none());
    /// let tripped = breaker.on_error(Moment::ZERO, Duration::ZERO).unwrap();
    /// assert_eq!(tripped.cause, Cause::Tripped(Rule::ErrorCount));
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn on_error(&self, now: Moment, duration: Duration) -> Option<Transition> {
        self.on_result(now, duration, true)
    }

    /// [`on_error`](CircuitBreaker::on_error) if `error`, else
    /// [`on_success`](CircuitBreaker::on_success).
    ///
    /// Outcomes reported while open, forced open or disabled are dropped. While half-open
    /// every outcome counts as a probe's, as in resilience4j, even that of a call let through
    /// before the breaker opened.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::CircuitBreaker;
    /// let breaker = CircuitBreaker::builder().error_ratio(0.5).min_calls(2).build(Moment::ZERO)?;
    /// assert!(breaker.on_result(Moment::ZERO, Duration::ZERO, false).is_none());
    /// assert!(breaker.on_result(Moment::ZERO, Duration::ZERO, true).is_some());
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn on_result(&self, now: Moment, duration: Duration, error: bool) -> Option<Transition> {
        let slow = self.config.is_slow(duration);
        loop {
            let word = self.cell.load();
            match word.state() {
                State::Closed => return self.record_closed(word, now, error, slow),
                State::HalfOpen => {
                    if let Some(answer) = self.record_probe(word, now, error, slow) {
                        return answer;
                    }
                }
                State::Open | State::ForcedOpen | State::Disabled => return None,
            }
        }
    }

    /// [`on_success`](CircuitBreaker::on_success) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::CircuitBreaker;
    /// use slidewin::time::ManualClock;
    /// let clock = ManualClock::new(Moment::from_secs(1));
    /// let breaker = CircuitBreaker::builder().error_ratio(0.5).build(Moment::ZERO)?;
    /// assert!(breaker.on_success_now(&clock, Duration::from_millis(5)).is_none());
    /// assert_eq!(breaker.window(Moment::from_secs(1)).calls, 1);
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn on_success_now(&self, clock: &impl Clock, duration: Duration) -> Option<Transition> {
        self.on_success(clock.now(), duration)
    }

    /// [`on_error`](CircuitBreaker::on_error) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::CircuitBreaker;
    /// use slidewin::time::ManualClock;
    /// let clock = ManualClock::new(Moment::from_secs(1));
    /// let breaker = CircuitBreaker::builder().error_ratio(0.5).min_calls(1).build(Moment::ZERO)?;
    /// assert!(breaker.on_error_now(&clock, Duration::from_millis(5)).is_some());
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn on_error_now(&self, clock: &impl Clock, duration: Duration) -> Option<Transition> {
        self.on_error(clock.now(), duration)
    }

    /// Closed: counts the outcome, then trips if the window reaches a rule.
    fn record_closed(
        &self,
        word: Word,
        now: Moment,
        error: bool,
        slow: bool,
    ) -> Option<Transition> {
        self.ring.add(now, outcome_event(error, slow), 1);
        // `None`: the state moved on since `word`; the outcome counts for the next closed
        // window only if it landed after that window began.
        let aux = self.cell.aux(word)?;
        let stats = self.window_stats(now, &aux);
        let rule = self.config.tripped(&stats)?;
        self.make(word, State::Open, now, Cause::Tripped(rule), stats)
    }

    /// Half-open: counts a probe; the last one judges them all. `None`: the word moved, read
    /// it again.
    fn record_probe(
        &self,
        word: Word,
        now: Moment,
        error: bool,
        slow: bool,
    ) -> Option<Option<Transition>> {
        let probes = word.probes().complete(error, slow);
        if probes.done < u64::from(self.config.probes) {
            return self
                .cell
                .update(word, word.with_probes(probes))
                .then_some(None);
        }
        let stats = probes.stats();
        let (to, cause) = match self.config.probes_failed(probes) {
            Some(rule) => (State::Open, Cause::ProbesFailed(rule)),
            None => (State::Closed, Cause::ProbesPassed),
        };
        self.make(word, to, now, cause, stats).map(Some)
    }

    /// The transition from `word` to `to` at `now`, if this thread makes it (a closed state
    /// gets a fresh window); `None` if another thread moved the word first.
    pub(super) fn make(
        &self,
        word: Word,
        to: State,
        now: Moment,
        cause: Cause,
        stats: CallStats,
    ) -> Option<Transition> {
        // Read before the word moves: the floor bucket's count so far belongs to the past.
        let window = (to == State::Closed).then(|| self.ring.newest_counts(now));
        let transition = Transition {
            from: word.state(),
            to,
            at: now,
            cause,
            stats,
        };
        self.cell
            .transition(word, word.next(to), now, window)
            .then_some(transition)
    }
}
