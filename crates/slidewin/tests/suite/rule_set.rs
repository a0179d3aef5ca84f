//! `RuleSet`: several named rules on one key, all or nothing, at its edges and against a
//! reference made of one limiter per rule.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use proptest::prelude::*;
use slidewin::limit::{
    Calendar, CalendarQuota, CalendarUnit, Decisions, FixedWindow, Gcra, Kind, Leases, LimitError,
    Rule, RuleSet, SlidingCounter, SlidingLog,
};
use slidewin::{ConfigError, Decision, Keyed, Limiter, Moment, Quota, SharedLimiter};

fn secs(n: u64) -> Moment {
    Moment::from_secs(n)
}

fn rule(name: &str, kind: Kind, quota: &str) -> Rule {
    Rule::new(name, kind, quota.parse().unwrap()).unwrap()
}

fn login() -> RuleSet {
    RuleSet::new([
        rule("minute", Kind::SlidingLog, "3/minute"),
        rule("hour", Kind::SlidingLog, "5/hour"),
    ])
    .unwrap()
}

#[test]
fn an_empty_set_answers_as_every_rule_fresh() {
    let limiter = Limiter::new(login());
    let d = limiter.peek(secs(7), 0).unwrap();
    assert!(d.allowed());
    assert_eq!(d.as_slice().len(), 2);
    assert_eq!((d[0].remaining(), d[1].remaining()), (3, 5));
    assert_eq!(d.binding(), 0); // 3 of 3 and 5 of 5: a tie goes to the first
    assert_eq!(limiter.idle_at(), Some(Moment::ZERO));
}

#[test]
fn one_admission_counts_in_every_rule() {
    let mut limiter = Limiter::new(login());
    let d = limiter.check(secs(1), 1).unwrap();
    assert!(d.allowed());
    assert_eq!((d[0].remaining(), d[1].remaining()), (2, 4));
    assert_eq!(d[0].reset_after(), Duration::from_secs(60));
    assert_eq!(d[1].reset_after(), Duration::from_secs(3600));
    assert_eq!(d.binding(), 0); // 2 of 3 is closer to the limit than 4 of 5
    assert_eq!(limiter.idle_at(), Some(secs(3601))); // when the hour rule forgets it
}

#[test]
fn a_denial_consumes_from_no_rule() {
    let mut limiter = Limiter::new(login());
    for _ in 0..3 {
        assert!(limiter.check(secs(0), 1).unwrap().allowed());
    }
    // The minute rule denies; the hour rule would admit, and must not count it.
    for _ in 0..100 {
        let denied = limiter.check(secs(30), 1).unwrap();
        assert!(!denied.allowed());
        assert_eq!(denied.binding(), 0);
        assert!(denied[1].allowed());
        assert_eq!(denied[1].remaining(), 1); // 2 left in the hour, 1 after this one
    }
    // A minute on, the hour still has its 2.
    assert!(limiter.check(secs(60), 1).unwrap().allowed());
    assert!(limiter.check(secs(60), 1).unwrap().allowed());
    let denied = limiter.check(secs(60), 1).unwrap();
    assert_eq!(denied.binding(), 1);
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(3540))); // the first leaves
}

/// The window is `(now - span, now]` for each rule of a set, as alone.
#[test]
fn the_boundary_is_each_rules_own() {
    let mut limiter = Limiter::new(RuleSet::from(rule("s", Kind::SlidingLog, "1/10s")));
    assert!(limiter.check(secs(5), 1).unwrap().allowed());
    let just_before = secs(15) - Duration::from_nanos(1);
    let denied = limiter.check(just_before, 1).unwrap();
    assert_eq!(denied.retry_after(), Some(Duration::from_nanos(1)));
    assert!(limiter.check(secs(15), 1).unwrap().allowed()); // exactly a span old: gone
}

#[test]
fn the_binding_denial_is_the_one_that_waits_longest() {
    let mut limiter = Limiter::new(
        RuleSet::new([
            rule("second", Kind::SlidingLog, "1/s"),
            rule("minute", Kind::FixedWindow, "2/minute"),
            rule("bucket", Kind::Gcra, "1/10s"),
        ])
        .unwrap(),
    );
    assert!(limiter.check(secs(1), 1).unwrap().allowed());
    let denied = limiter.check(secs(1), 1).unwrap();
    // Each denies: 1 s, 59 s (the fixed window's end... it has room: 1 of 2) and 10 s.
    assert!(!denied[0].allowed());
    assert!(denied[1].allowed());
    assert!(!denied[2].allowed());
    assert_eq!(denied.binding(), 2);
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(10)));
    // At +10 s every rule admits.
    assert!(limiter.check(secs(11), 1).unwrap().allowed());
}

