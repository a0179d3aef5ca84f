//! Issue 33: reserve, then settle. An estimate admitted as one stamp, its cost changed in place
//! later: in the windows it was admitted in; over-use is debt that later admissions wait out.
//! Edges, then a property test against a reference holding one entry per admission.

use std::time::Duration;

use proptest::prelude::*;
use slidewin::limit::{Reservation, SlidingLog};
use slidewin::{Decision, Limiter, Moment};

const SPAN: u64 = 10_000_000_000;

fn log(limit: u64) -> Limiter<SlidingLog> {
    let quota = slidewin::Quota::new(limit, Duration::from_nanos(SPAN)).unwrap();
    Limiter::new(SlidingLog::new(quota).unwrap())
}

fn at(nanos: u64) -> Moment {
    Moment::from_nanos(nanos)
}

#[test]
fn a_settle_after_the_window_changes_nothing_and_an_estimate_of_0_reserves_nothing() {
    let mut tokens = log(100);
    let (_, first) = tokens.reserve(at(0), 40).unwrap();
    let (_, none) = tokens.reserve(at(1), 0).unwrap();
    assert_eq!(none, None);
    // A later admission, past the first's window, drops its stamp from the log.
    tokens.check(at(SPAN + 5), 1).unwrap();
    assert!(!tokens.settle(first.unwrap(), 90));
    assert_eq!(tokens.peek(at(SPAN + 5), 0).unwrap().remaining(), 99);
}

#[test]
fn debt_past_the_limit_waits_for_the_settled_stamp_to_leave() {
    let mut tokens = log(100);
    let (_, reserved) = tokens.reserve(at(0), 10).unwrap();
    assert!(tokens.settle(reserved.unwrap(), 250));
    let denied = tokens.check(at(5), 1).unwrap();
    assert!(!denied.allowed());
    assert_eq!(denied.remaining(), 0);
    assert_eq!(denied.retry_after(), Some(Duration::from_nanos(SPAN - 5)));
    assert!(tokens.check(at(SPAN), 100).unwrap().allowed());
}

#[test]
fn settling_down_never_takes_more_than_the_instant_holds() {
    let mut tokens = log(100);
    let (_, a) = tokens.reserve(at(7), 30).unwrap();
    let (_, b) = tokens.reserve(at(7), 20).unwrap(); // the same instant: one stamp of 50
    assert!(tokens.settle(a.unwrap(), 0));
    assert_eq!(tokens.peek(at(7), 0).unwrap().remaining(), 80);
    // A second settle from the same estimate takes from what the instant holds, never more.
    assert!(tokens.settle(a.unwrap(), 0));
    assert_eq!(tokens.peek(at(7), 0).unwrap().remaining(), 100);
    // An instant with no units left is gone: nothing holds either reservation now.
    assert!(!tokens.settle(b.unwrap(), 40));
    assert_eq!(tokens.peek(at(7), 0).unwrap().remaining(), 100);
}

/// One entry per admission: its time and units, changed in place by a settle.
struct Reference {
    limit: u64,
    entries: Vec<(u64, u64)>,
}

impl Reference {
    fn counted(&self, now: u64) -> (u64, usize, u64) {
        let at = self.entries.last().map_or(now, |&(t, _)| t.max(now));
        let first = self
            .entries
            .iter()
            .position(|&(t, _)| t + SPAN > at)
            .unwrap_or(self.entries.len());
        let count = self.entries[first..].iter().map(|&(_, u)| u).sum();
        (at, first, count)
    }

    fn until(t: u64, now: u64) -> Duration {
        Duration::from_nanos((t + SPAN).saturating_sub(now))
    }

    fn check(&mut self, now: u64, cost: u64) -> (bool, u64, Duration, Option<Duration>, u64) {
        let (at, first, count) = self.counted(now);
        if count + cost <= self.limit {
            if cost > 0 {
                self.entries.drain(..first);
                self.entries.push((at, cost));
            }
            let live = self.entries.len() > first.min(self.entries.len()) || cost > 0;
            let newest = if cost > 0 {
                Some(at)
            } else if count > 0 && live {
                self.entries.last().map(|&(t, _)| t)
            } else {
                None
            };
            let reset = newest.map_or(Duration::ZERO, |t| Self::until(t, now));
            return (true, self.limit - count - cost, reset, None, at);
        }
        let excess = count + cost - self.limit;
        let mut sum = 0;
        let leaving = self.entries[first..]
            .iter()
            .find(|&&(_, u)| {
                sum += u;
                sum >= excess
            })
            .map(|&(t, _)| t)
            .unwrap();
        let reset = Self::until(self.entries.last().unwrap().0, now);
        let remaining = self.limit.saturating_sub(count);
        (false, remaining, reset, Some(Self::until(leaving, now)), at)
    }

