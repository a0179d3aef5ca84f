//! [`SlidingCounter`]: Cloudflare's two-counter approximation of a sliding window.

use crate::error::ConfigError;
use crate::limit::algorithm::sealed::Enforce;
use crate::limit::algorithm::{Algorithm, Locked};
use crate::limit::{Decision, LimitError, Quota, Reservation, until};
use crate::time::Moment;

/// The sliding window approximated with two counters, as Cloudflare does: the cost admitted in
/// the current fixed window and in the previous one, the previous weighted by how much of it
/// the sliding window `(now - span, now]` still covers, as if its requests had been spread
/// evenly:
///
/// ```text
/// estimate = previous * (span - elapsed) / span + current      (elapsed: since the current window began)
/// ```
///
/// A request is admitted when `estimate + cost <= limit`, computed exactly in integers.
/// O(1) time and 24 bytes of state, whatever the limit.
///
/// **Its error.** The estimate is exact when the previous window's requests were spread evenly.
/// When they came in a burst it is not: a burst at the start of the previous window is still
/// weighted in, although it has left the sliding window, so the counter denies requests an
/// exact log would admit; a burst at its end has partly left the estimate while still inside
/// the window, so it admits more than the limit in that window. At worst the window holds the
/// whole previous count plus up to `limit`: **up to twice the limit**, though only when the
/// previous window ended in a burst. `BENCHMARKS.md` measures it against the exact
/// [`SlidingLog`](crate::limit::SlidingLog) on a bursty trace.
///
/// A clock that goes back into an earlier window is counted at the start of the window the
/// state is in (the estimate's largest value), so it can only deny more.
///
/// # Example
///
/// ```
/// use slidewin::{Limiter, Moment};
/// use slidewin::limit::SlidingCounter;
///
/// let mut limiter = Limiter::new(SlidingCounter::new("10/minute".parse()?)?);
/// // 10 in the first minute, spread out; at 1:30 half of them still weigh in.
/// for s in (0..60).step_by(6) {
///     assert!(limiter.check(Moment::from_secs(s), 1)?.allowed());
/// }
/// let decision = limiter.peek(Moment::from_secs(90), 1)?;
/// assert_eq!(decision.remaining(), 4); // 10 - 10 * 30/60 - 1
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct SlidingCounter {
    quota: Quota,
}

/// The two counters of a [`SlidingCounter`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[allow(unreachable_pub)] // opaque: named by the sealed trait only
pub struct SlidingCounterState {
    /// The current window's index: its start divided by the span.
    window: u64,
    /// The cost admitted in the window before it.
    previous: u64,
    /// The cost admitted in it.
    current: u64,
}

/// The state rolled forward to `now`, and how far into its window `now` is.
struct Rolled {
    state: SlidingCounterState,
    elapsed: u64,
}