#[test]
fn a_cost_no_rule_set_admits_names_the_smallest_most() {
    let mut limiter = Limiter::new(
        RuleSet::new([
            rule("a", Kind::SlidingLog, "10/s"),
            rule("b", Kind::Gcra, "100/s burst 4"),
        ])
        .unwrap(),
    );
    assert_eq!(
        limiter.check(secs(0), 5).unwrap_err(),
        LimitError::CostTooHigh { cost: 5, max: 4 }
    );
    assert!(limiter.check(secs(0), 4).unwrap().allowed());
}

#[test]
fn a_cost_of_zero_asks_every_rule_and_consumes_nothing() {
    let mut limiter = Limiter::new(login());
    limiter.check(secs(0), 2).unwrap();
    let asked = limiter.check(secs(0), 0).unwrap();
    assert!(asked.allowed());
    assert_eq!((asked[0].remaining(), asked[1].remaining()), (1, 3));
    assert_eq!(limiter.check(secs(0), 0).unwrap(), asked);
}

#[test]
fn huge_jumps_and_the_end_of_the_timeline() {
    let mut limiter = Limiter::new(login());
    assert!(limiter.check(secs(0), 3).unwrap().allowed());
    // Centuries later: all forgotten.
    let far = Moment::from_secs(18_000_000_000);
    let d = limiter.check(far, 3).unwrap();
    assert!(d.allowed());
    assert_eq!(d[1].remaining(), 2);
    // At the very end of the timeline: no overflow, no panic; an admission there never leaves.
    let end = Moment::MAX;
    assert!(limiter.check(end, 1).unwrap().allowed());
    assert_eq!(limiter.idle_at(), None);
    let mut full = Limiter::new(RuleSet::from(rule("x", Kind::SlidingLog, "1/s")));
    assert!(full.check(end, 1).unwrap().allowed());
    assert!(!full.check(end, 1).unwrap().allowed());
}

#[test]
fn a_clock_going_back_can_only_deny_more() {
    let mut limiter = Limiter::new(login());
    assert!(limiter.check(secs(100), 3).unwrap().allowed());
    // Back to 50 s: the log counts at its newest admission's time, so still full.
    assert!(!limiter.check(secs(50), 1).unwrap().allowed());
    assert!(limiter.check(secs(160), 1).unwrap().allowed());
}

#[test]
fn rules_at_the_largest_limit() {
    let most = Quota::new(u64::MAX, Duration::from_secs(1)).unwrap();
    let set = RuleSet::new([
        Rule::new("log", Kind::SlidingLog, most).unwrap(),
        Rule::new("counter", Kind::SlidingCounter, most).unwrap(),
    ])
    .unwrap();
    let mut limiter = Limiter::new(set);
    let d = limiter.check(secs(0), u64::MAX).unwrap();
    assert!(d.allowed());
    assert_eq!(d.remaining(), 0);
    assert!(!limiter.check(secs(0), 1).unwrap().allowed());
}

#[test]
fn names_kinds_and_sizes_are_checked_when_built() {
    let q: Quota = "1/s".parse().unwrap();
    for (name, reason) in [
        ("", "a rule needs a name"),
        ("per ip", "only ASCII letters"),
        ("{tag}", "only ASCII letters"),
        ("a:b", "only ASCII letters"),
        ("é", "only ASCII letters"),
    ] {
        let err = Rule::new(name, Kind::Gcra, q).unwrap_err();
        assert!(
            matches!(err, ConfigError::BadRuleName { .. }),
            "{name:?}: {err:?}"
        );
        assert!(err.to_string().contains(reason), "{name:?}: {err}");
    }
    let long = "n".repeat(10_000);
    let err = Rule::new(&long, Kind::Gcra, q).unwrap_err();
    assert_eq!(
        err,
        ConfigError::BadRuleName {
            name: "n".repeat(64),
            reason: "it is longer than 64 bytes"
        }
    );
    assert!(Rule::new(&"n".repeat(64), Kind::Gcra, q).is_ok());
    assert!(Rule::new("a-b_c.9", Kind::Gcra, q).is_ok());

    assert_eq!(RuleSet::new([]), Err(ConfigError::NoRules));
    let many = (0..1_000).map(|i| rule(&format!("r{i}"), Kind::Gcra, "1/s"));
    assert_eq!(
        RuleSet::new(many),
        Err(ConfigError::TooManyRules {
            count: 1_000,
            max: 16
        })
    );
    let err = RuleSet::new([
        rule("a", Kind::Gcra, "1/s"),
        rule("a", Kind::SlidingLog, "2/s"),
    ])
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "two rules of one set are named `a`; each needs a name of its own"
    );

    assert_eq!("GCRA".parse::<Kind>(), Ok(Kind::Gcra));
    let err = "token_bucket".parse::<Kind>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "`token_bucket` is not an algorithm; expected sliding_log, sliding_counter, \
         fixed_window, gcra, leases or calendar"
    );
    for kind in Kind::ALL {
        assert_eq!(kind.to_string().parse::<Kind>(), Ok(kind));
    }
    let err = Rule::new("x", Kind::FixedWindow, "5/s burst 9".parse().unwrap()).unwrap_err();
    assert!(
        matches!(err, ConfigError::BurstUnsupported { .. }),
        "{err:?}"
    );
}

