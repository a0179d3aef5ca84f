//! Sentinel's documented circuit-breaking (degrade) rules, as regression tests named after
//! them: its wiki's three strategies (1.8.0 on) and the demos' rules.
//!
//! A Sentinel rule maps onto a `CircuitBreaker` as: `statIntervalMs` the window (one bucket,
//! as Sentinel aligns its interval on the timeline), `minRequestAmount` the minimum number of
//! calls (5 by default), `timeWindow` the wait, one probe. The one difference: Sentinel trips
//! only *above* a threshold, we trip *at* it (resilience4j's rule), so Sentinel's error count
//! `n` is `error_count(n + 1)` and the ratios below stay off the threshold itself, but for the
//! test that pins the difference.

use std::time::Duration;

use slidewin::Moment;
use slidewin::breaker::{Cause, CircuitBreaker, CircuitBreakerBuilder, Rule, State};

fn ms(ms: u64) -> Moment {
    Moment::from_millis(ms)
}

/// Sentinel's rule shape: the stat interval, `minRequestAmount`, `timeWindow` in seconds.
fn sentinel(
    stat_interval_ms: u64,
    min_request_amount: u64,
    time_window_s: u64,
) -> CircuitBreakerBuilder {
    CircuitBreaker::builder()
        .window(Duration::from_millis(stat_interval_ms), 1)
        .min_calls(min_request_amount)
        .wait(Duration::from_secs(time_window_s))
        .probes(1)
}

/// `SlowRatioCircuitBreakerDemo`: max RT 50 ms, open when the slow ratio is above 0.6 with at
/// least 100 requests in 20 s, for 10 s. Its traffic takes 40 to 60 ms: at most 9 of every 20
/// are slower than 50 ms, so those RTs alone never trip it; slower traffic does.
fn slow_ratio_demo() -> CircuitBreaker {
    sentinel(20_000, 100, 10)
        .slow_call_ratio(0.6, Duration::from_millis(50))
        .build(Moment::ZERO)
        .unwrap()
}

#[test]
fn sentinel_slow_ratio_demo_rts_of_40_to_60_ms_stay_closed() {
    let breaker = slow_ratio_demo();
    for i in 0..2_000 {
        let rt = Duration::from_millis(40 + i % 20); // 51..=59 ms are slow: 45%
        assert!(breaker.on_success(ms(i * 9), rt).is_none(), "call {i}");
    }
    let stats = breaker.window(ms(17_999));
    assert_eq!(stats.slow_ratio(), Some(0.45));
}

#[test]
fn sentinel_slow_ratio_demo_trips_at_the_100th_request_above_60_percent() {
    let breaker = slow_ratio_demo();
    let slow = Duration::from_millis(55);
    for i in 0..99 {
        assert!(breaker.on_success(ms(i), slow).is_none()); // below minRequestAmount
    }
    let tripped = breaker.on_success(ms(99), slow).unwrap();
    assert_eq!(tripped.cause, Cause::Tripped(Rule::SlowCallRatio));
    assert_eq!(tripped.stats.calls, 100);
    let refused = breaker.try_acquire(ms(100)).unwrap_err();
    assert_eq!(refused.retry_after, Some(Duration::from_millis(9_999)));
}

/// The wiki: after the wait, the next request is a probe; it ends the breaking if its RT is
/// not above the slow RT, and opens the breaker again if it is.
#[test]
fn sentinel_slow_ratio_half_open_probe_recovers_or_reopens() {
    let breaker = slow_ratio_demo();
    for i in 0..100 {
        let _ = breaker.on_success(ms(i), Duration::from_millis(60));
    }
    let _probe = breaker.try_acquire(ms(10_099)).unwrap();
    let reopened = breaker
        .on_success(ms(10_150), Duration::from_millis(51))
        .unwrap();
    assert_eq!(
        (reopened.to, reopened.cause),
        (State::Open, Cause::ProbesFailed(Rule::SlowCallRatio))
    );
    assert!(breaker.try_acquire(ms(20_149)).is_err()); // a whole timeWindow again
    let _probe = breaker.try_acquire(ms(20_150)).unwrap();
    // An error that is fast ends it: the slow-ratio rule judges RT alone.
    let closed = breaker
        .on_error(ms(20_160), Duration::from_millis(50))
        .unwrap();
    assert_eq!(
        (closed.to, closed.cause),
        (State::Closed, Cause::ProbesPassed)
    );
}

/// `ExceptionRatioCircuitBreakerDemo`: open when the error ratio is above 0.5 with at least
/// 50 requests in 30 s, for 10 s. Its traffic fails 45% of the time.
fn error_ratio_demo() -> CircuitBreaker {
    sentinel(30_000, 50, 10)
        .error_ratio(0.5)
        .build(Moment::ZERO)
        .unwrap()
}

#[test]
fn sentinel_error_ratio_demo_45_percent_errors_stay_closed() {
    let breaker = error_ratio_demo();
    for i in 0..3_000 {
        let error = i % 20 >= 11; // the successes of each 20 first, so no prefix reaches 0.5
        assert!(
            breaker
                .on_result(ms(i * 7), Duration::from_millis(8), error)
                .is_none(),
            "call {i}"
        );
    }
}

