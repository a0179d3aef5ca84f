//! Issue 33: `Leases`, a concurrency limit whose units leave by release or at the end of their
//! lease, and a sliding log that refunds (`Rule::with_refunds`), whose units leave the same
//! way. Edges, then property tests against a reference that keeps one time per unit.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use slidewin::limit::{Kind, Leases, Rule, RuleSet};
use slidewin::{Decision, Keyed, Limiter, Moment, SharedLimiter};

const LEASE: Duration = Duration::from_secs(10);

fn leases(limit: u64) -> Limiter<Leases> {
    Limiter::new(Leases::new(limit, LEASE).unwrap())
}

fn at(nanos: u64) -> Moment {
    Moment::from_nanos(nanos)
}

const SPAN: u64 = 10_000_000_000;

/// A unit acquired at `t` is held in `(t - lease, t]`'s sense: through `t + lease - 1 ns`, and
/// gone at `t + lease` exactly.
#[test]
fn a_lease_ends_exactly_one_lease_after_its_acquisition() {
    let mut in_flight = leases(1);
    assert!(in_flight.check(at(5), 1).unwrap().allowed());
    let held = in_flight.check(at(5 + SPAN - 1), 1).unwrap();
    assert_eq!(held.retry_after(), Some(Duration::from_nanos(1)));
    assert!(in_flight.check(at(5 + SPAN), 1).unwrap().allowed());
}

#[test]
fn a_release_with_nothing_held_gives_back_nothing() {
    let mut in_flight = leases(2);
    assert_eq!(in_flight.release(Moment::ZERO, 1), 0);
    assert_eq!(in_flight.release(at(u64::MAX), u64::MAX), 0);
    assert_eq!(in_flight.check(Moment::ZERO, 2).unwrap().remaining(), 0);
}

/// One acquisition of three units: a release of one leaves two, of more gives back the rest.
#[test]
fn a_release_cuts_an_acquisition_in_part_and_never_past_what_is_held() {
    let mut in_flight = leases(3);
    assert!(in_flight.check(Moment::ZERO, 3).unwrap().allowed());
    assert_eq!(in_flight.release(at(1), 1), 1);
    assert_eq!(in_flight.peek(at(1), 0).unwrap().remaining(), 1);
    assert_eq!(in_flight.release(at(2), 5), 2);
    assert_eq!(in_flight.peek(at(2), 0).unwrap().remaining(), 3);
}

/// The release names no acquisition: the oldest units go, whose leases end first.
#[test]
fn a_release_gives_back_the_oldest_units_held() {
    let mut in_flight = leases(2);
    assert!(in_flight.check(at(0), 1).unwrap().allowed());
    assert!(in_flight.check(at(SPAN / 2), 1).unwrap().allowed());
    assert_eq!(in_flight.release(at(SPAN / 2), 1), 1);
    // The one left is the newer: it is held until SPAN / 2 + SPAN.
    let full = in_flight.check(at(SPAN), 2).unwrap();
    assert_eq!(full.retry_after(), Some(Duration::from_nanos(SPAN / 2)));
}

/// A holder that dies never releases: its unit leaves with its lease, and a release after
/// that gives back nothing of it (only what newer acquisitions hold, the oldest first).
#[test]
fn a_holder_that_dies_leaks_nothing_past_its_lease() {
    let mut in_flight = leases(1);
    assert!(in_flight.check(at(0), 1).unwrap().allowed());
    assert!(!in_flight.check(at(SPAN - 1), 1).unwrap().allowed());
    assert!(in_flight.check(at(SPAN), 1).unwrap().allowed());
    assert_eq!(in_flight.release(at(3 * SPAN), 1), 0);
}

/// A clock gone back counts at the newest acquisition, as a sliding log does; a release then
/// gives back units held at that time.
#[test]
fn a_clock_gone_back_releases_what_is_held_at_the_newest_acquisition() {
    let mut in_flight = leases(2);
    assert!(in_flight.check(at(5 * SPAN), 2).unwrap().allowed());
    assert_eq!(in_flight.release(Moment::ZERO, 1), 1);
    let after = in_flight.check(Moment::ZERO, 1).unwrap();
    assert!(after.allowed());
    assert_eq!(after.remaining(), 0);
}

