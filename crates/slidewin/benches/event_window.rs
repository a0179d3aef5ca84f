//! The time workloads of Perl's `LinkedList::Single` sliding-window example: `EventWindow`
//! against the example's array and list algorithms, in the same run. `cargo bench -p slidewin --bench event_window`.

use criterion::{Criterion, criterion_group, criterion_main};
use slidewin::EventWindow;

#[path = "support/windows.rs"]
mod windows;
use windows::{ListWindow, VecWindow, Window, burst, steady};

fn steady_workloads(c: &mut Criterion) {
    for every in [1, 100] {
        let mut group = c.benchmark_group(format!("event_window/100k_events_expire_every_{every}"));
        group.bench_function("slidewin", |b| {
            b.iter(|| steady::<EventWindow<u64>>(100_000, every))
        });
        group.bench_function("array_vec_drain", |b| {
            b.iter(|| steady::<VecWindow>(100_000, every))
        });
        group.bench_function("list_linked_list", |b| {
            b.iter(|| steady::<ListWindow>(100_000, every))
        });
        group.finish();
    }
}

fn burst_workload(c: &mut Criterion) {
    let mut group = c.benchmark_group("event_window/burst_200k_expire_to_10");
    group.sample_size(20);
    group.bench_function("slidewin", |b| {
        b.iter(|| burst::<EventWindow<u64>>(200_000, 10).len())
    });
    group.bench_function("array_vec_drain", |b| {
        b.iter(|| burst::<VecWindow>(200_000, 10).len())
    });
    group.bench_function("list_linked_list", |b| {
        b.iter(|| burst::<ListWindow>(200_000, 10).len())
    });
    group.finish();
}

criterion_group!(benches, steady_workloads, burst_workload);
criterion_main!(benches);
