//! What the limiter benches (`limit.rs`, `limit_ab.rs`) give both libraries: a per-thread
//! clock, so that no clock costs more for one than for the other, the keys of the keyed
//! workloads in turn, and the threads that run them.

// Shared by two bench crates through `#[path]`.
#![allow(dead_code, unreachable_pub)]

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use governor::clock::Clock as GovernorClock;
use governor::nanos::Nanos;
use slidewin::{Clock, Moment};

thread_local! {
    static NOW: Cell<u64> = const { Cell::new(0) };
}
/// The latest time any thread's clock reached. Every measured stretch starts its thread's
/// clock here and publishes where it ended, so clocks never run behind a limiter's state (a
/// governor limiter takes its origin from the clock when it is built: a clock behind it would
/// see every request denied, and measure only the cheap path).
static LATEST: AtomicU64 = AtomicU64::new(0);

pub fn sync_clock() {
    NOW.with(|now| now.set(LATEST.load(Ordering::Relaxed)));
}

pub fn publish_clock() {
    LATEST.fetch_max(NOW.with(Cell::get), Ordering::Relaxed);
}

/// A per-thread clock moving `step` nanoseconds at each reading.
#[derive(Clone, Copy)]
pub struct Ticker {
    pub step: u64,
}

impl Ticker {
    pub fn tick(self) -> u64 {
        NOW.with(|now| {
            let t = now.get() + self.step;
            now.set(t);
            t
        })
    }
}

impl Clock for Ticker {
    fn now(&self) -> Moment {
        Moment::from_nanos(self.tick())
    }
}

impl GovernorClock for Ticker {
    type Instant = Nanos;
    fn now(&self) -> Nanos {
        Nanos::from(self.tick())
    }
}

/// The keys of the keyed workloads.
pub const KEYS: u64 = 100_000;

thread_local! {
    pub static NEXT_KEY: Cell<u64> = const { Cell::new(0) };
}

/// The keys in turn, so each is checked once per `KEYS` clock readings.
pub fn next_key() -> u64 {
    NEXT_KEY.with(|k| {
        let key = k.get();
        k.set((key + 1) % KEYS);
        key
    })
}

/// Runs `op` `iters` times on each of `threads` threads at once; the wall time. Each thread
/// walks its own part of the keys, as threads serving different clients would.
pub fn on_threads(threads: usize, iters: u64, op: &(dyn Fn() + Sync)) -> Duration {
    let start = Instant::now();
    std::thread::scope(|scope| {
        for thread in 0..threads as u64 {
            scope.spawn(move || {
                sync_clock();
                NEXT_KEY.with(|key| key.set(thread * KEYS / threads as u64));
                for _ in 0..iters {
                    op();
                }
                publish_clock();
            });
        }
    });
    start.elapsed()
}