/// A huge limit and jumps to the end of the timeline.
#[test]
fn extremes_of_limit_and_time() {
    let mut in_flight = Limiter::new(Leases::new(u64::MAX, LEASE).unwrap());
    assert!(in_flight.check(Moment::ZERO, u64::MAX).unwrap().allowed());
    assert_eq!(in_flight.release(Moment::ZERO, u64::MAX), u64::MAX);
    assert!(in_flight.check(at(u64::MAX), u64::MAX).unwrap().allowed());
    assert_eq!(in_flight.release(at(u64::MAX), 1), 1);
    assert_eq!(in_flight.peek(at(u64::MAX), 0).unwrap().remaining(), 1);
}

/// The holders: a shared limiter under threads, and a keyed one, key by key.
#[test]
fn shared_and_keyed_holders_release() {
    let shared = Arc::new(SharedLimiter::new(Leases::new(8, LEASE).unwrap()));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                for _ in 0..1_000 {
                    if shared.check(Moment::ZERO, 1).unwrap().allowed() {
                        assert_eq!(shared.release(Moment::ZERO, 1), 1);
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    // Every admission released: all 8 free again.
    assert_eq!(shared.peek(Moment::ZERO, 0).unwrap().remaining(), 8);

    let keyed = Keyed::<String, _>::new(Leases::new(1, LEASE).unwrap());
    assert!(keyed.check("a", Moment::ZERO, 1).unwrap().allowed());
    assert!(keyed.check("b", Moment::ZERO, 1).unwrap().allowed());
    assert_eq!(keyed.release("a", Moment::ZERO, 1), 1);
    assert!(keyed.check("a", Moment::ZERO, 1).unwrap().allowed());
    assert!(!keyed.check("b", Moment::ZERO, 1).unwrap().allowed());
}

/// The obviously correct reference: a time per unit held, oldest first. A request counts at
/// its time, or at the newest unit's if later; the units whose leases have ended by then go
/// when something is written (an acquisition, a release that gives back), as in the log.
struct Reference {
    limit: u64,
    times: Vec<u64>,
}

impl Reference {
    /// The time a request at `now` counts at, and the index of the first unit still held then.
    fn counted(&self, now: u64) -> (u64, usize) {
        let at = self.times.last().map_or(now, |&newest| newest.max(now));
        let held = |t: &u64| u128::from(*t) + u128::from(SPAN) > u128::from(at);
        (
            at,
            self.times.iter().position(held).unwrap_or(self.times.len()),
        )
    }

    fn until(t: u64, now: u64) -> Duration {
        let end = u128::from(t) + u128::from(SPAN);
        Duration::from_nanos(u64::try_from(end.saturating_sub(u128::from(now))).unwrap())
    }

    fn check(&mut self, now: u64, cost: u64) -> (bool, u64, Duration, Option<Duration>) {
        let (at, first) = self.counted(now);
        let held = (self.times.len() - first) as u64;
        if held + cost <= self.limit {
            let newest = if cost > 0 {
                self.times.drain(..first);
                self.times
                    .extend(std::iter::repeat_n(at, usize::try_from(cost).unwrap()));
                Some(at)
            } else {
                self.times.last().copied().filter(|_| held > 0)
            };
            let reset = newest.map_or(Duration::ZERO, |t| Self::until(t, now));
            return (true, self.limit - held - cost, reset, None);
        }
        let excess = held + cost - self.limit;
        let leaving = self.times[first + usize::try_from(excess).unwrap() - 1];
        let reset = Self::until(*self.times.last().unwrap(), now);
        (
            false,
            self.limit - held,
            reset,
            Some(Self::until(leaving, now)),
        )
    }

    /// A release that gives back nothing writes nothing, as a denial does.
    fn release(&mut self, now: u64, units: u64) -> u64 {
        let (_, first) = self.counted(now);
        if units == 0 || first == self.times.len() {
            return 0;
        }
        self.times.drain(..first);
        let released = units.min(self.times.len() as u64);
        self.times.drain(..usize::try_from(released).unwrap());
        released
    }

    /// The units held at `now`.
    fn held(&self, now: u64) -> u64 {
        let (_, first) = self.counted(now);
        (self.times.len() - first) as u64
    }
}

#[derive(Clone, Debug)]
enum Op {
    Acquire { step: u64, back: bool, cost: u64 },
    Release { step: u64, units: u64 },
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let step = prop_oneof![4 => 0..SPAN / 4, 1 => Just(SPAN), 1 => SPAN..SPAN * 3, 1 => Just(0)];
    let op = prop_oneof![
        3 => (step.clone(), prop::bool::weighted(0.1), 0..=4u64)
            .prop_map(|(step, back, cost)| Op::Acquire { step, back, cost }),
        2 => (step, 0..=5u64).prop_map(|(step, units)| Op::Release { step, units }),
    ];
    prop::collection::vec(op, 1..80)
}

fn same(decision: &Decision, expected: (bool, u64, Duration, Option<Duration>)) -> bool {
    (
        decision.allowed(),
        decision.remaining(),
        decision.reset_after(),
        decision.retry_after(),
    ) == expected
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Acquisitions (the clock now and then going back), releases, and holders that never
    /// release (their units left to their leases): every answer is the reference's, so the
    /// units held never pass the limit and none outlives its lease.
    #[test]
    fn leases_answer_as_a_time_per_unit_held(limit in 1..=4u64, ops in ops()) {
        let mut in_flight = leases(limit);
        let check = |l: &mut Limiter<Leases>, now, cost| l.check(at(now), cost).unwrap();
        let release = |l: &mut Limiter<Leases>, now, units| l.release(at(now), units);
        run(limit, ops, &mut in_flight, check, release)?;
    }

    /// A sliding log built `with_refunds`, in a rule set: its negative corrections give back
    /// its oldest units in the window, answered as the same reference (its span the window).
    #[test]
    fn a_refunding_log_answers_as_a_time_per_unit_admitted(limit in 1..=4u64, ops in ops()) {
        let quota = slidewin::limit::Quota::new(limit, LEASE).unwrap();
        let rule = Rule::new("tokens", Kind::SlidingLog, quota).unwrap().with_refunds().unwrap();
        let mut log = Limiter::new(RuleSet::from(rule));
        let check = |l: &mut Limiter<RuleSet>, now, cost| l.check(at(now), cost).unwrap().decision();
        let release = |l: &mut Limiter<RuleSet>, now, units| l.release(at(now), units);
        run(limit, ops, &mut log, check, release)?;
    }
}

/// Acquisitions and releases on `limiter` and the reference, every answer compared.
fn run<L>(
    limit: u64,
    ops: Vec<Op>,
    limiter: &mut L,
    check: impl Fn(&mut L, u64, u64) -> Decision,
    release: impl Fn(&mut L, u64, u64) -> u64,
) -> Result<(), TestCaseError> {
    let mut reference = Reference {
        limit,
        times: Vec::new(),
    };
    let mut now = 1_000 * SPAN;
    for op in ops {
        match op {
            Op::Acquire { step, back, cost } => {
                now = if back { now - step } else { now + step };
                let expected = reference.check(now, cost.min(limit));
                let decision = check(limiter, now, cost.min(limit));
                prop_assert!(
                    same(&decision, expected),
                    "at {}: {:?} vs {:?}",
                    now,
                    decision,
                    expected
                );
            }
            Op::Release { step, units } => {
                now += step;
                prop_assert_eq!(release(limiter, now, units), reference.release(now, units));
            }
        }
        prop_assert!(reference.held(now) <= limit);
    }
    Ok(())
}

fn refunding(quota: &str) -> Rule {
    let quota = quota.parse().unwrap();
    Rule::new("tokens", Kind::SlidingLog, quota)
        .unwrap()
        .with_refunds()
        .unwrap()
}

/// A correction names no admission: the oldest units in the window go back, which leave no
/// later than the corrected ones would, so the log admits no more than an exact refund.
#[test]
fn a_refund_gives_back_the_oldest_units_and_never_more_than_an_exact_one() {
    let mut log = Limiter::new(RuleSet::from(refunding("10/minute")));
    let secs = Moment::from_secs;
    assert!(log.check(secs(0), 4).unwrap().allowed());
    assert!(log.check(secs(30), 6).unwrap().allowed());
    // The request at 30 s cost nothing: 6 back, 4 of them from 0 s and 2 from 30 s.
    assert_eq!(log.release(secs(31), 6), 6);
    assert_eq!(log.peek(secs(31), 0).unwrap().decision().remaining(), 6);
    // An exact refund would leave nothing at 60 s; the oldest units' refund leaves 4 of the
    // 30 s admission there, which the 0 s admission's 4 would have left by then anyway.
    assert_eq!(log.peek(secs(60), 0).unwrap().decision().remaining(), 6);
    assert_eq!(log.peek(secs(90), 0).unwrap().decision().remaining(), 10);
}

#[test]
fn a_refund_of_what_has_left_the_window_gives_back_nothing() {
    let mut log = Limiter::new(RuleSet::from(refunding("5/minute")));
    assert!(log.check(Moment::ZERO, 5).unwrap().allowed());
    assert_eq!(log.release(Moment::from_secs(60), 5), 0);
    assert_eq!(log.release(Moment::from_secs(59), u64::MAX), 5);
    assert_eq!(log.release(at(u64::MAX), u64::MAX), 0);
    let empty = Limiter::new(RuleSet::from(refunding("5/minute")));
    assert_eq!(
        empty.peek(Moment::ZERO, 0).unwrap().decision().remaining(),
        5
    );
}

/// A minute that refunds, a day that does not, and leases: the minute and the leases give
/// back, the day keeps what was spent.
#[test]
fn a_rule_set_refunds_only_its_leases_and_its_refunding_logs() {
    let set = RuleSet::new([
        refunding("10/minute").renamed("minute").unwrap(),
        Rule::new("day", Kind::SlidingLog, "100/day".parse().unwrap()).unwrap(),
        Rule::new("in_flight", Kind::Leases, "5 per 30s".parse().unwrap()).unwrap(),
    ])
    .unwrap();
    let mut limiter = Limiter::new(set);
    assert!(limiter.check(Moment::ZERO, 4).unwrap().allowed());
    assert_eq!(limiter.release(Moment::ZERO, 3), 3);
    let left = limiter.peek(Moment::ZERO, 0).unwrap();
    let remaining: Vec<u64> = left.iter().map(Decision::remaining).collect();
    assert_eq!(remaining, [9, 96, 4]);
}

#[test]
fn only_a_sliding_log_refunds_and_leases_always_give_back() {
    for kind in [Kind::SlidingCounter, Kind::FixedWindow, Kind::Gcra] {
        let err = Rule::new("r", kind, "5/s".parse().unwrap())
            .unwrap()
            .with_refunds()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{kind} cannot give units back: it does not know which window or refill a \
                 request was counted in; only sliding_log refunds (its oldest units)"
            )
        );
    }
    let monthly = Rule::calendar("m", "5 per calendar month".parse().unwrap()).unwrap();
    assert!(monthly.with_refunds().is_err());
    let leases = Rule::new("f", Kind::Leases, "2 per 30s".parse().unwrap()).unwrap();
    assert_eq!(leases.clone().with_refunds().unwrap(), leases);
    assert!(leases.gives_back() && !leases.refunds());
    let plain = Rule::new("tokens", Kind::SlidingLog, "5/s".parse().unwrap()).unwrap();
    let refunds = plain.clone().with_refunds().unwrap();
    assert_ne!(plain, refunds, "a reload that turns refunds on is a change");
    assert!(refunds.renamed("other").unwrap().refunds());
    // Without refunds, a log's admissions stay spent.
    let mut spent = Limiter::new(RuleSet::from(plain));
    assert!(spent.check(Moment::ZERO, 5).unwrap().allowed());
    assert_eq!(spent.release(Moment::ZERO, 5), 0);
}
