//! The Debouncer and Throttler under paused time, exact to the millisecond: the scenarios
//! of debounce and throttle and the events they leave, the per-key operations, the
//! regressions named after lodash's bugs, and the answers each call gets.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use slidewin_shape::{
    Cancelled, DebounceOptions, Debouncer, Edge, Event, Outcome, Runtime, ShapeConfigError,
    ThrottleOptions, Throttler,
};
use support::{Log, Probe, block_runtime_for, drain, script};

const C: Result<u32, Cancelled> = Err(Cancelled);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn debouncer(rt: &Runtime, opts: DebounceOptions) -> Debouncer<&'static str, u32> {
    Debouncer::with_options(rt, opts).unwrap()
}

fn label(key: &str) -> Arc<str> {
    format!("{key:?}").into()
}

// ---- the scenarios, exact under paused time ----

const FIVE_CALLS: [u64; 5] = [0, 10, 20, 30, 40];

#[tokio::test(start_paused = true)]
async fn five_calls_60ms_trailing_only() {
    let rt = Runtime::new(4).unwrap();
    let d = debouncer(&rt, DebounceOptions::new(ms(60)));
    let log = Log::new();
    let answers = script(&log, &FIVE_CALLS, 200, |n| d.call("k", log.job(n))).await;
    assert_eq!(answers, [C, C, C, C, Ok(4)]);
    assert_eq!(log.runs(), [(4, 100)]); // 60 ms after the last call
}

#[tokio::test(start_paused = true)]
async fn five_calls_60ms_leading_only() {
    let rt = Runtime::new(4).unwrap();
    let d = debouncer(
        &rt,
        DebounceOptions::new(ms(60)).leading(true).trailing(false),
    );
    let log = Log::new();
    let answers = script(&log, &FIVE_CALLS, 200, |n| d.call("k", log.job(n))).await;
    assert_eq!(answers, [Ok(0), C, C, C, C]);
    assert_eq!(log.runs(), [(0, 0)]);
}

#[tokio::test(start_paused = true)]
async fn five_calls_60ms_leading_and_trailing() {
    let rt = Runtime::new(4).unwrap();
    let d = debouncer(&rt, DebounceOptions::new(ms(60)).leading(true));
    let log = Log::new();
    let answers = script(&log, &FIVE_CALLS, 200, |n| d.call("k", log.job(n))).await;
    assert_eq!(answers, [Ok(0), C, C, C, Ok(4)]);
    assert_eq!(log.runs(), [(0, 0), (4, 100)]);
}

#[tokio::test(start_paused = true)]
async fn throttle_nine_calls_10ms_apart_40ms_runs_exactly_four() {
    // On real time this is only bounded (3 to 9 runs). Paused: the leading
    // call at 0; at 40 the window closes before the call made at 40, and runs the call of 30;
    // the call at 40 opens the next window, which closes at 80 with the call of 70; the call
    // at 80 opens the last, closed at 120.
    let rt = Runtime::new(4).unwrap();
    let t: Throttler<&str, u32> = Throttler::new(&rt, ms(40)).unwrap();
    let log = Log::new();
    let times: Vec<u64> = (0..9).map(|i| i * 10).collect();
    let answers = script(&log, &times, 300, |n| t.call("k", log.job(n))).await;
    assert_eq!(answers, [Ok(0), C, C, Ok(3), C, C, C, Ok(7), Ok(8)]);
    assert_eq!(log.runs(), [(0, 0), (3, 40), (7, 80), (8, 120)]);
    assert_eq!(rt.inspect().registered, 4);
}

// ---- the events: what merged calls leave behind ----

