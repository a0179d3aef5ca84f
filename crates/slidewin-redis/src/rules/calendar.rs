//! Calendar rules on Redis ([`Kind::Calendar`](slidewin::limit::Kind::Calendar)). Redis cannot
//! date calendar windows (zones, daylight saving, months of 28 to 31 days), so the client dates
//! the window holding each check's time with [`CalendarQuota::window`] and sends it in the
//! rule's numbers for that call: `6, start, end, limit, 0`, whole microseconds of Unix time
//! (see `lua/check.lua`). A check at the server's time is dated by this client's clock, and
//! the script refuses it when the server's time is outside the window sent.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use slidewin::limit::{CalendarQuota, Kind, Rule};
use slidewin::{ConfigError, Moment};

use super::call::What;
use super::{Call, EXACT, Rules, number};

/// The latest window end sent: the last of Lua's exact integers (the window that holds the end
/// of the timeline ends there, long after [`RedisLimiter::MAX_TIME`](crate::RedisLimiter)).
const LAST_END: u64 = (1 << 53) - 1;

/// A calendar rule's numbers, its window still to be dated by each call (`0, 0`).
pub(super) fn prepare(
    rule: &Rule,
    refuse: impl Fn(&'static str) -> ConfigError,
) -> Result<[u64; 5], ConfigError> {
    let limit = rule.calendar_quota().map_or(0, CalendarQuota::limit);
    // A count and a cost, each at most the limit, add up below 2^53.
    if u128::from(limit) >= EXACT / 2 {
        return Err(refuse(
            "its arithmetic would pass 2^53, where Lua's numbers stop being exact",
        ));
    }
    Ok([number(Kind::Calendar), 0, 0, limit, 0])
}

/// `params` (a calendar rule's) with the window of `quota` that holds `at` (microseconds of
/// Unix time): its start and end rounded up to the microsecond, so that a time taken at its
/// microsecond is inside exactly when it is in memory.
fn dated(quota: &CalendarQuota, params: [u64; 5], at: u64) -> [u64; 5] {
    let window = quota.window(Moment::from_nanos(at.saturating_mul(1_000)));
    let up = |t: Moment| t.as_nanos().div_ceil(1_000);
    let [number, _, _, limit, spare] = params;
    [
        number,
        up(window.start()),
        up(window.end()).min(LAST_END),
        limit,
        spare,
    ]
}

/// The window of `quota` holding `at` (microseconds of Unix time), as the script takes it:
/// start and end.
pub(crate) fn window_of(quota: &CalendarQuota, at: u64) -> (u64, u64) {
    let [_, start, end, _, _] = dated(quota, [0; 5], at);
    (start, end)
}

/// How long from `now` (microseconds of Unix time; `None`: this client's clock) until the
/// window of `quota` holding it ends: a closed failure policy's wait for a calendar rule.
pub(crate) fn until_window_end(quota: &CalendarQuota, now: Option<u64>) -> Duration {
    let now = now.unwrap_or_else(client_now);
    let (_, end) = window_of(quota, now);
    Duration::from_micros(end.saturating_sub(now))
}

/// This client's clock, in microseconds of Unix time: what dates the windows of a check at the
/// server's time.
fn client_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// The time a calendar rule counted an admission at `now` in, `ends` its window's end as the
/// answer told (`now` plus its `reset_after`): `now`, or, when the key held a later window (a
/// clock gone back counts there, as in memory), that window's start.
pub(crate) fn counted_at(quota: &CalendarQuota, now: u64, ends: u64) -> u64 {
    if ends <= window_of(quota, now).1 {
        return now;
    }
    window_of(quota, ends.saturating_sub(1)).0.max(now)
}

impl Call {
    /// Dates the call's calendar windows: at its time, or by this client's clock for a check at
    /// the server's time.
    pub(super) fn date_windows(&mut self, rules: &Rules) {
        if !rules.dates_windows() {
            return;
        }
        let at = match self.now {
            Some(at) => at,
            None => {
                let at = client_now();
                self.dated_by = Some(at);
                at
            }
        };
        self.date(rules, at);
    }

    /// Dates the call's calendar windows again at `at`, microseconds of Unix time: the
    /// server's time, after a check at it found the client's windows wrong.
    pub(crate) fn redate(&mut self, rules: &Rules, at: u64) {
        self.dated_by = Some(at);
        self.date(rules, at);
    }

    /// Whether its windows were dated by a clock other than the check's time, which the
    /// script may find wrong: a calendar check at the server's time.
    pub(crate) fn dated_by_a_clock(&self) -> bool {
        self.dated_by.is_some()
    }

    /// The time that dated its calendar windows, for a check at the server's time.
    pub(crate) fn dated_by(&self) -> Option<Moment> {
        self.dated_by
            .map(|at| Moment::from_nanos(at.saturating_mul(1_000)))
    }

    fn date(&mut self, rules: &Rules, at: u64) {
        let each = rules.rule_set().rules().iter().zip(&rules.inner.each);
        let params: Box<[[u64; 5]]> = each
            .map(|(rule, prepared)| match rule.calendar_quota() {
                Some(quota) => dated(quota, prepared.params, at),
                None => prepared.params,
            })
            .collect();
        match &mut self.what {
            What::One { params: one, .. } => *one = params[0],
            What::Many(_) => self.dated = Some(params),
        }
    }
}
