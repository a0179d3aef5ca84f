//! `WindowMetrics` against a `Mutex`-protected ring and sentinel-core's leap array, and
//! `MovingStat` against a version that stores every event, in the same run.
//! `cargo bench -p slidewin --bench stats` (BENCHMARKS.md has the figures).

#[path = "support/stats_workloads.rs"]
mod stats_workloads;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use slidewin::stats::MetricEvent;
use stats_workloads::{
    STEP, filled, moving_naive, moving_ours, mutex_default, on_threads, record_mutex, record_ours,
    record_ours_sentinel_clock, record_sentinel, sentinel_default, sentinel_node, sentinel_qps,
};

fn record(c: &mut Criterion) {
    let mut group = c.benchmark_group("stats/record/1_thread");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let ours = sentinel_default();
    let mut base = 0;
    group.bench_function("slidewin_explicit_time", |b| {
        b.iter_custom(|iters| {
            let start = std::time::Instant::now();
            base = record_ours(&ours, base, iters);
            start.elapsed()
        })
    });
    let mutex = mutex_default();
    let mut base = 0;
    group.bench_function("mutex_explicit_time", |b| {
        b.iter_custom(|iters| {
            let start = std::time::Instant::now();
            base = record_mutex(&mutex, base, iters);
            start.elapsed()
        })
    });
    let node = sentinel_node();
    group.bench_function("sentinel_core", |b| {
        b.iter_custom(|iters| {
            let start = std::time::Instant::now();
            record_sentinel(&*node, iters);
            start.elapsed()
        })
    });
    let on_sentinel_clock = sentinel_default();
    group.bench_function("slidewin_sentinel_clock", |b| {
        b.iter_custom(|iters| {
            let start = std::time::Instant::now();
            record_ours_sentinel_clock(&on_sentinel_clock, iters);
            start.elapsed()
        })
    });
    group.finish();

    // Two threads on one object, each recording `iters` events at the same times as the other
    // (both in the same bucket, both racing for each recycle).
    let mut group = c.benchmark_group("stats/record/2_threads");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let ours = sentinel_default();
    let next = AtomicU64::new(0);
    group.bench_function("slidewin_explicit_time", |b| {
        b.iter_custom(|iters| {
            let base = next.fetch_add(iters * STEP, Ordering::Relaxed);
            on_threads(2, &|_| {
                record_ours(&ours, base, iters);
            })
        })
    });
    let mutex = mutex_default();
    let next = AtomicU64::new(0);
    group.bench_function("mutex_explicit_time", |b| {
        b.iter_custom(|iters| {
            let base = next.fetch_add(iters * STEP, Ordering::Relaxed);
            on_threads(2, &|_| {
                record_mutex(&mutex, base, iters);
            })
        })
    });
    let node = sentinel_node();
    group.bench_function("sentinel_core", |b| {
        b.iter_custom(|iters| on_threads(2, &|_| record_sentinel(&*node, iters)))
    });
    group.finish();
}

fn read(c: &mut Criterion) {
    for buckets in [2, 60] {
        let mut group = c.benchmark_group(format!("stats/read_qps/{buckets}_buckets"));
        group
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3));
        let (ours, mutex, now) = filled(buckets);
        group.bench_function("slidewin", |b| {
            b.iter(|| black_box(ours.rate(black_box(now), MetricEvent::Pass)))
        });
        group.bench_function("slidewin_all_figures", |b| {
            b.iter(|| black_box(ours.stats(black_box(now))))
        });
        group.bench_function("mutex", |b| {
            b.iter(|| black_box(mutex.rate(black_box(now), MetricEvent::Pass)))
        });
        if buckets == 2 {
            let node = sentinel_node();
            group.bench_function("sentinel_core", |b| {
                b.iter(|| black_box(sentinel_qps(&*node)))
            });
        }
        group.finish();
    }
}

fn moving(c: &mut Criterion) {
    let mut group = c.benchmark_group("stats/moving_stat_120k_events");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for every in [1_000, 100] {
        group.bench_function(format!("slidewin_tally_every_{every}"), |b| {
            b.iter(|| moving_ours(every))
        });
        group.bench_function(format!("naive_tally_every_{every}"), |b| {
            b.iter(|| moving_naive(every))
        });
    }
    group.finish();
}

criterion_group!(benches, record, read, moving);
criterion_main!(benches);
