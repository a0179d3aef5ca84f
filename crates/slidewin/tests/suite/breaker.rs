//! `CircuitBreaker` at its edges: the minimum number of calls, exactly at a threshold, the
//! window's boundaries, a closed window restarting, time going back, huge jumps and
//! `u64::MAX`-sized times and durations, the probes, the operators, and threads racing for a
//! transition. Sentinel's documented degrade rules are in `breaker_sentinel.rs`.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use slidewin::breaker::{
    BreakerConfigError, CallStats, Cause, CircuitBreaker, CircuitBreakerBuilder, Rule, State,
    Transition,
};
use slidewin::{ConfigError, Moment};

const MS: Duration = Duration::from_millis(1);

fn ms(ms: u64) -> Moment {
    Moment::from_millis(ms)
}

fn secs(s: u64) -> Moment {
    Moment::from_secs(s)
}

/// Error ratio 0.5 over 10 s in 10 buckets, at least 4 calls, open 5 s, 2 probes.
fn builder() -> CircuitBreakerBuilder {
    CircuitBreaker::builder()
        .error_ratio(0.5)
        .window(Duration::from_secs(10), 10)
        .min_calls(4)
        .wait(Duration::from_secs(5))
        .probes(2)
}

/// Reports `errors` failed and `successes` good calls at `now`; the transitions made.
fn report(breaker: &CircuitBreaker, now: Moment, successes: u64, errors: u64) -> Vec<Transition> {
    let good = (0..successes).filter_map(|_| breaker.on_success(now, MS));
    let bad = (0..errors).filter_map(|_| breaker.on_error(now, MS));
    good.chain(bad).collect::<Vec<_>>()
}

/// Trips `breaker` (of `builder()`) at `now`.
fn trip(breaker: &CircuitBreaker, now: Moment) {
    let made = report(breaker, now, 2, 2);
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(breaker.state(now), State::Open);
}

#[test]
fn below_the_minimum_number_of_calls_nothing_trips() {
    let breaker = builder().build(Moment::ZERO).unwrap();
    assert!(report(&breaker, ms(1), 0, 3).is_empty());
    assert_eq!(breaker.state(ms(1)), State::Closed);
    assert_eq!(
        breaker.window(ms(1)),
        CallStats {
            calls: 3,
            errors: 3,
            slow: 0
        }
    );
    let made = report(&breaker, ms(2), 0, 1);
    assert_eq!(made[0].cause, Cause::Tripped(Rule::ErrorRatio));
    assert_eq!(
        made[0].stats,
        CallStats {
            calls: 4,
            errors: 4,
            slow: 0
        }
    );
}

#[test]
fn a_ratio_exactly_at_the_threshold_trips_and_just_below_does_not() {
    let below = builder()
        .error_ratio(0.3)
        .min_calls(10)
        .build(Moment::ZERO)
        .unwrap();
    assert!(report(&below, ms(1), 8, 2).is_empty()); // 0.2
    assert!(report(&below, ms(1), 1, 0).is_empty()); // 2 of 11
    let at = builder()
        .error_ratio(0.3)
        .min_calls(10)
        .build(Moment::ZERO)
        .unwrap();
    let made = report(&at, ms(1), 7, 3); // 3 of 10 is 0.3 exactly
    assert_eq!(made.len(), 1);
    assert_eq!(made[0].stats.error_ratio(), Some(0.3));
}

#[test]
fn an_error_count_exactly_at_the_threshold_trips() {
    let breaker = builder().error_count(3).build(Moment::ZERO).unwrap();
    // The error ratio is also set (0.5): 2 errors in 10 calls reach neither rule.
    assert!(report(&breaker, ms(1), 8, 2).is_empty());
    let made = report(&breaker, ms(1), 0, 1);
    assert_eq!(made[0].cause, Cause::Tripped(Rule::ErrorCount));
}

#[test]
fn a_call_exactly_as_slow_as_the_threshold_is_not_slow() {
    let breaker = CircuitBreaker::builder()
        .slow_call_ratio(1.0, Duration::from_millis(50))
        .min_calls(2)
        .build(Moment::ZERO)
        .unwrap();
    assert!(
        breaker
            .on_success(ms(1), Duration::from_millis(50))
            .is_none()
    );
    let stats = breaker.window(ms(1));
    assert_eq!(stats.slow, 0);
    let one_ns_more = Duration::from_millis(50) + Duration::from_nanos(1);
    assert!(breaker.on_error(ms(1), one_ns_more).is_none()); // 1 slow of 2
    let breaker = CircuitBreaker::builder()
        .slow_call_ratio(1.0, Duration::from_millis(50))
        .min_calls(2)
        .build(Moment::ZERO)
        .unwrap();
    assert!(breaker.on_success(ms(1), one_ns_more).is_none());
    let made = breaker.on_success(ms(1), Duration::MAX).unwrap();
    assert_eq!(made.cause, Cause::Tripped(Rule::SlowCallRatio));
}

