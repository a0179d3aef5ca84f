//! [`SlidingLog`]: the exact limiter, a log of the admissions in the window.

use crate::error::ConfigError;
use crate::limit::algorithm::sealed::Enforce;
use crate::limit::algorithm::{Algorithm, Locked};
use crate::limit::{Decision, LimitError, Quota, Reservation, until};
use crate::slide_vec::{SlideVec, gallop};
use crate::time::Moment;

/// The exact algorithm: at most `limit` units of cost admitted in **any** window
/// `(t - span, t]`, whatever the timing of the requests, and a denied request consumes nothing.
///
/// The state is a log of the admissions still inside the window, oldest first: one stamp per
/// admission, carrying its time and its cost (as a running total of the units admitted, so
/// that the count of any suffix is one subtraction). Admissions at the same instant share a
/// stamp. So the memory follows the admissions, never the units of cost: 16 bytes a stamp,
/// and never more stamps than `limit`, whatever the limit (up to `u64::MAX`) and the costs. A
/// check drops the stamps that have left and looks at the front: O(1) amortized; a denial
/// finds when enough units leave by a binary search.
///
/// A clock may go backwards: a request earlier than the newest admission is counted at the
/// newest admission's time, as if no time had passed. So the log's own timeline never goes back,
/// no window of it ever holds more than `limit`, and a clock that jumps back can only deny more.
/// The `reset_after` and `retry_after` it answers are from the caller's `now`, and exact.
///
/// Where a log of every admission is too much (limits in the millions, each unit its own
/// request), use [`SlidingCounter`](crate::limit::SlidingCounter) (approximate, 24 bytes) or
/// [`Gcra`](crate::limit::Gcra) (a token bucket, 8 bytes).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::{Limiter, Moment};
/// use slidewin::limit::SlidingLog;
///
/// let mut limiter = Limiter::new(SlidingLog::new("3/10s".parse()?)?);
/// for s in [0, 1, 2] {
///     assert!(limiter.check(Moment::from_secs(s), 1)?.allowed());
/// }
/// let denied = limiter.check(Moment::from_secs(9), 1)?;
/// assert_eq!(denied.retry_after(), Some(Duration::from_secs(1))); // at 10 s, 0 s has left
/// assert!(limiter.check(Moment::from_secs(10), 1)?.allowed());
///
/// // A cost is one stamp, not one per unit: a trillion units cost 16 bytes.
/// let mut bulk = Limiter::new(SlidingLog::new("1000000000000/s".parse()?)?);
/// assert_eq!(bulk.check(Moment::ZERO, 1_000_000_000_000)?.remaining(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct SlidingLog {
    quota: Quota,
}

/// The state of a [`SlidingLog`]: a stamp per admission that may still count, oldest first,
/// never more than `limit` of them (their units pass the limit only by a settled debt).
#[derive(Clone, Debug)]
#[allow(unreachable_pub)] // opaque: named by the sealed trait only
pub struct SlidingLogState {
    stamps: SlideVec<Stamp>,
    /// The running total of units admitted before the first stamp (wrapping, as the stamps'
    /// totals do: only differences are read, and a log never holds more than `limit` units).
    base: u64,
}

/// One admission, or several at one instant.
#[derive(Clone, Copy, Debug)]
struct Stamp {
    at: Moment,
    /// The running total of units admitted, this admission's included (wrapping).
    total: u64,
}

/// A log as counted for one request: the stamps that have left, and the units of those left.
#[derive(Clone, Copy, Debug)]
#[allow(unreachable_pub)] // opaque: named by the sealed trait only
pub struct Counted {
    /// The time counted at: the request's, or the newest admission's if later.
    at: Moment,
    /// How many stamps (the oldest) have left the window ending at `at`.
    gone: usize,
    /// The running total at the last stamp gone: the units admitted before the window.
    before: u64,
    /// The units in the window.
    count: u64,
}