#[tokio::test(start_paused = true)]
async fn five_same_key_calls_register_one_task_one_armed_four_replaced() {
    let rt = Runtime::new(4).unwrap();
    let mut events = rt.subscribe();
    let d = debouncer(&rt, DebounceOptions::new(ms(60)));
    let log = Log::new();
    script(&log, &FIVE_CALLS, 200, |n| d.call("search", log.job(n))).await;
    assert_eq!(rt.inspect().registered, 1);
    let key = label("search");
    let id = rt.run(async {}).id(); // the next id tells the first
    let first = match drain(&mut events).as_slice() {
        [
            Event::Armed { key: k1 },
            Event::Replaced { key: k2 },
            Event::Replaced { .. },
            Event::Replaced { .. },
            Event::Replaced { .. },
            Event::Fired {
                key: k3,
                edge: Edge::Trailing,
                id: fired,
            },
            Event::TaskRegistered { id: registered },
            Event::TaskStarted { id: started },
            Event::TaskFinished {
                id: finished,
                outcome: Outcome::Completed,
            },
            Event::TaskRegistered { .. }, // the probe task above
        ] => {
            assert_eq!((k1, k2, k3), (&key, &key, &key));
            assert_eq!([registered, started, finished], [fired; 3]);
            *fired
        }
        other => panic!("unexpected events: {other:#?}"),
    };
    assert_eq!(first.get() + 1, id.get());
}

