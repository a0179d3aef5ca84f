//! The limiters at the edges only memory reaches: the end of the 584-year timeline, limits
//! and costs near `u64::MAX`, nanosecond windows, and what each holder promises. The edges
//! every backend shares run against memory, Redis and Redis Cluster in slidewin-redis's
//! `tests/limit_edges.rs`.

use std::time::Duration;

use slidewin::limit::{Algorithm, FixedWindow, Gcra, SlidingCounter, SlidingLog};
use slidewin::{Decision, Keyed, Limiter, Moment, Quota, SharedLimiter};

fn ms(n: u64) -> Moment {
    Moment::from_millis(n)
}

fn secs(n: u64) -> Moment {
    Moment::from_secs(n)
}

fn quota(text: &str) -> Quota {
    text.parse().unwrap()
}

/// Python `limits` #276: `clear()` on a limit did nothing, so a user reset to full quota stayed
/// limited. Every reset here gives the full quota back.
#[test]
fn python_limits_276_reset_really_clears() {
    let q = quota("2/minute");
    let now = secs(1);

    let mut direct = Limiter::new(SlidingLog::new(q).unwrap());
    direct.check(now, 2).unwrap();
    direct.reset();
    assert!(direct.check(now, 2).unwrap().allowed());

    let shared = SharedLimiter::new(SlidingCounter::new(q).unwrap());
    shared.check(now, 2).unwrap();
    shared.reset();
    assert!(shared.check(now, 2).unwrap().allowed());

    let atomic = SharedLimiter::new(FixedWindow::new(q).unwrap());
    atomic.check(now, 2).unwrap();
    atomic.reset();
    assert!(atomic.check(now, 2).unwrap().allowed());

    let keyed = Keyed::<&str, _>::new(Gcra::new(q).unwrap());
    keyed.check(&"ann", now, 2).unwrap();
    keyed.check(&"bob", now, 2).unwrap();
    assert!(keyed.reset(&"ann"));
    assert!(!keyed.reset(&"carol"));
    assert!(keyed.check(&"ann", now, 2).unwrap().allowed());
    assert!(!keyed.check(&"bob", now, 1).unwrap().allowed());
    keyed.reset_all();
    assert!(keyed.check(&"bob", now, 2).unwrap().allowed());
}

#[test]
fn sliding_log_the_admission_exactly_one_span_old_has_left() {
    let mut limiter = Limiter::new(SlidingLog::new(quota("1/10s")).unwrap());
    assert!(limiter.check(secs(5), 1).unwrap().allowed());
    let denied = limiter
        .check(secs(15) - Duration::from_nanos(1), 1)
        .unwrap();
    assert_eq!(denied.retry_after(), Some(Duration::from_nanos(1)));
    assert!(limiter.check(secs(15), 1).unwrap().allowed());
}

#[test]
fn huge_jumps_in_time() {
    for limiter in [
        &mut Limiter::new(SlidingLog::new(quota("3/s")).unwrap()) as &mut dyn Check,
        &mut Limiter::new(SlidingCounter::new(quota("3/s")).unwrap()),
        &mut Limiter::new(FixedWindow::new(quota("3/s")).unwrap()),
        &mut Limiter::new(Gcra::new(quota("3/s")).unwrap()),
    ] {
        assert!(limiter.at(Moment::ZERO, 3), "{limiter:?}");
        // Centuries later, and near the end of the timeline.
        assert!(
            limiter.at(Moment::from_secs(10_000_000_000), 3),
            "{limiter:?}"
        );
        assert!(
            !limiter.at(Moment::from_secs(10_000_000_000), 1),
            "{limiter:?}"
        );
        let near_the_end = Moment::MAX - Duration::from_secs(10);
        assert!(limiter.at(near_the_end, 3), "{limiter:?}");
        assert!(!limiter.at(near_the_end, 1), "{limiter:?}");
    }
}

#[test]
fn at_the_very_end_of_the_timeline_nothing_overflows() {
    // The window counters and the log admit at the last moment; the GCRA cannot record a TAT
    // past it, so it denies what would refill after it, and says to wait for ever.
    for limiter in [
        &mut Limiter::new(SlidingLog::new(quota("3/s")).unwrap()) as &mut dyn Check,
        &mut Limiter::new(SlidingCounter::new(quota("3/s")).unwrap()),
        &mut Limiter::new(FixedWindow::new(quota("3/s")).unwrap()),
    ] {
        assert!(limiter.at(Moment::MAX, 3), "{limiter:?}");
        assert!(!limiter.at(Moment::MAX, 1), "{limiter:?}");
    }
    let mut gcra = Limiter::new(Gcra::new(quota("3/s")).unwrap());
    let denied = gcra.check(Moment::MAX, 1).unwrap();
    assert!(!denied.allowed());
    assert_eq!(denied.retry_after(), Some(Duration::MAX));
    assert!(
        gcra.check(Moment::MAX - Duration::from_secs(2), 3)
            .unwrap()
            .allowed()
    );
}

#[test]
fn quotas_an_algorithm_cannot_take_are_errors() {
    let burst = quota("10/s burst 20");
    assert!(SlidingLog::new(burst).is_err());
    assert!(SlidingCounter::new(burst).is_err());
    assert!(FixedWindow::new(burst).is_err());
    assert!(Gcra::new(burst).is_ok());
    let err = SlidingLog::new(burst).unwrap_err();
    assert_eq!(
        err.to_string(),
        "SlidingLog has no burst, but the quota `10 per 1s burst 20` sets one; \
         use Gcra, or leave the burst at the limit"
    );
    let too_fine = Quota::new(2_000, Duration::from_micros(1)).unwrap();
    let err = Gcra::new(too_fine).unwrap_err();
    assert!(
        err.to_string()
            .contains("more than one unit of cost per nanosecond"),
        "{err}"
    );
    assert!(FixedWindow::new(too_fine).is_err());
}

