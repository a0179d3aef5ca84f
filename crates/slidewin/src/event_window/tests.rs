//! `EventWindow`'s unit tests: the window convention at its boundary, late and equal times,
//! the cap, memory given back, and payloads dropped in order.

use super::*;
use crate::slide_vec::MIN_CAPACITY;
use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;

fn secs(s: u64) -> Moment {
    Moment::from_secs(s)
}

fn window<T>(span_secs: u64) -> EventWindow<T> {
    EventWindow::new(Duration::from_secs(span_secs)).unwrap()
}

fn times<T>(w: &EventWindow<T>) -> Vec<Moment> {
    w.iter().map(|(t, _)| t).collect()
}

/// What must hold after any operation: sorted by time, the cap respected, `oldest`,
/// `newest` and `len` agreeing with the contents.
fn assert_invariants<T: PartialEq + fmt::Debug>(w: &EventWindow<T>) {
    let all: Vec<_> = w.iter().collect();
    assert!(all.windows(2).all(|p| p[0].0 <= p[1].0), "not sorted");
    assert_eq!(all.len(), w.len());
    assert_eq!(w.is_empty(), all.is_empty());
    assert_eq!(w.oldest(), all.first().copied());
    assert_eq!(w.newest(), all.last().copied());
    assert_eq!(w.iter().rev().count(), w.len());
    assert!(w.newest().is_none_or(|(t, _)| t <= w.newest_bound));
    if w.is_empty() {
        assert_eq!(w.newest_bound, Moment::ZERO);
    }
    if let Some(max) = w.max_len() {
        assert!(w.len() <= max, "{} events over the cap {max}", w.len());
    }
}

/// After `expire`, the buffer's capacity follows the shrink policy.
fn assert_capacity_policy<T>(w: &EventWindow<T>) {
    assert!(
        w.capacity() <= MIN_CAPACITY.max(8 * w.len()),
        "capacity {} for {} live events",
        w.capacity(),
        w.len()
    );
}

#[test]
fn zero_and_overlong_spans_are_errors_naming_the_value() {
    assert_eq!(
        EventWindow::<()>::new(Duration::ZERO).unwrap_err(),
        ConfigError::ZeroSpan
    );
    let err = EventWindow::<()>::new(Duration::MAX).unwrap_err();
    assert_eq!(
        err,
        ConfigError::SpanTooLong {
            span: Duration::MAX
        }
    );
    assert!(err.to_string().contains(&format!("{:?}", Duration::MAX)));
    assert_eq!(
        EventWindow::<()>::with_max_len(Duration::from_secs(1), 0).unwrap_err(),
        ConfigError::ZeroMaxLen
    );
    // The shortest and the longest spans work.
    assert!(EventWindow::<()>::new(Duration::from_nanos(1)).is_ok());
    assert!(EventWindow::<()>::new(Duration::from_nanos(u64::MAX)).is_ok());
}

#[test]
fn the_event_exactly_one_span_old_leaves() {
    let mut w = window(10);
    w.record(secs(5), 'a');
    w.record(secs(6), 'b');
    assert_eq!(w.count_in(secs(15)), 1, "5 s is not inside (5 s, 15 s]");
    assert_eq!(w.expire(secs(14), drop), 0, "5 s is inside (4 s, 14 s]");
    let mut gone = Vec::new();
    assert_eq!(w.expire(secs(15), |e| gone.push(e)), 1);
    assert_eq!(gone, [(secs(5), 'a')]);
    assert_eq!(times(&w), [secs(6)]);
    // One nanosecond short of the boundary keeps it.
    assert_eq!(w.expire(secs(16) - Duration::from_nanos(1), drop), 0);
    assert_eq!(w.expire(secs(16), drop), 1);
    assert_invariants(&w);
}

#[test]
fn empty_window_and_expire_on_empty() {
    let mut w = window::<u8>(10);
    assert_invariants(&w);
    assert_eq!(
        w.expire(Moment::MAX, |_| panic!("no event to hand over")),
        0
    );
    assert_eq!(w.count_in(Moment::MAX), 0);
    assert_eq!(w.oldest(), None);
    assert_eq!(w.newest(), None);
    assert_eq!(w.iter().next(), None);
    assert_invariants(&w);
}

#[test]
fn one_element() {
    let mut w = window(1);
    w.record(secs(3), "x");
    assert_eq!(w.oldest(), w.newest());
    assert_eq!(w.count_in(secs(3)), 1);
    assert_eq!(w.count_in(secs(2)), 0, "not yet recorded at 2 s");
    assert_eq!(w.count_in(secs(4)), 0);
    assert_eq!(w.expire(secs(3), drop), 0);
    assert_eq!(w.expire(secs(4), drop), 1);
    assert!(w.is_empty());
}

