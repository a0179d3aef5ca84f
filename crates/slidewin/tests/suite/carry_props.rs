//! `Keyed::carry_from` against simple references, on random traces: admissions under one
//! quota, a carry to another, then checks under the new one.
//!
//! What is compared, honestly:
//!
//! * `SlidingLog`, exactly: a list of every admitted unit's time, as the log still knows it
//!   (the units inside the old span at the newest admission: what it had let go is gone), is
//!   counted under the new quota, and every check after the carry answers as that list does,
//!   for any new limit and span. The one difference by design: where the list counts more
//!   than the new limit, a cost of 0 (a question) is told "nothing remaining" by both, and
//!   the log, which keeps only the newest `limit` units, admits the question.
//! * `FixedWindow`, exactly, against the count of the history's units in each window; the
//!   same difference for a cost of 0 above the new limit.
//! * `SlidingCounter`, `allowed` and `remaining` against the two-counter estimate of the whole
//!   history (same span), and every retry time is exact.
//! * `Gcra` against the textbook virtual-scheduling GCRA, one cell at a time, started after
//!   the carry at the TAT the documented rule gives (the old TAT, or the units owed
//!   converted to the new rate if later, at most an empty bucket).
//!
//! Time never goes back here: `Keyed` drops a key idle at a check's time, which a clock going
//! back past that time could tell from a key kept; `tests/carry.rs` carries at times before
//! the states' own.

#![allow(
    clippy::cast_possible_truncation,
    reason = "counts and indices in tests are far below 2^32"
)]

use crate::reference;

use std::time::Duration;

use proptest::prelude::*;
use reference::{Fields, ReferenceLog, fields};
use slidewin::limit::{FixedWindow, Gcra, SlidingCounter, SlidingLog};
use slidewin::{Keyed, Moment, Quota};

/// One request: a step forward in time (nanoseconds) and a cost.
#[derive(Clone, Debug)]
struct Step {
    delta: u64,
    cost: u64,
}

fn steps(span: u64, most: u64) -> impl Strategy<Value = Vec<Step>> {
    let delta = prop_oneof![
        6 => 0..span / 2 + 1,                 // inside the window
        2 => Just(span),                      // exactly one span: the boundary
        2 => Just(0),                         // equal times
        1 => (span * 1_000)..(span * 100_000), // a huge jump
    ];
    let cost = prop_oneof![4 => Just(1u64), 2 => 0..=most, 1 => Just(most)];
    proptest::collection::vec(
        (delta, cost).prop_map(|(delta, cost)| Step { delta, cost }),
        0..40,
    )
}

fn quota(limit: u64, span: u64) -> Quota {
    Quota::new(limit, Duration::from_nanos(span)).unwrap()
}

fn nanos(n: u64) -> Duration {
    Duration::from_nanos(n)
}

/// Every unit of the history and its time, counted per window of `span`.
struct ReferenceFixed {
    limit: u64,
    span: u64,
    units: Vec<(u64, u64)>,
}

impl ReferenceFixed {
    fn check(&mut self, now: u64, cost: u64) -> Fields {
        let window = now / self.span;
        let count: u64 = self
            .units
            .iter()
            .filter(|(t, _)| t / self.span == window)
            .map(|(_, c)| c)
            .sum();
        let ends = nanos((window + 1) * self.span - now);
        if count + cost <= self.limit {
            if cost > 0 {
                self.units.push((now, cost));
            }
            let reset = if count + cost > 0 {
                ends
            } else {
                Duration::ZERO
            };
            (true, self.limit, self.limit - count - cost, reset, None)
        } else {
            let remaining = self.limit.saturating_sub(count);
            (false, self.limit, remaining, ends, Some(ends))
        }
    }
}

/// Cloudflare's estimate over the whole history: the units of the previous window weighted by
/// how much of it the sliding window still covers, plus the current window's.
struct ReferenceCounter {
    limit: u64,
    span: u64,
    units: Vec<(u64, u64)>,
}

impl ReferenceCounter {
    fn check(&mut self, now: u64, cost: u64) -> (bool, u64) {
        let (span, window) = (u128::from(self.span), now / self.span);
        let in_window = |w: u64| -> u128 {
            self.units
                .iter()
                .filter(|(t, _)| t / self.span == w)
                .map(|&(_, c)| u128::from(c))
                .sum()
        };
        let previous = window.checked_sub(1).map_or(0, in_window);
        let elapsed = u128::from(now % self.span);
        let weighted = previous * (span - elapsed) + in_window(window) * span;
        let capacity = u128::from(self.limit) * span;
        let after = weighted + u128::from(cost) * span;
        if after <= capacity {
            if cost > 0 {
                self.units.push((now, cost));
            }
            (true, ((capacity - after) / span) as u64)
        } else {
            (false, (capacity.saturating_sub(weighted) / span) as u64)
        }
    }
}