impl SlidingLog {
    /// The rules of an exact sliding log for `quota`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::BurstUnsupported`] for a quota with a burst other than its limit.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::limit::SlidingLog;
    ///
    /// assert_eq!(SlidingLog::new("100/minute".parse()?)?.quota().limit(), 100);
    /// assert!(SlidingLog::new("10/s burst 20".parse()?).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(quota: Quota) -> Result<SlidingLog, ConfigError> {
        Ok(SlidingLog {
            quota: quota.without_burst("SlidingLog")?,
        })
    }

    /// The quota it enforces.
    ///
    /// ```
    /// use slidewin::limit::SlidingLog;
    /// assert_eq!(SlidingLog::new("3 per 10 seconds".parse()?)?.quota().to_string(), "3 per 10s");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// Counts `state`'s window for a request at `now`. The log counts at the newest admission's
    /// time if it is later, so that its own timeline does not go back.
    #[inline]
    fn count(&self, state: &SlidingLogState, now: Moment) -> Counted {
        let stamps = state.stamps.as_slice();
        let Some(newest) = stamps.last() else {
            return Counted {
                at: now,
                gone: 0,
                before: state.base,
                count: 0,
            };
        };
        let at = now.max(newest.at);
        let gone = match at.as_nanos().checked_sub(self.quota.span_nanos()) {
            Some(cutoff) => gallop(stamps, |s| s.at.as_nanos() <= cutoff),
            None => 0,
        };
        let before = match gone.checked_sub(1) {
            Some(last_gone) => stamps[last_gone].total,
            None => state.base,
        };
        Counted {
            at,
            gone,
            before,
            count: newest.total.wrapping_sub(before),
        }
    }

    /// The decision for `cost` at `now` on the log as counted.
    #[inline]
    fn decide(
        &self,
        state: &SlidingLogState,
        counted: &Counted,
        now: Moment,
        cost: u64,
    ) -> Decision {
        let limit = self.quota.limit();
        // The count passes the limit only by a settled reservation's debt (`settle`): then
        // there is no room, and the debt leaves before any cost fits.
        let room = limit.saturating_sub(counted.count);
        let after = u128::from(counted.count) + u128::from(cost);
        if after > u128::from(limit) {
            // At most the count: a cost is at most the limit. (In debt, a question of 0 is
            // denied too, until the debt leaves, as on Redis.)
            let excess = u64::try_from(after - u128::from(limit)).unwrap_or(u64::MAX);
            return self.deny(state, counted, now, excess);
        }
        // Once admitted, the newest unit is at `at`.
        let newest = if cost > 0 {
            Some(counted.at)
        } else if counted.count > 0 {
            state.stamps.as_slice().last().map(|s| s.at)
        } else {
            None
        };
        let reset_after = newest.map_or(0, |t| self.until_leaves(t, now));
        Decision::allow_nanos(limit, room - cost, reset_after)
    }

    /// A denial: `excess` units must leave first (at most the count, since a cost is at most
    /// the limit); the stamp that takes the running count past that is the last that must.
    #[cold]
    #[inline(never)]
    fn deny(
        &self,
        state: &SlidingLogState,
        counted: &Counted,
        now: Moment,
        excess: u64,
    ) -> Decision {
        let live = &state.stamps.as_slice()[counted.gone..];
        let before = counted.before;
        let must_leave = live.partition_point(|s| s.total.wrapping_sub(before) < excess);
        let must_leave = live[must_leave.min(live.len() - 1)].at;
        let reset_after = live.last().map_or(0, |s| self.until_leaves(s.at, now));
        Decision::deny_nanos(
            self.quota.limit(),
            self.quota.limit().saturating_sub(counted.count),
            reset_after,
            self.until_leaves(must_leave, now),
        )
    }

    /// Nanoseconds from `now` until an admission at `t` leaves the window.
    #[inline]
    fn until_leaves(&self, t: Moment, now: Moment) -> u64 {
        until(
            u128::from(t.as_nanos()) + u128::from(self.quota.span_nanos()),
            now,
        )
    }

    /// Removes up to `units` of the oldest units still in the window at `now` (counted as a
    /// check counts, at the newest admission's time if later); how many it removed. What has
    /// left the window goes with them, and a stamp is cut in part if need be, as `carry` cuts
    /// one. A release of nothing writes nothing, as a denial does.
    pub(crate) fn release_oldest(
        &self,
        state: &mut SlidingLogState,
        now: Moment,
        units: u64,
    ) -> u64 {
        let counted = self.count(state, now);
        if units == 0 || counted.count == 0 {
            return 0;
        }
        if counted.gone > 0 {
            state.base = counted.before;
            state.stamps.take_front(counted.gone, drop);
        }
        let released = units.min(counted.count);
        let units_of = |s: &Stamp, base: u64| s.total.wrapping_sub(base);
        // The stamps wholly released, then the part of the next.
        let whole = state
            .stamps
            .as_slice()
            .partition_point(|s| units_of(s, state.base) <= released);
        state.base = state.base.wrapping_add(released);
        state.stamps.take_front(whole, drop);
        released
    }

    /// Changes the units of the admission `reservation` made to `actual`, in place: in the
    /// stamp of its time, so in the windows it was admitted in. More is debt that later checks
    /// wait out, up to twice the limit in the log (see [`Limiter::settle`](crate::Limiter::settle));
    /// less gives units back, never past what the stamp holds (admissions of one instant share
    /// it), and a stamp left with none goes. A reservation whose stamp has left the log changes
    /// nothing (its windows have passed). Whether it found the stamp.
    fn settle_stamp(
        &self,
        state: &mut SlidingLogState,
        reservation: Reservation,
        actual: u64,
    ) -> bool {
        let stamps = state.stamps.as_slice();
        let index = stamps.partition_point(|s| s.at < reservation.at());
        let Some(stamp) = stamps.get(index).filter(|s| s.at == reservation.at()) else {
            return false;
        };
        let before = index.checked_sub(1).map_or(state.base, |i| stamps[i].total);
        let held = stamp.total.wrapping_sub(before);
        let estimate = reservation.units();
        if actual >= estimate {
            // Every stamp is in the window ending at the newest: the log's units are its count.
            let units = stamps
                .last()
                .map_or(0, |s| s.total.wrapping_sub(state.base));
            let room = self.quota.limit().saturating_mul(2).saturating_sub(units);
            let more = (actual - estimate).min(room);
            for later in state.stamps.iter_mut_from(index) {
                later.total = later.total.wrapping_add(more);
            }
        } else {
            let less = (estimate - actual).min(held);
            for later in state.stamps.iter_mut_from(index) {
                later.total = later.total.wrapping_sub(less);
            }
            // An instant with no units is no admission: the newest time is the one before it,
            // as on Redis, which keeps a time per unit.
            if less == held {
                state.stamps.remove(index);
            }
        }
        true
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

impl Algorithm for SlidingLog {}

impl Enforce for SlidingLog {
    type Output = Decision;
    type State = SlidingLogState;
    type Cell = Locked<SlidingLogState>;

    #[inline]
    fn sweep_every(&self) -> u64 {
        self.quota.span_nanos()
    }

    #[inline]
    fn fresh(&self) -> SlidingLogState {
        SlidingLogState {
            stamps: SlideVec::new(),
            base: 0,
        }
    }

    type Pending = Counted;

    /// The decision, and the log as counted, which [`commit`](Enforce::commit) records an
    /// admission on.
    #[inline(always)]
    fn prepare(
        &self,
        state: &SlidingLogState,
        now: Moment,
        cost: u64,
    ) -> Result<(Decision, Counted), LimitError> {
        self.check_cost(cost)?;
        let counted = self.count(state, now);
        Ok((self.decide(state, &counted, now, cost), counted))
    }

    // Always: a rule set's check commits two rules from two places, and `#[inline]` alone left
    // this a call (about 25 instructions a rule, callgrind).
    #[inline(always)]
    fn commit(state: &mut SlidingLogState, counted: Counted, cost: u64) {
        // `at` becomes the newest admission, and every later check counts at it or after:
        // what has left the window ending at `at` will never count again. (A denial forgets
        // nothing: the newest admission, not `at`, bounds the later checks.)
        if counted.gone > 0 {
            state.base = counted.before;
            state.stamps.take_front(counted.gone, drop);
        }
        let total = counted
            .before
            .wrapping_add(counted.count)
            .wrapping_add(cost);
        match state.stamps.last_mut() {
            Some(newest) if newest.at == counted.at => newest.total = total,
            _ => state.stamps.push(Stamp {
                at: counted.at,
                total,
            }),
        }
    }

    /// The log's time: the request's, or its newest admission's if later.
    #[inline]
    fn counted_at(&self, counted: &Counted, _now: Moment) -> Moment {
        counted.at
    }

    /// The stamp of the reservation's time, changed in place; an
    /// [`unreserved`](Reservation::unreserved) one counts `actual` at its time, as an
    /// admission would (at the newest stamp's time if later), up to twice the limit in the
    /// window.
    fn settle(&self, state: &mut SlidingLogState, reservation: Reservation, actual: u64) -> bool {
        if reservation.units() > 0 {
            return self.settle_stamp(state, reservation, actual);
        }
        let counted = self.count(state, reservation.at());
        let room = self
            .quota
            .limit()
            .saturating_mul(2)
            .saturating_sub(counted.count);
        let more = actual.min(room);
        if more > 0 {
            Self::commit(state, counted, more);
        }
        actual > 0
    }

    /// The stamps' buffer.
    #[inline]
    fn heap_bytes(&self, state: &SlidingLogState) -> usize {
        state.stamps.heap_bytes()
    }

    /// A check pushes at most one stamp, and none at the newest stamp's instant or before
    /// (it counts there, into that stamp).
    #[inline]
    fn growth_bytes(&self, state: &SlidingLogState, now: Moment) -> usize {
        match state.stamps.as_slice().last() {
            Some(newest) if newest.at >= now => 0,
            _ => state.stamps.growth_bytes(),
        }
    }

    /// The stamps are kept, on their own timeline. Two cuts at the front, since every later
    /// check counts at the newest stamp's time or after:
    ///
    /// * the stamps that have left the window of the new span ending at the newest stamp
    ///   (a shorter span), which no check can count again;
    /// * the oldest units beyond the new limit (a lower limit), a stamp cut in part if need
    ///   be, so that the log holds at most `limit` units (the invariant `decide` subtracts
    ///   on) and at most `limit` stamps.
    ///
    /// Both keep exactness for the new quota, given the stamps the log held: a window counts
    /// a suffix of the log, so with `n` units where the full log would count `n > limit`, the
    /// cut log counts `limit`, and both deny any cost of 1 or more, with nothing remaining (a
    /// cost of 0, a question, the cut log admits, as a log just filled would); below the limit
    /// both count the same; and a denial waits, in both, for the `(n - limit + cost)`-th
    /// oldest unit of the window to leave. A longer span counts what the log still holds: what
    /// it had let go, older than its old span, is gone. `now` plays no part: the log's timeline
    /// is its own.
    fn carry(
        &self,
        _old: &SlidingLog,
        mut state: SlidingLogState,
        _now: Moment,
    ) -> Option<SlidingLogState> {
        let stamps = state.stamps.as_slice();
        let newest = *stamps.last()?;
        let units = |s: &Stamp| s.total.wrapping_sub(state.base);
        let left = match newest.at.as_nanos().checked_sub(self.quota.span_nanos()) {
            Some(cutoff) => gallop(stamps, |s| s.at.as_nanos() <= cutoff),
            None => 0,
        };
        let excess = units(&newest).saturating_sub(self.quota.limit());
        // Both cuts keep the newest stamp: a span is at least 1 ns and a limit at least 1.
        let over = stamps.partition_point(|s| units(s) <= excess);
        let cut = match left.checked_sub(1) {
            Some(last_left) => units(&stamps[last_left]).max(excess),
            None => excess,
        };
        state.base = state.base.wrapping_add(cut);
        state.stamps.take_front(left.max(over), drop);
        Some(state)
    }

    /// When the newest admission leaves: `span` after it.
    #[inline]
    fn idle_at(&self, state: &SlidingLogState) -> Option<Moment> {
        match state.stamps.as_slice().last() {
            None => Some(Moment::ZERO),
            Some(newest) => newest
                .at
                .as_nanos()
                .checked_add(self.quota.span_nanos())
                .map(Moment::from_nanos),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `1000000000000/s` with a check of 10^12 aborted the process: a timestamp per unit.
    #[test]
    fn sliding_log_a_cost_of_a_trillion_is_one_stamp() {
        let rules = SlidingLog::new("1000000000000/s".parse().unwrap()).unwrap();
        let mut state = rules.fresh();
        let trillion = 1_000_000_000_000;
        assert!(
            rules
                .check(&mut state, Moment::ZERO, trillion)
                .unwrap()
                .allowed()
        );
        assert_eq!(state.stamps.len(), 1);
        let denied = rules
            .check(&mut state, Moment::from_millis(10), trillion)
            .unwrap();
        assert!(!denied.allowed());
        assert_eq!(state.stamps.len(), 1);
        assert!(
            rules
                .check(&mut state, Moment::from_secs(1), trillion)
                .unwrap()
                .allowed()
        );
        assert_eq!(state.stamps.len(), 1);
    }

    /// Admissions at one instant share a stamp; a stamp leaves with its window.
    #[test]
    fn admissions_at_one_instant_share_a_stamp() {
        let rules = SlidingLog::new("3/s".parse().unwrap()).unwrap();
        let mut state = rules.fresh();
        rules.check(&mut state, Moment::ZERO, 2).unwrap();
        rules.check(&mut state, Moment::ZERO, 1).unwrap();
        assert_eq!(state.stamps.len(), 1);
        rules.check(&mut state, Moment::from_secs(1), 1).unwrap();
        assert_eq!(state.stamps.len(), 1);
    }
}
