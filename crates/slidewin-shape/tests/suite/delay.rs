//! `delay`: runs after exactly its duration, and a cancelled delay never runs and never
//! registers a task.

use crate::support;

use std::time::Duration;

use slidewin_shape::{Cancelled, Runtime, delay};
use support::{Log, Probe, drain};
use tokio_util::sync::CancellationToken;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test(start_paused = true)]
async fn runs_after_exactly_its_duration() {
    let rt = Runtime::new(1).unwrap();
    let log = Log::new();
    let answer = delay(&rt, ms(800), CancellationToken::new(), log.job(1));
    assert_eq!(answer.await, Ok(1));
    assert_eq!(log.runs(), [(1, 800)]);
}

#[tokio::test(start_paused = true)]
async fn cancelled_before_it_fires_never_runs_and_registers_no_task() {
    let rt = Runtime::new(1).unwrap();
    let mut events = rt.subscribe();
    let token = CancellationToken::new();
    let probe = Probe::new();
    let log = Log::new();
    let answer = delay(&rt, ms(800), token.clone(), probe.future());
    log.at(799).await;
    token.cancel();
    assert_eq!(answer.await, Err(Cancelled));
    log.at(2_000).await;
    assert_eq!(probe.counts(), (0, 1), "dropped, never polled");
    assert_eq!(rt.inspect().registered, 0);
    assert!(drain(&mut events).is_empty(), "not even TaskRegistered");
}

#[tokio::test(start_paused = true)]
async fn cancelled_after_it_fired_changes_nothing() {
    let rt = Runtime::new(1).unwrap();
    let token = CancellationToken::new();
    let log = Log::new();
    let answer = delay(&rt, ms(100), token.clone(), log.job(1));
    log.at(101).await;
    token.cancel();
    assert_eq!(answer.await, Ok(1));
    assert_eq!(log.runs(), [(1, 100)]);
}

#[tokio::test(start_paused = true)]
async fn an_already_cancelled_token_answers_at_once() {
    let rt = Runtime::new(1).unwrap();
    let token = CancellationToken::new();
    token.cancel();
    let probe = Probe::new();
    assert_eq!(
        delay(&rt, ms(5), token, probe.future()).await,
        Err(Cancelled)
    );
    assert_eq!(probe.counts(), (0, 1));
}

#[tokio::test(start_paused = true)]
async fn registered_at_the_call_not_at_the_first_poll_and_zero_runs_at_once() {
    let rt = Runtime::new(1).unwrap();
    let log = Log::new();
    let later = delay(&rt, ms(100), CancellationToken::new(), log.job(1));
    let now = delay(&rt, Duration::ZERO, CancellationToken::new(), log.job(0));
    log.at(300).await; // not awaited until long after
    assert_eq!((now.await, later.await), (Ok(0), Ok(1)));
    assert_eq!(log.runs(), [(0, 0), (1, 100)]);
}

#[tokio::test(start_paused = true)]
async fn a_delay_past_the_end_of_the_clock_waits_for_its_token() {
    let rt = Runtime::new(1).unwrap();
    let token = CancellationToken::new();
    let answer = delay(&rt, Duration::MAX, token.clone(), async { 1 });
    tokio::time::sleep(Duration::from_secs(86_400 * 365)).await;
    token.cancel();
    assert_eq!(answer.await, Err(Cancelled));
}