#[test]
fn a_call_exactly_one_span_old_has_left_the_window() {
    let breaker = builder()
        .error_count(2)
        .min_calls(2)
        .build(Moment::ZERO)
        .unwrap();
    assert!(breaker.on_error(ms(500), MS).is_none());
    // At 10.5 s the window is the buckets [1 s, 11 s): the error at 0.5 s has left.
    assert!(breaker.on_error(ms(10_500), MS).is_none());
    assert_eq!(breaker.window(ms(10_500)).errors, 1);
    // At 10.999 s the bucket [1 s, 2 s) is the oldest; one more error trips.
    assert!(breaker.on_error(ms(10_999), MS).is_some());
}

#[test]
fn the_last_instant_of_a_bucket_still_sees_the_oldest_bucket() {
    let breaker = builder()
        .error_count(2)
        .min_calls(2)
        .build(Moment::ZERO)
        .unwrap();
    assert!(breaker.on_error(ms(0), MS).is_none());
    let last = Moment::from_nanos(10_000_000_000 - 1);
    assert_eq!(breaker.window(last).errors, 1);
    assert_eq!(breaker.window(secs(10)).errors, 0);
    assert!(breaker.on_error(last, MS).is_some());
}

#[test]
fn the_wait_ends_exactly_at_opened_plus_wait() {
    let breaker = builder().build(Moment::ZERO).unwrap();
    trip(&breaker, secs(1));
    let before = Moment::from_nanos(6_000_000_000 - 1);
    let refused = breaker.try_acquire(before).unwrap_err();
    assert_eq!(refused.retry_after, Some(Duration::from_nanos(1)));
    assert_eq!(breaker.state(before), State::Open);
    assert_eq!(breaker.state(secs(6)), State::HalfOpen);
    let probe = breaker.try_acquire(secs(6)).unwrap();
    let transition = probe.transition().unwrap();
    assert_eq!(
        (transition.from, transition.to),
        (State::Open, State::HalfOpen)
    );
    assert_eq!(transition.at, secs(6));
}

#[test]
fn probes_that_pass_close_it_with_an_empty_window() {
    let breaker = builder().build(Moment::ZERO).unwrap();
    trip(&breaker, secs(1));
    let first = breaker.try_acquire(secs(6)).unwrap();
    let second = breaker.try_acquire(secs(6)).unwrap();
    assert!(first.is_probe() && second.is_probe());
    let third = breaker.try_acquire(secs(6)).unwrap_err();
    assert_eq!((third.state, third.retry_after), (State::HalfOpen, None));
    assert!(breaker.on_error(secs(7), MS).is_none()); // 1 of 2 failed: 0.5
    let made = breaker.on_success(secs(7), MS);
    // 0.5 reaches the error ratio: open again, from the last probe's time.
    let made = made.unwrap();
    assert_eq!(
        (made.to, made.cause),
        (State::Open, Cause::ProbesFailed(Rule::ErrorRatio))
    );
    assert_eq!(
        made.stats,
        CallStats {
            calls: 2,
            errors: 1,
            slow: 0
        }
    );
    assert_eq!(
        breaker.try_acquire(secs(11)).unwrap_err().retry_after,
        Some(Duration::from_secs(1))
    );

    let _ = breaker.try_acquire(secs(12)).unwrap();
    assert!(breaker.on_success(secs(12), MS).is_none());
    let closed = breaker.on_success(secs(12), MS).unwrap();
    assert_eq!(
        (closed.from, closed.to, closed.cause),
        (State::HalfOpen, State::Closed, Cause::ProbesPassed)
    );
    // The window restarted: the 2 errors of 1 s, still within 10 s, no longer count.
    assert_eq!(breaker.window(secs(12)), CallStats::default());
    assert!(report(&breaker, secs(12), 2, 1).is_empty());
}

/// The window restarts at the bucket where the breaker closed, less what that bucket held
/// before: here the wait is shorter than a bucket, so the calls that tripped it share it.
#[test]
fn a_window_restarted_inside_a_bucket_forgets_that_buckets_earlier_calls() {
    let breaker = builder()
        .error_count(2)
        .window(Duration::from_secs(10), 1)
        .min_calls(2)
        .wait(Duration::from_millis(100))
        .probes(1)
        .build(Moment::ZERO)
        .unwrap();
    assert!(breaker.on_error(ms(10), MS).is_none());
    assert!(breaker.on_error(ms(20), MS).is_some());
    let _probe = breaker.try_acquire(ms(200)).unwrap();
    assert_eq!(breaker.on_success(ms(250), MS).unwrap().to, State::Closed);
    assert_eq!(breaker.window(ms(300)), CallStats::default());
    assert!(breaker.on_error(ms(300), MS).is_none());
    assert_eq!(breaker.window(ms(300)).errors, 1);
    assert!(breaker.on_error(ms(400), MS).is_some());
}

