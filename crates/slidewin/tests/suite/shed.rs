//! `AdaptiveLimit` at its edges: the builder's bounds, `min` and `max`, a latency exactly at
//! the threshold, the calls in flight at the limit and above it after a cut, a token dropped
//! unreported, the cooldown, time going back, `u64::MAX`-sized times and latencies, the limit
//! left unused, and threads racing for the last place.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use slidewin::Moment;
use slidewin::shed::{
    AdaptiveLimit, AdaptiveLimitBuilder, Cause, Change, MAX_LIMIT, Shed, ShedConfigError,
};

const SLOW: Duration = Duration::from_millis(100);

fn ms(ms: u64) -> Moment {
    Moment::from_millis(ms)
}

/// Slow above 100 ms, from 2 to 50, starting at 10, halved at most once a second.
fn builder() -> AdaptiveLimitBuilder {
    AdaptiveLimit::builder(SLOW)
        .min(2)
        .max(50)
        .initial(10)
        .backoff(0.5)
        .cooldown(Duration::from_secs(1))
}

/// One call admitted and reported at `now`.
fn call(limit: &AdaptiveLimit, now: Moment, latency: Duration, ok: bool) -> Option<Change> {
    limit
        .try_acquire(now)
        .expect("admitted")
        .done(now, latency, ok)
}

#[test]
fn builder_names_the_bound_each_value_broke() {
    let err = |b: AdaptiveLimitBuilder| b.build().unwrap_err();
    assert_eq!(
        err(AdaptiveLimit::builder(Duration::ZERO)),
        ShedConfigError::ZeroThreshold
    );
    assert_eq!(err(builder().min(0)), ShedConfigError::ZeroMin);
    assert_eq!(
        err(builder().max(MAX_LIMIT + 1)),
        ShedConfigError::MaxTooHigh { max: MAX_LIMIT + 1 }
    );
    assert_eq!(
        err(builder().min(51)),
        ShedConfigError::MinAboveMax { min: 51, max: 50 }
    );
    assert_eq!(
        err(builder().initial(1)),
        ShedConfigError::InitialOutOfRange {
            initial: 1,
            min: 2,
            max: 50
        }
    );
    assert_eq!(
        err(builder().initial(51)).to_string(),
        "the initial limit must be from min 2 to max 50, got 51"
    );
    for ratio in [0.49, 1.0, f64::NAN, -0.9] {
        let got = err(builder().backoff(ratio));
        assert!(
            matches!(got, ShedConfigError::BackoffOutOfRange { .. }),
            "{ratio}: {got:?}"
        );
    }
    // The bounds themselves are accepted.
    let edge = AdaptiveLimit::builder(Duration::from_nanos(1))
        .min(MAX_LIMIT)
        .max(MAX_LIMIT);
    assert_eq!(edge.backoff(0.5).build().unwrap().limit(), MAX_LIMIT);
    // The default initial 20 is clamped into a range that excludes it.
    assert_eq!(
        AdaptiveLimit::builder(SLOW)
            .min(30)
            .max(40)
            .build()
            .unwrap()
            .limit(),
        30
    );
}

#[test]
fn a_latency_exactly_at_the_threshold_is_fast() {
    let limit = builder().min(1).initial(2).build().unwrap();
    assert_eq!(call(&limit, ms(0), SLOW, true), None);
    assert_eq!(limit.estimate(), 2.5); // 2 + 1/2
    let change = call(&limit, ms(1), SLOW + Duration::from_nanos(1), true).unwrap();
    assert_eq!((change.from, change.to, change.cause), (2, 1, Cause::Slow));
    assert_eq!(limit.estimate(), 1.25);
}

#[test]
fn sheds_at_the_limit_and_admits_again_once_a_call_ends() {
    let limit = builder().initial(3).build().unwrap();
    let tokens: Vec<_> = (0..3).map(|_| limit.try_acquire(ms(0)).unwrap()).collect();
    assert_eq!(
        limit.try_acquire(ms(0)).unwrap_err(),
        Shed {
            limit: 3,
            in_flight: 3
        }
    );
    let mut tokens = tokens.into_iter();
    let _ = tokens
        .next()
        .unwrap()
        .done(ms(5), Duration::from_millis(5), true);
    assert_eq!(limit.in_flight(), 2);
    let _again = limit.try_acquire(ms(6)).expect("a place came free");
}

#[test]
fn a_dropped_token_is_a_failure_at_its_start() {
    let limit = builder().build().unwrap();
    let token = limit.try_acquire(Moment::from_secs(7)).unwrap();
    drop(token);
    assert_eq!((limit.limit(), limit.in_flight()), (5, 0));
    // The cut dated 7 s: a failure at 7.5 s is within its cooldown, one at 8 s is not.
    assert_eq!(call(&limit, Moment::from_millis(7_500), SLOW, false), None);
    let cut = call(&limit, Moment::from_secs(8), SLOW, false).unwrap();
    assert_eq!(cut.to_string(), "limit 5 -> 2 at 8s: a failed call");
}

