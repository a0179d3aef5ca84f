//! `Debounced` against lodash's `debounce`, transcribed literally into a small model
//! (`slidewin_test_support::lodash`, which says how it differs from lodash 4.17.21) and run on
//! a perfect event loop: random options (throttle's among them), random calls on three keys at
//! random times (many at the same millisecond and at window boundaries), `flush` and `cancel`.
//! The same calls must run at the same milliseconds, every other call must be dropped exactly
//! once, and `pending` and the timer must agree after every step.

use std::time::Duration;

use proptest::prelude::*;
use slidewin::Moment;
use slidewin::debounce::{Admit, Debounce, DebounceOptions, Debounced, Edge, Sink};
use slidewin_test_support::lodash::{
    BASE, Kind, Model, Op, Options, TIGHT_LOOP_RUNS, TIGHT_LOOP_TIMES, ops, options, streams,
    tight_loop,
};

fn millis(t: Moment) -> u64 {
    t.as_nanos() / 1_000_000
}

/// What the states report: the calls run (ms, call) and the calls dropped.
#[derive(Default)]
struct Outcomes {
    runs: Vec<(u64, usize)>,
    dropped: Vec<usize>,
}

impl Sink<usize> for Outcomes {
    fn run(&mut self, edge: Edge, at: Moment, call: usize) {
        assert!(matches!(edge, Edge::Trailing | Edge::Flush), "{edge}");
        self.runs.push((millis(at), call));
    }

    fn replaced(&mut self, old: usize) {
        self.dropped.push(old);
    }
}

/// Runs the ops through one `Debounced` per key and through the model, comparing `pending`
/// and the timer after each op, and the runs at the end.
fn check(o: Options, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut opts = DebounceOptions::new(Duration::from_millis(o.wait))
        .leading(o.leading)
        .trailing(o.trailing);
    if let Some(m) = o.max_wait {
        opts = opts.max_wait(Duration::from_millis(m));
    }
    let d = Debounce::new(opts).unwrap();
    let mut states: [Debounced<usize>; 3] = Default::default();
    let mut model = Model::new(o);
    let mut out = Outcomes::default();
    let mut calls = 0;
    let mut now = 0;
    for op in ops {
        now += op.gap;
        let t = Moment::from_millis(now);
        model.run_until(BASE + now);
        for state in &mut states {
            state.settle(&d, t, &mut out);
        }
        let state = &mut states[usize::from(op.key)];
        match op.kind {
            Kind::Call => {
                let n = calls;
                calls += 1;
                match state.call(&d, t, &mut out) {
                    Admit::Run(edge) => {
                        prop_assert!(matches!(edge, Edge::Leading | Edge::MaxWait));
                        out.runs.push((now, n));
                    }
                    Admit::Buffer => state.buffer(n, &mut out),
                    Admit::Refuse => out.dropped.push(n),
                }
                model.debounced(op.key, BASE + now, n);
            }
            Kind::Flush => {
                state.flush(&d, t, &mut out);
                model.flush(op.key, BASE + now);
            }
            Kind::Cancel => {
                out.dropped.extend(state.cancel());
                model.cancel(op.key);
            }
        }
        for (key, state) in (0u8..).zip(&states) {
            prop_assert_eq!(
                state.pending(),
                model.pending(key),
                "pending({}) after {:?} at {} ms",
                key,
                op,
                now
            );
            prop_assert_eq!(
                state.timer().map(millis),
                model.timer(key),
                "timer({}) after {:?} at {} ms",
                key,
                op,
                now
            );
            prop_assert!(state.wake_at(&d) >= t || state.is_idle(&d, t));
            if state.is_idle(&d, t) {
                // Idle is the same as new: the next call is answered alike.
                let (mut idle, mut new) = (state.clone(), Debounced::new());
                let next = Moment::from_millis(now + 1);
                let ignore = &mut |_, _, _| {};
                prop_assert_eq!(idle.call(&d, next, ignore), new.call(&d, next, ignore));
                prop_assert_eq!(idle.timer(), new.timer());
            }
        }
    }
    model.run_until(u64::MAX);
    for state in &mut states {
        state.settle(&d, Moment::MAX, &mut out);
        prop_assert!(!state.pending());
    }

    let mut ran = out.runs.clone();
    ran.sort_unstable();
    let mut expected = model.runs.clone();
    expected.sort_unstable();
    prop_assert_eq!(&ran, &expected, "runs (ms, call)");
    let mut every: Vec<usize> = ran.iter().map(|&(_, n)| n).chain(out.dropped).collect();
    every.sort_unstable();
    prop_assert_eq!(
        every,
        (0..calls).collect::<Vec<_>>(),
        "each call run or dropped once"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn debounce_and_throttle_run_the_calls_lodash_runs(
        (o, ops) in options().prop_flat_map(|o| (Just(o), ops(o)))
    ) {
        check(o, &ops)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    #[test]
    fn max_wait_streams_run_the_calls_lodash_runs((o, ops) in streams()) {
        check(o, &ops)?;
    }
}

/// Throttle's tight-loop path clears the pending timer, as lodash 4.17.21 does (see
/// `TIGHT_LOOP_TIMES`): the model and `Debounced` both run the calls as lodash does.
#[test]
fn lodash_4_17_21_max_wait_clears_the_pending_timer() {
    let (o, ops) = tight_loop();
    let mut model = Model::new(o);
    for (n, &t) in TIGHT_LOOP_TIMES.iter().enumerate() {
        model.run_until(BASE + t);
        model.debounced(0, BASE + t, n);
    }
    model.run_until(u64::MAX);
    assert_eq!(model.runs, TIGHT_LOOP_RUNS, "the model");
    check(o, &ops).unwrap();
}