#[test]
fn sentinel_error_ratio_demo_needs_min_request_amount() {
    let breaker = error_ratio_demo();
    for i in 0..49 {
        assert!(breaker.on_error(ms(i), Duration::from_millis(8)).is_none());
    }
    let tripped = breaker.on_error(ms(49), Duration::from_millis(8)).unwrap();
    assert_eq!(tripped.stats.calls, 50);
    // The errors were in [0, 30 s): at 30 s that interval has gone, and the next window
    // starts afresh.
    assert_eq!(breaker.window(ms(30_000)).calls, 0);
}

/// The wiki: error ratio and error count probes end the breaking when the next request
/// completes without error, and open it again otherwise.
#[test]
fn sentinel_error_ratio_half_open_probe_recovers_or_reopens() {
    let breaker = error_ratio_demo();
    for i in 0..50 {
        let _ = breaker.on_error(ms(i), Duration::from_millis(8));
    }
    let _probe = breaker.try_acquire(ms(10_049)).unwrap();
    assert!(breaker.try_acquire(ms(10_049)).is_err()); // one probe at a time
    let reopened = breaker
        .on_error(ms(10_050), Duration::from_millis(8))
        .unwrap();
    assert_eq!(reopened.cause, Cause::ProbesFailed(Rule::ErrorRatio));
    let _probe = breaker.try_acquire(ms(20_050)).unwrap();
    let closed = breaker
        .on_success(ms(20_051), Duration::from_millis(8))
        .unwrap();
    assert_eq!(closed.to, State::Closed);
}

/// The error-count strategy with Sentinel's defaults (1 s, 5 requests) and the old demo's
/// count of 4: open when more than 4 errors are counted in the interval.
fn error_count_demo() -> CircuitBreaker {
    sentinel(1_000, 5, 10)
        .error_count(4 + 1)
        .build(Moment::ZERO)
        .unwrap()
}

#[test]
fn sentinel_error_count_trips_above_the_count_within_the_stat_interval() {
    let breaker = error_count_demo();
    for i in 0..4 {
        assert!(breaker.on_error(ms(100 + i), Duration::ZERO).is_none());
    }
    assert!(breaker.on_success(ms(200), Duration::ZERO).is_none()); // 4 errors: not above 4
    let tripped = breaker.on_error(ms(300), Duration::ZERO).unwrap();
    assert_eq!(tripped.cause, Cause::Tripped(Rule::ErrorCount));
    assert_eq!(tripped.stats.errors, 5);
}

#[test]
fn sentinel_error_count_does_not_add_up_across_stat_intervals() {
    let breaker = error_count_demo();
    for i in 0..4 {
        assert!(breaker.on_error(ms(900 + i), Duration::ZERO).is_none());
    }
    for i in 0..4 {
        assert!(breaker.on_error(ms(1_000 + i), Duration::ZERO).is_none());
    }
    assert_eq!(breaker.state(ms(1_500)), State::Closed);
}

#[test]
fn sentinel_min_request_amount_defaults_to_5() {
    let breaker = sentinel(1_000, 5, 10)
        .error_ratio(0.5)
        .build(Moment::ZERO)
        .unwrap();
    for i in 0..4 {
        assert!(breaker.on_error(ms(i), Duration::ZERO).is_none());
    }
    assert!(breaker.on_error(ms(4), Duration::ZERO).is_some());
}

/// Sentinel trips only when a ratio is *above* its threshold; resilience4j, and we, trip at
/// it. Half of 10 requests failing trips ours at 0.5 and would not trip Sentinel's.
#[test]
fn sentinel_trips_above_the_threshold_we_trip_at_it() {
    let breaker = sentinel(1_000, 10, 10)
        .error_ratio(0.5)
        .build(Moment::ZERO)
        .unwrap();
    for i in 0..9 {
        let _ = breaker.on_result(ms(i), Duration::ZERO, i % 2 == 0);
    }
    let tripped = breaker.on_success(ms(9), Duration::ZERO).unwrap();
    assert_eq!(tripped.stats.error_ratio(), Some(0.5));
}

/// The wiki's state-change observer prints `CLOSED -> OPEN at <ms>, snapshotValue=<ratio>`:
/// a transition has the same facts.
#[test]
fn sentinel_state_change_observer_has_its_facts() {
    let breaker = error_ratio_demo();
    let tripped = (0..50)
        .find_map(|i| breaker.on_error(ms(1_000 + i), Duration::ZERO))
        .unwrap();
    let line = format!(
        "{} -> {} at {}, snapshotValue={:.2}",
        tripped.from.to_string().to_uppercase(),
        tripped.to.to_string().to_uppercase(),
        tripped.at.as_nanos() / 1_000_000,
        tripped.stats.error_ratio().unwrap(),
    );
    assert_eq!(line, "CLOSED -> OPEN at 1049, snapshotValue=1.00");
}
