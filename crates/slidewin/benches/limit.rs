//! The limiters against governor, in the same run: a direct limiter and a keyed one over
//! 100,000 keys, on one thread and on two sharing the limiter; and a flood of new keys on a
//! capped keyed limiter, below its cap and at it; then what issue 33's kinds cost beside a
//! plain check of the exact log: a reservation settled, a refund, a calendar day.
//! `cargo bench -p slidewin --bench limit`.
//!
//! Both libraries read time from the same kind of clock: a per-thread counter that moves one
//! emission interval per reading, so every request arrives just as the quota allows (the
//! admitting path), and no clock costs more for one than for the other.

#[path = "support/ticker.rs"]
mod ticker;

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use criterion::{
    BenchmarkGroup, Criterion, criterion_group, criterion_main, measurement::WallTime,
};
use slidewin::limit::{Algorithm, Decision, FixedWindow, Gcra, SlidingCounter, SlidingLog};
use slidewin::{Keyed, Limiter, Quota, SharedLimiter};
use ticker::{KEYS, Ticker, next_key, on_threads, publish_clock, sync_clock};

/// 1,000 per second: one every millisecond.
const LIMIT: u32 = 1_000;
const INTERVAL: u64 = 1_000_000;

fn quota() -> Quota {
    Quota::new(u64::from(LIMIT), Duration::from_secs(1)).unwrap()
}

fn governor_quota() -> governor::Quota {
    governor::Quota::per_second(NonZeroU32::new(LIMIT).unwrap())
}

fn bench(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    threads: usize,
    op: &(dyn Fn() + Sync),
) {
    group.bench_function(name, |b| {
        b.iter_custom(|iters| on_threads(threads, iters, op))
    });
}

fn direct(c: &mut Criterion) {
    let direct_clock = Ticker { step: INTERVAL };
    for threads in [1, 2] {
        let mut group = c.benchmark_group(format!("limit/direct/{threads}_thread"));
        group
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3));

        sync_clock();
        let governor = governor::RateLimiter::direct_with_clock(governor_quota(), direct_clock);
        bench(&mut group, "governor_gcra", threads, &|| {
            black_box(governor.check().is_ok());
        });
        // Lock-free: one word and a compare-and-swap.
        let gcra = SharedLimiter::new(Gcra::new(quota()).unwrap());
        bench(&mut group, "slidewin_shared_gcra", threads, &|| {
            black_box(gcra.check_now(&direct_clock, 1).unwrap().allowed());
        });
        let fixed = SharedLimiter::new(FixedWindow::new(quota()).unwrap());
        bench(&mut group, "slidewin_shared_fixed_window", threads, &|| {
            black_box(fixed.check_now(&direct_clock, 1).unwrap().allowed());
        });
        // Behind a mutex.
        let log = SlidingLog::new(quota()).unwrap();
        shared(
            &mut group,
            "slidewin_shared_sliding_log",
            threads,
            direct_clock,
            log,
        );
        let counter = SlidingCounter::new(quota()).unwrap();
        shared(
            &mut group,
            "slidewin_shared_sliding_counter",
            threads,
            direct_clock,
            counter,
        );
        if threads == 1 {
            owned(
                &mut group,
                "slidewin_gcra",
                direct_clock,
                Gcra::new(quota()).unwrap(),
            );
            let log = SlidingLog::new(quota()).unwrap();
            owned(&mut group, "slidewin_sliding_log", direct_clock, log);
            let counter = SlidingCounter::new(quota()).unwrap();
            owned(
                &mut group,
                "slidewin_sliding_counter",
                direct_clock,
                counter,
            );
            let fixed = FixedWindow::new(quota()).unwrap();
            owned(&mut group, "slidewin_fixed_window", direct_clock, fixed);
        }
        group.finish();
    }
}

fn shared<A: Algorithm<Output = Decision>>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    threads: usize,
    clock: Ticker,
    algorithm: A,
) {
    let limiter = SharedLimiter::new(algorithm);
    bench(group, name, threads, &|| {
        black_box(limiter.check_now(&clock, 1).unwrap().allowed());
    });
}

fn owned<A: Algorithm<Output = Decision>>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    clock: Ticker,
    algorithm: A,
) {
    let mut limiter = Limiter::new(algorithm);
    group.bench_function(name, |b| {
        b.iter(|| black_box(limiter.check_now(&clock, 1).unwrap().allowed()))
    });
}

