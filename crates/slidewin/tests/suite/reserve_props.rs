//! Issue 33 beyond the sliding log: reserve, then settle, on every algorithm, on a rule set
//! (a token budget a minute AND a day) and on every holder. Each family against a reference
//! computed the obvious way, then the edges.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use slidewin::limit::{FixedWindow, Gcra, Kind, Reservation, Rule, RuleSet, SlidingCounter};
use slidewin::{Limiter, Moment, Quota, SharedLimiter};

const SPAN: u64 = 10_000_000_000;

fn quota(limit: u64) -> Quota {
    Quota::new(limit, Duration::from_nanos(SPAN)).unwrap()
}

fn at(nanos: u64) -> Moment {
    Moment::from_nanos(nanos)
}

/// A step of a property test: after `step` nanoseconds (back, now and then), a settle of an
/// earlier reservation (`what == 0`) to `actual`, or a reserve of `cost`.
type Step = (u64, bool, u64, u8, u64, prop::sample::Index);

fn steps(most: u64) -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        (
            0..SPAN / 3,
            prop::bool::weighted(0.1),
            0..=most,
            0..3u8,
            0..3 * most,
            any::<prop::sample::Index>(),
        ),
        1..80,
    )
}

/// What a reference answers to a reserve: admitted, what remains, and the time it counted at.
type Answer = (bool, u64, u64);

/// Runs `steps` on `reserve`/`settle` and on the reference's, asserting the same answers.
fn agree(
    steps: Vec<Step>,
    most: u64,
    mut reserve: impl FnMut(u64, u64) -> (bool, u64, Option<Reservation>),
    mut settle: impl FnMut(Reservation, u64) -> bool,
    mut expect_reserve: impl FnMut(u64, u64) -> Answer,
    mut expect_settle: impl FnMut(u64, u64, u64) -> bool,
) -> Result<(), TestCaseError> {
    let mut reservations: Vec<Reservation> = Vec::new();
    let mut now = 1_000 * SPAN + 7;
    for (step, back, cost, what, actual, pick) in steps {
        now = if back { now - step } else { now + step };
        if what == 0 && !reservations.is_empty() {
            let r = reservations[pick.index(reservations.len())];
            let expected = expect_settle(r.at().as_nanos(), r.units(), actual);
            prop_assert_eq!(settle(r, actual), expected, "settle {:?} to {}", r, actual);
            continue;
        }
        let cost = cost.min(most);
        let (allowed, remaining, counted) = expect_reserve(now, cost);
        let (ok, left, reserved) = reserve(now, cost);
        prop_assert_eq!(
            (ok, left),
            (allowed, remaining),
            "reserve {} at {}",
            cost,
            now
        );
        prop_assert_eq!(reserved.is_some(), allowed && cost > 0);
        if let Some(r) = reserved {
            prop_assert_eq!(r, Reservation::new(at(counted), cost));
            reservations.push(r);
        }
    }
    Ok(())
}

/// A reference of one algorithm: its answers to a reserve and to a settle.
trait Reference {
    fn reserve(&mut self, now: u64, cost: u64) -> Answer;
    fn settle(&mut self, at: u64, from: u64, to: u64) -> bool;
}

/// [`agree`] of a shared limiter and a reference, costs at most `most`.
fn agree_shared<A>(
    shared: &SharedLimiter<A>,
    reference: impl Reference,
    steps: Vec<Step>,
    most: u64,
) -> Result<(), TestCaseError>
where
    A: slidewin::limit::Algorithm<Output = slidewin::Decision>,
{
    let reference = std::cell::RefCell::new(reference);
    agree(
        steps,
        most,
        |now, cost| {
            let (d, r) = shared.reserve(at(now), cost.min(most)).unwrap();
            (d.allowed(), d.remaining(), r)
        },
        |r, actual| shared.settle(r, actual),
        |now, cost| reference.borrow_mut().reserve(now, cost.min(most)),
        |t, from, to| reference.borrow_mut().settle(t, from, to),
    )
}

/// A number the reference computed in 128 bits that a limit or a time bounds.
fn narrow(n: u128) -> u64 {
    u64::try_from(n).unwrap()
}

/// A fixed window, the obvious way: a count per window; the latest window admitted in is
/// where a clock gone back counts. A count is at most the limit.
struct ReferenceFixed {
    limit: u64,
    counts: BTreeMap<u64, u64>,
    latest: u64,
}