    /// An unreserved settle: `units` entered at the log's time, as an admission would be,
    /// whatever the limit, up to twice the limit in the window.
    fn charge(&mut self, now: u64, units: u64) -> bool {
        let (at, first, count) = self.counted(now);
        let more = units.min((2 * self.limit).saturating_sub(count));
        if more > 0 {
            self.entries.drain(..first);
            self.entries.push((at, more));
        }
        units > 0
    }

    /// The entries of one instant share their units, as the log's stamp does; the log holds
    /// at most twice the limit, and an instant left with no units is no admission.
    fn settle(&mut self, at: u64, from: u64, to: u64) -> bool {
        settle_entries(&mut self.entries, self.limit, at, from, to)
    }
}

fn same(d: &Decision, e: &(bool, u64, Duration, Option<Duration>, u64)) -> bool {
    (d.allowed(), d.remaining(), d.reset_after(), d.retry_after()) == (e.0, e.1, e.2, e.3)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Reservations (the clock now and then going back), settles up and down of any of them,
    /// old or new, charges of unreserved costs, and plain checks: every answer is the
    /// reference's.
    #[test]
    fn reserve_and_settle_answer_as_one_entry_per_admission(
        limit in 1..=20u64,
        steps in prop::collection::vec(
            (0..SPAN / 3, prop::bool::weighted(0.1), 0..=8u64, 0..3u8, 0..40u64, any::<prop::sample::Index>()),
            1..80,
        ),
    ) {
        let mut tokens = log(limit);
        let mut reference = Reference { limit, entries: Vec::new() };
        let mut reservations: Vec<Reservation> = Vec::new();
        let mut now = 1_000 * SPAN;
        for (step, back, cost, what, actual, pick) in steps {
            now = if back { now - step } else { now + step };
            let cost = cost.min(limit);
            if what == 0 && !reservations.is_empty() {
                let reservation = reservations[pick.index(reservations.len())];
                let expected = reference.settle(reservation.at().as_nanos(), reservation.units(), actual);
                prop_assert_eq!(tokens.settle(reservation, actual), expected);
                continue;
            }
            if what == 1 && pick.index(3) == 0 {
                // A cost reported after the work: charged whatever the limit.
                let expected = reference.charge(now, actual);
                prop_assert_eq!(tokens.settle(Reservation::unreserved(at(now)), actual), expected);
                continue;
            }
            let expected = reference.check(now, cost);
            let (decision, reserved) = tokens.reserve(at(now), cost).unwrap();
            prop_assert!(same(&decision, &expected), "at {}: {:?} vs {:?}", now, decision, expected);
            if let Some(reservation) = reserved {
                prop_assert_eq!(reservation.at(), at(expected.4));
                reservations.push(reservation);
            }
        }
    }
}

/// A settle of the entries (time, units) of a log of `limit`, the obvious way: entries of one
/// instant share their units; more is added up to twice the limit in all; less is taken from
/// the instant's entries; entries left with no units go. Whether the instant had any.
pub(crate) fn settle_entries(
    entries: &mut Vec<(u64, u64)>,
    limit: u64,
    at: u64,
    from: u64,
    to: u64,
) -> bool {
    let same: Vec<usize> = (0..entries.len()).filter(|&i| entries[i].0 == at).collect();
    let Some(&first) = same.first() else {
        return false;
    };
    if to >= from {
        let units: u64 = entries.iter().map(|&(_, u)| u).sum();
        entries[first].1 += (to - from).min((2 * limit).saturating_sub(units));
        return true;
    }
    let mut take = from - to;
    for i in same {
        let cut = take.min(entries[i].1);
        entries[i].1 -= cut;
        take -= cut;
    }
    entries.retain(|&(t, u)| t != at || u > 0);
    true
}
