//! GCRA against governor, direct and keyed over 100,000 keys, interleaved: each round runs
//! both contenders, in turn, on one thread and on two, and the median of each over all rounds
//! is kept. On this drifting machine criterion's
//! one-after-the-other runs move a ratio by a third; rounds that alternate keep it steady.
//! `cargo bench -p slidewin --bench limit_ab`.
//!
//! The workload is `limit.rs`'s: quota `1000/s`, both libraries reading a per-thread clock
//! that moves one emission interval (1 ms) per reading, so every request is admitted. The
//! second pair also reads the units left, as a caller sending `RateLimit` headers does.
//!
//! `LIMIT_AB_COUNTED=N` runs only N keyed checks of keys held, in one function for callgrind
//! to count, since instructions do not drift as time does:
//! `LIMIT_AB_COUNTED=200000 valgrind --tool=callgrind --toggle-collect='*counted_keyed_checks*'
//! target/release/deps/limit_ab-<hash>`.

#[path = "support/ticker.rs"]
mod ticker;

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::middleware::StateInformationMiddleware;
use slidewin::limit::Gcra;
use slidewin::{Keyed, Quota, SharedLimiter};
use ticker::{KEYS, Ticker, next_key, on_threads, publish_clock, sync_clock};

const LIMIT: u32 = 1_000;
const INTERVAL: u64 = 1_000_000;
/// Checks per thread per timed run: long enough that spawning the threads is noise.
const CHECKS: u64 = 2_000_000;
const ROUNDS: usize = 31;

/// The clock every run reads: one emission interval a reading.
const TICKER: Ticker = Ticker { step: INTERVAL };

/// The clock of the keyed rows: each key once per emission interval.
const KEYED_TICKER: Ticker = Ticker {
    step: INTERVAL / KEYS,
};

/// Runs `op` `CHECKS` times on each of `threads` threads at once; nanoseconds per check per
/// thread.
fn run(threads: usize, op: &(dyn Fn() + Sync)) -> f64 {
    on_threads(threads, CHECKS, op).as_secs_f64() * 1e9 / CHECKS as f64
}

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// One row: the median of `ROUNDS` alternated runs of each, on `threads` threads.
fn row(name: &str, threads: usize, ours: &(dyn Fn() + Sync), theirs: &(dyn Fn() + Sync)) {
    let (mut our_times, mut their_times) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        if round % 2 == 0 {
            their_times.push(run(threads, theirs));
            our_times.push(run(threads, ours));
        } else {
            our_times.push(run(threads, ours));
            their_times.push(run(threads, theirs));
        }
    }
    let (ours, theirs) = (median(our_times), median(their_times));
    let plural = if threads == 1 { "" } else { "s" };
    println!(
        "| {name}, {threads} thread{plural} | {ours:.2} ns | {theirs:.2} ns | {:.2} |",
        theirs / ours,
    );
}

/// `checks` keyed checks of keys held (each admitted, none swept): the function callgrind
/// counts. Returns how many were admitted.
#[inline(never)]
fn counted_keyed_checks(keyed: &Keyed<u64, Gcra>, checks: u64) -> usize {
    (0..checks)
        .filter(|_| {
            keyed
                .check_now(&next_key(), &KEYED_TICKER, 1)
                .unwrap()
                .allowed()
        })
        .count()
}

fn main() {
    let quota = Quota::new(u64::from(LIMIT), Duration::from_secs(1)).unwrap();
    if let Some(checks) = std::env::var("LIMIT_AB_COUNTED")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        let keyed = Keyed::<u64, _>::new(Gcra::new(quota).unwrap());
        for _ in 0..KEYS {
            let _ = keyed.check_now(&next_key(), &KEYED_TICKER, 1);
        }
        let admitted = counted_keyed_checks(&keyed, checks);
        println!("{admitted} of {checks} keyed checks admitted");
        return;
    }
    let governor_quota = governor::Quota::per_second(NonZeroU32::new(LIMIT).unwrap());
    println!(
        "| workload | slidewin (`SharedLimiter<Gcra>`, `Keyed<u64, Gcra>`) | governor | ratio (governor / ours) |"
    );
    println!("|---|---:|---:|---:|");
    for threads in [1, 2] {
        // Each run starts from the latest clock, so one limiter of each serves every round.
        let governor = governor::RateLimiter::direct_with_clock(governor_quota, TICKER);
        let gcra = SharedLimiter::new(Gcra::new(quota).unwrap());
        row(
            "direct GCRA, admitted or not",
            threads,
            &|| {
                black_box(gcra.check_now(&TICKER, 1).unwrap().allowed());
            },
            &|| {
                black_box(governor.check().is_ok());
            },
        );
    }
    for threads in [1, 2] {
        // 100,000 keys, each checked once per emission interval: a key's state is found,
        // checked and written back, or swept when idle and added again.
        sync_clock();
        let governor = governor::RateLimiter::dashmap_with_clock(governor_quota, KEYED_TICKER);
        let keyed = Keyed::<u64, _>::new(Gcra::new(quota).unwrap());
        for key in 0..KEYS {
            let _ = governor.check_key(&key);
            let _ = keyed.check_now(&key, &KEYED_TICKER, 1);
        }
        publish_clock();
        row(
            "keyed GCRA, 100k keys",
            threads,
            &|| {
                black_box(
                    keyed
                        .check_now(&next_key(), &KEYED_TICKER, 1)
                        .unwrap()
                        .allowed(),
                );
            },
            &|| {
                black_box(governor.check_key(&next_key()).is_ok());
            },
        );
    }
    for threads in [1, 2] {
        // What a caller sending `RateLimit` headers reads: the units left, besides the answer.
        let governor = governor::RateLimiter::direct_with_clock(governor_quota, TICKER)
            .with_middleware::<StateInformationMiddleware>();
        let gcra = SharedLimiter::new(Gcra::new(quota).unwrap());
        row(
            "direct GCRA, and the units left",
            threads,
            &|| {
                black_box(gcra.check_now(&TICKER, 1).unwrap().remaining());
            },
            &|| {
                black_box(governor.check().map(|s| s.remaining_burst_capacity()).ok());
            },
        );
    }
}