#[test]
fn a_cut_below_the_calls_in_flight_sheds_until_enough_end() {
    let limit = builder().build().unwrap();
    let mut tokens: Vec<_> = (0..10).map(|_| limit.try_acquire(ms(0)).unwrap()).collect();
    let cut = tokens
        .pop()
        .unwrap()
        .done(ms(200), Duration::from_millis(200), true)
        .unwrap();
    assert_eq!((cut.from, cut.to, cut.cause), (10, 5, Cause::Slow));
    assert_eq!(
        limit.try_acquire(ms(201)).unwrap_err(),
        Shed {
            limit: 5,
            in_flight: 9
        }
    );
    // Within the cooldown, the calls admitted under 10 end slowly and cut nothing more.
    for token in tokens.drain(..4) {
        assert_eq!(token.done(ms(300), Duration::from_millis(300), true), None);
    }
    assert_eq!(limit.limit(), 5);
    assert_eq!(limit.try_acquire(ms(301)).unwrap_err().in_flight, 5);
    drop(tokens.pop()); // in the cooldown too (at its start, 0 ms)
    assert!(limit.try_acquire(ms(302)).is_ok());
}

#[test]
fn time_going_back_never_cuts_within_the_cooldown() {
    let limit = builder().cooldown(Duration::ZERO).build().unwrap();
    assert!(call(&limit, Moment::from_secs(10), SLOW, false).is_some()); // 10 -> 5
    // Before the last cut: no cut, even with no cooldown.
    assert_eq!(call(&limit, Moment::from_secs(9), SLOW, false), None);
    assert_eq!(limit.limit(), 5);
    // A report before its token's start: the latency given is what counts.
    let token = limit.try_acquire(Moment::from_secs(20)).unwrap();
    assert_eq!(
        token.done(Moment::from_secs(19), Duration::from_millis(1), true),
        None
    );
    assert_eq!(limit.in_flight(), 0);
    assert!(call(&limit, Moment::from_secs(10), SLOW, false).is_some()); // at the last cut
}

#[test]
fn huge_latencies_and_the_end_of_the_timeline() {
    let limit = builder().build().unwrap();
    let cut = call(&limit, Moment::MAX, Duration::MAX, true).unwrap();
    assert_eq!((cut.to, cut.cause, cut.at), (5, Cause::Slow, Moment::MAX));
    // The cooldown saturates at the end: a call at `Moment::MAX` may cut again.
    assert!(call(&limit, Moment::MAX, Duration::MAX, true).is_some());
    assert_eq!(limit.limit(), 2);
    // A cooldown beyond the timeline: the first cut, then none.
    let once = builder().cooldown(Duration::MAX).build().unwrap();
    assert!(call(&once, ms(1), Duration::MAX, true).is_some());
    assert_eq!(
        call(&once, Moment::from_nanos(u64::MAX - 1), Duration::MAX, true),
        None
    );
}

#[test]
fn the_limit_stays_within_min_and_max() {
    let limit = builder().cooldown(Duration::ZERO).build().unwrap();
    let cuts: Vec<_> = (0..6)
        .filter_map(|i| call(&limit, ms(i), SLOW * 2, true))
        .collect();
    let to: Vec<u32> = cuts.iter().map(|c| c.to).collect();
    assert_eq!(to, [5, 2]); // 10, 5, 2.5 -> 2 (min), then 2 stays: no change returned
    assert_eq!(limit.estimate(), 2.0);

    let limit = builder().max(12).build().unwrap();
    let mut changes = Vec::new();
    for i in 0..200 {
        // The limit in use: every place taken, then all reported fast.
        let tokens: Vec<_> = (0..limit.limit())
            .map(|_| limit.try_acquire(ms(i)).unwrap())
            .collect();
        changes.extend(tokens.into_iter().filter_map(|t| t.done(ms(i), SLOW, true)));
    }
    let to: Vec<u32> = changes.iter().map(|c| c.to).collect();
    assert_eq!(to, [11, 12]);
    assert_eq!(limit.estimate(), 12.0);
}

#[test]
fn an_unused_limit_stops_growing_at_twice_the_calls_in_flight() {
    let limit = builder().min(1).initial(1).build().unwrap();
    for i in 0..1_000 {
        let _ = call(&limit, ms(i), Duration::from_millis(1), true);
    }
    // One call at a time: 1, 2, 2.5, 2.9, 3.24..., then 2 * 1 < 3 keeps it there.
    assert_eq!(limit.limit(), 3);
}

#[test]
fn racing_threads_never_pass_the_limit() {
    const THREADS: usize = 8;
    let limit = Arc::new(builder().initial(3).build().unwrap());
    let barrier = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (limit, barrier) = (Arc::clone(&limit), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                let token = AdaptiveLimit::try_acquire_owned(Arc::clone(&limit), ms(0)).ok();
                barrier.wait(); // every thread has tried before any reports
                token
                    .map(|t| t.done(ms(1), Duration::from_millis(1), true))
                    .is_some()
            })
        })
        .collect();
    let admitted: usize = threads
        .into_iter()
        .map(|h| usize::from(h.join().unwrap()))
        .sum();
    assert_eq!(admitted, 3);
    assert_eq!(limit.in_flight(), 0);
}