#[test]
fn release_hands_a_probe_back_only_to_its_own_half_open_state() {
    let breaker = builder().probes(1).build(Moment::ZERO).unwrap();
    trip(&breaker, secs(1));
    let probe = breaker.try_acquire(secs(6)).unwrap();
    assert!(breaker.try_acquire(secs(6)).is_err());
    breaker.release(probe);
    let probe = breaker.try_acquire(secs(6)).unwrap();
    assert_eq!(breaker.on_error(secs(6), MS).unwrap().to, State::Open);
    breaker.release(probe); // of a half-open state that has ended: nothing
    let next = breaker.try_acquire(secs(11)).unwrap();
    assert!(breaker.try_acquire(secs(11)).is_err());
    // A closed breaker's permit is not a probe: releasing it does nothing either.
    assert_eq!(breaker.on_success(secs(11), MS).unwrap().to, State::Closed);
    breaker.release(next);
    breaker.release(breaker.try_acquire(secs(11)).unwrap());
    assert_eq!(breaker.state(secs(11)), State::Closed);
}

#[test]
fn outcomes_while_open_are_dropped() {
    let breaker = builder().build(Moment::ZERO).unwrap();
    trip(&breaker, secs(1));
    assert!(report(&breaker, secs(2), 10, 10).is_empty());
    assert_eq!(breaker.state(secs(2)), State::Open);
}

#[test]
fn time_going_back_neither_reopens_early_nor_loses_calls() {
    let breaker = builder().build(Moment::ZERO).unwrap();
    assert!(report(&breaker, secs(5), 2, 1).is_empty());
    // A call reported earlier than the last one still counts (its bucket is in the window).
    assert_eq!(breaker.on_error(secs(3), MS).unwrap().stats.calls, 4);
    // Opened at 3 s: a call at 1 s (a clock gone back) waits until 8 s.
    let refused = breaker.try_acquire(secs(1)).unwrap_err();
    assert_eq!(refused.retry_after, Some(Duration::from_secs(7)));
    assert_eq!(breaker.state(secs(1)), State::Open);
    assert_eq!(breaker.state(secs(8)), State::HalfOpen);
}

#[test]
fn a_huge_jump_empties_the_window_and_ends_the_wait() {
    let breaker = builder().build(Moment::ZERO).unwrap();
    assert!(report(&breaker, secs(1), 1, 2).is_empty());
    let far = Moment::from_nanos(1 << 62);
    assert_eq!(breaker.window(far), CallStats::default());
    trip(&breaker, far);
    let later = Moment::from_nanos(u64::MAX - 1);
    let probe = breaker.try_acquire(later).unwrap();
    assert_eq!(probe.transition().unwrap().at, later);
}

#[test]
fn times_and_waits_near_u64_max_saturate() {
    let end = Moment::MAX;
    let breaker = builder()
        .wait(Duration::from_nanos(u64::MAX))
        .build(end)
        .unwrap();
    trip(&breaker, Moment::from_nanos(u64::MAX - 10));
    // Open until Moment::MAX: the wait saturates, and a call at the very end is a probe.
    let refused = breaker
        .try_acquire(Moment::from_nanos(u64::MAX - 1))
        .unwrap_err();
    assert_eq!(refused.retry_after, Some(Duration::from_nanos(1)));
    assert!(breaker.try_acquire(end).unwrap().is_probe());
    assert!(breaker.on_success(end, Duration::MAX).is_none());
    assert_eq!(
        breaker.on_success(end, Duration::MAX).unwrap().to,
        State::Closed
    );
    // The longest wait the timeline holds is accepted; one nanosecond more is not.
    let too_long = Duration::from_nanos(u64::MAX) + Duration::from_nanos(1);
    let err = builder().wait(too_long).build(Moment::ZERO).unwrap_err();
    assert_eq!(err, BreakerConfigError::WaitTooLong { wait: too_long });
}

