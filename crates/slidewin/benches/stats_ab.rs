//! The statistics' workloads interleaved: each round runs every contender of every workload
//! once (after one untimed run), and the best time of each over all rounds is kept. On a
//! shared machine whose speed drifts over seconds, the ratios hold steadier than criterion's
//! one-after-the-other runs. `cargo bench -p slidewin --bench stats_ab` prints the table.

#[path = "support/stats_workloads.rs"]
mod stats_workloads;

use std::hint::black_box;
use std::time::{Duration, Instant};

use slidewin::stats::MetricEvent;
use stats_workloads::{
    MOVING_EVENTS, STEP, filled, moving_naive, moving_ours, mutex_default, on_threads,
    record_mutex, record_ours, record_ours_sentinel_clock, record_sentinel, sentinel_default,
    sentinel_node, sentinel_qps,
};

const ROUNDS: usize = 30;
const RECORDS: u64 = 1_000_000;
const READS: u64 = 100_000;

struct Contender<'a> {
    workload: &'static str,
    name: &'static str,
    /// Operations per run, to report time per operation.
    ops: u64,
    run: Box<dyn FnMut() + 'a>,
    best: Duration,
}

fn contender<'a>(
    workload: &'static str,
    name: &'static str,
    ops: u64,
    run: impl FnMut() + 'a,
) -> Contender<'a> {
    Contender {
        workload,
        name,
        ops,
        run: Box::new(run),
        best: Duration::MAX,
    }
}

fn main() {
    let (ours, mutex, node) = (sentinel_default(), mutex_default(), sentinel_node());
    let (ours2, mutex2) = (sentinel_default(), mutex_default());
    let on_clock = sentinel_default();
    let (filled2, mutex_filled2, now2) = filled(2);
    let (filled60, mutex_filled60, now60) = filled(60);
    let (mut base, mut base_mutex, mut base2, mut base_mutex2) = (0, 0, 0, 0);
    let mut contenders = vec![
        contender(
            "record, 1 thread",
            "slidewin (explicit time)",
            RECORDS,
            || {
                base = record_ours(&ours, base, RECORDS);
            },
        ),
        contender(
            "record, 1 thread",
            "slidewin (sentinel's clock)",
            RECORDS,
            || {
                record_ours_sentinel_clock(&on_clock, RECORDS);
            },
        ),
        contender("record, 1 thread", "mutex (explicit time)", RECORDS, || {
            base_mutex = record_mutex(&mutex, base_mutex, RECORDS);
        }),
        contender("record, 1 thread", "sentinel-core", RECORDS, || {
            record_sentinel(&*node, RECORDS);
        }),
        contender(
            "record, 2 threads",
            "slidewin (explicit time)",
            RECORDS,
            || {
                let b = base2;
                on_threads(2, &|_| {
                    record_ours(&ours2, b, RECORDS);
                });
                base2 += RECORDS * STEP;
            },
        ),
        contender(
            "record, 2 threads",
            "mutex (explicit time)",
            RECORDS,
            || {
                let b = base_mutex2;
                on_threads(2, &|_| {
                    record_mutex(&mutex2, b, RECORDS);
                });
                base_mutex2 += RECORDS * STEP;
            },
        ),
        contender("record, 2 threads", "sentinel-core", RECORDS, || {
            on_threads(2, &|_| record_sentinel(&*node, RECORDS));
        }),
        contender("read QPS, 2 buckets", "slidewin", READS, || {
            for _ in 0..READS {
                black_box(filled2.rate(black_box(now2), MetricEvent::Pass));
            }
        }),
        contender("read QPS, 2 buckets", "mutex", READS, || {
            for _ in 0..READS {
                black_box(mutex_filled2.rate(black_box(now2), MetricEvent::Pass));
            }
        }),
        contender("read QPS, 2 buckets", "sentinel-core", READS, || {
            for _ in 0..READS {
                black_box(sentinel_qps(&*node));
            }
        }),
        contender("read QPS, 60 buckets", "slidewin", READS, || {
            for _ in 0..READS {
                black_box(filled60.rate(black_box(now60), MetricEvent::Pass));
            }
        }),
        contender("read QPS, 60 buckets", "mutex", READS, || {
            for _ in 0..READS {
                black_box(mutex_filled60.rate(black_box(now60), MetricEvent::Pass));
            }
        }),
        contender(
            "MovingStat add, tally every 100",
            "slidewin",
            MOVING_EVENTS,
            || {
                black_box(moving_ours(100));
            },
        ),
        contender(
            "MovingStat add, tally every 100",
            "naive (every event)",
            MOVING_EVENTS,
            || {
                black_box(moving_naive(100));
            },
        ),
    ];
    for _ in 0..ROUNDS {
        for c in &mut contenders {
            (c.run)();
            let start = Instant::now();
            (c.run)();
            c.best = c.best.min(start.elapsed());
        }
    }
    println!("| workload | contender | best per operation | vs the first |");
    println!("|---|---|---:|---:|");
    let mut first = None;
    let mut workload = "";
    for c in &contenders {
        #[allow(clippy::cast_precision_loss, reason = "a display")]
        let per_op = c.best.as_secs_f64() * 1e9 / c.ops as f64;
        if c.workload != workload {
            workload = c.workload;
            first = Some(per_op);
        }
        let ratio = per_op / first.unwrap_or(per_op);
        println!(
            "| {} | {} | {per_op:.1} ns | {ratio:.2}x |",
            c.workload, c.name
        );
    }
}
