//! The keyed, async `Debouncer` against one `slidewin::debounce::Debounced` per key on a
//! perfect event loop: random options (throttle's among them), random calls on three keys at
//! random times (many at the same millisecond and at window boundaries), `flush` and `cancel`,
//! under tokio's paused clock. The same calls must run at the same milliseconds (their futures
//! first polled then), every other call must end `Cancelled`, `pending` must agree after every
//! step, and every key must be freed at the end. (`Debounced` itself is checked against a
//! transcription of lodash's `debounce` in slidewin's `tests/debounce_props.rs`.)

use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use slidewin::Moment;
use slidewin::debounce::{Admit, Debounce, Debounced, Edge};
use slidewin_shape::{DebounceOptions, Debouncer, Runtime};
use slidewin_test_support::lodash::{
    Kind, Op, Options, TIGHT_LOOP_RUNS, ops, options, streams, tight_loop,
};
use tokio::time::{Instant, sleep, sleep_until};

/// The options as `DebounceOptions`.
fn debounce(o: Options) -> DebounceOptions {
    let opts = DebounceOptions::new(Duration::from_millis(o.wait))
        .leading(o.leading)
        .trailing(o.trailing);
    match o.max_wait {
        Some(m) => opts.max_wait(Duration::from_millis(m)),
        None => opts,
    }
}

/// The reference: one `Debounced` per key, every key settled at each op's time, as a perfect
/// event loop fires timers on time.
struct Reference {
    d: Debounce,
    keys: [Debounced<usize>; 3],
    runs: Vec<(u64, usize)>, // (ms from the start, call number)
}

fn millis(t: Moment) -> u64 {
    t.as_nanos() / 1_000_000
}

impl Reference {
    fn new(o: Options) -> Reference {
        Reference {
            d: Debounce::new(debounce(o)).unwrap(),
            keys: Default::default(),
            runs: Vec::new(),
        }
    }

    fn run_until(&mut self, now: Moment) {
        let runs = &mut self.runs;
        for key in &mut self.keys {
            key.settle(&self.d, now, &mut |_: Edge, at, call| {
                runs.push((millis(at), call))
            });
        }
    }

    fn call(&mut self, key: u8, now: Moment, call: usize) {
        let runs = &mut self.runs;
        let mut sink = |_: Edge, at, call| runs.push((millis(at), call));
        let state = &mut self.keys[usize::from(key)];
        match state.call(&self.d, now, &mut sink) {
            Admit::Run(_) => sink(Edge::Leading, now, call),
            Admit::Buffer => state.buffer(call, &mut sink),
            Admit::Refuse => {}
        }
    }

    fn flush(&mut self, key: u8, now: Moment) {
        let runs = &mut self.runs;
        self.keys[usize::from(key)].flush(&self.d, now, &mut |_: Edge, at, call| {
            runs.push((millis(at), call))
        });
    }

    fn cancel(&mut self, key: u8) {
        self.keys[usize::from(key)].cancel();
    }

    fn pending(&self, key: u8) -> bool {
        self.keys[usize::from(key)].pending()
    }
}

/// Runs the ops through a real `Debouncer` under paused time: the calls that ran (with the
/// millisecond their future was first polled) and every call's outcome, checking `pending`
/// against the reference after each op. The runs, (ms, call), sorted.
fn check(o: Options, ops: &[Op]) -> Result<Vec<(u64, usize)>, TestCaseError> {
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    tokio_rt.block_on(async {
        let rt = Runtime::new(10_000).unwrap();
        let d: Debouncer<u8, usize> = Debouncer::with_options(&rt, debounce(o)).unwrap();
        let mut model = Reference::new(o);
        let polled = Arc::new(Mutex::new(Vec::new()));
        let start = Instant::now();
        let mut now = 0;
        let mut answers = Vec::new();
        for op in ops {
            now += op.gap;
            sleep_until(start + Duration::from_millis(now)).await;
            let t = Moment::from_millis(now);
            model.run_until(t);
            match op.kind {
                Kind::Call => {
                    let n = answers.len();
                    let polled = Arc::clone(&polled);
                    answers.push(d.call(op.key, async move {
                        let at = u64::try_from(start.elapsed().as_millis()).unwrap();
                        polled.lock().unwrap().push((at, n));
                        n
                    }));
                    model.call(op.key, t, n);
                }
                Kind::Flush => {
                    d.flush(&op.key);
                    model.flush(op.key, t);
                }
                Kind::Cancel => {
                    d.cancel(&op.key);
                    model.cancel(op.key);
                }
            }
            for key in 0..3 {
                prop_assert_eq!(
                    d.pending(&key),
                    model.pending(key),
                    "pending({}) after {:?} at {} ms",
                    key,
                    op,
                    now
                );
            }
        }
        model.run_until(Moment::MAX);
        sleep(Duration::from_millis(
            10 * (o.max_wait.unwrap_or(o.wait) + 1),
        ))
        .await;

        let mut ran = polled.lock().unwrap().clone();
        ran.sort_unstable();
        let mut expected = model.runs.clone();
        expected.sort_unstable();
        prop_assert_eq!(&ran, &expected, "runs (ms, call)");
        for (n, answer) in answers.into_iter().enumerate() {
            let ran = expected.iter().any(|&(_, call)| call == n);
            prop_assert_eq!(answer.await.is_ok(), ran, "answer of call {}", n);
        }
        prop_assert_eq!(d.len(), 0, "keys left after quiet");
        prop_assert_eq!(rt.inspect().registered, expected.len() as u64);
        Ok(ran)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn debounce_and_throttle_run_the_calls_debounced_runs(
        (o, ops) in options().prop_flat_map(|o| (Just(o), ops(o)))
    ) {
        check(o, &ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn max_wait_streams_run_the_calls_debounced_runs((o, ops) in streams()) {
        check(o, &ops)?;
    }
}

/// Throttle's tight-loop path clears the pending timer, as lodash 4.17.21 does (see
/// `slidewin_test_support::lodash::TIGHT_LOOP_TIMES`).
#[test]
fn lodash_4_17_21_max_wait_clears_the_pending_timer() {
    let (o, ops) = tight_loop();
    assert_eq!(check(o, &ops).unwrap(), TIGHT_LOOP_RUNS);
}
