//! `until_ready` and `until_key_ready` under paused time, exact to the millisecond: each
//! algorithm's wait, costs that can never be admitted, waiters racing for one slot, a waiter
//! dropped on a timeout consuming nothing, keys waiting independently, rule sets, and the
//! keyed cap.

use std::sync::Arc;
use std::time::Duration;

use slidewin::limit::{
    FixedWindow, Gcra, Kind, LimitError, Rule, RuleSet, SlidingCounter, SlidingLog,
};
use slidewin::{Clock, Keyed, Moment, SharedLimiter};
use slidewin_shape::{TokioClock, UntilKeyReady, UntilReady};
use tokio::time::Instant;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Milliseconds since `start`, on tokio's (paused) clock.
fn elapsed_ms(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap()
}

#[tokio::test(start_paused = true)]
async fn the_clock_reads_tokio_s_paused_time_exactly() {
    let clock = TokioClock::new();
    assert_eq!(clock.now(), Moment::ZERO);
    tokio::time::advance(Duration::from_nanos(1_234_567)).await;
    assert_eq!(clock.now(), Moment::from_nanos(1_234_567));
    let later = TokioClock::with_origin(Instant::now() + ms(5));
    assert_eq!(
        later.now(),
        Moment::ZERO,
        "before its origin: zero, not a panic"
    );
    assert_eq!(
        clock.instant(Moment::from_millis(7)),
        Some(clock.origin() + ms(7))
    );
}

#[tokio::test(start_paused = true)]
async fn each_algorithm_admits_at_the_moment_it_said() {
    let clock = TokioClock::new();
    let start = Instant::now();
    // 2 per second: two at once, the third when the window allows it.
    let log = SharedLimiter::new(SlidingLog::new("2/s".parse().unwrap()).unwrap());
    let gcra = SharedLimiter::new(Gcra::new("2/s".parse().unwrap()).unwrap());
    let fixed = SharedLimiter::new(FixedWindow::new("2/s".parse().unwrap()).unwrap());
    for _ in 0..2 {
        log.until_ready(&clock, 1).await.unwrap();
        gcra.until_ready(&clock, 1).await.unwrap();
        fixed.until_ready(&clock, 1).await.unwrap();
    }
    assert_eq!(elapsed_ms(start), 0);
    tokio::time::advance(ms(100)).await;

    let base = Instant::now();
    let d = gcra.until_ready(&clock, 1).await.unwrap();
    assert!(d.allowed());
    assert_eq!(elapsed_ms(base), 400, "GCRA: one each 500 ms, from 0");

    let base = Instant::now();
    log.until_ready(&clock, 1).await.unwrap();
    assert_eq!(
        elapsed_ms(base),
        500,
        "the log: when the first stamp leaves, at 1 s"
    );

    let base = Instant::now();
    fixed.until_ready(&clock, 2).await.unwrap();
    assert_eq!(
        elapsed_ms(start),
        1_000,
        "fixed window: the next window, at 1 s"
    );
    assert_eq!(elapsed_ms(base), 0, "the log's wait reached it already");
}

#[tokio::test(start_paused = true)]
async fn the_sliding_counter_waits_for_its_estimate() {
    let clock = TokioClock::new();
    let limiter = SharedLimiter::new(SlidingCounter::new("10/s".parse().unwrap()).unwrap());
    let start = Instant::now();
    limiter.until_ready(&clock, 10).await.unwrap();
    // The next window weighs the previous 10 by (1 s - elapsed) / 1 s: 9 once 100 ms of it
    // have passed, and then 1 more fits.
    let d = limiter.until_ready(&clock, 1).await.unwrap();
    assert!(d.allowed());
    assert_eq!(elapsed_ms(start), 1_100);
    assert!(!limiter.check_now(&clock, 10).unwrap().allowed());
}

