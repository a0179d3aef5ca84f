//! Bytes held by each window after the burst of Perl's `LinkedList::Single` sliding-window
//! example (200,000 events expired down to 10), and
//! while it holds a steady 1,000 events, measured with a counting global allocator.
//! `cargo bench -p slidewin --bench event_window_memory`.

#[path = "support/windows.rs"]
mod windows;

use slidewin::EventWindow;
use slidewin_test_support::counting_alloc::{CountingAllocator, held_after};
use windows::{ListWindow, SPAN, VecWindow, Window, burst};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// The window after `SPAN` steady events, each one unit apart, with expiry after every event.
fn steady_full<W: Window>() -> W {
    let mut window = W::with_span(SPAN);
    for i in 0..3 * SPAN {
        window.record(i, i);
        window.expire(i, &mut |_, _| {});
    }
    assert_eq!(window.len() as u64, SPAN);
    window
}

fn row<W: Window>(name: &str) {
    let (after_burst, burst_bytes) = held_after(|| burst::<W>(200_000, 10));
    let (full, full_bytes) = held_after(steady_full::<W>);
    println!("| {name:<16} | {burst_bytes:>26} | {full_bytes:>27} |");
    drop((after_burst, full));
}

fn main() {
    // `cargo bench` passes flags meant for a harness; this binary has nothing to filter.
    println!("| window           | bytes held after the burst | bytes held with 1,000 live |");
    println!("|------------------|---------------------------:|----------------------------:|");
    row::<EventWindow<u64>>("slidewin");
    row::<VecWindow>("array_vec_drain");
    row::<ListWindow>("list_linked_list");
}