#[test]
fn a_keyed_set_drops_a_key_once_every_rule_is_idle() {
    let limiter = Keyed::<u32, _>::new(login());
    limiter.check(&1, secs(0), 1).unwrap();
    assert_eq!(limiter.sweep(secs(60)), 0); // the hour rule still holds it
    assert_eq!(limiter.sweep(secs(3600)), 1);
    assert!(limiter.is_empty());
}

/// Threads racing on one shared set and on one key of a keyed set: exactly the tighter limit
/// in all, and the looser rule counted exactly what was admitted.
#[test]
fn threads_never_get_more_than_the_tightest_rule() {
    const THREADS: usize = 4;
    let shared = Arc::new(SharedLimiter::new(
        RuleSet::new([
            rule("small", Kind::SlidingLog, "100/minute"),
            rule("large", Kind::Gcra, "1000/minute"),
        ])
        .unwrap(),
    ));
    let keyed = Arc::new(Keyed::<u32, _>::new(login()));
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (shared, keyed, barrier) = (shared.clone(), keyed.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                let mut admitted = (0, 0);
                for _ in 0..500 {
                    admitted.0 += usize::from(shared.check(secs(1), 1).unwrap().allowed());
                    admitted.1 += usize::from(keyed.check(&7, secs(1), 1).unwrap().allowed());
                }
                admitted
            })
        })
        .collect();
    let (a, b) = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .fold((0, 0), |acc, x| (acc.0 + x.0, acc.1 + x.1));
    assert_eq!((a, b), (100, 3));
    // The large rule counted exactly the 100 admitted: 900 more fit, not one more.
    let after = shared.peek(secs(1), 0).unwrap();
    assert_eq!(after[1].remaining(), 900);
}

/// One limiter per rule, each asked alone: the set admits when all would, then consumes from
/// each.
struct Reference {
    logs: Vec<Limiter<SlidingLog>>,
    counters: Vec<Limiter<SlidingCounter>>,
    fixed: Vec<Limiter<FixedWindow>>,
    gcras: Vec<Limiter<Gcra>>,
    leases: Vec<Limiter<Leases>>,
    calendars: Vec<Limiter<Calendar>>,
    order: Vec<(Kind, usize)>,
}

impl Reference {
    fn new(rules: &[Rule]) -> Reference {
        let mut r = Reference {
            logs: Vec::new(),
            counters: Vec::new(),
            fixed: Vec::new(),
            gcras: Vec::new(),
            leases: Vec::new(),
            calendars: Vec::new(),
            order: Vec::new(),
        };
        for rule in rules {
            let q = rule.quota();
            let at = match rule.kind() {
                Kind::SlidingLog => {
                    r.logs.push(Limiter::new(SlidingLog::new(q).unwrap()));
                    r.logs.len()
                }
                Kind::SlidingCounter => {
                    r.counters
                        .push(Limiter::new(SlidingCounter::new(q).unwrap()));
                    r.counters.len()
                }
                Kind::FixedWindow => {
                    r.fixed.push(Limiter::new(FixedWindow::new(q).unwrap()));
                    r.fixed.len()
                }
                Kind::Gcra => {
                    r.gcras.push(Limiter::new(Gcra::new(q).unwrap()));
                    r.gcras.len()
                }
                Kind::Leases => {
                    r.leases.push(Limiter::new(Leases::from_quota(q).unwrap()));
                    r.leases.len()
                }
                Kind::Calendar => {
                    let q = rule.calendar_quota().unwrap().clone();
                    r.calendars.push(Limiter::new(Calendar::new(q)));
                    r.calendars.len()
                }
            };
            r.order.push((rule.kind(), at - 1));
        }
        r
    }