impl Reference for ReferenceFixed {
    fn reserve(&mut self, now: u64, cost: u64) -> Answer {
        let window = (now / SPAN).max(self.latest);
        let count = self.counts.get(&window).copied().unwrap_or(0);
        if count + cost > self.limit {
            return (false, self.limit - count, 0);
        }
        if cost > 0 {
            self.counts.insert(window, count + cost);
            self.latest = window;
        }
        (true, self.limit - count - cost, now.max(window * SPAN))
    }

    fn settle(&mut self, at: u64, from: u64, to: u64) -> bool {
        if at / SPAN != self.latest {
            return false;
        }
        let count = self.counts.entry(self.latest).or_default();
        *count = if to >= from {
            (*count + (to - from)).min(self.limit)
        } else {
            count.saturating_sub(from - to)
        };
        true
    }
}

/// Two counters, the obvious way: a count per window, the previous one weighted by how much
/// of it the window ending now still covers; compared exactly, in units × nanoseconds.
struct ReferenceCounter {
    limit: u64,
    counts: BTreeMap<u64, u64>,
    latest: u64,
}

impl Reference for ReferenceCounter {
    fn reserve(&mut self, now: u64, cost: u64) -> Answer {
        let (window, elapsed) = if now / SPAN >= self.latest {
            (now / SPAN, now % SPAN)
        } else {
            (self.latest, 0) // the clock went back: counted at the window's start
        };
        let count = |w: u64| u128::from(self.counts.get(&w).copied().unwrap_or(0));
        let previous = if window > 0 { count(window - 1) } else { 0 };
        let weighted = previous * u128::from(SPAN - elapsed) + count(window) * u128::from(SPAN);
        let capacity = u128::from(self.limit) * u128::from(SPAN);
        let after = weighted + u128::from(cost) * u128::from(SPAN);
        let left = |used: u128| narrow(capacity.saturating_sub(used) / u128::from(SPAN));
        if after > capacity {
            return (false, left(weighted), 0);
        }
        if cost > 0 {
            *self.counts.entry(window).or_default() += cost;
            self.latest = window;
        }
        (true, left(after), window * SPAN + elapsed)
    }

    fn settle(&mut self, at: u64, from: u64, to: u64) -> bool {
        let window = at / SPAN;
        if window != self.latest && window + 1 != self.latest {
            return false;
        }
        let count = self.counts.entry(window).or_default();
        *count = if to >= from {
            (*count + (to - from)).min(self.limit)
        } else {
            count.saturating_sub(from - to)
        };
        true
    }
}

/// A token bucket as a meter of debt: a cost fits while the debt after it, `TAT - now`, is
/// within the bucket; a settle moves the debt by the difference, never below what the
/// reservation itself used from its time on.
struct ReferenceBucket {
    limit: u64,
    burst: u64,
    interval: u128,
    tat: u128,
}

impl Reference for ReferenceBucket {
    fn reserve(&mut self, now: u64, cost: u64) -> Answer {
        let now = u128::from(now);
        let bucket = self.interval * u128::from(self.burst);
        let debt = |tat: u128| tat.saturating_sub(now);
        let left = |tat: u128| narrow((bucket - debt(tat).min(bucket)) / self.interval);
        let next = self.tat.max(now) + u128::from(cost) * self.interval;
        if cost > 0 && debt(next) > bucket {
            return (false, left(self.tat), 0);
        }
        if cost > 0 {
            self.tat = next;
        }
        (true, left(self.tat.max(now)), narrow(now))
    }

    fn settle(&mut self, at: u64, from: u64, to: u64) -> bool {
        let before = self.tat;
        if to >= from {
            // At most a span (here `limit` intervals) and a full bucket after the reservation.
            let ceiling = u128::from(at) + u128::from(self.limit + self.burst) * self.interval;
            let later = (self.tat + u128::from(to - from) * self.interval).min(ceiling);
            self.tat = later.max(self.tat);
        } else {
            let floor = u128::from(at) + u128::from(to) * self.interval;
            let earlier = self
                .tat
                .saturating_sub(u128::from(from - to) * self.interval);
            self.tat = earlier.max(floor).min(before);
        }
        self.tat != before
    }
}

/// The minute-and-day budget, the obvious way: each rule a log of one entry per admission,
/// counted in its window `(at - span, at]` (`at`: the request's time, or the rule's newest
/// entry's if later); admitted only if every rule has room, then entered in both, at each
/// rule's own time. The reservation's time is the later of theirs.
struct ReferenceBudget {
    rules: [RuleLog; 2],
}

/// A rule's limit, span, and entries (time, units).
type RuleLog = (u64, u64, Vec<(u64, u64)>);

