//! Two tables for BENCHMARKS.md: the bytes each live key costs a keyed limiter (ours and
//! governor's), measured with a counting allocator; and how closely each algorithm holds a
//! `100/minute` quota on a bursty trace, against the exact sliding log.
//! `cargo bench -p slidewin --bench limit_report`.

#![allow(
    clippy::cast_possible_truncation,
    reason = "counts and indices in tests are far below 2^32"
)]

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::FakeRelativeClock;
use slidewin::limit::{
    Algorithm, FixedWindow, Gcra, Kind, Rule, RuleSet, SlidingCounter, SlidingLog,
};
use slidewin::{Keyed, Limiter, Moment, Quota};
use slidewin_test_support::counting_alloc::{CountingAllocator, held_after};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const KEYS: u64 = 100_000;

fn quota() -> Quota {
    "100/minute".parse().unwrap()
}

/// Bytes per key after one request from each of `KEYS` keys.
fn per_key<A: Algorithm>(algorithm: A) -> f64 {
    let (limiter, bytes) = held_after(|| {
        let limiter = Keyed::<u64, _>::new(algorithm);
        for key in 0..KEYS {
            limiter.check(&key, Moment::from_secs(1), 1).unwrap();
        }
        limiter
    });
    assert_eq!(limiter.len() as u64, KEYS);
    bytes as f64 / KEYS as f64
}

fn governor_per_key() -> f64 {
    let (limiter, bytes) = held_after(|| {
        let quota = governor::Quota::per_minute(NonZeroU32::new(100).unwrap());
        let limiter =
            governor::RateLimiter::dashmap_with_clock(quota, FakeRelativeClock::default());
        for key in 0..KEYS {
            let _ = limiter.check_key(&key);
        }
        limiter
    });
    assert_eq!(limiter.len() as u64, KEYS);
    bytes as f64 / KEYS as f64
}

/// A deterministic bursty client over an hour: a request every few seconds, and now and then
/// a burst of 50 to 200 requests within two seconds, some of them straddling a minute's end.
fn bursty_trace() -> Vec<Moment> {
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut random = move |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    let mut trace = Vec::new();
    let mut ms = 0;
    while ms < 3_600_000 {
        ms += 500 + random(5_000);
        trace.push(ms);
        if random(12) == 0 {
            // A burst, half the time just before a minute boundary.
            let start = if random(2) == 0 {
                (ms / 60_000 + 1) * 60_000 - 1_000
            } else {
                ms
            };
            for _ in 0..50 + random(150) {
                trace.push(start + random(2_000));
            }
        }
    }
    trace.sort_unstable();
    trace.into_iter().map(Moment::from_millis).collect()
}

/// Admitted requests and the most admitted in any one-minute window.
fn run<A: Algorithm>(algorithm: A, trace: &[Moment]) -> (usize, usize) {
    let mut limiter = Limiter::new(algorithm);
    let admitted: Vec<Moment> = trace
        .iter()
        .copied()
        .filter(|&t| limiter.check(t, 1).unwrap().as_ref().allowed())
        .collect();
    let span = Duration::from_secs(60);
    let worst = admitted
        .iter()
        .enumerate()
        .map(|(i, &end)| i + 1 - admitted.partition_point(|&t| t + span <= end))
        .max()
        .unwrap_or(0);
    (admitted.len(), worst)
}

fn main() {
    println!("| keyed limiter, 100,000 live keys | bytes per key |");
    println!("|---|---:|");
    println!("| governor (dashmap, GCRA) | {:.1} |", governor_per_key());
    let gcra = Gcra::new(quota()).unwrap();
    println!("| slidewin Gcra | {:.1} |", per_key(gcra));
    let fixed = FixedWindow::new(quota()).unwrap();
    println!("| slidewin FixedWindow | {:.1} |", per_key(fixed));
    let counter = SlidingCounter::new(quota()).unwrap();
    println!("| slidewin SlidingCounter | {:.1} |", per_key(counter));
    let log = SlidingLog::new(quota()).unwrap();
    println!(
        "| slidewin SlidingLog (1 request per key) | {:.1} |",
        per_key(log)
    );
    let two = RuleSet::new([
        Rule::new("minute", Kind::SlidingLog, quota()).unwrap(),
        Rule::new("hour", Kind::Gcra, "1000/hour".parse().unwrap()).unwrap(),
    ])
    .unwrap();
    println!(
        "| slidewin RuleSet: SlidingLog + Gcra (1 request per key) | {:.1} |",
        per_key(two)
    );
    println!();

    let trace = bursty_trace();
    let (exact, exact_worst) = run(SlidingLog::new(quota()).unwrap(), &trace);
    println!(
        "bursty trace: {} requests over an hour, quota 100/minute",
        trace.len()
    );
    println!();
    println!("| algorithm | admitted | vs exact log | most in any minute |");
    println!("|---|---:|---:|---:|");
    for (name, (admitted, worst)) in [
        ("SlidingLog (exact)", (exact, exact_worst)),
        (
            "SlidingCounter",
            run(SlidingCounter::new(quota()).unwrap(), &trace),
        ),
        (
            "FixedWindow",
            run(FixedWindow::new(quota()).unwrap(), &trace),
        ),
        ("Gcra (burst 100)", run(Gcra::new(quota()).unwrap(), &trace)),
    ] {
        let diff = admitted as f64 / exact as f64 - 1.0;
        println!("| {name} | {admitted} | {:+.1}% | {worst} |", diff * 100.0);
    }
}
