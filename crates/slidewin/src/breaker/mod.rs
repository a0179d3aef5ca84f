//! [`CircuitBreaker`]: stop calling what is failing, on a [`WindowMetrics`]'s statistics, with
//! the time as a parameter.
//!
//! The states are resilience4j's ([`State`]):
//!
//! * **closed**: calls pass, and each outcome is counted in a sliding window. Once the window
//!   holds at least [`min_calls`](CircuitBreakerBuilder::min_calls) calls, a [`Rule`] that is
//!   reached (error ratio, error count, slow-call ratio, each `>=` its threshold) trips it:
//! * **open** for the [`wait`](CircuitBreakerBuilder::wait): calls are [`Rejected`] with the
//!   time left. The first call once the wait has passed moves it to
//! * **half-open**: that call and up to [`probes`](CircuitBreakerBuilder::probes) in all pass
//!   (the rest are rejected). When as many outcomes as probes have been reported, the rules
//!   judge them: one reached, open again; none, closed with an empty window.
//! * **forced-open** and **disabled**, for operators ([`force_open`](CircuitBreaker::force_open),
//!   [`disable`](CircuitBreaker::disable)), until a [`reset`](CircuitBreaker::reset).
//!
//! Every change of state is a [`Transition`] (from, to, time, [`Cause`] and the [`CallStats`]
//! behind it), returned by the one call that made it, for the caller to log.
//!
//! # Threads
//!
//! `Send + Sync`, with no lock. A closed breaker's call is one atomic load to acquire; its
//! outcome is one atomic add into the window's bucket, then a read of the window
//! (O(buckets)) to judge it. The state is one atomic word moved by compare-and-swap, with the
//! half-open probes' counters inside it, so of threads racing for a transition exactly one
//! makes it and returns it.
//!
//! # Where it differs from resilience4j, and why
//!
//! * The window is time-based only (resilience4j's `TIME_BASED`, in buckets of a
//!   [`WindowMetrics`]); it restarts empty when the breaker closes, as there.
//! * An open breaker's wait ends at `opened + wait` exactly: the crate's window convention
//!   (what is `wait` old has left), where resilience4j waits for the instant after.
//!   [`state`](CircuitBreaker::state) reads half-open from then on, as resilience4j's
//!   automatic transition would, though the transition itself is made (and returned) by the
//!   next call.
//! * Outcomes reported while open, forced open or disabled are dropped; resilience4j counts
//!   them in statistics it throws away at the next transition, so no decision differs.
//! * The error count has no resilience4j counterpart (it is Sentinel's); over the probes it is
//!   capped at their number, so that it can be reached.
//!
//! Sentinel's degrade rules trip only *above* their threshold: its error count `n` is
//! [`error_count(n + 1)`](CircuitBreakerBuilder::error_count) here, its ratios differ only at
//! equality, and its half-open state is `probes(1)`.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use slidewin::Moment;
//! use slidewin::breaker::{CircuitBreaker, State};
//!
//! let breaker = CircuitBreaker::builder()
//!     .error_ratio(0.5)
//!     .min_calls(4)
//!     .wait(Duration::from_secs(10))
//!     .probes(1)
//!     .build(Moment::ZERO)?;
//! let rt = Duration::from_millis(20);
//! let mut log = Vec::new();
//!
//! // Two of four calls fail: closed -> open.
//! for (ms, failed) in [(100, false), (200, true), (300, false), (400, true)] {
//!     let now = Moment::from_millis(ms);
//!     let _permit = breaker.try_acquire(now).expect("closed");
//!     log.extend(breaker.on_result(now, rt, failed));
//! }
//! let refused = breaker.try_acquire(Moment::from_secs(5)).unwrap_err();
//! assert_eq!(refused.retry_after, Some(Duration::from_millis(5_400)));
//!
//! // After the wait, one probe passes; it succeeds: half-open -> closed.
//! let probe = breaker.try_acquire(Moment::from_millis(10_400)).expect("a probe");
//! log.extend(probe.transition().copied());
//! log.extend(breaker.on_success(Moment::from_millis(10_450), rt));
//! assert_eq!(breaker.state(Moment::from_secs(11)), State::Closed);
//!
//! let lines: Vec<String> = log.iter().map(ToString::to_string).collect();
//! assert_eq!(lines, [
//!     "closed -> open at 400ms: error ratio reached (4 calls, 2 errors, 0 slow)",
//!     "open -> half-open at 10.4s: wait elapsed (0 calls, 0 errors, 0 slow)",
//!     "half-open -> closed at 10.45s: probes passed (1 calls, 0 errors, 0 slow)",
//! ]);
//! # Ok::<(), slidewin::breaker::BreakerConfigError>(())
//! ```

