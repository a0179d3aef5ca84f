//! The limiters against simple references, on random traces: equal times, the window boundary,
//! clocks going backwards, huge jumps, costs above 1.

#![allow(
    clippy::cast_possible_truncation,
    reason = "counts and indices in tests are far below 2^32"
)]

use crate::reference;

use std::time::Duration;

use proptest::prelude::*;
use reference::{ReferenceLog, fields};
use slidewin::limit::{Algorithm, FixedWindow, Gcra, LimitError, SlidingCounter, SlidingLog};
use slidewin::{Decision, Limiter, Moment, Quota};

/// One request of a trace: a time step (possibly backwards) and a cost.
#[derive(Clone, Debug)]
struct Step {
    /// Nanoseconds to move; negative moves back.
    delta: i64,
    cost: u64,
}

fn steps(span: u64, limit: u64) -> impl Strategy<Value = Vec<Step>> {
    let span = i64::try_from(span).unwrap();
    let delta = prop_oneof![
        6 => 0..span / 2 + 1,           // inside the window
        2 => Just(span),                // exactly one span: the boundary
        1 => Just(0),                   // equal times
        1 => -span..0,                  // the clock goes back
        1 => (span * 1_000)..(span * 1_000_000), // a huge jump
    ];
    let cost = prop_oneof![4 => Just(1u64), 2 => 0..=limit, 1 => Just(limit)];
    proptest::collection::vec(
        (delta, cost).prop_map(|(delta, cost)| Step { delta, cost }),
        1..80,
    )
}

fn quota(limit: u64, span: u64) -> Quota {
    Quota::new(limit, Duration::from_nanos(span)).unwrap()
}

/// Walks the trace from a start far from the origin, so that steps back stay on the timeline.
fn times(trace: &[Step]) -> impl Iterator<Item = (Moment, u64)> + '_ {
    let mut now: i64 = 1 << 50;
    trace.iter().map(move |step| {
        now += step.delta;
        (Moment::from_nanos(u64::try_from(now).unwrap()), step.cost)
    })
}

/// The textbook GCRA (virtual scheduling): one cell conforms at `t` if `t >= TAT - L`, and then
/// `TAT = max(t, TAT) + I`. A cost of `n` is `n` cells at the same time, all or none.
struct TextbookGcra {
    interval: u64,
    tolerance: u64,
    tat: u64,
}

impl TextbookGcra {
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