impl ReferenceBudget {
    fn reserve(&mut self, now: u64, cost: u64) -> (bool, [u64; 2], u64) {
        let at = |entries: &Vec<(u64, u64)>| entries.last().map_or(now, |&(t, _)| t.max(now));
        let count = |(_, span, entries): &RuleLog| -> u64 {
            let live = entries.iter().filter(|&&(t, _)| t + span > at(entries));
            live.map(|&(_, u)| u).sum()
        };
        let counts = [count(&self.rules[0]), count(&self.rules[1])];
        let fits = |i: usize| counts[i] + cost <= self.rules[i].0;
        // Each rule's own answer: what it leaves if it admits, what it has if it denies.
        let left = |i: usize| match fits(i) {
            true => self.rules[i].0 - counts[i] - cost,
            false => self.rules[i].0.saturating_sub(counts[i]),
        };
        let left = [left(0), left(1)];
        let latest = at(&self.rules[0].2).max(at(&self.rules[1].2));
        if !(fits(0) && fits(1)) {
            return (false, left, latest);
        }
        if cost > 0 {
            for (_, span, entries) in &mut self.rules {
                let t = at(entries);
                entries.retain(|&(e, _)| e + *span > t); // what has left its window, for good
                entries.push((t, cost));
            }
        }
        (true, left, latest)
    }

    /// Each rule settles its own entries; whether either held it.
    fn settle(&mut self, at: u64, from: u64, to: u64) -> bool {
        let mut any = false;
        for (limit, _, entries) in &mut self.rules {
            any |= crate::reserve::settle_entries(entries, *limit, at, from, to);
        }
        any
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn a_fixed_window_settles_in_the_window_it_admitted_in(limit in 1..=20u64, steps in steps(8)) {
        let shared = SharedLimiter::new(FixedWindow::new(quota(limit)).unwrap());
        agree_shared(&shared, ReferenceFixed { limit, counts: BTreeMap::new(), latest: 0 }, steps, limit)?;
    }

    #[test]
    fn a_sliding_counter_settles_its_current_or_previous_window(limit in 1..=20u64, steps in steps(8)) {
        let shared = SharedLimiter::new(SlidingCounter::new(quota(limit)).unwrap());
        agree_shared(&shared, ReferenceCounter { limit, counts: BTreeMap::new(), latest: 0 }, steps, limit)?;
    }

    #[test]
    fn a_token_bucket_moves_its_tat_by_the_difference(burst in 1..=20u64, steps in steps(8)) {
        let limit = 20;
        let text = format!("{limit} per {SPAN}ns burst {burst}");
        let shared = SharedLimiter::new(Gcra::new(text.parse().unwrap()).unwrap());
        let interval = u128::from(SPAN.div_ceil(limit));
        agree_shared(&shared, ReferenceBucket { limit, burst, interval, tat: 0 }, steps, burst)?;
    }

    /// Tokens a minute AND a day (here 10 s and 30 s): a reserve admits on both or on none,
    /// and a settle changes both, each in its own windows.
    #[test]
    fn a_minute_and_day_budget_reserves_on_both_and_settles_both(
        per_minute in 1..=20u64,
        per_day in 1..=40u64,
        steps in steps(8),
    ) {
        let most = per_minute.min(per_day);
        let set = RuleSet::new([
            Rule::new("minute", Kind::SlidingLog, quota(per_minute)).unwrap(),
            Rule::new("day", Kind::SlidingLog, Quota::new(per_day, Duration::from_nanos(3 * SPAN)).unwrap()).unwrap(),
        ]).unwrap();
        let mut tokens = Limiter::new(set);
        let mut reference = ReferenceBudget {
            rules: [(per_minute, SPAN, Vec::new()), (per_day, 3 * SPAN, Vec::new())],
        };
        let mut reservations: Vec<Reservation> = Vec::new();
        let mut now = 1_000 * SPAN + 7;
        for (step, back, cost, what, actual, pick) in steps {
            now = if back { now - step } else { now + step };
            if what == 0 && !reservations.is_empty() {
                let r = reservations[pick.index(reservations.len())];
                let expected = reference.settle(r.at().as_nanos(), r.units(), actual);
                prop_assert_eq!(tokens.settle(r, actual), expected);
                continue;
            }
            let cost = cost.min(most);
            let (allowed, left, counted) = reference.reserve(now, cost);
            let (decisions, reserved) = tokens.reserve(at(now), cost).unwrap();
            let each: Vec<u64> = decisions.iter().map(|d| d.remaining()).collect();
            prop_assert_eq!((decisions.allowed(), each), (allowed, left.to_vec()), "{} at {}", cost, now);
            if let Some(r) = reserved {
                prop_assert_eq!(r, Reservation::new(at(counted), cost));
                reservations.push(r);
            }
        }
    }
}
