//! The limiters at their edges, and regression tests named after the peers' bugs.

use std::time::Duration;

use slidewin::limit::{Algorithm, FixedWindow, Gcra, LimitError, SlidingCounter, SlidingLog};
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

/// How many of `attempts` unit requests are admitted.
fn admitted<A: Algorithm<Output = Decision>>(
    limiter: &mut Limiter<A>,
    attempts: &[Moment],
) -> usize {
    attempts
        .iter()
        .filter(|&&t| limiter.check(t, 1).unwrap().allowed())
        .count()
}

/// governor #16 and #39: with `10/s`, users saw about 15 per second get through in the first
/// seconds, because a token bucket admits its burst and then refills. Ours: the exact log
/// admits exactly 10 in every window of a second; the GCRA admits what its docs say, at most
/// `burst + limit - 1`, and with `burst` 1 at most the limit.
#[test]
fn governor_16_39_the_first_second_admits_what_the_docs_say() {
    // A client asking every 10 ms for three seconds.
    let attempts: Vec<Moment> = (0..300).map(|i| ms(i * 10)).collect();
    let in_first_second = |limiter: &mut dyn FnMut(Moment) -> bool| {
        attempts
            .iter()
            .filter(|&&t| limiter(t) && t < secs(1))
            .count()
    };

    let mut log = Limiter::new(SlidingLog::new(quota("10/s")).unwrap());
    assert_eq!(
        in_first_second(&mut |t| log.check(t, 1).unwrap().allowed()),
        10
    );

    let mut bucket = Limiter::new(Gcra::new(quota("10/s")).unwrap());
    assert_eq!(
        in_first_second(&mut |t| bucket.check(t, 1).unwrap().allowed()),
        19
    );

    let mut smooth = Limiter::new(Gcra::new(quota("10/s burst 1")).unwrap());
    assert_eq!(
        in_first_second(&mut |t| smooth.check(t, 1).unwrap().allowed()),
        10
    );
}