#[test]
fn equal_timestamps_keep_arrival_order_and_leave_together() {
    let mut w = window(10);
    for p in 0..5 {
        w.record(secs(1), p);
    }
    w.record(secs(0), -1); // late, before all of them
    w.record(secs(1), 5); // late relative to nothing: same time as the newest
    let order: Vec<i32> = w.iter().map(|(_, p)| *p).collect();
    assert_eq!(order, [-1, 0, 1, 2, 3, 4, 5]);
    assert_eq!(w.count_in(secs(10)), 6);
    let mut gone = Vec::new();
    assert_eq!(w.expire(secs(11), |(_, p)| gone.push(p)), 7);
    assert_eq!(gone, [-1, 0, 1, 2, 3, 4, 5]);
    assert_invariants(&w);
}

#[test]
fn out_of_order_records_go_into_place() {
    let mut w = window(100);
    for s in [10, 30, 20, 5, 30, 25, 40] {
        w.record(secs(s), s);
        assert_invariants(&w);
    }
    assert_eq!(times(&w), [5, 10, 20, 25, 30, 30, 40].map(secs).to_vec());
    // The expired events are exactly the prefix older than the cutoff.
    let mut gone = Vec::new();
    assert_eq!(w.expire(secs(125), |(t, _)| gone.push(t)), 4);
    assert_eq!(gone, [5, 10, 20, 25].map(secs).to_vec());
}

#[test]
fn a_record_already_out_of_the_window_leaves_at_the_next_expire() {
    let mut w = window(10);
    w.record(secs(100), 'n');
    assert_eq!(w.expire(secs(100), drop), 0);
    w.record(secs(1), 'o'); // 99 s late
    assert_eq!(w.count_in(secs(100)), 1);
    let mut gone = Vec::new();
    assert_eq!(w.expire(secs(100), |(_, p)| gone.push(p)), 1);
    assert_eq!(gone, ['o']);
}

#[test]
fn a_jump_far_ahead_empties_everything() {
    let mut w = window(10);
    for i in 0..1_000 {
        w.record(Moment::from_millis(i), i);
    }
    assert_eq!(w.expire(Moment::MAX, drop), 1_000);
    assert!(w.is_empty());
    assert_capacity_policy(&w);
    // ... and the window works afterwards.
    w.record(Moment::MAX, 7);
    assert_eq!(w.count_in(Moment::MAX), 1);
}

#[test]
fn time_going_backwards_expires_nothing_new() {
    let mut w = window(10);
    for s in 0..20 {
        w.record(secs(s), s);
    }
    assert_eq!(w.expire(secs(15), drop), 6); // 0..=5
    assert_eq!(w.expire(secs(3), drop), 0);
    assert_eq!(w.count_in(secs(3)), 0, "6..20 are all after 3 s");
    assert_eq!(w.expire(secs(16), drop), 1);
    assert_eq!(w.oldest(), Some((secs(7), &7)));
}

#[test]
fn near_the_origin_nothing_has_left() {
    let mut w = EventWindow::new(Duration::from_nanos(u64::MAX)).unwrap();
    w.record(Moment::ZERO, ());
    assert_eq!(w.expire(Moment::from_secs(1_000_000), drop), 0);
    assert_eq!(w.count_in(Moment::ZERO), 1);
    assert_eq!(w.expire(Moment::MAX, drop), 1);
}

#[test]
fn the_cap_evicts_the_oldest_through_the_handler() {
    let mut w = EventWindow::with_max_len(Duration::from_secs(100), 3).unwrap();
    let mut gone = Vec::new();
    for s in 1..=5 {
        w.record_with(secs(s), s, |e| gone.push(e));
        assert_invariants(&w);
    }
    assert_eq!(gone, [(secs(1), 1), (secs(2), 2)]);
    // A late event older than everything in a full window is itself the oldest.
    assert_eq!(w.record(secs(0), 0), Some((secs(0), 0)));
    // A late event in the middle evicts the front.
    assert_eq!(w.record(secs(4), 40), Some((secs(3), 3)));
    let order: Vec<u64> = w.iter().map(|(_, p)| *p).collect();
    assert_eq!(order, [4, 40, 5]);
}

#[test]
fn memory_comes_back_after_a_burst() {
    let mut w = window(10);
    for i in 0..200_000u64 {
        w.record(Moment::from_nanos(i), i);
    }
    for i in 0..10 {
        w.record(secs(100) + Duration::from_nanos(i), i);
    }
    assert!(w.capacity() >= 200_010);
    assert_eq!(w.expire(secs(105), drop), 200_000);
    assert_eq!(w.len(), 10);
    assert!(w.capacity() <= 20, "capacity {}", w.capacity());
    assert_capacity_policy(&w);
}

