//! [`Calendar`]: a counter per window of the calendar (a day, week, month or year in a zone).
//!
//! The algorithm is here; its quota is in `quota`, and the calendar arithmetic that places
//! the windows on the timeline in `window`.

mod quota;
mod window;

use crate::error::ConfigError;
use crate::limit::algorithm::sealed::Enforce;
use crate::limit::algorithm::{Algorithm, Locked};
use crate::limit::{Decision, LimitError, Reservation, until};
use crate::time::Moment;

pub(crate) use quota::weekday_name;
pub use quota::{CalendarQuota, CalendarUnit};
pub use window::CalendarWindow;

/// A counter per window of the calendar: at most `limit` per calendar day, week, month or
/// year in a time zone, from an optional anchor (see [`CalendarQuota`] for where the windows
/// fall). "10,000 a calendar month in Paris" means the month in Paris, 28 to 31 days, and a
/// day across a daylight-saving change 23 or 25 hours, never a fixed span.
///
/// **Moments are read as Unix time** (a [`SystemClock`](crate::time::SystemClock)'s, or
/// `Moment::try_from(jiff::Timestamp)`), as on Redis: a calendar has a date only on that
/// timeline. Each window is `[start, end)`: the instant a window starts is in it.
///
/// As with a [`FixedWindow`](crate::limit::FixedWindow), a client may spend the whole limit
/// at the end of one window and again at the start of the next. A clock that goes back to an
/// earlier window is counted in the later one, so it can only deny more. `reset_after` and a
/// denial's `retry_after` are the time until the window ends: the real reset instant in the
/// zone.
///
/// The state (24 bytes) keeps the current window's bounds and its count, so a check inside
/// the window does no calendar arithmetic; crossing a boundary computes the next window once.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use jiff::Timestamp;
/// use jiff::tz::TimeZone;
/// use slidewin::{Limiter, Moment};
/// use slidewin::limit::{Calendar, CalendarQuota};
///
/// let monthly: CalendarQuota = "3 per calendar month".parse()?;
/// let paris = monthly.in_zone(TimeZone::get("Europe/Paris")?);
/// let mut limiter = Limiter::new(Calendar::new(paris));
/// let at = |t: &str| -> Result<Moment, Box<dyn std::error::Error>> {
///     Ok(Moment::try_from(t.parse::<Timestamp>()?)?)
/// };
///
/// assert!(limiter.check(at("2026-10-31T22:00:00Z")?, 3)?.allowed());
/// let denied = limiter.check(at("2026-10-31T22:30:00Z")?, 1)?;
/// // November starts at midnight in Paris: 23:00 UTC, half an hour later.
/// assert_eq!(denied.retry_after(), Some(Duration::from_secs(30 * 60)));
/// assert!(limiter.check(at("2026-10-31T23:00:00Z")?, 3)?.allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Calendar {
    quota: CalendarQuota,
}

/// The window a [`Calendar`] counts in, and its count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[allow(unreachable_pub)] // opaque: named by the sealed trait only
pub struct CalendarState {
    /// The window's first instant, Unix nanoseconds.
    start: u64,
    /// Its end (0: no window yet, a fresh state; `u64::MAX`: the timeline's end).
    end: u64,
    /// The cost admitted in it.
    count: u64,
}

impl Calendar {
    /// The rules of a calendar counter for `quota`. Every quota is representable: the
    /// constructor cannot fail.
    ///
    /// ```
    /// use slidewin::limit::Calendar;
    /// let rules = Calendar::new("100 per calendar day".parse()?);
    /// assert_eq!(rules.quota().limit(), 100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn new(quota: CalendarQuota) -> Calendar {
        Calendar { quota }
    }

    /// The quota it enforces.
    ///
    /// ```
    /// use slidewin::limit::Calendar;
    /// let rules = Calendar::new("5 per calendar week".parse()?);
    /// assert_eq!(rules.quota().to_string(), "5 per calendar week");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn quota(&self) -> &CalendarQuota {
        &self.quota
    }

    /// The state as of `now`: inside the known window, itself (no calendar arithmetic); past
    /// its end, the window holding `now`, empty; before its start (the clock went back), the
    /// later window, which keeps counting.
    #[inline]
    fn current(&self, state: CalendarState, now: Moment) -> CalendarState {
        let t = now.as_nanos();
        if t < state.end || (state.end == u64::MAX && state.start <= t) {
            return state;
        }
        let window = self.quota.window(now);
        // `end == 0` only for a fresh state; otherwise a later window starts at or after the
        // known one's end.
        if state.end == 0 || window.start_nanos() >= state.end {
            CalendarState {
                start: window.start_nanos(),
                end: window.end_nanos(),
                count: 0,
            }
        } else {
            state
        }
    }

    #[inline]
    fn decide(&self, state: CalendarState, now: Moment, cost: u64) -> Result<Decision, LimitError> {
        let limit = self.quota.limit();
        if cost > limit {
            return Err(LimitError::CostTooHigh { cost, max: limit });
        }
        let ends = until(u128::from(state.end), now);
        let used = state.count + cost; // both at most the limit
        Ok(if used <= limit {
            let reset_after = if used > 0 { ends } else { 0 };
            Decision::allow_nanos(limit, limit - used, reset_after)
        } else {
            Decision::deny_nanos(limit, limit - state.count, ends, ends)
        })
    }

    /// An error for [`Rule::new`](crate::limit::Rule::new) with
    /// [`Kind::Calendar`](crate::limit::Kind::Calendar): its quota has no calendar.
    pub(crate) fn needs_calendar_quota() -> ConfigError {
        ConfigError::CalendarQuota {
            reason: "a calendar rule needs a calendar quota (`10000 per calendar month`): \
                     build it with Rule::calendar",
        }
    }
}