mod cell;
mod config;
mod operator;
mod outcome;
mod state;
mod transition;

use std::fmt;
use std::time::Duration;

use crate::WindowMetrics;
use crate::stats::MetricEvent;
use crate::time::{Clock, Moment};
use cell::{Aux, Cell};
use config::Config;
pub use config::{BreakerConfigError, CircuitBreakerBuilder};
pub use state::State;
use state::{Probes, Word};
pub use transition::{CallStats, Cause, Permit, Rejected, Rule, Transition};

/// A circuit breaker over a sliding window of call outcomes; see the [module](self) for its
/// states and how it compares with resilience4j's and Sentinel's.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::Moment;
/// use slidewin::breaker::{CircuitBreaker, State};
///
/// let breaker = CircuitBreaker::builder().error_count(3).min_calls(1).build(Moment::ZERO)?;
/// for ms in [10, 20, 30] {
///     let now = Moment::from_millis(ms);
///     if let Ok(_permit) = breaker.try_acquire(now) {
///         let _ = breaker.on_error(now, Duration::from_millis(1));
///     }
/// }
/// assert_eq!(breaker.state(Moment::from_millis(40)), State::Open);
/// assert!(breaker.try_acquire(Moment::from_millis(40)).is_err());
/// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
/// ```
pub struct CircuitBreaker {
    config: Config,
    /// The outcomes while closed, one counter each (see `outcome_event`).
    ring: WindowMetrics,
    cell: Cell,
}

impl CircuitBreaker {
    /// A builder with no rule yet; see [`CircuitBreakerBuilder`] for the settings.
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::breaker::{CircuitBreaker, State};
    /// let breaker = CircuitBreaker::builder().error_ratio(0.5).build(Moment::ZERO)?;
    /// assert_eq!(breaker.state(Moment::ZERO), State::Closed);
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn builder() -> CircuitBreakerBuilder {
        CircuitBreakerBuilder::new()
    }

    fn from_parts(config: Config, ring: WindowMetrics, start: Moment) -> CircuitBreaker {
        let (floor, baseline) = ring.newest_counts(start);
        let cell = Cell::new(Aux {
            since: start,
            floor,
            baseline,
        });
        CircuitBreaker { config, ring, cell }
    }

