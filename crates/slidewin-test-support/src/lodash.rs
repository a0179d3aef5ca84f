//! Lodash's `debounce`, transcribed literally into a model on a perfect event loop, and the
//! random options and calls that the debounce tests run through it and through slidewin's own
//! (`slidewin`'s `tests/debounce_props.rs` against `Debounced`, `slidewin-shape`'s
//! `tests/keyed_model.rs` against the keyed `Debouncer`).
//!
//! The model is lodash 4.17.21's code with two changes: `flush` clears the timer (lodash PR
//! #4656, unreleased), and timers fire on time (lodash #6003 is a timer late behind a blocked
//! loop). A timer due at `t` fires before a call made at `t`, and timers due together fire in
//! the order they were started. Everything else is as lodash has it, including the tight-loop
//! path clearing the pending timer before it starts a new one, so a key never has two timers
//! live: the model asserts it.
//!
//! Times are lodash's `Date.now()`, in milliseconds: [`BASE`] plus the milliseconds from the
//! start. No example here: the module exists for those two tests (and the crate is not
//! published), which show its use.

use std::collections::BTreeMap;

use proptest::prelude::*;

/// Lodash's time stamps are `Date.now()`: far from zero, as here (its `lastInvokeTime` starts
/// at 0, which must look long ago).
pub const BASE: u64 = 1_000_000_000;

/// Lodash's `debounce` options, in milliseconds; `max_wait == Some(wait)` is lodash's
/// `throttle`.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// `wait`.
    pub wait: u64,
    /// `maxWait`, if any: at least `wait`.
    pub max_wait: Option<u64>,
    /// `leading`.
    pub leading: bool,
    /// `trailing`.
    pub trailing: bool,
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

/// The event loop and every key's `debounce` closure.
pub struct Model {
    o: Options,
    keys: BTreeMap<u8, Lodash>,
    timers: Vec<Timer>, // in the order started
    next_id: u64,
    /// The calls run: (ms from the start, call number), in the order they ran.
    pub runs: Vec<(u64, usize)>,
}

impl Model {
    /// The loop with no timers, every key quiet.
    pub fn new(o: Options) -> Model {
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
    pub fn timer(&self, key: u8) -> Option<u64> {
        self.timers
            .iter()
            .find(|t| t.key == key)
            .map(|t| t.due - BASE)
    }

    /// Fires every timer due by `now`, earliest first, ties in the order started.
    pub fn run_until(&mut self, now: u64) {
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

    /// The debounced function called on `key` at `time` with call number `call`.
    pub fn debounced(&mut self, key: u8, time: u64, call: usize) {
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

    /// `debounced.cancel()` on `key`.
    pub fn cancel(&mut self, key: u8) {
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
    pub fn flush(&mut self, key: u8, time: u64) {
        if let Some(id) = self.state(key).timer_id {
            self.clear_timeout(id);
            self.trailing_edge(key, time);
        }
    }

    /// Lodash's `lastArgs`, where a held call can run (ours says `pending`).
    pub fn pending(&mut self, key: u8) -> bool {
        self.o.trailing && self.state(key).last_args.is_some()
    }
}

/// What an [`Op`] does.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// Calls the debounced function.
    Call,
    /// `flush()`.
    Flush,
    /// `cancel()`.
    Cancel,
}

/// One step of a test: after `gap` milliseconds, something on key `key` (0, 1 or 2).
#[derive(Clone, Copy, Debug)]
pub struct Op {
    /// Milliseconds since the step before.
    pub gap: u64,
    /// The key, below 3.
    pub key: u8,
    /// What it does.
    pub kind: Kind,
}

/// Random options: throttle's (`max_wait == wait`) among them, and every pair of edges but
/// none.
pub fn options() -> impl Strategy<Value = Options> {
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

/// Random steps for `o`: calls closer than `wait`, ties, boundaries and long pauses, mostly on
/// key 0, with a few flushes and cancels.
pub fn ops(o: Options) -> impl Strategy<Value = Vec<Op>> {
    let w = o.wait;
    let m = o.max_wait.unwrap_or(w);
    // Streams of calls closer than `wait` (where max_wait and lodash's tight-loop path matter),
    // ties, boundaries, and pauses long enough for keys to go quiet.
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

/// Steady streams of calls on one key with small waits and a max wait, where lodash's
/// tight-loop path, and the timer it replaces, decide when calls run.
pub fn streams() -> impl Strategy<Value = (Options, Vec<Op>)> {
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

/// Throttle's tight-loop path, as lodash 4.17.21 has it: calls on one key at these
/// milliseconds, with a wait and max wait of 40 and both edges, run as [`TIGHT_LOOP_RUNS`]
/// says. The call at 80, 40 after the run at 40 while the timer started at 50 is due at 90,
/// clears that timer: the call at 130 then waits for its own timer, until 170. Lodash before
/// 4.17.12 left the old timer firing, and it ran that call at 160.
pub const TIGHT_LOOP_TIMES: [u64; 10] = [0, 10, 30, 50, 70, 80, 90, 100, 110, 130];

/// What [`TIGHT_LOOP_TIMES`]' calls run: (ms, call number).
pub const TIGHT_LOOP_RUNS: [(u64, usize); 5] = [(0, 0), (40, 2), (80, 5), (120, 8), (170, 9)];

/// The options and steps of [`TIGHT_LOOP_TIMES`].
pub fn tight_loop() -> (Options, Vec<Op>) {
    let o = Options {
        wait: 40,
        max_wait: Some(40),
        leading: true,
        trailing: true,
    };
    let mut last = 0;
    let ops = TIGHT_LOOP_TIMES
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
    (o, ops)
}
