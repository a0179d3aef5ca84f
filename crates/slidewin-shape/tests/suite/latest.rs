//! `Latest` (restart coordination) and `SequenceGuard`: exact counts of what a newer call
//! cancels, and stale results discarded for work that ignores cancellation.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use slidewin_shape::{Cancelled, Event, Latest, Outcome, Runtime, SequenceGuard};
use support::{Probe, drain};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test(start_paused = true)]
async fn each_newer_call_cancels_the_one_in_flight() {
    // Five calls 10 ms apart, each taking 100 ms: four are aborted while they run, the last
    // completes; each aborted future is dropped where it stood.
    let rt = Runtime::new(8).unwrap();
    let mut events = rt.subscribe();
    let latest = Latest::new(&rt);
    let probes: Vec<Probe> = (0..5).map(|_| Probe::new()).collect();
    let mut tasks = Vec::new();
    for (n, probe) in (0u32..).zip(&probes) {
        let guard = probe.future(); // dropped with the task: counts the drop
        tasks.push(latest.call("search", async move {
            let _guard = guard;
            tokio::time::sleep(ms(100)).await;
            n
        }));
        tokio::time::sleep(ms(10)).await;
    }
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await);
    }
    assert_eq!(
        results,
        [
            Err(Cancelled),
            Err(Cancelled),
            Err(Cancelled),
            Err(Cancelled),
            Ok(4)
        ]
    );
    let drops: Vec<_> = probes.iter().map(|p| p.counts()).collect();
    assert_eq!(drops, [(0, 1); 5]);
    let outcomes: Vec<Outcome> = drain(&mut events)
        .into_iter()
        .filter_map(|e| match e {
            Event::TaskFinished { outcome, .. } => Some(outcome),
            _ => None,
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Aborted,
            Outcome::Aborted,
            Outcome::Aborted,
            Outcome::Aborted,
            Outcome::Completed
        ]
    );
    assert!(
        latest.is_empty(),
        "a key is held only while its call is in flight"
    );
}

#[tokio::test(start_paused = true)]
async fn a_queued_older_call_is_cancelled_before_it_starts() {
    let rt = Runtime::new(1).unwrap();
    let blocker = rt.run(async { tokio::time::sleep(ms(50)).await });
    let latest = Latest::new(&rt);
    let probe = Probe::new();
    let old = latest.call("k", probe.future());
    let new = latest.call("k", async { 2 });
    assert_eq!((old.await, new.await), (Err(Cancelled), Ok(2)));
    assert_eq!(probe.counts(), (0, 1), "never polled");
    blocker.await.unwrap();
    assert_eq!(rt.inspect().registered, 3);
}

#[tokio::test(start_paused = true)]
async fn keys_do_not_cancel_each_other_and_cancel_works_per_key() {
    let rt = Runtime::new(4).unwrap();
    let latest = Latest::new(&rt);
    let a = latest.call(1, async {
        tokio::time::sleep(ms(10)).await;
        'a'
    });
    let b = latest.call(2, std::future::pending::<char>());
    assert_eq!(latest.len(), 2);
    assert!(latest.cancel(&2));
    assert!(!latest.cancel(&3));
    assert_eq!((a.await, b.await), (Ok('a'), Err(Cancelled)));
    tokio::task::yield_now().await;
    assert!(latest.is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_guard_discards_stale_results_of_work_that_ignores_cancellation() {
    // The work runs on its own task and posts its result whatever happens to the call that
    // started it (it ignores cancellation). "ru" is slow, "rust" fast: "ru"'s result comes
    // back after "rust"'s was shown and must not replace it.
    let rt = Runtime::new(4).unwrap();
    let latest = Latest::new(&rt);
    let guard = Arc::new(SequenceGuard::new());
    let (results, mut inbox) = tokio::sync::mpsc::unbounded_channel();
    for (query, took) in [("ru", 300), ("rust", 100)] {
        let ticket = guard.issue();
        let results = results.clone();
        drop(latest.call("box", async move {
            let work = tokio::spawn(async move {
                tokio::time::sleep(ms(took)).await;
                let _ = results.send((ticket, query));
            });
            let _ = work.await;
        }));
        tokio::time::sleep(ms(10)).await;
    }
    drop(results);
    let mut shown = Vec::new();
    let mut discarded = Vec::new();
    while let Some((ticket, query)) = inbox.recv().await {
        if guard.accept(ticket) {
            shown.push(query);
        } else {
            discarded.push(query);
        }
    }
    assert_eq!((shown, discarded), (vec!["rust"], vec!["ru"]));
}

#[test]
fn sequence_guard_accepts_only_newer_tickets_across_threads() {
    let guard = Arc::new(SequenceGuard::new());
    let tickets: Vec<_> = (0..1_000).map(|_| guard.issue()).collect();
    assert!(tickets.windows(2).all(|w| w[0] < w[1]));
    // Accepting from several threads at once: the newest accepted only moves forward, and the
    // very last ticket is accepted exactly once.
    let accepted: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let (guard, tickets) = (Arc::clone(&guard), &tickets);
                s.spawn(move || {
                    tickets
                        .iter()
                        .skip(i)
                        .step_by(4)
                        .filter(|&&t| guard.accept(t))
                        .count()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert!(accepted >= 1);
    assert_eq!(guard.newest_accepted(), tickets.last().copied());
    assert!(!guard.accept(tickets[999]));
    assert!(guard.is_latest(tickets[999]));
}