#[tokio::test(start_paused = true)]
async fn a_cost_that_can_never_be_admitted_is_an_error_at_once() {
    let clock = TokioClock::new();
    let start = Instant::now();
    let limiter = SharedLimiter::new(Gcra::new("5/s burst 3".parse().unwrap()).unwrap());
    assert_eq!(
        limiter.until_ready(&clock, 4).await.unwrap_err(),
        LimitError::CostTooHigh { cost: 4, max: 3 }
    );
    let keyed = Keyed::<u8, _>::new(SlidingLog::new("5/s".parse().unwrap()).unwrap());
    assert_eq!(
        keyed.until_key_ready(&1, &clock, 6).await.unwrap_err(),
        LimitError::CostTooHigh { cost: 6, max: 5 }
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_dropped_on_a_timeout_consumes_nothing() {
    let clock = TokioClock::new();
    let limiter = SharedLimiter::new(Gcra::new("4/s burst 1".parse().unwrap()).unwrap());
    limiter.until_ready(&clock, 1).await.unwrap();
    let timed_out = tokio::time::timeout(ms(100), limiter.until_ready(&clock, 1)).await;
    assert!(timed_out.is_err());
    // The slot at 250 ms is still there: the dropped waiter took nothing.
    let start = Instant::now();
    limiter.until_ready(&clock, 1).await.unwrap();
    assert_eq!(elapsed_ms(start), 150);
}

#[tokio::test(start_paused = true)]
async fn waiters_racing_for_one_slot_are_admitted_one_per_slot() {
    let clock = TokioClock::new();
    let limiter = Arc::new(SharedLimiter::new(
        Gcra::new("1/s".parse().unwrap()).unwrap(),
    ));
    let start = Instant::now();
    limiter.until_ready(&clock, 1).await.unwrap();
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let limiter = Arc::clone(&limiter);
            tokio::spawn(async move {
                limiter.until_ready(&clock, 1).await.unwrap();
                elapsed_ms(start)
            })
        })
        .collect();
    let mut admitted = Vec::new();
    for waiter in waiters {
        admitted.push(waiter.await.unwrap());
    }
    admitted.sort_unstable();
    assert_eq!(admitted, [1_000, 2_000, 3_000]);
}

#[tokio::test(start_paused = true)]
async fn keys_wait_independently() {
    let clock = TokioClock::new();
    let limiter = Arc::new(Keyed::<String, _>::new(
        SlidingLog::new("1 per 300ms".parse().unwrap()).unwrap(),
    ));
    let start = Instant::now();
    limiter.until_key_ready("a", &clock, 1).await.unwrap();
    tokio::time::advance(ms(100)).await;
    limiter.until_key_ready("b", &clock, 1).await.unwrap();
    let (a, b) = tokio::join!(
        async {
            limiter.until_key_ready("a", &clock, 1).await.unwrap();
            elapsed_ms(start)
        },
        async {
            limiter.until_key_ready("b", &clock, 1).await.unwrap();
            elapsed_ms(start)
        },
    );
    assert_eq!((a, b), (300, 400));
}

#[tokio::test(start_paused = true)]
async fn a_rule_set_waits_for_its_binding_rule_and_answers_every_rule() {
    let clock = TokioClock::new();
    let login = Keyed::<String, _>::new(
        RuleSet::new([
            Rule::new("second", Kind::Gcra, "2/s".parse().unwrap()).unwrap(),
            Rule::new("minute", Kind::SlidingLog, "3/minute".parse().unwrap()).unwrap(),
        ])
        .unwrap(),
    );
    let start = Instant::now();
    let mut at = Vec::new();
    for _ in 0..4 {
        let decisions = login.until_key_ready("ann", &clock, 1).await.unwrap();
        assert!(decisions.allowed());
        assert_eq!(decisions.as_slice().len(), 2);
        at.push(elapsed_ms(start));
    }
    // GCRA 2/s (burst 2): two at once, then one each 500 ms; the fourth waits for the
    // minute's first stamps to leave.
    assert_eq!(at, [0, 0, 500, 60_000]);
}

#[tokio::test(start_paused = true)]
async fn a_new_key_at_the_cap_is_an_error_at_once() {
    let clock = TokioClock::new();
    let limiter = Keyed::<u8, _>::new(SlidingLog::new("1/minute".parse().unwrap()).unwrap())
        .with_max_keys(1)
        .unwrap();
    limiter.until_key_ready(&1, &clock, 1).await.unwrap();
    let start = Instant::now();
    assert_eq!(
        limiter.until_key_ready(&2, &clock, 1).await.unwrap_err(),
        LimitError::KeysFull { cap: 1 }
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
}
