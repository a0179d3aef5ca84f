//! `Debounced` against lodash's `debounce`, transcribed literally into a small model below and
//! run on a perfect event loop: random options (throttle's among them), random calls on three
//! keys at random times (many at the same millisecond and at window boundaries), `flush` and
//! `cancel`. The same calls must run at the same milliseconds, every other call must be
//! dropped exactly once, and `pending` and the timer must agree after every step.
//!
//! The model is lodash 4.17.21's code with two changes: `flush` clears the timer (lodash PR
//! #4656, unreleased), and timers fire on time (lodash #6003 is a timer late behind a blocked
//! loop). A timer due at `t` fires before a call made at `t`, and timers due together fire in
//! the order they were started. Everything else is as lodash has it, including the tight-loop
//! path clearing the pending timer before it starts a new one, so a key never has two timers
//! live: the model asserts it.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use slidewin::Moment;
use slidewin::debounce::{Admit, Debounce, DebounceOptions, Debounced, Edge, Sink};

/// Lodash's time stamps are `Date.now()`: far from zero, as here (its `lastInvokeTime` starts
/// at 0, which must look long ago).
const BASE: u64 = 1_000_000_000;

#[derive(Clone, Copy, Debug)]
struct Options {
    wait: u64,
    max_wait: Option<u64>,
    leading: bool,
    trailing: bool,
}

/// One key's `debounce` closure state, as lodash's variables.
#[derive(Default)]
struct Lodash {
    last_args: Option<usize>,
    last_call_time: Option<u64>,
    last_invoke_time: u64,
    timer_id: Option<u64>,
}

struct Timer {
    due: u64,
    id: u64,
    key: u8,
}

/// The event loop and every key's closure.
struct Model {
    o: Options,
    keys: BTreeMap<u8, Lodash>,
    timers: Vec<Timer>, // in the order started
    next_id: u64,
    runs: Vec<(u64, usize)>, // (ms from the start, call number)
}

impl Model {
    fn new(o: Options) -> Model {
        Model {
            o,
            keys: BTreeMap::new(),
            timers: Vec::new(),
            next_id: 0,
            runs: Vec::new(),
        }
    }

    fn state(&mut self, key: u8) -> &mut Lodash {
        self.keys.entry(key).or_default()
    }

    fn start_timer(&mut self, key: u8, now: u64, wait: u64) -> u64 {
        assert!(
            self.timers.iter().all(|t| t.key != key),
            "key {key} would have two timers live"
        );
        self.next_id += 1;
        self.timers.push(Timer {
            due: now + wait,
            id: self.next_id,
            key,
        });
        self.next_id
    }

    fn clear_timeout(&mut self, id: u64) {
        self.timers.retain(|t| t.id != id);
    }

    /// The key's live timer, in ms from the start.
    fn timer(&self, key: u8) -> Option<u64> {
        self.timers
            .iter()
            .find(|t| t.key == key)
            .map(|t| t.due - BASE)
    }

    /// Fires every timer due by `now`, earliest first, ties in the order started.
    fn run_until(&mut self, now: u64) {
        loop {
            let next = self
                .timers
                .iter()
                .enumerate()
                .filter(|(_, t)| t.due <= now)
                .min_by_key(|(_, t)| (t.due, t.id))
                .map(|(i, _)| i);
            let Some(i) = next else { return };
            let timer = self.timers.remove(i);
            self.timer_expired(timer.key, timer.due);
        }
    }

    fn should_invoke(&mut self, key: u8, time: u64) -> bool {
        let o = self.o;
        let s = self.state(key);
        let Some(last_call) = s.last_call_time else {
            return true;
        };
        let since_call = time as i64 - last_call as i64;
        let since_invoke = time as i64 - s.last_invoke_time as i64;
        since_call >= o.wait as i64
            || since_call < 0
            || o.max_wait.is_some_and(|m| since_invoke >= m as i64)
    }

    fn remaining_wait(&mut self, key: u8, time: u64) -> u64 {
        let o = self.o;
        let s = self.state(key);
        let waiting = o.wait - (time - s.last_call_time.unwrap());
        match o.max_wait {
            Some(m) => waiting.min(m - (time - s.last_invoke_time)),
            None => waiting,
        }
    }

    fn invoke_func(&mut self, key: u8, time: u64) {
        let s = self.state(key);
        let args = s.last_args.take().unwrap();
        s.last_invoke_time = time;
        self.runs.push((time - BASE, args));
    }

    fn leading_edge(&mut self, key: u8, time: u64) {
        self.state(key).last_invoke_time = time;
        let id = self.start_timer(key, time, self.o.wait);
        self.state(key).timer_id = Some(id);
        if self.o.leading {
            self.invoke_func(key, time);
        }
    }

    fn timer_expired(&mut self, key: u8, time: u64) {
        if self.should_invoke(key, time) {
            self.trailing_edge(key, time);
        } else {
            let remaining = self.remaining_wait(key, time);
            let id = self.start_timer(key, time, remaining);
            self.state(key).timer_id = Some(id);
        }
    }

    fn trailing_edge(&mut self, key: u8, time: u64) {
        self.state(key).timer_id = None;
        if self.o.trailing && self.state(key).last_args.is_some() {
            self.invoke_func(key, time);
        }
        self.state(key).last_args = None;
    }