#[test]
fn operators_force_open_disable_and_reset_from_every_state() {
    let breaker = builder().build(Moment::ZERO).unwrap();
    let forced = breaker.force_open(secs(1)).unwrap();
    assert_eq!((forced.from, forced.to), (State::Closed, State::ForcedOpen));
    assert!(breaker.try_acquire(Moment::MAX).is_err());
    assert!(report(&breaker, secs(1), 0, 10).is_empty());
    let disabled = breaker.disable(secs(2)).unwrap();
    assert_eq!(
        (disabled.from, disabled.to),
        (State::ForcedOpen, State::Disabled)
    );
    assert!(breaker.disable(secs(2)).is_none());
    assert!(report(&breaker, secs(2), 0, 10).is_empty());
    assert!(breaker.try_acquire(secs(2)).is_ok());
    let reset = breaker.reset(secs(3));
    assert_eq!(
        (reset.from, reset.to, reset.cause),
        (State::Disabled, State::Closed, Cause::Reset)
    );
    assert_eq!(breaker.window(secs(3)), CallStats::default());

    trip(&breaker, secs(4));
    let _probe = breaker.try_acquire(secs(9)).unwrap();
    assert!(breaker.on_error(secs(9), MS).is_none());
    let forced = breaker.force_open(secs(9)).unwrap();
    assert_eq!(forced.from, State::HalfOpen);
    assert_eq!(
        forced.stats,
        CallStats {
            calls: 1,
            errors: 1,
            slow: 0
        }
    );
    assert_eq!(breaker.reset(secs(10)).from, State::ForcedOpen);
    assert_eq!(breaker.state(secs(10)), State::Closed);
}

#[test]
fn every_setting_out_of_its_bound_is_named() {
    let cases: [(CircuitBreakerBuilder, &str); 11] = [
        (
            CircuitBreaker::builder(),
            "a circuit breaker needs a rule: error_ratio, error_count or slow_call_ratio",
        ),
        (
            builder().error_ratio(0.0),
            "the error ratio must be in (0, 1], got 0",
        ),
        (
            builder().error_ratio(1.000_001),
            "the error ratio must be in (0, 1], got 1.000001",
        ),
        (
            builder().error_ratio(f64::NAN),
            "the error ratio must be in (0, 1], got NaN",
        ),
        (
            builder().slow_call_ratio(-0.5, MS),
            "the slow-call ratio must be in (0, 1], got -0.5",
        ),
        (
            builder().error_count(0),
            "the error count must be at least 1, got 0",
        ),
        (
            builder().min_calls(0),
            "min_calls must be at least 1, got 0",
        ),
        (
            builder().wait(Duration::ZERO),
            "the wait must be longer than zero, got 0ns",
        ),
        (builder().probes(0), "probes must be from 1 to 1024, got 0"),
        (
            builder().probes(1_025),
            "probes must be from 1 to 1024, got 1025",
        ),
        (
            builder().window(Duration::from_secs(1), 0),
            "the breaker's window: buckets must be at least 1, got 0",
        ),
    ];
    for (builder, message) in cases {
        assert_eq!(
            builder.build(Moment::ZERO).unwrap_err().to_string(),
            message
        );
    }
    let err = builder()
        .window(Duration::ZERO, 1)
        .build(Moment::ZERO)
        .unwrap_err();
    assert_eq!(err, BreakerConfigError::Window(ConfigError::ZeroSpan));
    assert!(std::error::Error::source(&err).is_some());
    assert!(
        builder()
            .error_ratio(1.0)
            .probes(1_024)
            .build(Moment::ZERO)
            .is_ok()
    );
}

/// Threads race to report the outcome that trips the breaker: exactly one returns the
/// transition.
#[test]
fn racing_threads_make_each_transition_once() {
    let breaker = Arc::new(builder().min_calls(64).build(Moment::ZERO).unwrap());
    let threads = 8_u64;
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (breaker, barrier) = (Arc::clone(&breaker), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                (0..100)
                    .filter_map(|n| breaker.on_error(ms(i * 100 + n), MS))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let made: Vec<Transition> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(made[0].stats.calls, made[0].stats.errors);
    assert!(made[0].stats.calls >= 64);
}

/// Threads race for the probes of a half-open breaker: exactly as many as permitted pass, and
/// one thread makes the open to half-open transition.
#[test]
fn racing_threads_get_exactly_the_permitted_probes() {
    let breaker = Arc::new(builder().probes(5).build(Moment::ZERO).unwrap());
    trip(&breaker, secs(1));
    let barrier = Arc::new(Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let (breaker, barrier) = (Arc::clone(&breaker), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                let permits: Vec<_> = (0..4)
                    .filter_map(|_| breaker.try_acquire(secs(6)).ok())
                    .collect();
                let transitions = permits.iter().filter(|p| p.transition().is_some()).count();
                (permits.len(), transitions)
            })
        })
        .collect();
    let (permits, transitions) = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .fold((0, 0), |(a, b), (c, d)| (a + c, b + d));
    assert_eq!((permits, transitions), (5, 1));
}