impl Algorithm for Calendar {}

impl Enforce for Calendar {
    type Output = Decision;
    type State = CalendarState;
    type Cell = Locked<CalendarState>;

    #[inline]
    fn sweep_every(&self) -> u64 {
        self.quota.unit().longest_nanos()
    }

    #[inline]
    fn fresh(&self) -> CalendarState {
        CalendarState::default()
    }

    /// The state it leaves when admitted.
    type Pending = CalendarState;

    /// The decision, and the state it leaves when admitted (the count grown by the cost).
    #[inline]
    fn prepare(
        &self,
        state: &CalendarState,
        now: Moment,
        cost: u64,
    ) -> Result<(Decision, CalendarState), LimitError> {
        let current = self.current(*state, now);
        let decision = self.decide(current, now, cost)?;
        let count = current.count + if decision.allowed() { cost } else { 0 };
        Ok((decision, CalendarState { count, ..current }))
    }

    #[inline]
    fn commit(state: &mut CalendarState, next: CalendarState, _cost: u64) {
        *state = next;
    }

    /// The same windows (unit, zone, anchor and month-end rule): the same window, its count
    /// cut to the new limit, as a fixed window's. Other windows: fresh, as no split of the
    /// count between them is known to be right.
    /// The request's time, or the start of the window counted in if later (a clock gone back
    /// counts in the window the state holds).
    #[inline]
    fn counted_at(&self, next: &CalendarState, now: Moment) -> Moment {
        now.max(Moment::from_nanos(next.start))
    }

    /// The count of the reservation's window, if that is the window the state holds: raised
    /// by the difference up to the limit (a full window denies until it ends, and forgets at
    /// its end, debt too, as a fixed window does), or lowered by it down to 0. A reservation
    /// of an earlier window changes nothing: that window has ended. An
    /// [`unreserved`](Reservation::unreserved) one counts `actual` in the window of its time
    /// (the state's, if later), up to the limit.
    fn settle(&self, state: &mut CalendarState, reservation: Reservation, actual: u64) -> bool {
        if reservation.units() == 0 {
            if actual == 0 {
                return false; // nothing to charge: the window stays as it is
            }
            let current = self.current(*state, reservation.at());
            let count = current.count.saturating_add(actual).min(self.quota.limit());
            *state = CalendarState { count, ..current };
            return true;
        }
        let t = reservation.at().as_nanos();
        let held = state.start <= t && (t < state.end || state.end == u64::MAX);
        if !held || state.end == 0 {
            return false;
        }
        let estimate = reservation.units();
        state.count = if actual >= estimate {
            let more = actual - estimate;
            state.count.saturating_add(more).min(self.quota.limit())
        } else {
            state.count.saturating_sub(estimate - actual)
        };
        true
    }

    fn carry(&self, old: &Calendar, state: CalendarState, _now: Moment) -> Option<CalendarState> {
        (self.quota.same_windows(&old.quota) && state.count > 0).then(|| CalendarState {
            count: state.count.min(self.quota.limit()),
            ..state
        })
    }

    /// When its window ends, if anything was admitted in it; never for the window that holds
    /// the end of the timeline.
    #[inline]
    fn idle_at(&self, state: &CalendarState) -> Option<Moment> {
        if state.count == 0 {
            return Some(Moment::ZERO);
        }
        (state.end != u64::MAX).then(|| Moment::from_nanos(state.end))
    }
}
