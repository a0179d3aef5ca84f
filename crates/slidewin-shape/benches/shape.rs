//! Overhead of `Debouncer::call` on 1,000,000 calls, on one hot key and spread over 10,000
//! keys, against awaiting each future directly (the floor) and spawning each as a tokio task
//! (running every call, unshaped), in the same run.
//! `cargo bench -p slidewin-shape --bench shape`.
//!
//! The wait (60 s) is longer than a run takes, so every call after a key's first is merged:
//! one is buffered per key and the rest replace it.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use slidewin_shape::{Debouncer, Runtime};

const CALLS: u64 = 1_000_000;

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// Time for `CALLS` calls through a new debouncer, `iters` times; setup and teardown are not
/// timed.
fn debounced(tokio_rt: &tokio::runtime::Runtime, keys: u64, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let d: Debouncer<u64, u64> = tokio_rt.block_on(async {
            let rt = Runtime::new(4).unwrap();
            Debouncer::new(&rt, Duration::from_secs(60)).unwrap()
        });
        let start = Instant::now();
        tokio_rt.block_on(async {
            for i in 0..CALLS {
                drop(black_box(d.call(i % keys, async move { i })));
            }
        });
        total += start.elapsed();
        drop(d);
        // Let the aborted key timers go.
        tokio_rt.block_on(tokio::task::yield_now());
    }
    total
}

fn direct(tokio_rt: &tokio::runtime::Runtime, iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        tokio_rt.block_on(async {
            for i in 0..CALLS {
                black_box(black_box(async move { i }).await);
            }
        });
    }
    start.elapsed()
}

fn spawned(tokio_rt: &tokio::runtime::Runtime, iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        tokio_rt.block_on(async {
            let tasks: Vec<_> = (0..CALLS).map(|i| tokio::spawn(async move { i })).collect();
            for task in tasks {
                black_box(task.await.unwrap());
            }
        });
    }
    start.elapsed()
}

fn calls(c: &mut Criterion) {
    let rt = tokio_rt();
    for (name, keys) in [("hot_key", 1), ("10k_keys", 10_000)] {
        let mut group = c.benchmark_group(format!("shape/1M_calls_{name}"));
        group.sampling_mode(SamplingMode::Flat);
        group.sample_size(10);
        group.throughput(Throughput::Elements(CALLS));
        group.bench_function("debouncer", |b| {
            b.iter_custom(|iters| debounced(&rt, keys, iters))
        });
        group.bench_function("direct_await", |b| {
            b.iter_custom(|iters| direct(&rt, iters))
        });
        group.bench_function("spawn_each", |b| b.iter_custom(|iters| spawned(&rt, iters)));
        group.finish();
    }
}

criterion_group!(benches, calls);
criterion_main!(benches);