    fn check(&mut self, now: u64, cost: u64) -> (bool, Option<u64>) {
        match self.conforms(now, cost) {
            Some(tat) => {
                self.tat = tat;
                (true, None)
            }
            None => {
                // The first moment all cells conform, by search: conformance only grows with time.
                let (mut lo, mut hi) =
                    (now, now + self.tolerance + self.interval * cost + self.tat);
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if self.conforms(mid, cost).is_some() {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                (false, Some(lo - now))
            }
        }
    }
}

/// Checks the trace against any algorithm and returns the admitted (time, cost) pairs, on the
/// limiter's own timeline: an admission earlier than the newest counts at the newest's time.
/// Peek must agree with check and consume nothing, and every retry time must be exact.
fn run<A: Algorithm<Output = Decision>>(
    rules: &A,
    trace: &[Step],
) -> Result<Vec<(u64, u64)>, TestCaseError> {
    let mut limiter = Limiter::new(rules.clone());
    let mut admitted = Vec::new();
    let mut newest = 0;
    for (now, cost) in times(trace) {
        let peeked = limiter.peek(now, cost);
        let checked = limiter.check(now, cost);
        prop_assert_eq!(peeked, checked);
        let decision = checked.map_err(|e| TestCaseError::fail(e.to_string()))?;
        if decision.allowed() {
            prop_assert!(decision.retry_after().is_none());
            if cost > 0 {
                newest = newest.max(now.as_nanos());
                admitted.push((newest, cost));
            }
        } else {
            // The retry time is exact: admitted then, and not a nanosecond before.
            let wait = decision.retry_after().expect("a denial says when to retry");
            prop_assert!(
                limiter.peek(now + wait, cost).unwrap().allowed(),
                "not at +{wait:?}"
            );
            if wait > Duration::ZERO {
                let before = now + wait - Duration::from_nanos(1);
                prop_assert!(
                    !limiter.peek(before, cost).unwrap().allowed(),
                    "already at {before:?}"
                );
            }
        }
    }
    Ok(admitted)
}

/// The most cost admitted in any window `(t - span, t]`: the worst window ends at an admission.
fn worst_window(admitted: &[(u64, u64)], span: u64) -> u64 {
    admitted
        .iter()
        .map(|&(end, _)| {
            admitted
                .iter()
                .filter(|&&(t, _)| t <= end && t + span > end)
                .map(|&(_, cost)| cost)
                .sum()
        })
        .max()
        .unwrap_or(0)
}

/// Checks the trace and, after each step, that `idle_at` tells the truth, against the
/// definition: from `idle_at` on, the limiter answers as a fresh one would, whatever is asked
/// (costs up to `most`); a nanosecond before it, it answers something else.
fn idle_at_is_when_it_answers_as_fresh<A: Algorithm<Output = Decision>>(
    rules: &A,
    most: u64,
    span: u64,
    trace: &[Step],
) -> Result<(), TestCaseError> {
    let fresh = Limiter::new(rules.clone());
    let same = |limiter: &Limiter<A>, t: Moment| {
        [0, 1, most]
            .iter()
            .all(|&cost| limiter.peek(t, cost) == fresh.peek(t, cost))
    };
    let mut limiter = Limiter::new(rules.clone());
    for (now, cost) in times(trace) {
        limiter.check(now, cost.min(most)).unwrap();
        let at = limiter
            .idle_at()
            .expect("no trace reaches the end of the timeline");
        for later in [0, 1, 7, span] {
            let t = at + Duration::from_nanos(later);
            prop_assert!(
                same(&limiter, t),
                "answers as fresh from {:?}, not at {:?}",
                at,
                t
            );
        }
        if at > Moment::ZERO {
            let before = at - Duration::from_nanos(1);
            prop_assert!(
                !same(&limiter, before),
                "answers as fresh at {:?} already",
                before
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn sliding_log_matches_a_log_of_every_admission(
        (limit, span, trace) in (1..8u64, 1..1_000u64).prop_flat_map(|(l, s)| (Just(l), Just(s), steps(s, l))),
    ) {
        let mut limiter = Limiter::new(SlidingLog::new(quota(limit, span)).unwrap());
        let mut reference = ReferenceLog { limit, span, units: Vec::new() };
        for (now, cost) in times(&trace) {
            let ours = limiter.check(now, cost).unwrap();
            prop_assert_eq!(fields(ours), reference.check(now.as_nanos(), cost), "at {:?} cost {}", now, cost);
        }
    }

    #[test]
    fn sliding_log_never_admits_more_than_the_limit_in_any_window(
        (limit, span, trace) in (1..8u64, 1..1_000u64).prop_flat_map(|(l, s)| (Just(l), Just(s), steps(s, l))),
    ) {
        let admitted = run(&SlidingLog::new(quota(limit, span)).unwrap(), &trace)?;
        prop_assert!(worst_window(&admitted, span) <= limit);
    }

    #[test]
    fn gcra_matches_the_textbook(
        (limit, span, burst, trace) in (1..8u64, 8..1_000u64, 1..10u64)
            .prop_flat_map(|(l, s, b)| (Just(l), Just(s), Just(b), steps(s, b))),
    ) {
        let q = quota(limit, span).with_burst(burst).unwrap();
        let rules = Gcra::new(q).unwrap();
        let interval = span.div_ceil(limit);
        let mut textbook = TextbookGcra { interval, tolerance: interval * (burst - 1), tat: 0 };
        let mut limiter = Limiter::new(rules.clone());
        for (now, cost) in times(&trace) {
            let cost = cost.clamp(1, burst);
            let ours = limiter.check(now, cost).unwrap();
            let (allowed, retry) = textbook.check(now.as_nanos(), cost);
            prop_assert_eq!(ours.allowed(), allowed, "at {:?} cost {}", now, cost);
            prop_assert_eq!(ours.retry_after(), retry.map(Duration::from_nanos));
        }
        // And its window bound: burst + limit - 1 in any span.
        let admitted = run(&rules, &trace)?;
        prop_assert!(worst_window(&admitted, span) < burst + limit);
    }

    #[test]
    fn fixed_window_and_sliding_counter_stay_within_twice_the_limit(
        (limit, span, trace) in (1..8u64, 16..1_000u64).prop_flat_map(|(l, s)| (Just(l), Just(s), steps(s, l))),
    ) {
        let fixed = run(&FixedWindow::new(quota(limit, span)).unwrap(), &trace)?;
        prop_assert!(worst_window(&fixed, span) <= 2 * limit);
        let counter = run(&SlidingCounter::new(quota(limit, span)).unwrap(), &trace)?;
        prop_assert!(worst_window(&counter, span) <= 2 * limit);
    }

    #[test]
    fn idle_at_is_when_each_algorithm_answers_as_a_fresh_one(
        (limit, span, burst, trace) in (1..8u64, 16..1_000u64, 1..10u64)
            .prop_flat_map(|(l, s, b)| (Just(l), Just(s), Just(b), steps(s, l.max(b)))),
    ) {
        let q = quota(limit, span);
        idle_at_is_when_it_answers_as_fresh(&SlidingLog::new(q).unwrap(), limit, span, &trace)?;
        idle_at_is_when_it_answers_as_fresh(&SlidingCounter::new(q).unwrap(), limit, span, &trace)?;
        idle_at_is_when_it_answers_as_fresh(&FixedWindow::new(q).unwrap(), limit, span, &trace)?;
        let gcra = Gcra::new(q.with_burst(burst).unwrap()).unwrap();
        idle_at_is_when_it_answers_as_fresh(&gcra, burst, span, &trace)?;
    }

    #[test]
    fn a_cost_above_the_most_at_once_is_an_error_not_a_denial(limit in 1..100u64, extra in 1..100u64) {
        let q = quota(limit, 1_000);
        let too_much = limit + extra;
        let error = Err(LimitError::CostTooHigh { cost: too_much, max: limit });
        prop_assert_eq!(Limiter::new(SlidingLog::new(q).unwrap()).check(Moment::ZERO, too_much), error);
        prop_assert_eq!(Limiter::new(SlidingCounter::new(q).unwrap()).check(Moment::ZERO, too_much), error);
        prop_assert_eq!(Limiter::new(FixedWindow::new(q).unwrap()).check(Moment::ZERO, too_much), error);
        prop_assert_eq!(Limiter::new(Gcra::new(q).unwrap()).check(Moment::ZERO, too_much), error);
    }
}
