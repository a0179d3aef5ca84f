//! The Runtime: the concurrency cap with exact counts and times under paused time, the order
//! of its events, aborts, panics, and bad configuration.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use slidewin_shape::{Cancelled, Event, Outcome, Runtime, ShapeConfigError, Stats};
use support::{Log, drain};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test(start_paused = true)]
async fn at_most_concurrency_tasks_run_at_once_in_registration_order() {
    // 10 tasks of 100 ms on 3 slots: they start in threes at 0, 100, 200 and the last at 300;
    // never more than 3 run, and every slot is used.
    let rt = Runtime::new(3).unwrap();
    let log = Log::new();
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..10)
        .map(|n| {
            let (job, running, most) = (log.job(n), Arc::clone(&running), Arc::clone(&most));
            rt.run(async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                job.await;
                tokio::time::sleep(ms(100)).await;
                running.fetch_sub(1, Ordering::SeqCst);
            })
        })
        .collect();
    assert_eq!(
        rt.inspect(),
        Stats {
            registered: 10,
            queued: 10,
            running: 0,
            finished: 0
        }
    );
    tokio::task::yield_now().await;
    assert_eq!(
        rt.inspect(),
        Stats {
            registered: 10,
            queued: 7,
            running: 3,
            finished: 0
        }
    );
    log.at(150).await;
    assert_eq!(
        rt.inspect(),
        Stats {
            registered: 10,
            queued: 4,
            running: 3,
            finished: 3
        }
    );
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(most.load(Ordering::SeqCst), 3);
    let starts: Vec<(u32, u64)> = log.runs();
    let expected: Vec<(u32, u64)> = (0..10).map(|n| (n, u64::from(n / 3) * 100)).collect();
    assert_eq!(starts, expected);
    assert_eq!(
        rt.inspect(),
        Stats {
            registered: 10,
            queued: 0,
            running: 0,
            finished: 10
        }
    );
}

#[tokio::test(start_paused = true)]
async fn events_tell_each_task_s_life_in_order() {
    let rt = Runtime::new(1).unwrap();
    let mut events = rt.subscribe();
    let a = rt.run(async { tokio::time::sleep(ms(10)).await });
    let b = rt.run(async {});
    let (ia, ib) = (a.id(), b.id());
    a.await.unwrap();
    b.await.unwrap();
    assert_eq!(
        drain(&mut events),
        [
            Event::TaskRegistered { id: ia },
            Event::TaskRegistered { id: ib },
            Event::TaskStarted { id: ia },
            Event::TaskFinished {
                id: ia,
                outcome: Outcome::Completed
            },
            Event::TaskStarted { id: ib },
            Event::TaskFinished {
                id: ib,
                outcome: Outcome::Completed
            },
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn an_aborted_queued_task_never_starts_and_frees_nothing_it_did_not_hold() {
    let rt = Runtime::new(1).unwrap();
    let mut events = rt.subscribe();
    let busy = rt.run(async { tokio::time::sleep(ms(10)).await });
    let queued = rt.run(async { unreachable!("aborted before it started") });
    let id = queued.id();
    queued.abort();
    assert_eq!(queued.await, Err(Cancelled));
    busy.await.unwrap();
    assert_eq!(
        rt.inspect(),
        Stats {
            registered: 2,
            queued: 0,
            running: 0,
            finished: 2
        }
    );
    let got = drain(&mut events);
    assert!(!got.contains(&Event::TaskStarted { id }));
    assert!(got.contains(&Event::TaskFinished {
        id,
        outcome: Outcome::Aborted
    }));
}

#[tokio::test(start_paused = true)]
async fn an_aborted_running_task_gives_its_slot_back() {
    let rt = Runtime::new(1).unwrap();
    let stuck = rt.run(std::future::pending::<()>());
    let next = rt.run(async { 2 });
    tokio::task::yield_now().await;
    assert_eq!((rt.inspect().running, rt.inspect().queued), (1, 1));
    stuck.abort();
    assert_eq!(next.await, Ok(2));
    assert_eq!(stuck.await, Err(Cancelled));
}

#[tokio::test(start_paused = true)]
async fn a_dropped_task_still_runs() {
    let rt = Runtime::new(1).unwrap();
    let log = Log::new();
    drop(rt.run(log.job(3)));
    tokio::task::yield_now().await;
    assert_eq!(log.runs(), [(3, 0)]);
}

#[tokio::test(start_paused = true)]
async fn a_lagging_subscriber_counts_what_it_missed() {
    let rt = Runtime::with_event_capacity(4, 4).unwrap();
    let mut events = rt.subscribe();
    for _ in 0..6 {
        drop(rt.run(async {}));
    }
    let got = drain(&mut events);
    assert_eq!(got.len(), 4);
    assert_eq!(events.missed(), 2);
}

#[tokio::test]
async fn bad_configuration_is_an_error_naming_the_value() {
    assert_eq!(
        Runtime::new(0).unwrap_err(),
        ShapeConfigError::ZeroConcurrency
    );
    assert_eq!(
        Runtime::new(0).unwrap_err().to_string(),
        "the concurrency must be at least 1, got 0"
    );
    let too_many = usize::MAX;
    let err = Runtime::new(too_many).unwrap_err();
    assert!(
        matches!(err, ShapeConfigError::ConcurrencyTooHigh { concurrency, .. } if concurrency == too_many)
    );
    assert!(err.to_string().ends_with(&format!("got {too_many}")));
    assert_eq!(
        Runtime::with_event_capacity(1, 0).unwrap_err(),
        ShapeConfigError::EventCapacity { capacity: 0 }
    );
}

#[test]
fn new_outside_tokio_is_an_error_not_a_panic() {
    let err = Runtime::new(1).unwrap_err();
    assert_eq!(err, ShapeConfigError::NoTokioRuntime);
    assert!(err.to_string().contains("Runtime::with_handle"));
}