/// Issue 33's kinds, one thread, each step 1 ms later on an explicit clock, against a plain
/// check of the exact log: a reservation of 2 settled to 1, a check of 2 with 1 refunded, and
/// a check of a calendar day (the same limit per day) in UTC.
fn settled(c: &mut Criterion) {
    use slidewin::Moment;
    use slidewin::limit::{Calendar, Kind, Rule, RuleSet};
    let mut group = c.benchmark_group("limit/issue_33/1_thread");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let quota = || Quota::new(10_000, Duration::from_secs(1)).unwrap();
    let steps = || {
        let mut now = 1_000_000_000_000_000u64;
        move || {
            now += INTERVAL;
            Moment::from_nanos(now)
        }
    };
    let mut log = Limiter::new(SlidingLog::new(quota()).unwrap());
    let mut next = steps();
    group.bench_function("sliding_log_check", |b| {
        b.iter(|| black_box(log.check(next(), 1).unwrap().allowed()))
    });
    let mut log = Limiter::new(SlidingLog::new(quota()).unwrap());
    let mut next = steps();
    group.bench_function("sliding_log_reserve_settle", |b| {
        b.iter(|| {
            let (_, reserved) = log.reserve(next(), 2).unwrap();
            black_box(log.settle(reserved.unwrap(), 1))
        })
    });
    let rule = Rule::new("log", Kind::SlidingLog, quota()).unwrap();
    let mut set = Limiter::new(RuleSet::from(rule.clone()));
    let mut next = steps();
    group.bench_function("rule_set_log_check", |b| {
        b.iter(|| black_box(set.check(next(), 1).unwrap().allowed()))
    });
    let mut refunds = Limiter::new(RuleSet::from(rule.with_refunds().unwrap()));
    let mut next = steps();
    group.bench_function("rule_set_log_check_refund", |b| {
        b.iter(|| {
            let now = next();
            black_box(refunds.check(now, 2).unwrap().allowed());
            black_box(refunds.release(now, 1))
        })
    });
    let day = "864000000 per calendar day".parse().unwrap();
    let mut calendar = Limiter::new(Calendar::new(day));
    let mut next = steps();
    group.bench_function("calendar_day_check", |b| {
        b.iter(|| black_box(calendar.check(next(), 1).unwrap().allowed()))
    });
    group.finish();
}

fn keyed(c: &mut Criterion) {
    let keyed_clock = Ticker {
        step: INTERVAL / KEYS,
    };
    for threads in [1, 2] {
        let mut group = c.benchmark_group(format!("limit/keyed_100k/{threads}_thread"));
        group
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3));

        sync_clock();
        let governor = governor::RateLimiter::dashmap_with_clock(governor_quota(), keyed_clock);
        for key in 0..KEYS {
            let _ = governor.check_key(&key);
        }
        publish_clock();
        bench(&mut group, "governor_gcra", threads, &|| {
            black_box(governor.check_key(&next_key()).is_ok());
        });
        let (gcra, fixed) = (
            Gcra::new(quota()).unwrap(),
            FixedWindow::new(quota()).unwrap(),
        );
        keyed_ours(&mut group, "slidewin_gcra", threads, keyed_clock, gcra);
        keyed_ours(
            &mut group,
            "slidewin_fixed_window",
            threads,
            keyed_clock,
            fixed,
        );
        let counter = SlidingCounter::new(quota()).unwrap();
        keyed_ours(
            &mut group,
            "slidewin_sliding_counter",
            threads,
            keyed_clock,
            counter,
        );
        let log = SlidingLog::new(quota()).unwrap();
        keyed_ours(
            &mut group,
            "slidewin_sliding_log",
            threads,
            keyed_clock,
            log,
        );
        group.finish();
    }
}

fn keyed_ours<A: Algorithm<Output = Decision>>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    threads: usize,
    clock: Ticker,
    algorithm: A,
) {
    let limiter = Keyed::<u64, _>::new(algorithm);
    sync_clock();
    for key in 0..KEYS {
        let _ = limiter.check_now(&key, &clock, 1);
    }
    publish_clock();
    bench(group, name, threads, &|| {
        black_box(limiter.check_now(&next_key(), &clock, 1).unwrap().allowed());
    });
}

/// The cap on live keys of the flood rows, and how many new keys a below-the-cap run checks
/// before it starts again on a new limiter (so that it never reaches its cap).
const FLOOD_CAP: usize = 100_000;
const FLOOD_CHUNK: usize = 1_000_000;

/// A flood of distinct keys on a `Keyed<u64, SlidingLog>` at `100/minute` with a cap of
/// 100,000: each check is a key never seen, the clock moving 10 ns a check (no key goes idle).
/// Below the cap every key is admitted and stored; at the cap every one is refused.
fn flood(c: &mut Criterion) {
    let clock = Ticker { step: 10 };
    let quota: Quota = "100/minute".parse().unwrap();
    let mut group = c.benchmark_group("limit/keyed_flood/1_thread");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let mut next = 0u64;
    group.bench_function("below_the_cap", |b| {
        b.iter_custom(|iters| {
            let mut elapsed = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                let n = (iters - done).min(FLOOD_CHUNK as u64);
                let limiter = Keyed::<u64, _>::new(SlidingLog::new(quota).unwrap())
                    .with_max_keys(FLOOD_CAP.max(2 * FLOOD_CHUNK))
                    .unwrap();
                let start = Instant::now();
                for _ in 0..n {
                    next += 1;
                    black_box(limiter.check_now(&next, &clock, 1).unwrap().allowed());
                }
                elapsed += start.elapsed();
                done += n;
                drop(limiter); // not timed
            }
            elapsed
        })
    });
    let full = Keyed::<u64, _>::new(SlidingLog::new(quota).unwrap())
        .with_max_keys(FLOOD_CAP)
        .unwrap();
    for _ in 0..FLOOD_CAP {
        next += 1;
        assert!(full.check_now(&next, &clock, 1).unwrap().allowed());
    }
    group.bench_function("flood_at_the_cap", |b| {
        b.iter(|| {
            next += 1;
            black_box(full.check_now(&next, &clock, 1).is_err())
        })
    });
    group.finish();
}

criterion_group!(benches, direct, keyed, flood, settled);
criterion_main!(benches);