impl SlidingCounter {
    /// The rules of a two-counter sliding window for `quota`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::BurstUnsupported`] for a quota with a burst other than its limit.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::limit::SlidingCounter;
    ///
    /// assert_eq!(SlidingCounter::new("10/s".parse()?)?.quota().limit(), 10);
    /// assert!(SlidingCounter::new("10/s burst 20".parse()?).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(quota: Quota) -> Result<SlidingCounter, ConfigError> {
        Ok(SlidingCounter {
            quota: quota.without_burst("SlidingCounter")?,
        })
    }

    /// The quota it enforces.
    ///
    /// ```
    /// use slidewin::limit::SlidingCounter;
    /// assert_eq!(SlidingCounter::new("10/s".parse()?)?.quota().to_string(), "10 per 1s");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn quota(&self) -> Quota {
        self.quota
    }

    #[inline]
    fn roll(&self, state: SlidingCounterState, now: Moment) -> Rolled {
        let span = self.quota.span_nanos();
        let window = now.as_nanos() / span;
        let state = match window.checked_sub(state.window) {
            Some(0) => state,
            Some(1) => SlidingCounterState {
                window,
                previous: state.current,
                current: 0,
            },
            Some(_) => SlidingCounterState {
                window,
                previous: 0,
                current: 0,
            },
            // The clock went back into an earlier window: count at the start of this one.
            None => {
                return Rolled { state, elapsed: 0 };
            }
        };
        Rolled {
            state,
            elapsed: now.as_nanos() % span,
        }
    }

    #[inline]
    fn decide(&self, rolled: &Rolled, now: Moment, cost: u64) -> Result<Decision, LimitError> {
        let limit = self.quota.limit();
        if cost > limit {
            return Err(LimitError::CostTooHigh { cost, max: limit });
        }
        let span = u128::from(self.quota.span_nanos());
        let Rolled { state, elapsed } = *rolled;
        let (previous, current) = (u128::from(state.previous), u128::from(state.current));
        // Everything in units of cost x nanoseconds, so the comparison is exact.
        let weighted = previous * (span - u128::from(elapsed)) + current * span;
        let capacity = u128::from(limit) * span;
        let starts = u128::from(state.window) * span;
        let after = weighted + u128::from(cost) * span;
        let remaining_after =
            |used: u128| u64::try_from(capacity.saturating_sub(used) / span).unwrap_or(0);
        if after <= capacity {
            let current = current + u128::from(cost);
            // The estimate is zero once the window after the one holding the newest cost ends.
            let reset_at = if current > 0 {
                starts + 2 * span
            } else if previous > 0 {
                starts + span
            } else {
                0
            };
            Ok(Decision::allow_nanos(
                limit,
                remaining_after(after),
                until(reset_at, now),
            ))
        } else {
            let reset_at = if current > 0 {
                starts + 2 * span
            } else {
                starts + span
            };
            Ok(Decision::deny_nanos(
                limit,
                remaining_after(weighted),
                until(reset_at, now),
                until(self.admits_at(rolled, cost), now),
            ))
        }
    }

    /// The first moment from which `cost` is admitted, the state staying as it is: later in
    /// this window as the previous one weighs less, or else in the next.
    fn admits_at(&self, rolled: &Rolled, cost: u64) -> u128 {
        let span = u128::from(self.quota.span_nanos());
        let limit = u128::from(self.quota.limit());
        let (previous, current) = (
            u128::from(rolled.state.previous),
            u128::from(rolled.state.current),
        );
        let starts = u128::from(rolled.state.window) * span;
        // The smallest offset into a window at which `weight * (span - offset) <= room * span`.
        let first_offset = |weight: u128, room: u128| match (room * span).checked_div(weight) {
            Some(covered) => span.saturating_sub(covered),
            None => 0, // nothing weighs
        };
        let cost = u128::from(cost);
        if limit >= current + cost {
            let offset =
                first_offset(previous, limit - current - cost).max(u128::from(rolled.elapsed));
            if offset < span {
                return starts + offset;
            }
        }
        // In the next window the current count becomes the previous one. `cost <= limit`, so
        // the offset is at most `span`: the start of the window after, where nothing weighs.
        starts + span + first_offset(current, limit - cost)
    }
}

impl Algorithm for SlidingCounter {}

impl Enforce for SlidingCounter {
    type Output = Decision;
    type State = SlidingCounterState;
    type Cell = Locked<SlidingCounterState>;

    #[inline]
    fn sweep_every(&self) -> u64 {
        self.quota.span_nanos()
    }

    #[inline]
    fn fresh(&self) -> SlidingCounterState {
        SlidingCounterState::default()
    }

    /// The state it leaves when admitted.
    type Pending = SlidingCounterState;

    /// The decision, and the state it leaves (the same state when it denies, or when the cost
    /// is 0, a question, which changes nothing).
    #[inline]
    fn prepare(
        &self,
        state: &SlidingCounterState,
        now: Moment,
        cost: u64,
    ) -> Result<(Decision, SlidingCounterState), LimitError> {
        let rolled = self.roll(*state, now);
        let decision = self.decide(&rolled, now, cost)?;
        if decision.allowed() && cost > 0 {
            let next = SlidingCounterState {
                current: rolled.state.current + cost,
                ..rolled.state
            };
            return Ok((decision, next));
        }
        Ok((decision, *state))
    }

    #[inline]
    fn commit(state: &mut SlidingCounterState, next: SlidingCounterState, _cost: u64) {
        *state = next;
    }

    /// The same span: the counters as they are, even above a lower limit. The estimate is
    /// then above the limit, so every cost (a cost of 0 too, as on Redis, which reads the same
    /// counters under the new quota) is denied with nothing remaining until it falls back; a
    /// cut to the limit would let the counts weigh less in the next window than the same
    /// counter, fed the same history, would. The arithmetic holds: the checks compare in 128
    /// bits (the counts were within the old limit, so the weighted sum fits), subtract
    /// saturating, and add to `current` only what fits under the new limit.
    ///
    /// Another span: fresh. The counters are of windows aligned to the old span, which the
    /// new windows cut across, and how the count of a window was spread in it is not known:
    /// no split is right. The fresh start is one more window boundary, of the kind the counter
    /// already answers for (its error bound, up to twice the limit after a burst at a
    /// window's end).
    fn carry(
        &self,
        old: &SlidingCounter,
        state: SlidingCounterState,
        _now: Moment,
    ) -> Option<SlidingCounterState> {
        let same_span = old.quota.span_nanos() == self.quota.span_nanos();
        let counted = state.previous > 0 || state.current > 0;
        (same_span && counted).then_some(state)
    }

