//! [`FixedWindow`]: a counter per window aligned to the span.

use crate::error::ConfigError;
use crate::limit::algorithm::sealed::{Enforce, OneWord};
use crate::limit::algorithm::{Algorithm, Word};
use crate::limit::{Decision, LimitError, Quota, Reservation, until};
use crate::time::Moment;

/// A counter per fixed window: the windows `[k * span, (k + 1) * span)` from the timeline's
/// origin, each admitting up to `limit`. The simplest and cheapest algorithm (16 bytes of
/// state, one word in a [`SharedLimiter`](crate::SharedLimiter), which is lock-free for it),
/// and the one Redis's documentation shows.
///
/// **It is not a sliding window.** A client that spends its whole limit at the end of one
/// window and again at the start of the next gets **twice the limit** through in an instant:
/// with `100/minute`, 100 at 0:59.9 and 100 at 1:00.0. Use [`SlidingLog`](crate::limit::SlidingLog)
/// when that matters.
///
/// A clock that goes back to an earlier window is counted in the later one, so it can only
/// deny more.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::{Limiter, Moment};
/// use slidewin::limit::FixedWindow;
///
/// let mut limiter = Limiter::new(FixedWindow::new("100/minute".parse()?)?);
/// let late = Moment::from_millis(59_900);
/// assert!(limiter.check(late, 100)?.allowed());
/// assert_eq!(limiter.check(late, 1)?.retry_after(), Some(Duration::from_millis(100)));
/// // The boundary burst: another 100, a tenth of a second later.
/// assert!(limiter.check(Moment::from_secs(60), 100)?.allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct FixedWindow {
    quota: Quota,
}

/// The window a [`FixedWindow`] counts in, and its count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[allow(unreachable_pub)] // opaque: named by the sealed trait only
pub struct FixedWindowState {
    /// The window's index: its start divided by the span.
    window: u64,
    /// The cost admitted in it.
    count: u64,
}

impl FixedWindow {
    /// The rules of a fixed window for `quota`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::BurstUnsupported`] for a quota with a burst other than its limit, and
    /// [`ConfigError::Unrepresentable`] when its windows and counts do not fit one 64-bit word
    /// (a limit near the span in nanoseconds).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::limit::FixedWindow;
    ///
    /// let rules = FixedWindow::new("100/minute".parse()?)?;
    /// assert_eq!(rules.quota().limit(), 100);
    /// assert!(FixedWindow::new("10/s burst 20".parse()?).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(quota: Quota) -> Result<FixedWindow, ConfigError> {
        let quota = quota.without_burst("FixedWindow")?;
        // The state packs into one word as `window * (limit + 1) + count` (see `pack`): the
        // last window of the timeline must fit.
        let last_window = u128::from(u64::MAX / quota.span_nanos());
        let limit = u128::from(quota.limit());
        if last_window * (limit + 1) + limit > u128::from(u64::MAX) {
            return Err(ConfigError::Unrepresentable {
                algorithm: "FixedWindow",
                quota,
                reason: "its windows and counts do not fit one 64-bit word \
                         (the limit is near the span in nanoseconds)",
            });
        }
        Ok(FixedWindow { quota })
    }

    /// The quota it enforces.
    ///
    /// ```
    /// use slidewin::limit::FixedWindow;
    /// assert_eq!(FixedWindow::new("5/s".parse()?)?.quota().to_string(), "5 per 1s");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The state as of `now`: a later window starts empty; an earlier one (the clock went
    /// back) counts in the window the state is in.
    #[inline]
    fn current(&self, state: FixedWindowState, now: Moment) -> FixedWindowState {
        let window = now.as_nanos() / self.quota.span_nanos();
        if window > state.window {
            FixedWindowState { window, count: 0 }
        } else {
            state
        }
    }

    #[inline]
    fn decide(
        &self,
        state: FixedWindowState,
        now: Moment,
        cost: u64,
    ) -> Result<Decision, LimitError> {
        let limit = self.quota.limit();
        if cost > limit {
            return Err(LimitError::CostTooHigh { cost, max: limit });
        }
        let ends = (u128::from(state.window) + 1) * u128::from(self.quota.span_nanos());
        let used = state.count + cost;
        Ok(if used <= limit {
            let reset_after = if used > 0 { until(ends, now) } else { 0 };
            Decision::allow_nanos(limit, limit - used, reset_after)
        } else {
            Decision::deny_nanos(
                limit,
                limit - state.count,
                until(ends, now),
                until(ends, now),
            )
        })
    }
}

