//! The workloads of Perl's `LinkedList::Single` sliding-window example again, interleaved: each round runs every workload on every
//! implementation a few times in a row (the first runs bring the allocator to that
//! implementation's steady state, the last is timed), and the best time of each over all rounds is kept. On a
//! shared machine whose speed drifts over seconds, this keeps the ratios steady where
//! criterion's one-after-the-other runs wander.
//! `cargo bench -p slidewin --bench event_window_ab`.

#[path = "support/windows.rs"]
mod windows;

use std::hint::black_box;
use std::time::{Duration, Instant};

use slidewin::EventWindow;
use windows::{ListWindow, VecWindow, Window, burst, steady};

const ROUNDS: usize = 100;
/// Untimed runs before each timed one: enough for the allocator to settle into the
/// implementation's own pattern after the others' (the burst frees and takes megabytes).
const WARM_UP: usize = 3;

type Workload = fn() -> usize;

fn implementations<W: Window>() -> [Workload; 3] {
    [
        || steady::<W>(100_000, 1),
        || steady::<W>(100_000, 100),
        || burst::<W>(200_000, 10).len(),
    ]
}

fn main() {
    let names = [
        "100k events, expire every event",
        "100k events, expire every 100",
        "burst of 200k, expire to 10",
    ];
    let contenders = [
        ("slidewin", implementations::<EventWindow<u64>>()),
        ("array_vec_drain", implementations::<VecWindow>()),
        ("list_linked_list", implementations::<ListWindow>()),
    ];
    let mut best = [[Duration::MAX; 3]; 3];
    for _ in 0..ROUNDS {
        for w in 0..names.len() {
            for (c, (_, workloads)) in contenders.iter().enumerate() {
                for _ in 0..WARM_UP {
                    black_box(workloads[w]());
                }
                let start = Instant::now();
                black_box(workloads[w]());
                best[c][w] = best[c][w].min(start.elapsed());
            }
        }
    }
    println!("| workload | slidewin | array_vec_drain | list_linked_list | vs vec | vs list |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (w, name) in names.iter().enumerate() {
        let [ours, vec, list] = [best[0][w], best[1][w], best[2][w]];
        println!(
            "| {name} | {ours:.2?} | {vec:.2?} | {list:.2?} | {:.2}x | {:.2}x |",
            vec.as_secs_f64() / ours.as_secs_f64(),
            list.as_secs_f64() / ours.as_secs_f64(),
        );
    }
}