    /// The request's time, or the start of the window counted in if later (a clock gone back).
    #[inline]
    fn counted_at(&self, next: &SlidingCounterState, now: Moment) -> Moment {
        let starts = next.window.saturating_mul(self.quota.span_nanos());
        now.max(Moment::from_nanos(starts))
    }

    /// The counter of the reservation's window, if the state still holds it (the current
    /// window, or the previous one): raised by the difference up to the limit (a full window;
    /// its weight in the next one is the debt), or lowered by it down to 0. A reservation of
    /// an older window changes nothing: it no longer weighs. An
    /// [`unreserved`](Reservation::unreserved) one counts `actual` in the window of its time
    /// (the state's, if later), up to the limit.
    fn settle(
        &self,
        state: &mut SlidingCounterState,
        reservation: Reservation,
        actual: u64,
    ) -> bool {
        if reservation.units() == 0 {
            if actual == 0 {
                return false; // nothing to charge: the windows stay as they are
            }
            let mut rolled = self.roll(*state, reservation.at()).state;
            rolled.current = rolled
                .current
                .saturating_add(actual)
                .min(self.quota.limit());
            *state = rolled;
            return true;
        }
        let window = reservation.at().as_nanos() / self.quota.span_nanos();
        let counter = if window == state.window {
            &mut state.current
        } else if window.checked_add(1) == Some(state.window) {
            &mut state.previous
        } else {
            return false;
        };
        let estimate = reservation.units();
        *counter = if actual >= estimate {
            counter
                .saturating_add(actual - estimate)
                .min(self.quota.limit())
        } else {
            counter.saturating_sub(estimate - actual)
        };
        true
    }

    #[inline]
    /// When what it admitted stops counting: the end of the window after its current one,
    /// or of its current one if only the previous one admitted any.
    fn idle_at(&self, state: &SlidingCounterState) -> Option<Moment> {
        let windows = match (state.previous, state.current) {
            (0, 0) => return Some(Moment::ZERO),
            (_, 0) => 1,
            _ => 2,
        };
        state
            .window
            .checked_add(windows)
            .and_then(|end| end.checked_mul(self.quota.span_nanos()))
            .map(Moment::from_nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limiter(text: &str) -> (SlidingCounter, SlidingCounterState) {
        let rules = SlidingCounter::new(text.parse().unwrap()).unwrap();
        let state = rules.fresh();
        (rules, state)
    }

    #[test]
    fn retry_after_is_the_first_moment_that_admits() {
        let (rules, mut state) = limiter("10/10s");
        // 10 in the first window, at 9 s.
        assert!(
            rules
                .check(&mut state, Moment::from_secs(9), 10)
                .unwrap()
                .allowed()
        );
        for now in [9_000, 10_000, 12_345, 15_000, 19_999] {
            let now = Moment::from_millis(now);
            for cost in [1, 5, 10] {
                let denied = rules.peek(&state, now, cost).unwrap();
                if denied.allowed() {
                    continue;
                }
                let wait = denied.retry_after().unwrap();
                let at = now + wait;
                assert!(
                    rules.peek(&state, at, cost).unwrap().allowed(),
                    "{now:?} +{wait:?} {cost}"
                );
                let just_before = at - Duration::from_nanos(1);
                if just_before >= now {
                    assert!(
                        !rules.peek(&state, just_before, cost).unwrap().allowed(),
                        "{now:?} {cost}"
                    );
                }
            }
        }
    }

    #[test]
    fn an_empty_counter_is_idle_and_resets_at_once() {
        let (rules, state) = limiter("3/s");
        assert!(rules.is_idle(&state, Moment::ZERO));
        let decision = rules.peek(&state, Moment::from_secs(5), 0).unwrap();
        assert_eq!(
            (decision.remaining(), decision.reset_after()),
            (3, Duration::ZERO)
        );
    }

    #[test]
    fn idle_at_a_state_whose_current_window_admitted_nothing_is_its_end() {
        // Only a state built by hand has this shape: a check that admits adds to `current`.
        let (rules, _) = limiter("4/s");
        let state = SlidingCounterState {
            window: 3,
            previous: 2,
            current: 0,
        };
        assert_eq!(rules.idle_at(&state), Some(Moment::from_secs(4)));
        let ahead = Moment::from_secs(4);
        assert_eq!(
            rules.peek(&state, ahead, 4),
            rules.peek(&rules.fresh(), ahead, 4)
        );
        let before = Moment::from_nanos(3_999_999_999);
        assert_ne!(
            rules.peek(&state, before, 4),
            rules.peek(&rules.fresh(), before, 4)
        );
    }
}