impl Algorithm for FixedWindow {}

impl Enforce for FixedWindow {
    type Output = Decision;
    type State = FixedWindowState;
    type Cell = Word;

    #[inline]
    fn sweep_every(&self) -> u64 {
        self.quota.span_nanos()
    }

    #[inline]
    fn fresh(&self) -> FixedWindowState {
        FixedWindowState::default()
    }

    /// The state it leaves when admitted.
    type Pending = FixedWindowState;

    /// The decision, and the state it leaves (the same state when it denies, or when the cost
    /// is 0, a question, which changes nothing).
    #[inline]
    fn prepare(
        &self,
        state: &FixedWindowState,
        now: Moment,
        cost: u64,
    ) -> Result<(Decision, FixedWindowState), LimitError> {
        let current = self.current(*state, now);
        let decision = self.decide(current, now, cost)?;
        if decision.allowed() && cost > 0 {
            let count = current.count + cost; // at most the limit: admitted
            return Ok((decision, FixedWindowState { count, ..current }));
        }
        Ok((decision, *state))
    }

    #[inline]
    fn commit(state: &mut FixedWindowState, next: FixedWindowState, _cost: u64) {
        *state = next;
    }

    /// The same span: the same window, its count cut to the new limit. The cut changes no
    /// decision on a cost of 1 or more: from the limit up, every one is denied until the
    /// window ends, with nothing remaining (a cost of 0, a question, is admitted with nothing
    /// remaining, as in a window just filled); and it keeps what the checks and the one-word
    /// packing rely on (`count <= limit`).
    ///
    /// Another span: fresh. The count is of a window aligned to the old span, which the new
    /// windows cut across, and when in it the admissions came is not known: no split is
    /// right. The fresh start is one more window boundary, of the kind a fixed window already
    /// lets twice its limit through.
    fn carry(
        &self,
        old: &FixedWindow,
        state: FixedWindowState,
        _now: Moment,
    ) -> Option<FixedWindowState> {
        let same_span = old.quota.span_nanos() == self.quota.span_nanos();
        (same_span && state.count > 0).then(|| FixedWindowState {
            window: state.window,
            count: state.count.min(self.quota.limit()),
        })
    }

    /// The request's time, or the start of the window counted in if later (a clock gone back).
    #[inline]
    fn counted_at(&self, next: &FixedWindowState, now: Moment) -> Moment {
        let starts = next.window.saturating_mul(self.quota.span_nanos());
        now.max(Moment::from_nanos(starts))
    }

    /// The count of the reservation's window, if that is the window the state holds: raised
    /// by the difference up to the limit (a full window denies until it ends; a fixed window
    /// forgets at its end, debt too), or lowered by it down to 0. A reservation of an earlier
    /// window changes nothing: that window has ended.
    /// An [`unreserved`](Reservation::unreserved) reservation counts `actual` in the window of
    /// its time (the state's, if later), up to the limit.
    fn settle(&self, state: &mut FixedWindowState, reservation: Reservation, actual: u64) -> bool {
        if reservation.units() == 0 {
            if actual == 0 {
                return false; // nothing to charge: the window stays as it is
            }
            let current = self.current(*state, reservation.at());
            let count = current.count.saturating_add(actual).min(self.quota.limit());
            *state = FixedWindowState { count, ..current };
            return true;
        }
        if reservation.at().as_nanos() / self.quota.span_nanos() != state.window {
            return false;
        }
        let estimate = reservation.units();
        state.count = if actual >= estimate {
            state
                .count
                .saturating_add(actual - estimate)
                .min(self.quota.limit())
        } else {
            state.count.saturating_sub(estimate - actual)
        };
        true
    }

    #[inline]
    /// When its window ends, if anything was admitted in it.
    fn idle_at(&self, state: &FixedWindowState) -> Option<Moment> {
        if state.count == 0 {
            return Some(Moment::ZERO);
        }
        state
            .window
            .checked_add(1)
            .and_then(|next| next.checked_mul(self.quota.span_nanos()))
            .map(Moment::from_nanos)
    }
}

impl OneWord for FixedWindow {
    #[inline]
    fn pack(&self, state: &FixedWindowState) -> u64 {
        // Fits: checked in `new` for the last window, and `count <= limit`.
        state.window * (self.quota.limit() + 1) + state.count
    }

    #[inline]
    fn unpack(&self, word: u64) -> FixedWindowState {
        let base = self.quota.limit() + 1;
        FixedWindowState {
            window: word / base,
            count: word % base,
        }
    }
}
