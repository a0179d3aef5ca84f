//! The memory requirement of Perl's `LinkedList::Single` sliding-window example, measured: after
//! a burst of 200,000 events expires down to 10, the window holds at most 4 KiB (the example's
//! perl array kept 1.75 MB).

use std::time::Duration;

use slidewin::{EventWindow, Moment};
use slidewin_test_support::counting_alloc::{CountingAllocator, held_after};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[test]
fn linkedlist_single_burst_memory_comes_back() {
    let (mut window, at_peak) = held_after(|| {
        let mut window = EventWindow::new(Duration::from_nanos(1_000)).unwrap();
        for i in 0..200_000u64 {
            window.record(Moment::from_nanos(i), i);
        }
        window
    });
    let event_size = size_of::<(Moment, u64)>() as isize;
    assert!(
        at_peak >= 200_000 * event_size,
        "{at_peak} bytes at the peak"
    );

    let ((), change) = held_after(|| {
        for i in 0..10u64 {
            window.record(Moment::from_nanos(1_000_000 + i), i);
        }
        assert_eq!(window.expire(Moment::from_nanos(1_000_010), drop), 200_000);
    });
    let held = at_peak + change;
    assert_eq!(window.len(), 10);
    assert!(held <= 4 * 1024, "{held} bytes held for 10 events");
}