/// governor #107 and #249: the tolerance was one interval too long, so after a full burst and
/// a wait, one cell more than the burst got through. Ours holds exactly `burst` at once after
/// any wait, and exactly one more per interval.
#[test]
fn governor_107_249_a_full_bucket_holds_exactly_the_burst() {
    let mut limiter = Limiter::new(Gcra::new(quota("1200/minute burst 5")).unwrap()); // 50 ms each
    assert!(limiter.check(ms(0), 5).unwrap().allowed());
    // Two intervals later: exactly two cells, not three.
    let two = [ms(100), ms(100), ms(100)];
    assert_eq!(admitted(&mut limiter, &two), 2);
    // Long after: exactly the burst, whether asked one by one or at once.
    assert_eq!(admitted(&mut limiter, &[secs(10); 7]), 5);
    assert!(limiter.check(secs(20), 5).unwrap().allowed());
    assert_eq!(
        limiter.check(secs(30), 6),
        Err(LimitError::CostTooHigh { cost: 6, max: 5 })
    );
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
fn every_algorithm_on_an_empty_limiter() {
    fn fresh<A: Algorithm<Output = Decision>>(algorithm: A) -> Decision {
        Limiter::new(algorithm).peek(secs(3), 0).unwrap()
    }
    let q = quota("4/s");
    for decision in [
        fresh(SlidingLog::new(q).unwrap()),
        fresh(SlidingCounter::new(q).unwrap()),
        fresh(FixedWindow::new(q).unwrap()),
        fresh(Gcra::new(q).unwrap()),
    ] {
        assert!(decision.allowed());
        assert_eq!((decision.limit(), decision.remaining()), (4, 4));
        assert_eq!(decision.reset_after(), Duration::ZERO);
        assert_eq!(decision.retry_after(), None);
    }
}

#[test]
fn one_admission_and_what_each_algorithm_answers() {
    let q = quota("2/10s");
    let now = secs(4);
    let after_one = |d: Decision| (d.allowed(), d.remaining(), d.reset_after());
    let mut log = Limiter::new(SlidingLog::new(q).unwrap());
    assert_eq!(
        after_one(log.check(now, 1).unwrap()),
        (true, 1, Duration::from_secs(10))
    );
    let mut fixed = Limiter::new(FixedWindow::new(q).unwrap());
    assert_eq!(
        after_one(fixed.check(now, 1).unwrap()),
        (true, 1, Duration::from_secs(6))
    );
    let mut counter = Limiter::new(SlidingCounter::new(q).unwrap());
    assert_eq!(
        after_one(counter.check(now, 1).unwrap()),
        (true, 1, Duration::from_secs(16))
    );
    let mut gcra = Limiter::new(Gcra::new(q).unwrap());
    assert_eq!(
        after_one(gcra.check(now, 1).unwrap()),
        (true, 1, Duration::from_secs(5))
    );
}

#[test]
fn fixed_window_boundary_lets_twice_the_limit_through() {
    let mut limiter = Limiter::new(FixedWindow::new(quota("100/minute")).unwrap());
    assert!(limiter.check(ms(59_999), 100).unwrap().allowed());
    assert!(limiter.check(ms(60_000), 100).unwrap().allowed());
    // 200 inside (0.0 s, 60.0 s]... one millisecond apart: the documented weakness.
    let mut exact = Limiter::new(SlidingLog::new(quota("100/minute")).unwrap());
    assert!(exact.check(ms(59_999), 100).unwrap().allowed());
    assert!(!exact.check(ms(60_000), 1).unwrap().allowed());
}

#[test]
fn a_clock_going_back_can_only_deny_more() {
    for limiter in [
        &mut Limiter::new(SlidingLog::new(quota("2/10s")).unwrap()) as &mut dyn Check,
        &mut Limiter::new(SlidingCounter::new(quota("2/10s")).unwrap()),
        &mut Limiter::new(FixedWindow::new(quota("2/10s")).unwrap()),
        &mut Limiter::new(Gcra::new(quota("2/10s burst 2")).unwrap()),
    ] {
        assert!(limiter.at(secs(100), 2), "{limiter:?}");
        // Back a minute, and back to long before: the window is still full.
        assert!(!limiter.at(secs(40), 1), "{limiter:?}");
        assert!(!limiter.at(secs(1), 1), "{limiter:?}");
        // Time moves on from the newest admission.
        assert!(limiter.at(secs(130), 2), "{limiter:?}");
    }
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
fn a_cost_of_zero_asks_without_consuming() {
    let mut limiter = Limiter::new(SlidingLog::new(quota("1/s")).unwrap());
    assert!(limiter.check(secs(1), 0).unwrap().allowed());
    assert!(limiter.check(secs(1), 1).unwrap().allowed());
    let zero = limiter.check(secs(1), 0).unwrap();
    assert!(zero.allowed());
    assert_eq!(zero.remaining(), 0);
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

/// Costs of several units, in and out of the window: the stamp that must leave for a cost to
/// fit is the one whose units take the count past the excess, not the `n`-th from the end.
#[test]
fn sliding_log_retry_after_counts_units_not_stamps() {
    let mut limiter = Limiter::new(SlidingLog::new(quota("10/10s")).unwrap());
    assert!(limiter.check(secs(1), 4).unwrap().allowed()); // 4 at 1 s
    assert!(limiter.check(secs(2), 1).unwrap().allowed()); // 1 at 2 s
    assert!(limiter.check(secs(3), 5).unwrap().allowed()); // 5 at 3 s: full
    let one = limiter.peek(secs(4), 1).unwrap();
    assert_eq!(one.retry_after(), Some(Duration::from_secs(7))); // the 4 at 1 s leave at 11 s
    let five = limiter.peek(secs(4), 5).unwrap();
    assert_eq!(five.retry_after(), Some(Duration::from_secs(8))); // and the 1 at 2 s, at 12 s
    let six = limiter.peek(secs(4), 6).unwrap();
    assert_eq!(six.retry_after(), Some(Duration::from_secs(9))); // and the 5 at 3 s, at 13 s
    assert_eq!(six.remaining(), 0);
    assert!(limiter.check(secs(11), 4).unwrap().allowed());
    assert!(!limiter.check(secs(11), 1).unwrap().allowed());
}