    fn each(&mut self, now: Moment, cost: u64, commit: bool) -> Vec<Decision> {
        self.order
            .clone()
            .into_iter()
            .map(|(kind, i)| {
                let answer = match (kind, commit) {
                    (Kind::SlidingLog, false) => self.logs[i].peek(now, cost),
                    (Kind::SlidingLog, true) => self.logs[i].check(now, cost),
                    (Kind::SlidingCounter, false) => self.counters[i].peek(now, cost),
                    (Kind::SlidingCounter, true) => self.counters[i].check(now, cost),
                    (Kind::FixedWindow, false) => self.fixed[i].peek(now, cost),
                    (Kind::FixedWindow, true) => self.fixed[i].check(now, cost),
                    (Kind::Gcra, false) => self.gcras[i].peek(now, cost),
                    (Kind::Gcra, true) => self.gcras[i].check(now, cost),
                    (Kind::Leases, false) => self.leases[i].peek(now, cost),
                    (Kind::Leases, true) => self.leases[i].check(now, cost),
                    (Kind::Calendar, false) => self.calendars[i].peek(now, cost),
                    (Kind::Calendar, true) => self.calendars[i].check(now, cost),
                };
                answer.unwrap()
            })
            .collect()
    }

    /// Each lease limiter gives back up to `units`; the most any gave back.
    fn release(&mut self, now: Moment, units: u64) -> u64 {
        let each = self.leases.iter_mut().map(|l| l.release(now, units));
        each.max().unwrap_or(0)
    }

    fn check(&mut self, now: Moment, cost: u64) -> Vec<Decision> {
        let peeked = self.each(now, cost, false);
        if peeked.iter().all(Decision::allowed) {
            self.each(now, cost, true)
        } else {
            peeked
        }
    }
}

fn rules() -> impl Strategy<Value = Vec<Rule>> {
    let one = (0..6usize, 1..6u64, 1..2_000u64, 0..3u64).prop_map(|(kind, limit, span, extra)| {
        let kind = Kind::ALL[kind];
        let mut q = Quota::new(limit, Duration::from_millis(span)).unwrap();
        if kind == Kind::Gcra {
            q = q.with_burst(limit + extra).unwrap();
        }
        (kind, q)
    });
    prop::collection::vec(one, 1..5).prop_map(|rules| {
        rules
            .into_iter()
            .enumerate()
            .map(|(i, (kind, q))| {
                let name = format!("r{i}");
                if kind == Kind::Calendar {
                    // Days of the calendar: the traces cross a few of them.
                    let day = CalendarQuota::new(q.limit(), CalendarUnit::Day).unwrap();
                    return Rule::calendar(&name, day).unwrap();
                }
                Rule::new(&name, kind, q).unwrap()
            })
            .collect()
    })
}

proptest! {
    #[test]
    /// Issue 33: with leases among the rules, a step may be a release of what they hold.
    fn a_set_answers_as_one_limiter_per_rule_asked_together(
        rules in rules(),
        steps in prop::collection::vec((0..400u64, 0..4u64, prop::bool::weighted(0.2)), 1..120),
    ) {
        let set = RuleSet::new(rules.clone()).unwrap();
        let max = set.max_cost();
        let mut ours = Limiter::new(set);
        let mut reference = Reference::new(&rules);
        // 20 s before a day's end, so that a calendar day's boundary is crossed.
        let mut now = Moment::from_secs(86_380);
        for (gap, cost, release) in steps {
            now += Duration::from_millis(gap);
            if release {
                prop_assert_eq!(ours.release(now, cost), reference.release(now, cost));
                continue;
            }
            let cost = cost.min(max);
            let expected = reference.check(now, cost);
            let got: Decisions = ours.check(now, cost).unwrap();
            prop_assert_eq!(got.as_slice(), &expected[..]);
            prop_assert_eq!(got.allowed(), expected.iter().all(Decision::allowed));
            prop_assert_eq!(&got, &Decisions::new(expected).unwrap());
        }
    }
}