    /// Asks to make a call at `now`: a [`Permit`], or [`Rejected`] while open (with the time
    /// left), forced open, or half-open with every probe out.
    ///
    /// The first call at or after an open breaker's wait moves it to half-open and is its
    /// first probe ([`Permit::transition`] returns the transition).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::{CircuitBreaker, State};
    /// let breaker = CircuitBreaker::builder().error_count(1).min_calls(1).probes(2).build(Moment::ZERO)?;
    /// let _ = breaker.on_error(Moment::ZERO, Duration::ZERO); // open for 60 s
    /// let at = Moment::from_secs(60);
    /// assert!(breaker.try_acquire(at).unwrap().transition().is_some());
    /// assert!(breaker.try_acquire(at).unwrap().is_probe());
    /// let third = breaker.try_acquire(at).unwrap_err();
    /// assert_eq!((third.state, third.retry_after), (State::HalfOpen, None));
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Rejected`] when the call must not be made.
    pub fn try_acquire(&self, now: Moment) -> Result<Permit, Rejected> {
        loop {
            let word = self.cell.load();
            let answer = match word.state() {
                State::Closed | State::Disabled => Some(Ok(Permit {
                    probe_of: None,
                    transition: None,
                })),
                State::ForcedOpen => Some(Err(Rejected {
                    state: State::ForcedOpen,
                    retry_after: None,
                })),
                State::Open => self.acquire_open(word, now),
                State::HalfOpen => self.acquire_probe(word),
            };
            if let Some(answer) = answer {
                return answer;
            }
        }
    }

    /// [`try_acquire`](CircuitBreaker::try_acquire) at `clock.now()`.
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::breaker::CircuitBreaker;
    /// use slidewin::time::ManualClock;
    /// let clock = ManualClock::new(Moment::ZERO);
    /// let breaker = CircuitBreaker::builder().error_ratio(0.5).build(Moment::ZERO)?;
    /// assert!(breaker.try_acquire_now(&clock).is_ok());
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](CircuitBreaker::try_acquire).
    pub fn try_acquire_now(&self, clock: &impl Clock) -> Result<Permit, Rejected> {
        self.try_acquire(clock.now())
    }

    /// Open: refused before the wait has passed; after it, half-open with this call as the
    /// first probe. `None`: the word moved, read it again.
    fn acquire_open(&self, word: Word, now: Moment) -> Option<Result<Permit, Rejected>> {
        let aux = self.cell.aux(word)?;
        let until = self.open_until(aux.since);
        if now < until {
            return Some(Err(Rejected {
                state: State::Open,
                retry_after: Some(until - now),
            }));
        }
        let next = word.next(State::HalfOpen);
        let first = next.with_probes(Probes {
            issued: 1,
            ..Probes::default()
        });
        let transition = Transition {
            from: State::Open,
            to: State::HalfOpen,
            at: now,
            cause: Cause::WaitElapsed,
            stats: CallStats::default(),
        };
        self.cell
            .transition(word, first, now, None)
            .then_some(Ok(Permit {
                probe_of: Some(next.generation()),
                transition: Some(transition),
            }))
    }

    /// Half-open: a probe if one is left. `None`: the word moved, read it again.
    fn acquire_probe(&self, word: Word) -> Option<Result<Permit, Rejected>> {
        let probes = word.probes();
        if probes.issued >= u64::from(self.config.probes) {
            return Some(Err(Rejected {
                state: State::HalfOpen,
                retry_after: None,
            }));
        }
        let next = word.with_probes(Probes {
            issued: probes.issued + 1,
            ..probes
        });
        self.cell.update(word, next).then_some(Ok(Permit {
            probe_of: Some(word.generation()),
            transition: None,
        }))
    }

    /// Hands back a permit whose call will not be made: a probe of the half-open state it was
    /// taken in can be handed out again. Any other permit needs no release (this does nothing).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::CircuitBreaker;
    /// let breaker = CircuitBreaker::builder().error_count(1).min_calls(1).probes(1).build(Moment::ZERO)?;
    /// let _ = breaker.on_error(Moment::ZERO, Duration::ZERO);
    /// let at = Moment::from_secs(60);
    /// let probe = breaker.try_acquire(at).unwrap();
    /// assert!(breaker.try_acquire(at).is_err()); // the only probe is out
    /// breaker.release(probe);
    /// assert!(breaker.try_acquire(at).is_ok());
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn release(&self, permit: Permit) {
        let Some(generation) = permit.probe_of else {
            return;
        };
        loop {
            let word = self.cell.load();
            let probes = word.probes();
            let ours = word.state() == State::HalfOpen && word.generation() == generation;
            if !ours || probes.issued <= probes.done {
                return;
            }
            let next = word.with_probes(Probes {
                issued: probes.issued - 1,
                ..probes
            });
            if self.cell.update(word, next) {
                return;
            }
        }
    }

    /// The state a call at `now` would find. An open breaker whose wait has passed reads
    /// [`HalfOpen`](State::HalfOpen): the next call is a probe (the transition is made, and
    /// returned, by that call). Changes nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::{CircuitBreaker, State};
    /// let breaker = CircuitBreaker::builder().error_count(1).min_calls(1).build(Moment::ZERO)?;
    /// let _ = breaker.on_error(Moment::from_secs(1), Duration::ZERO);
    /// assert_eq!(breaker.state(Moment::from_secs(60)), State::Open);
    /// assert_eq!(breaker.state(Moment::from_secs(61)), State::HalfOpen);
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    #[must_use]
    pub fn state(&self, now: Moment) -> State {
        loop {
            let word = self.cell.load();
            if word.state() != State::Open {
                return word.state();
            }
            if let Some(aux) = self.cell.aux(word) {
                return if now < self.open_until(aux.since) {
                    State::Open
                } else {
                    State::HalfOpen
                };
            }
        }
    }

    /// [`state`](CircuitBreaker::state) at `clock.now()`.
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::breaker::{CircuitBreaker, State};
    /// use slidewin::time::ManualClock;
    /// let clock = ManualClock::new(Moment::ZERO);
    /// let breaker = CircuitBreaker::builder().error_ratio(0.5).build(Moment::ZERO)?;
    /// assert_eq!(breaker.state_now(&clock), State::Closed);
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    #[must_use]
    pub fn state_now(&self, clock: &impl Clock) -> State {
        self.state(clock.now())
    }

    /// The calls in the closed window at `now`: since the breaker last closed, within the
    /// window's buckets. While it is not closed, what the last closed state left in the window.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::{CallStats, CircuitBreaker};
    /// let breaker = CircuitBreaker::builder()
    ///     .slow_call_ratio(0.9, Duration::from_millis(100))
    ///     .window(Duration::from_secs(10), 10)
    ///     .build(Moment::ZERO)?;
    /// let _ = breaker.on_error(Moment::from_secs(1), Duration::from_millis(150));
    /// let _ = breaker.on_success(Moment::from_secs(2), Duration::from_millis(50));
    /// let stats = breaker.window(Moment::from_secs(3));
    /// assert_eq!(stats, CallStats { calls: 2, errors: 1, slow: 1 });
    /// assert_eq!(breaker.window(Moment::from_secs(12)).calls, 0); // both have left
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    #[must_use]
    pub fn window(&self, now: Moment) -> CallStats {
        loop {
            if let Some(aux) = self.cell.aux(self.cell.load()) {
                return self.window_stats(now, &aux);
            }
        }
    }

    /// The window since `aux`'s floor, less what the floor bucket held when it began.
    fn window_stats(&self, now: Moment, aux: &Aux) -> CallStats {
        let (mut counts, floor_in_window) = self.ring.counts_since(now, aux.floor);
        if floor_in_window {
            for (count, before) in counts.iter_mut().zip(aux.baseline) {
                *count = count.saturating_sub(before);
            }
        }
        // In `MetricEvent` order; see `outcome_event`.
        let [slow_ok, slow_err, _, fast_err] = counts;
        CallStats {
            calls: counts.iter().fold(0, |sum, &n| sum.saturating_add(n)),
            errors: slow_err.saturating_add(fast_err),
            slow: slow_ok.saturating_add(slow_err),
        }
    }

    fn open_until(&self, since: Moment) -> Moment {
        since.checked_add(self.config.wait).unwrap_or(Moment::MAX)
    }

    /// The window's span.
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::breaker::CircuitBreaker;
    /// let breaker = CircuitBreaker::builder().error_ratio(0.5).build(Moment::ZERO)?;
    /// assert_eq!(breaker.span(), std::time::Duration::from_secs(10));
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    #[must_use]
    pub fn span(&self) -> Duration {
        self.ring.span()
    }

    /// How long the breaker stays open before a probe.
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::breaker::CircuitBreaker;
    /// let breaker = CircuitBreaker::builder().error_ratio(0.5).build(Moment::ZERO)?;
    /// assert_eq!(breaker.wait(), std::time::Duration::from_secs(60));
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    #[must_use]
    pub fn wait(&self) -> Duration {
        self.config.wait
    }

    /// How many probes a half-open breaker lets through.
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::breaker::CircuitBreaker;
    /// let breaker = CircuitBreaker::builder().error_ratio(0.5).build(Moment::ZERO)?;
    /// assert_eq!(breaker.probes(), 10);
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    #[must_use]
    pub fn probes(&self) -> u32 {
        self.config.probes
    }
}

/// The window's counter for an outcome. The ring counts the four outcomes apart, one atomic
/// add each, in `MetricEvent`'s four counters: `Pass` slow successes, `Block` slow errors,
/// `Success` and `Exception` the others. The ring is private, so the names mislead no one.
fn outcome_event(error: bool, slow: bool) -> MetricEvent {
    match (slow, error) {
        (true, false) => MetricEvent::Pass,
        (true, true) => MetricEvent::Block,
        (false, false) => MetricEvent::Success,
        (false, true) => MetricEvent::Exception,
    }
}

impl fmt::Debug for CircuitBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = self.cell.load();
        f.debug_struct("CircuitBreaker")
            .field("state", &word.state())
            .field("config", &self.config)
            .field("ring", &self.ring)
            .finish_non_exhaustive()
    }
}