    fn debounced(&mut self, key: u8, time: u64, call: usize) {
        let is_invoking = self.should_invoke(key, time);
        let s = self.state(key);
        s.last_args = Some(call);
        s.last_call_time = Some(time);
        if is_invoking {
            if self.state(key).timer_id.is_none() {
                return self.leading_edge(key, time);
            }
            if self.o.max_wait.is_some() {
                // "Handle invocations in a tight loop".
                let pending = self.state(key).timer_id.unwrap();
                self.clear_timeout(pending);
                let id = self.start_timer(key, time, self.o.wait);
                self.state(key).timer_id = Some(id);
                return self.invoke_func(key, time);
            }
        }
        if self.state(key).timer_id.is_none() {
            let id = self.start_timer(key, time, self.o.wait);
            self.state(key).timer_id = Some(id);
        }
    }

    fn cancel(&mut self, key: u8) {
        if let Some(id) = self.state(key).timer_id {
            self.clear_timeout(id);
        }
        let s = self.state(key);
        s.last_invoke_time = 0;
        s.last_args = None;
        s.last_call_time = None;
        s.timer_id = None;
    }

    /// With PR #4656's `clearTimeout`, which 4.17.21 lacks.
    fn flush(&mut self, key: u8, time: u64) {
        if let Some(id) = self.state(key).timer_id {
            self.clear_timeout(id);
            self.trailing_edge(key, time);
        }
    }

    /// Lodash's `lastArgs`, where a held call can run (ours says `pending`).
    fn pending(&mut self, key: u8) -> bool {
        self.o.trailing && self.state(key).last_args.is_some()
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Call,
    Flush,
    Cancel,
}

#[derive(Clone, Copy, Debug)]
struct Op {
    gap: u64,
    key: u8,
    kind: Kind,
}

fn options() -> impl Strategy<Value = Options> {
    (
        1u64..=50,
        prop_oneof![
            3 => Just(None),
            1 => Just(Some(0)), // throttle: max_wait = wait
            2 => (1u64..=100).prop_map(Some),
        ],
        prop_oneof![Just((false, true)), Just((true, false)), Just((true, true))],
    )
        .prop_map(|(wait, extra, (leading, trailing))| Options {
            wait,
            max_wait: extra.map(|e| wait + e),
            leading,
            trailing,
        })
}

fn ops(o: Options) -> impl Strategy<Value = Vec<Op>> {
    let w = o.wait;
    let m = o.max_wait.unwrap_or(w);
    // Streams of calls closer than `wait` (where max_wait and lodash's tight-loop path matter),
    // ties, boundaries, and pauses long enough for keys to go idle.
    let gap = prop_oneof![
        3 => Just(0u64),
        8 => 1..=w.div_ceil(2),
        3 => 1..=w,
        2 => Just(w),
        1 => Just(w - 1),
        1 => Just(w + 1),
        1 => Just(m),
        2 => 0..=3 * m,
    ];
    let kind = prop_oneof![
        12 => Just(Kind::Call),
        1 => Just(Kind::Flush),
        1 => Just(Kind::Cancel),
    ];
    prop::collection::vec(
        (gap, prop_oneof![3 => Just(0u8), 1 => 1u8..3], kind).prop_map(|(gap, key, kind)| Op {
            gap,
            key,
            kind,
        }),
        1..80,
    )
}

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

/// Steady streams of calls on one key with small waits and a max wait, where lodash's
/// tight-loop path, and the timer it replaces, decide when calls run.
fn streams() -> impl Strategy<Value = (Options, Vec<Op>)> {
    (2u64..=8, 0u64..=4, any::<bool>(), 10usize..60).prop_flat_map(|(wait, extra, leading, n)| {
        let o = Options {
            wait,
            max_wait: Some(wait + extra),
            leading,
            trailing: true,
        };
        let gaps = prop::collection::vec(0..wait, n);
        (
            Just(o),
            gaps.prop_map(|gaps| {
                gaps.into_iter()
                    .map(|gap| Op {
                        gap,
                        key: 0,
                        kind: Kind::Call,
                    })
                    .collect()
            }),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    #[test]
    fn max_wait_streams_run_the_calls_lodash_runs((o, ops) in streams()) {
        check(o, &ops)?;
    }
}

/// Throttle's tight-loop path (the call at 80, 40 after the run at 40, while the timer started
/// at 50 is due at 90) clears that timer, as lodash 4.17.21 does: the call at 130 then waits
/// for its own timer, until 170. Lodash before 4.17.12 left the old timer firing, and it ran
/// that call at 160.
#[test]
fn lodash_4_17_21_max_wait_clears_the_pending_timer() {
    let o = Options {
        wait: 40,
        max_wait: Some(40),
        leading: true,
        trailing: true,
    };
    let times = [0, 10, 30, 50, 70, 80, 90, 100, 110, 130];
    let mut last = 0;
    let ops: Vec<Op> = times
        .iter()
        .map(|&t| {
            let op = Op {
                gap: t - last,
                key: 0,
                kind: Kind::Call,
            };
            last = t;
            op
        })
        .collect();
    let mut model = Model::new(o);
    for (n, &t) in times.iter().enumerate() {
        model.run_until(BASE + t);
        model.debounced(0, BASE + t, n);
    }
    model.run_until(u64::MAX);
    assert_eq!(
        model.runs,
        [(0, 0), (40, 2), (80, 5), (120, 8), (170, 9)],
        "the model"
    );
    check(o, &ops).unwrap();
}
