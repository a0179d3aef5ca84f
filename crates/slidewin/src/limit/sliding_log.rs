//! [`SlidingLog`]: the exact limiter, a log of the last `limit` admission times.

use crate::limit::{Algorithm, Decision, LimitError, Quota, QuotaError, until};
use crate::slide_vec::{SlideVec, gallop};
use crate::time::Moment;

/// The exact algorithm: at most `limit` units of cost admitted in **any** window
/// `(t - span, t]`, whatever the timing of the requests, and a denied request consumes nothing.
///
/// The state is the times of the admitted units still inside the window, oldest first: never
/// more than `limit` of them, so the memory is at most `limit` timestamps (8 bytes each). A
/// check drops the times that have left and looks at the front: O(1) amortized, plus O(cost)
/// to record an admission.
///
/// A clock may go backwards: a request earlier than the newest admission is counted at the
/// newest admission's time, as if no time had passed. So the log's own timeline never goes back,
/// no window of it ever holds more than `limit`, and a clock that jumps back can only deny more.
/// The `reset_after` and `retry_after` it answers are from the caller's `now`, and exact.
///
/// Where a log of every admission is too much (limits in the millions), use
/// [`SlidingCounter`](crate::SlidingCounter) (approximate, 24 bytes) or [`Gcra`](crate::Gcra)
/// (a token bucket, 8 bytes).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::{Limiter, Moment, SlidingLog};
///
/// let mut limiter = Limiter::<SlidingLog>::new("3/10s".parse()?)?;
/// for s in [0, 1, 2] {
///     assert!(limiter.check(Moment::from_secs(s), 1)?.allowed());
/// }
/// let denied = limiter.check(Moment::from_secs(9), 1)?;
/// assert_eq!(denied.retry_after(), Some(Duration::from_secs(1))); // at 10 s, 0 s has left
/// assert!(limiter.check(Moment::from_secs(10), 1)?.allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct SlidingLog {
    quota: Quota,
}

/// The state of a [`SlidingLog`]: the times of the admitted units that may still count,
/// oldest first, at most `limit` of them.
///
/// ```
/// use slidewin::{Algorithm, Moment, SlidingLog};
/// let rules = SlidingLog::new("3/s".parse()?)?;
/// let mut state = rules.fresh();
/// rules.check(&mut state, Moment::ZERO, 2)?;
/// assert_eq!(state.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct SlidingLogState(SlideVec<Moment>);

impl SlidingLogState {
    /// How many admitted units it remembers.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it remembers none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }
}

impl SlidingLog {
    /// The time the log counts at for a request at `now`: never before the newest admission,
    /// so that the log's own timeline does not go back.
    #[inline]
    fn effective(times: &[Moment], now: Moment) -> Moment {
        times.last().map_or(now, |newest| now.max(*newest))
    }

    /// How many of `times` (the oldest) have left the window ending at `at`.
    #[inline]
    fn gone(&self, times: &[Moment], at: Moment) -> usize {
        match at.as_nanos().checked_sub(self.quota.span_nanos()) {
            Some(cutoff) => gallop(times, |t| t.as_nanos() <= cutoff),
            None => 0,
        }
    }

    /// The decision for `cost` at `now`, counted at `at` (the effective time), the first
    /// `gone` of `times` having left the window.
    #[inline]
    fn decide(
        &self,
        times: &[Moment],
        gone: usize,
        at: Moment,
        now: Moment,
        cost: u64,
    ) -> Decision {
        let limit = self.quota.limit();
        let live = &times[gone..];
        let count = live.len() as u64;
        let leaves_at = |t: Moment| u128::from(t.as_nanos()) + u128::from(self.quota.span_nanos());
        if count + cost <= limit {
            // Once admitted, the newest unit is at `at`.
            let newest = if cost > 0 { Some(&at) } else { live.last() };
            let reset_after = newest.map_or(0, |t| until(leaves_at(*t), now));
            Decision::allow_nanos(limit, limit - count - cost, reset_after)
        } else {
            // The newest `limit - cost` units may stay (fewer than `count`, since it was denied);
            // the one just older is the last that must leave to let the cost in.
            let stay = usize::try_from(limit - cost).map_or(0, |stay| stay.min(live.len() - 1));
            let must_leave = live[live.len() - 1 - stay];
            let reset_after = live.last().map_or(0, |t| until(leaves_at(*t), now));
            Decision::deny_nanos(
                limit,
                limit - count,
                reset_after,
                until(leaves_at(must_leave), now),
            )
        }
    }

    #[inline]
    fn check_cost(&self, cost: u64) -> Result<(), LimitError> {
        let max = self.quota.limit();
        if cost > max {
            return Err(LimitError::CostTooHigh { cost, max });
        }
        Ok(())
    }
}

impl Algorithm for SlidingLog {
    type State = SlidingLogState;

    fn new(quota: Quota) -> Result<SlidingLog, QuotaError> {
        Ok(SlidingLog {
            quota: quota.without_burst("SlidingLog")?,
        })
    }

    #[inline]
    fn quota(&self) -> Quota {
        self.quota
    }

    #[inline]
    fn fresh(&self) -> SlidingLogState {
        SlidingLogState(SlideVec::new())
    }

    #[inline]
    fn check(
        &self,
        state: &mut SlidingLogState,
        now: Moment,
        cost: u64,
    ) -> Result<Decision, LimitError> {
        self.check_cost(cost)?;
        let times = &mut state.0;
        let at = SlidingLog::effective(times.as_slice(), now);
        let gone = self.gone(times.as_slice(), at);
        let decision = self.decide(times.as_slice(), gone, at, now, cost);
        if decision.allowed() && cost > 0 {
            // `at` becomes the newest admission, and every later check counts at it or after:
            // what has left the window ending at `at` will never count again. (A denial
            // forgets nothing: the newest admission, not `at`, bounds the later checks.)
            times.take_front(gone, drop);
            times.push_copies(at, usize::try_from(cost).unwrap_or(usize::MAX));
        }
        Ok(decision)
    }

    #[inline]
    fn peek(
        &self,
        state: &SlidingLogState,
        now: Moment,
        cost: u64,
    ) -> Result<Decision, LimitError> {
        self.check_cost(cost)?;
        let times = state.0.as_slice();
        let at = SlidingLog::effective(times, now);
        Ok(self.decide(times, self.gone(times, at), at, now, cost))
    }

    #[inline]
    fn is_idle(&self, state: &SlidingLogState, now: Moment) -> bool {
        let times = state.0.as_slice();
        self.gone(times, SlidingLog::effective(times, now)) == times.len()
    }
}