/// The textbook GCRA (virtual scheduling): one cell conforms at `t` if `t >= TAT - τ`, and then
/// `TAT = max(t, TAT) + T`. A cost of `n` is `n` cells at the same time, all or none.
struct TextbookGcra {
    interval: u64,
    tolerance: u64,
    tat: u64,
}

impl TextbookGcra {
    fn new(limit: u64, span: u64, burst: u64) -> TextbookGcra {
        let interval = span.div_ceil(limit);
        TextbookGcra {
            interval,
            tolerance: interval * (burst - 1),
            tat: 0,
        }
    }

    fn conforms(&self, now: u64, cost: u64) -> Option<u64> {
        let mut tat = self.tat;
        for _ in 0..cost {
            if now + self.tolerance < tat {
                return None;
            }
            tat = tat.max(now) + self.interval;
        }
        Some(tat)
    }

    /// Whether it admits, and if not, the wait until it would (by search: conformance only
    /// grows with time).
    fn check(&mut self, now: u64, cost: u64) -> (bool, Option<Duration>) {
        if let Some(tat) = self.conforms(now, cost) {
            self.tat = tat;
            return (true, None);
        }
        let (mut lo, mut hi) = (now, now + self.tolerance + self.interval * cost + self.tat);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.conforms(mid, cost).is_some() {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        (false, Some(nanos(lo - now)))
    }
}

/// After a carry, a check answers as the reference does; but a question (a cost of 0) that
/// the reference denies, being above the limit, the carried state admits (as a log or window
/// just filled would), with the same `remaining` (0) and `reset_after`.
fn same_after_the_carry(
    ours: Fields,
    expected: Fields,
    t: u64,
    cost: u64,
) -> Result<(), TestCaseError> {
    if cost == 0 && !expected.0 {
        prop_assert!(ours.0);
        prop_assert_eq!(
            (ours.2, ours.3),
            (expected.2, expected.3),
            "a question at {}",
            t
        );
    } else {
        prop_assert_eq!(ours, expected, "after, at {} cost {}", t, cost);
    }
    Ok(())
}

/// The trace's times, from a start far from the origin, and its costs capped at `most`.
fn times(start: u64, trace: &[Step], most: u64) -> Vec<(u64, u64)> {
    let mut now = start;
    trace
        .iter()
        .map(|step| {
            now += step.delta;
            (now, step.cost.min(most))
        })
        .collect()
}

const START: u64 = 1 << 50;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn a_carried_sliding_log_answers_as_the_history_it_knows_under_the_new_quota(
        (l1, s1, l2, s2, before, gap, after) in (1..8u64, 1..1_000u64, 1..8u64)
            .prop_flat_map(|(l1, s1, l2)| {
                let s2 = prop_oneof![2 => Just(s1), 1 => 1..2_000u64];
                (Just(l1), Just(s1), Just(l2), s2, steps(s1, l1), 0..2 * s1, steps(s1, l2))
            }),
    ) {
        let old = Keyed::<u8, _>::new(SlidingLog::new(quota(l1, s1)).unwrap());
        let mut reference = ReferenceLog { limit: l1, span: s1, units: Vec::new() };
        let mut now = START;
        for (t, cost) in times(START, &before, l1) {
            now = t;
            let ours = old.check(&0, Moment::from_nanos(t), cost).unwrap();
            prop_assert_eq!(fields(ours), reference.check(t, cost), "before, at {} cost {}", t, cost);
        }
        now += gap;
        // A key the old limiter dropped as idle knows nothing.
        let known = if old.is_empty() { Vec::new() } else { reference.known(s1) };
        let new = Keyed::<u8, _>::new(SlidingLog::new(quota(l2, s2)).unwrap());
        new.carry_from(&old, Moment::from_nanos(now));
        prop_assert!(old.is_empty());
        let mut reference = ReferenceLog { limit: l2, span: s2, units: known };
        for (t, cost) in times(now, &after, l2) {
            let ours = fields(new.check(&0, Moment::from_nanos(t), cost).unwrap());
            same_after_the_carry(ours, reference.check(t, cost), t, cost)?;
        }
    }

    #[test]
    fn a_carried_fixed_window_counts_the_history_under_the_new_limit(
        (l1, span, l2, before, gap, after) in (1..8u64, 16..1_000u64, 1..8u64)
            .prop_flat_map(|(l1, s, l2)| {
                (Just(l1), Just(s), Just(l2), steps(s, l1), 0..2 * s, steps(s, l2))
            }),
    ) {
        let old = Keyed::<u8, _>::new(FixedWindow::new(quota(l1, span)).unwrap());
        let mut reference = ReferenceFixed { limit: l1, span, units: Vec::new() };
        let mut now = START;
        for (t, cost) in times(START, &before, l1) {
            now = t;
            let ours = old.check(&0, Moment::from_nanos(t), cost).unwrap();
            prop_assert_eq!(fields(ours), reference.check(t, cost), "before, at {} cost {}", t, cost);
        }
        now += gap;
        let new = Keyed::<u8, _>::new(FixedWindow::new(quota(l2, span)).unwrap());
        new.carry_from(&old, Moment::from_nanos(now));
        reference.limit = l2;
        for (t, cost) in times(now, &after, l2) {
            let ours = fields(new.check(&0, Moment::from_nanos(t), cost).unwrap());
            same_after_the_carry(ours, reference.check(t, cost), t, cost)?;
        }
    }