#[tokio::test(start_paused = true)]
async fn a_leading_run_is_visible_as_fired_and_is_not_armed() {
    // A leading-edge run is not armed first: it is `Fired` at once.
    let rt = Runtime::new(4).unwrap();
    let mut events = rt.subscribe();
    let d = debouncer(&rt, DebounceOptions::new(ms(60)).leading(true));
    let _first = d.call("k", async { 1 });
    let _second = d.call("k", async { 2 });
    let got = drain(&mut events);
    assert!(
        matches!(
            got.as_slice(),
            [
                Event::Fired { edge: Edge::Leading, id, .. },
                Event::TaskRegistered { id: registered },
                Event::Armed { .. },
            ] if id == registered
        ),
        "{got:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn calls_merged_away_never_take_a_slot_or_appear_in_the_runtime() {
    let rt = Runtime::new(1).unwrap();
    let d = debouncer(&rt, DebounceOptions::new(ms(60)));
    let probes: Vec<Probe> = (0..5).map(|_| Probe::new()).collect();
    let answers: Vec<_> = probes.iter().map(|p| d.call("k", p.future())).collect();
    assert_eq!(rt.inspect().registered, 0);
    // The four replaced futures are dropped unpolled at once; the last waits for its window.
    let counts: Vec<_> = probes.iter().map(Probe::counts).collect();
    assert_eq!(counts, [(0, 1), (0, 1), (0, 1), (0, 1), (0, 0)]);
    let mut results = Vec::new();
    for answer in answers {
        results.push(answer.await);
    }
    assert_eq!(results, [C, C, C, C, Ok(1)]);
    assert_eq!(probes[4].counts(), (1, 1));
    let stats = rt.inspect();
    assert_eq!((stats.registered, stats.finished), (1, 1));
}

// ---- lodash's behaviour, at its edges ----

#[tokio::test(start_paused = true)]
async fn leading_and_trailing_with_a_single_call_runs_once() {
    let rt = Runtime::new(4).unwrap();
    let d = debouncer(&rt, DebounceOptions::new(ms(60)).leading(true));
    let log = Log::new();
    let answers = script(&log, &[0], 500, |n| d.call("k", log.job(n))).await;
    assert_eq!(answers, [Ok(0)]);
    assert_eq!(log.runs(), [(0, 0)]);
}

#[tokio::test(start_paused = true)]
async fn a_call_exactly_wait_after_the_last_starts_a_new_window() {
    // The timer due at 60 is handled before the call made at 60: call 0 runs at 60, and call 1
    // waits for its own window.
    let rt = Runtime::new(4).unwrap();
    let d = debouncer(&rt, DebounceOptions::new(ms(60)));
    let log = Log::new();
    let answers = script(&log, &[0, 60], 500, |n| d.call("k", log.job(n))).await;
    assert_eq!(answers, [Ok(0), Ok(1)]);
    assert_eq!(log.runs(), [(0, 60), (1, 120)]);
}

#[tokio::test(start_paused = true)]
async fn max_wait_forces_a_run_while_calls_never_stop() {
    // A call every 20 ms for 300 ms, wait 50, max_wait 100: without max_wait nothing would run
    // until 50 ms after the last call (330).
    let rt = Runtime::new(4).unwrap();
    let d = debouncer(&rt, DebounceOptions::new(ms(50)).max_wait(ms(100)));
    let log = Log::new();
    let times: Vec<u64> = (0..16).map(|i| i * 20).collect();
    script(&log, &times, 1_000, |n| d.call("k", log.job(n))).await;
    let at: Vec<u64> = log.runs().iter().map(|&(_, t)| t).collect();
    assert_eq!(at, [100, 200, 300, 350]);
    assert!(at.windows(2).all(|w| w[1] - w[0] <= 100));
}

#[tokio::test(start_paused = true)]
async fn keys_are_independent() {
    let rt = Runtime::new(4).unwrap();
    let d: Debouncer<u8, u32> = Debouncer::new(&rt, ms(60)).unwrap();
    let log = Log::new();
    let a = d.call(1, log.job(10));
    log.at(30).await;
    let b = d.call(2, log.job(20));
    let a2 = d.call(1, log.job(11));
    assert_eq!((a.await, b.await, a2.await), (C, Ok(20), Ok(11)));
    assert_eq!(log.runs(), [(20, 90), (11, 90)]);
}

// ---- per key: flush, cancel, pending ----

#[tokio::test(start_paused = true)]
async fn flush_runs_the_buffered_call_now_and_only_that_key() {
    let rt = Runtime::new(4).unwrap();
    let mut events = rt.subscribe();
    let d = debouncer(&rt, DebounceOptions::new(ms(1_000)));
    let log = Log::new();
    let a = d.call("a", log.job(1));
    let b = d.call("b", log.job(2));
    log.at(10).await;
    assert!(d.flush(&"a"));
    assert!(!d.flush(&"a"), "nothing left to flush");
    assert!(!d.flush(&"missing"));
    assert_eq!((a.await, b.await), (Ok(1), Ok(2)));
    assert_eq!(log.runs(), [(1, 10), (2, 1_000)]);
    let fired: Vec<Edge> = drain(&mut events)
        .into_iter()
        .filter_map(|e| match e {
            Event::Fired { edge, .. } => Some(edge),
            _ => None,
        })
        .collect();
    assert_eq!(fired, [Edge::Flush, Edge::Trailing]);
}

#[tokio::test(start_paused = true)]
async fn lodash_pr4656_flush_leaves_no_timer() {
    // Throttle, trailing only, 100 ms. Call at 0, flush at 0 (it runs), call at 50. Lodash's
    // flush leaves the timer of the first window running: due at 100, it sees 100 ms since the
    // last run and runs the call of 50 at 100. Here flush stops it: the call at 50 opens a
    // window of its own and runs at 150.
    let rt = Runtime::new(4).unwrap();
    let t: Throttler<&str, u32> =
        Throttler::with_options(&rt, ThrottleOptions::new(ms(100)).leading(false)).unwrap();
    let log = Log::new();
    let first = t.call("k", log.job(0));
    assert!(t.flush(&"k"));
    assert!(!t.pending(&"k"));
    log.at(50).await;
    let second = t.call("k", log.job(1));
    log.at(100).await;
    assert!(t.pending(&"k"), "nothing ran at 100");
    assert_eq!((first.await, second.await), (Ok(0), Ok(1)));
    assert_eq!(log.runs(), [(0, 0), (1, 150)]);
    log.at(151).await;
    assert!(t.is_empty(), "the key is freed when it goes quiet");
}

#[tokio::test(start_paused = true)]
async fn cancel_answers_cancelled_and_forgets_the_key() {
    let rt = Runtime::new(4).unwrap();
    let mut events = rt.subscribe();
    let d = debouncer(&rt, DebounceOptions::new(ms(60)).leading(true));
    let log = Log::new();
    let first = d.call("k", log.job(0)); // leading: runs
    let second = d.call("k", log.job(1)); // buffered
    assert!(d.pending(&"k"));
    assert!(d.cancel(&"k"));
    assert!(!d.pending(&"k"));
    assert!(d.is_empty());
    assert!(!d.cancel(&"k"));
    // Forgotten: the next call is a leading call again, though it is inside the old window.
    log.at(10).await;
    let third = d.call("k", log.job(2));
    assert_eq!((first.await, second.await, third.await), (Ok(0), C, Ok(2)));
    assert_eq!(log.runs(), [(0, 0), (2, 10)]);
    let cancelled = drain(&mut events)
        .iter()
        .filter(|e| matches!(e, Event::Cancelled { .. }))
        .count();
    assert_eq!(cancelled, 1);
}

#[tokio::test(start_paused = true)]
async fn pending_follows_the_window() {
    let rt = Runtime::new(4).unwrap();
    let d = debouncer(&rt, DebounceOptions::new(ms(60)).leading(true));
    assert!(!d.pending(&"k"));
    let _a = d.call("k", async { 0 });
    assert!(!d.pending(&"k"), "the leading call ran; nothing waits");
    let _b = d.call("k", async { 1 });
    assert!(d.pending(&"k"));
    tokio::time::sleep(ms(59)).await;
    assert!(d.pending(&"k"));
    tokio::time::sleep(ms(1)).await;
    assert!(!d.pending(&"k"), "ran at 60");
}

#[tokio::test(start_paused = true)]
async fn a_call_inside_a_leading_only_window_is_cancelled_at_once() {
    let rt = Runtime::new(4).unwrap();
    let mut events = rt.subscribe();
    let d = debouncer(
        &rt,
        DebounceOptions::new(ms(60)).leading(true).trailing(false),
    );
    let probe = Probe::new();
    let _first = d.call("k", async { 0 });
    let second = d.call("k", probe.future());
    assert_eq!(probe.counts(), (0, 1), "dropped unpolled, at once");
    assert_eq!(second.await, C);
    assert!(
        drain(&mut events)
            .iter()
            .any(|e| matches!(e, Event::Cancelled { key } if *key == label("k")))
    );
}

// ---- lodash #6003 ----

#[tokio::test(start_paused = true)]
async fn lodash_6003_blocked_run_cannot_wedge_key() {
    // Leading only, wait 50. The run of the first call blocks the runtime's only thread for
    // 100 ms, so the key's timer, due at 50, has not fired when the next call comes at 100.
    // Lodash sees its stale timer and drops the call; here the call runs at once, and the
    // key keeps shaping.
    let rt = Runtime::new(1).unwrap();
    let d = debouncer(
        &rt,
        DebounceOptions::new(ms(50)).leading(true).trailing(false),
    );
    let log = Log::new();
    let first = d.call("k", async {
        block_runtime_for(ms(100));
        0
    });
    assert_eq!(first.await, Ok(0)); // polled right here; the clock is now at 100
    assert_eq!(log.now_ms(), 100);
    let second = d.call("k", log.job(1));
    let third = d.call("k", log.job(2));
    assert_eq!((second.await, third.await), (Ok(1), C));
    assert_eq!(log.runs(), [(1, 100)]);
}

#[tokio::test(start_paused = true)]
async fn lodash_6003_a_late_trailing_edge_runs_at_the_next_call() {
    // Trailing only, wait 50. The clock jumps from 0 to 80 with no task running: the window
    // closed at 50, so the call buffered at 0 runs before the call made at 80 is considered,
    // and that call opens a window of its own (run at 130).
    let rt = Runtime::new(4).unwrap();
    let mut events = rt.subscribe();
    let d = debouncer(&rt, DebounceOptions::new(ms(50)));
    let log = Log::new();
    let first = d.call("k", log.job(0));
    block_runtime_for(ms(80));
    let second = d.call("k", log.job(1));
    let edges: Vec<_> = drain(&mut events)
        .into_iter()
        .filter_map(|e| match e {
            Event::Armed { .. } => Some("armed"),
            Event::Fired { .. } => Some("fired"),
            Event::Replaced { .. } => Some("replaced"),
            _ => None,
        })
        .collect();
    assert_eq!(edges, ["armed", "fired", "armed"]);
    assert_eq!((first.await, second.await), (Ok(0), Ok(1)));
    assert_eq!(log.runs(), [(0, 80), (1, 130)]);
}

#[tokio::test(start_paused = true)]
async fn a_run_that_never_ends_does_not_hold_up_its_key() {
    // The first run never finishes and holds the only slot; the key still goes quiet, is
    // freed, and its next calls are shaped and queued behind it.
    let rt = Runtime::new(1).unwrap();
    let d: Debouncer<&str, u32> =
        Debouncer::with_options(&rt, DebounceOptions::new(ms(50)).leading(true)).unwrap();
    let stuck = d.call("k", std::future::pending());
    tokio::time::sleep(ms(51)).await;
    assert!(d.is_empty());
    let _next = d.call("k", async { 1 });
    let stats = rt.inspect();
    assert_eq!((stats.registered, stats.running, stats.queued), (2, 1, 1));
    drop(stuck);
}

// ---- answers ----

#[tokio::test(start_paused = true)]
async fn a_dropped_pending_does_not_withdraw_its_call() {
    let rt = Runtime::new(4).unwrap();
    let d = debouncer(&rt, DebounceOptions::new(ms(60)));
    let log = Log::new();
    drop(d.call("k", log.job(7)));
    log.at(100).await;
    assert_eq!(log.runs(), [(7, 60)]);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_debouncer_cancels_its_buffered_calls() {
    let rt = Runtime::new(4).unwrap();
    let mut events = rt.subscribe();
    let d = debouncer(&rt, DebounceOptions::new(ms(60)));
    let probe = Probe::new();
    let answer = d.call("k", probe.future());
    let clone = d.clone();
    drop(d);
    assert!(clone.pending(&"k"), "a clone keeps it alive");
    drop(clone);
    assert_eq!(answer.await, C);
    assert_eq!(probe.counts(), (0, 1));
    tokio::time::sleep(ms(100)).await;
    assert_eq!(rt.inspect().registered, 0);
    let got = drain(&mut events);
    assert!(
        matches!(got.last(), Some(Event::Cancelled { .. })),
        "{got:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn flush_all_runs_every_key() {
    let rt = Runtime::new(4).unwrap();
    let d: Debouncer<u32, u32> = Debouncer::new(&rt, ms(60)).unwrap();
    let answers: Vec<_> = (0..10).map(|k| d.call(k, async move { k })).collect();
    assert_eq!(d.flush_all(), 10);
    for (k, answer) in (0..).zip(answers) {
        assert_eq!(answer.await, Ok(k));
    }
}

#[tokio::test(start_paused = true)]
#[should_panic(expected = "boom")]
async fn a_panicking_run_resumes_its_panic_in_the_caller() {
    let rt = Runtime::new(4).unwrap();
    let d: Debouncer<&str, u32> = Debouncer::new(&rt, ms(60)).unwrap();
    let answer = d.call("k", async { panic!("boom") });
    let _ = answer.await;
}

#[tokio::test(start_paused = true)]
async fn a_panicking_run_is_reported_and_frees_its_slot() {
    let rt = Runtime::new(1).unwrap();
    let mut events = rt.subscribe();
    let d: Debouncer<&str, u32> =
        Debouncer::with_options(&rt, DebounceOptions::new(ms(60)).leading(true)).unwrap();
    drop(d.call("k", async { panic!("boom") }));
    tokio::time::sleep(ms(1)).await;
    assert!(drain(&mut events).iter().any(|e| matches!(
        e,
        Event::TaskFinished {
            outcome: Outcome::Panicked,
            ..
        }
    )));
    assert_eq!(rt.run(async { 5 }).await, Ok(5));
}

#[test]
fn calls_from_a_thread_outside_tokio_use_the_runtime_clock() {
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let rt = Runtime::with_handle(2, tokio_rt.handle().clone()).unwrap();
    let d: Debouncer<&str, u32> = Debouncer::new(&rt, ms(60)).unwrap();
    let a = d.call("k", async { 1 });
    let b = d.call("k", async { 2 });
    let (a, b) = tokio_rt.block_on(async { (a.await, b.await) });
    assert_eq!((a, b), (C, Ok(2)));
}

// ---- bad configuration ----

#[tokio::test]
async fn bad_options_are_errors_that_name_the_value() {
    let rt = Runtime::new(1).unwrap();
    let err = |opts| Debouncer::<u8, ()>::with_options(&rt, opts).unwrap_err();
    assert_eq!(
        err(DebounceOptions::new(Duration::ZERO)),
        ShapeConfigError::Options(slidewin::ConfigError::ZeroWait)
    );
    assert_eq!(
        err(DebounceOptions::new(ms(60)).max_wait(ms(59))).to_string(),
        "max_wait must be at least wait: got max_wait 59ms and wait 60ms"
    );
    assert_eq!(
        err(DebounceOptions::new(ms(60)).leading(false).trailing(false)),
        ShapeConfigError::Options(slidewin::ConfigError::NoEdge)
    );
    let long = Duration::from_secs(u64::MAX);
    assert_eq!(
        err(DebounceOptions::new(long)),
        ShapeConfigError::Options(slidewin::ConfigError::WaitTooLong { wait: long })
    );
    assert!(
        err(DebounceOptions::new(long))
            .to_string()
            .contains("584 years")
    );
    assert_eq!(
        err(DebounceOptions::new(ms(1)).max_wait(long)),
        ShapeConfigError::Options(slidewin::ConfigError::WaitTooLong { wait: long })
    );
    // max_wait == wait is a throttle: fine.
    assert!(
        Debouncer::<u8, ()>::with_options(&rt, DebounceOptions::new(ms(5)).max_wait(ms(5))).is_ok()
    );
    let throttle = ThrottleOptions::new(ms(5)).leading(false).trailing(false);
    assert_eq!(
        Throttler::<u8, ()>::with_options(&rt, throttle)
            .unwrap_err()
            .to_string(),
        "leading and trailing are both false: no call would ever run; set one of them"
    );
}

#[tokio::test(start_paused = true)]
async fn a_very_long_wait_is_accepted_and_just_never_closes() {
    let rt = Runtime::new(1).unwrap();
    let d: Debouncer<u8, ()> =
        Debouncer::new(&rt, Duration::from_secs(400 * 365 * 86_400)).unwrap();
    let _answer = d.call(1, async {});
    tokio::time::sleep(Duration::from_secs(10 * 365 * 86_400)).await;
    assert!(d.pending(&1));
    assert!(d.flush(&1));
}

#[test]
fn calls_from_many_threads_merge_exactly() {
    // 4 threads × 10,000 calls on 100 shared keys, all inside one window: after a flush,
    // exactly one call per key ran and every other one was answered `Cancelled`.
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let rt = Runtime::with_handle(8, tokio_rt.handle().clone()).unwrap();
    let d: Debouncer<u32, u32> = Debouncer::new(&rt, Duration::from_secs(3_600)).unwrap();
    let answers: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4u32)
            .map(|t| {
                let d = d.clone();
                s.spawn(move || {
                    (0..10_000u32)
                        .map(|i| d.call(i % 100, async move { t * 100_000 + i }))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert_eq!(d.len(), 100);
    assert_eq!(d.flush_all(), 100);
    let results = tokio_rt.block_on(async {
        let mut results = Vec::new();
        for answer in answers {
            results.push(answer.await);
        }
        results
    });
    let ran: Vec<u32> = results.iter().filter_map(|r| r.ok()).collect();
    assert_eq!(ran.len(), 100);
    let mut keys: Vec<u32> = ran.iter().map(|v| v % 100_000 % 100).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), 100, "one run per key");
    assert_eq!(results.iter().filter(|r| r.is_err()).count(), 39_900);
    assert_eq!(rt.inspect().registered, 100);
}