/// The four limiters behind one object, for the loops above.
trait Check: std::fmt::Debug {
    fn decide(&mut self, now: Moment, cost: u64) -> Decision;
    fn at(&mut self, now: Moment, cost: u64) -> bool {
        self.decide(now, cost).allowed()
    }
}

impl<A: Algorithm<Output = Decision>> Check for Limiter<A> {
    fn decide(&mut self, now: Moment, cost: u64) -> Decision {
        self.check(now, cost).unwrap()
    }
}

#[test]
fn the_shared_limiters_are_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<SharedLimiter<SlidingLog>>();
    shared::<SharedLimiter<SlidingCounter>>();
    shared::<SharedLimiter<Gcra>>();
    shared::<SharedLimiter<FixedWindow>>();
    shared::<SharedLimiter<slidewin::limit::RuleSet>>();
    shared::<Keyed<String, SlidingLog>>();
    shared::<Keyed<std::net::IpAddr, Gcra>>();
    fn owned<T: Send>() {}
    owned::<Limiter<SlidingLog>>();
}

/// The log's count was a `u64` that wrapped: at a limit of `u64::MAX`, one admission then a
/// peek of `u64::MAX` answered "allowed, remaining `u64::MAX`", and a check of `u64::MAX`
/// panicked ("capacity overflow") pushing one timestamp per unit.
#[test]
fn sliding_log_at_the_largest_limit_never_wraps_its_count() {
    let mut limiter = Limiter::new(
        SlidingLog::new(Quota::new(u64::MAX, Duration::from_secs(1)).unwrap()).unwrap(),
    );
    let first = limiter.check(secs(0), 1).unwrap();
    assert!(first.allowed());
    assert_eq!(first.remaining(), u64::MAX - 1);

    let peek = limiter.peek(secs(0), u64::MAX).unwrap();
    assert!(!peek.allowed());
    assert_eq!(peek.remaining(), u64::MAX - 1);
    assert_eq!(peek.retry_after(), Some(Duration::from_secs(1))); // when the one unit leaves

    let check = limiter.check(secs(0), u64::MAX).unwrap();
    assert!(!check.allowed());
    // The rest of the quota fits exactly; then nothing more does.
    let rest = limiter.check(ms(500), u64::MAX - 1).unwrap();
    assert!(rest.allowed());
    assert_eq!(rest.remaining(), 0);
    assert!(!limiter.check(ms(999), 1).unwrap().allowed());
    // At 1 s the first unit has left: one unit fits, and no more until 1.5 s.
    let one = limiter.check(secs(1), 1).unwrap();
    assert!(one.allowed());
    assert_eq!(one.remaining(), 0);
    let denied = limiter.check(secs(1), 1).unwrap();
    assert_eq!(denied.retry_after(), Some(Duration::from_millis(500)));
    // At 1.5 s the u64::MAX - 1 units leave: the whole quota but the one unit at 1 s.
    let whole = limiter.peek(ms(1_500), u64::MAX - 1).unwrap();
    assert!(whole.allowed());
    assert!(!limiter.peek(ms(1_500), u64::MAX).unwrap().allowed());
}

/// `1000000000000/s` with a check of 10^12 aborted the process ("memory allocation of
/// 8000000000000 bytes failed"): a timestamp per unit. A stamp per admission carries its cost
/// (the unit test of the same name counts the stamps).
#[test]
fn sliding_log_a_cost_of_a_trillion_is_one_stamp() {
    let mut limiter = Limiter::new(SlidingLog::new(quota("1000000000000/s")).unwrap());
    let trillion = 1_000_000_000_000;
    let decision = limiter.check(secs(0), trillion).unwrap();
    assert!(decision.allowed());
    assert_eq!(decision.remaining(), 0);
    // Denials of any size leave it as it is, and say when it all leaves.
    let denied = limiter.check(ms(10), trillion).unwrap();
    assert_eq!(denied.retry_after(), Some(Duration::from_millis(990)));
    assert!(limiter.check(secs(1), trillion).unwrap().allowed());
}

/// Rule sets of one to six rules (a few decisions are kept in place, more on the heap): each
/// rule answers as it would alone, the binding rule is the tightest, and decisions built from
/// a `Vec` equal those a check returns.
#[test]
fn rule_sets_of_every_size_answer_as_their_rules() {
    use slidewin::limit::{Decisions, Kind, Rule, RuleSet};
    for n in 1..=6u64 {
        let rules: Vec<Rule> = (0..n)
            .map(|i| {
                let limit = 10 - i; // the last rule is the tightest
                Rule::new(
                    &format!("r{i}"),
                    Kind::SlidingLog,
                    quota(&format!("{limit}/minute")),
                )
                .unwrap()
            })
            .collect();
        let mut set = Limiter::new(RuleSet::new(rules.clone()).unwrap());
        let decisions = set.check(Moment::ZERO, 1).unwrap();
        assert_eq!(decisions.as_slice().len(), usize::try_from(n).unwrap());
        for (i, rule) in rules.iter().enumerate() {
            let mut alone = Limiter::new(SlidingLog::new(rule.quota()).unwrap());
            assert_eq!(
                decisions[i],
                alone.check(Moment::ZERO, 1).unwrap(),
                "rule {i} of {n}"
            );
        }
        assert_eq!(decisions.binding(), usize::try_from(n - 1).unwrap());
        let rebuilt = Decisions::new(decisions.as_slice().to_vec()).unwrap();
        assert_eq!(rebuilt, decisions);
    }
}