    #[test]
    fn a_carried_sliding_counter_estimates_the_history_under_the_new_limit(
        (l1, span, l2, before, gap, after) in (1..8u64, 16..1_000u64, 1..8u64)
            .prop_flat_map(|(l1, s, l2)| {
                (Just(l1), Just(s), Just(l2), steps(s, l1), 0..2 * s, steps(s, l2))
            }),
    ) {
        let old = Keyed::<u8, _>::new(SlidingCounter::new(quota(l1, span)).unwrap());
        let mut reference = ReferenceCounter { limit: l1, span, units: Vec::new() };
        let mut now = START;
        for (t, cost) in times(START, &before, l1) {
            now = t;
            let ours = old.check(&0, Moment::from_nanos(t), cost).unwrap();
            prop_assert_eq!((ours.allowed(), ours.remaining()), reference.check(t, cost));
        }
        now += gap;
        let new = Keyed::<u8, _>::new(SlidingCounter::new(quota(l2, span)).unwrap());
        new.carry_from(&old, Moment::from_nanos(now));
        reference.limit = l2;
        for (t, cost) in times(now, &after, l2) {
            let at = Moment::from_nanos(t);
            let ours = new.check(&0, at, cost).unwrap();
            prop_assert_eq!((ours.allowed(), ours.remaining()), reference.check(t, cost), "after, at {} cost {}", t, cost);
            if let Some(wait) = ours.retry_after() {
                // The retry time is exact: admitted then, and not a nanosecond before.
                prop_assert!(new.peek(&0, at + wait, cost).unwrap().allowed());
                if wait > Duration::ZERO {
                    let before = at + wait - nanos(1);
                    prop_assert!(!new.peek(&0, before, cost).unwrap().allowed());
                }
            }
        }
    }

    #[test]
    fn a_carried_token_bucket_answers_as_the_textbook_from_the_tat_carried(
        (l1, s1, b1, l2, s2, b2, before, gap, after) in
            (1..8u64, 8..1_000u64, 1..10u64, 1..8u64, 8..1_000u64, 1..10u64)
            .prop_flat_map(|(l1, s1, b1, l2, s2, b2)| {
                (Just(l1), Just(s1), Just(b1), Just(l2), Just(s2), Just(b2),
                 steps(s1, b1), 0..2 * s1, steps(s2, b2))
            }),
    ) {
        let q1 = quota(l1, s1).with_burst(b1).unwrap();
        let q2 = quota(l2, s2).with_burst(b2).unwrap();
        let old = Keyed::<u8, _>::new(Gcra::new(q1).unwrap());
        let mut textbook = TextbookGcra::new(l1, s1, b1);
        let mut now = START;
        for (t, cost) in times(START, &before, b1) {
            now = t;
            let cost = cost.max(1);
            let ours = old.check(&0, Moment::from_nanos(t), cost).unwrap();
            prop_assert_eq!((ours.allowed(), ours.retry_after()), textbook.check(t, cost));
        }
        now += gap;
        let new = Keyed::<u8, _>::new(Gcra::new(q2).unwrap());
        new.carry_from(&old, Moment::from_nanos(now));
        // The rule: the old TAT, or the units owed at the new rate if later, at most an
        // empty bucket.
        let mut carried = TextbookGcra::new(l2, s2, b2);
        let kept = textbook.tat;
        if kept > now {
            let owed = u128::from(kept - now) * u128::from(carried.interval);
            let owed = owed.div_ceil(u128::from(textbook.interval)) as u64;
            let empty = carried.interval * b2;
            carried.tat = (now + owed.min(empty)).max(kept);
        }
        // Never more than Redis, which keeps the TAT, admits.
        let redis = TextbookGcra { tat: kept, ..TextbookGcra::new(l2, s2, b2) };
        for cost in 1..=b2 {
            if new.peek(&0, Moment::from_nanos(now), cost).unwrap().allowed() {
                prop_assert!(redis.conforms(now, cost).is_some());
            }
        }
        for (t, cost) in times(now, &after, b2) {
            let cost = cost.max(1);
            let ours = new.check(&0, Moment::from_nanos(t), cost).unwrap();
            prop_assert_eq!((ours.allowed(), ours.retry_after()), carried.check(t, cost), "after, at {} cost {}", t, cost);
        }
    }
}