#[test]
fn capacity_shrinks_gradually_as_a_window_drains() {
    let mut w = window(1);
    for i in 0..10_000u64 {
        w.record(Moment::from_millis(i), ());
    }
    for i in 0..10_000u64 {
        w.expire(Moment::from_millis(i + 1_000), drop);
        assert_capacity_policy(&w);
    }
    assert!(w.capacity() <= MIN_CAPACITY);
}

/// A payload that notes in a shared log when the handler sees it and when it is dropped.
struct Probe {
    id: u32,
    log: Rc<RefCell<Vec<String>>>,
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.log.borrow_mut().push(format!("drop {}", self.id));
    }
}

fn probes(n: u32, log: &Rc<RefCell<Vec<String>>>) -> EventWindow<Probe> {
    let mut w = window(10);
    for id in 0..n {
        w.record(
            secs(u64::from(id)),
            Probe {
                id,
                log: Rc::clone(log),
            },
        );
    }
    w
}

/// `30-lifetime.t` of Perl's `LinkedList::Single` sliding-window example: each expired
/// payload is dropped after the handler has seen it and before the next is handed over, in
/// order; nothing live is dropped.
#[test]
fn linkedlist_single_lifetime_expired_payloads_drop_in_order_after_the_handler() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut w = probes(6, &log);
    let handler_log = Rc::clone(&log);
    let n = w.expire(secs(13), |(_, p)| {
        handler_log.borrow_mut().push(format!("handle {}", p.id));
    });
    assert_eq!(n, 4);
    assert_eq!(
        *log.borrow(),
        [
            "handle 0", "drop 0", "handle 1", "drop 1", "handle 2", "drop 2", "handle 3", "drop 3"
        ]
    );
    log.borrow_mut().clear();
    // A handler may keep a payload: then it lives on.
    let mut kept = Vec::new();
    assert_eq!(w.expire(secs(14), |(_, p)| kept.push(p)), 1);
    assert!(log.borrow().is_empty(), "kept payload was dropped");
    drop(kept);
    assert_eq!(*log.borrow(), ["drop 4"]);
    log.borrow_mut().clear();
    drop(w);
    assert_eq!(*log.borrow(), ["drop 5"]);
}

#[test]
fn linkedlist_single_a_panicking_handler_leaves_the_window_consistent() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut w = probes(6, &log);
    let result = catch_unwind(AssertUnwindSafe(|| {
        w.expire(secs(14), |(_, p)| {
            assert!(p.id != 2, "handler fails on 2");
        })
    }));
    assert!(result.is_err());
    // 0..=4 had expired: all are out, 3 and 4 dropped unseen during the unwind.
    assert_eq!(
        *log.borrow(),
        ["drop 0", "drop 1", "drop 2", "drop 3", "drop 4"]
    );
    assert_eq!(w.len(), 1);
    assert_eq!(w.oldest().map(|(t, p)| (t, p.id)), Some((secs(5), 5)));
    assert_invariants_probe(&w);
    // The window goes on working.
    assert_eq!(w.expire(secs(15), drop), 1);
    assert!(w.is_empty());
}

fn assert_invariants_probe(w: &EventWindow<Probe>) {
    let ids: Vec<_> = w.iter().map(|(t, p)| (t, p.id)).collect();
    assert!(ids.windows(2).all(|p| p[0].0 <= p[1].0));
    assert_eq!(ids.len(), w.len());
}

/// `40-invariants.t` of the same example, for our structure: the invariants hold after a new window,
/// records, a partial expire, a full expire, a refill, 50 record-and-expire cycles, a capped
/// record and an expire on an empty window.
#[test]
fn linkedlist_single_invariants_after_every_kind_of_step() {
    let mut w = EventWindow::with_max_len(Duration::from_secs(10), 100).unwrap();
    assert_invariants(&w);
    for s in 0..20 {
        w.record(secs(s), s);
    }
    assert_invariants(&w);
    assert_eq!(w.expire(secs(15), drop), 6);
    assert_invariants(&w);
    assert_capacity_policy(&w);
    assert_eq!(w.expire(secs(100), drop), 14);
    assert_invariants(&w);
    assert_capacity_policy(&w);
    for s in 100..130 {
        w.record(secs(s), s);
    }
    assert_invariants(&w);
    for s in 130..180 {
        w.record(secs(s), s);
        w.expire(secs(s), drop);
        assert_invariants(&w);
        assert_capacity_policy(&w);
        assert_eq!(w.len(), 10);
    }
    for s in 180..400 {
        w.record(secs(179), s);
    }
    assert_eq!(w.len(), 100, "capped");
    assert_invariants(&w);
    assert_eq!(w.expire(secs(1_000), drop), 100);
    assert_eq!(w.expire(secs(1_000), drop), 0);
    assert_invariants(&w);
    assert_capacity_policy(&w);
}
