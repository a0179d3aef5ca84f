//! [`SlideVec`]: a `Vec` that also gives up its front in O(1), for windows.
//!
//! The events stay contiguous, so that no push or hand-over wraps an index as a `VecDeque`'s
//! do: taking from the front moves a `head` index past them (as perl's `shift` does), and the
//! buffer is compacted once as many slots are dead as are live, so each event is copied at
//! most once more.
//!
//! The one `unsafe` idea: slots are `ManuallyDrop`, so a slot behind `head` whose value has been
//! taken is never dropped again. Everything else is ordinary `Vec` code on the wrappers.

// The module's unsafe is confined to `take_front`, `pop_front`, `as_slice` and `Drop`.
#![allow(unsafe_code)]

use std::fmt;
use std::mem::ManuallyDrop;

/// Below this many slots a buffer is not worth shrinking.
pub(crate) const MIN_CAPACITY: usize = 8;

/// The length of the prefix of `items` for which `before` holds (it must hold for a prefix
/// and then never): a gallop from the front, then a binary search. O(log k) for a prefix of k,
/// where a plain binary search is O(log n): windows usually drop a few items at a time.
#[inline]
pub(crate) fn gallop<T>(items: &[T], before: impl Fn(&T) -> bool) -> usize {
    let mut end = 1;
    // Invariant: every item before `end / 2` is in the prefix, and so is `items[end / 2]` once
    // `end >= 2`.
    while end < items.len() && before(&items[end]) {
        end *= 2;
    }
    let start = end / 2;
    start + items[start..end.min(items.len())].partition_point(before)
}

/// A sequence that grows at the back and shrinks at the front, stored contiguously.
///
/// Invariant: `buf[head..]` hold live values; `buf[..head]` hold values already moved out (or
/// dropped), which must never be read or dropped again.
pub(crate) struct SlideVec<T> {
    buf: Vec<ManuallyDrop<T>>,
    head: usize,
}

impl<T> SlideVec<T> {
    pub(crate) const fn new() -> SlideVec<T> {
        SlideVec {
            buf: Vec::new(),
            head: 0,
        }
    }

    /// The live values, front first.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[T] {
        let live: &[ManuallyDrop<T>] = &self.buf[self.head..];
        // SAFETY: `ManuallyDrop<T>` is `repr(transparent)` over `T`, so the slices have the same
        // layout; the slots from `head` on hold live values (the invariant).
        unsafe { &*(std::ptr::from_ref(live) as *const [T]) }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.buf.len() - self.head
    }

    /// The live values from `index` on, front first, to change in place.
    pub(crate) fn iter_mut_from(&mut self, index: usize) -> impl Iterator<Item = &mut T> {
        let from = self.head.saturating_add(index).min(self.buf.len());
        self.buf[from..].iter_mut().map(|slot| &mut **slot)
    }

    /// The back value, to change in place.
    #[inline]
    pub(crate) fn last_mut(&mut self) -> Option<&mut T> {
        if self.len() == 0 {
            return None;
        }
        self.buf.last_mut().map(|slot| &mut **slot)
    }

    /// Whether a push fits without growing the buffer.
    #[inline]
    pub(crate) fn has_room(&self) -> bool {
        self.buf.len() < self.buf.capacity()
    }

    /// Slots allocated, dead ones included.
    pub(crate) fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    #[inline]
    pub(crate) fn push(&mut self, value: T) {
        if !self.has_room() {
            // Grown by our own rule, not `Vec`'s, so that `growth_bytes` can say what a push
            // takes: room for one at first, not `Vec`'s four (many windows, a keyed log's per
            // client, never hold more than one), then doubling.
            self.buf
                .reserve_exact(self.grown_capacity() - self.buf.len());
        }
        self.buf.push(ManuallyDrop::new(value));
    }

    /// The capacity a push into a full buffer grows it to.
    #[inline]
    fn grown_capacity(&self) -> usize {
        match self.buf.capacity() {
            0 => 1,
            capacity => capacity.saturating_mul(2).max(4),
        }
    }

    /// The bytes the buffer holds on the heap.
    #[inline]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.buf.capacity() * size_of::<T>()
    }

    /// The most bytes the next push adds to the heap: none while there is room.
    #[inline]
    pub(crate) fn growth_bytes(&self) -> usize {
        if self.has_room() {
            0
        } else {
            (self.grown_capacity() - self.buf.capacity()) * size_of::<T>()
        }
    }

    /// Inserts `value` before the live value at `index` (at the back when `index == len`).
    ///
    /// # Panics
    ///
    /// If `index > len`, as `Vec::insert` does.
    pub(crate) fn insert(&mut self, index: usize, value: T) {
        self.buf.insert(self.head + index, ManuallyDrop::new(value));
    }

    /// Removes and returns the live value at `index`, moving the later ones forward.
    ///
    /// # Panics
    ///
    /// If `index >= len`, as `Vec::remove` does.
    pub(crate) fn remove(&mut self, index: usize) -> T {
        ManuallyDrop::into_inner(self.buf.remove(self.head + index))
    }

    /// Removes the first `n` values, then hands each to `f`, front first.
    ///
    /// All `n` leave before `f` sees the first, so if `f` panics the sequence is already
    /// without them; the ones `f` had not seen yet are dropped during the unwind.
    ///
    /// # Panics
    ///
    /// If `n > len` (a bounds check, before anything is removed).
    #[inline]
    pub(crate) fn take_front(&mut self, n: usize, mut f: impl FnMut(T)) {
        assert!(
            n <= self.len(),
            "take_front({n}) from {} values",
            self.len()
        );
        let start = self.head;
        // The slots are dead from here on, whatever `f` does: `head` moves first.
        self.head += n;
        /// Drops the values of the slots the loop has not reached, if `f` unwinds.
        struct Rest<'a, T>(std::slice::IterMut<'a, ManuallyDrop<T>>);
        impl<T> Drop for Rest<'_, T> {
            fn drop(&mut self) {
                for slot in &mut self.0 {
                    // SAFETY: each slot of the taken range is yielded once, by this iterator:
                    // the loop took the ones before, so this value is live until here, and it
                    // is behind `head`, so nothing drops it again.
                    unsafe { ManuallyDrop::drop(slot) };
                }
            }
        }
        let mut rest = Rest(self.buf[start..self.head].iter_mut());
        for slot in &mut rest.0 {
            // SAFETY: the slot was live (the invariant, before `head` moved past it), is yielded
            // once by the iterator, and is behind `head`, so it is never read or dropped again.
            f(unsafe { ManuallyDrop::take(slot) });
        }
        drop(rest);
        self.compact_if_half_dead();
    }

    /// Removes and returns the front value.
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        let slot = self.buf.get_mut(self.head)?;
        // SAFETY: `head < buf.len()`, so the slot is live (the invariant); `head` moves past it
        // at once, so it is never read or dropped again.
        let value = unsafe { ManuallyDrop::take(slot) };
        self.head += 1;
        self.compact_if_half_dead();
        Some(value)
    }

    /// Drops every value and frees the buffer.
    pub(crate) fn clear(&mut self) {
        *self = SlideVec::new();
    }

    /// Once at least as many slots are dead as live, drops the dead slots (moving the live ones
    /// to the front), and if at most a quarter of the buffer is then used, moves them into a
    /// new buffer of twice their number. Each compaction copies no more values than were taken
    /// since the last, and a shrink leaves the buffer half full: pushes and takes stay
    /// amortized O(1).
    #[inline]
    fn compact_if_half_dead(&mut self) {
        if self.head > 0 && self.head >= self.len() {
            self.compact();
        }
    }

    #[inline(never)]
    fn compact(&mut self) {
        let live = self.len();
        if self.buf.capacity() > MIN_CAPACITY && live <= self.buf.capacity() / 4 {
            // A new buffer and a free of the old one rather than `Vec::shrink_to`: glibc
            // shrinks a large block in place with `mremap`, handing its pages to the kernel, so
            // the next burst would fault every page in again. A freed block the allocator
            // reuses.
            let mut smaller = Vec::with_capacity((2 * live).max(MIN_CAPACITY));
            smaller.extend(self.buf.drain(self.head..));
            self.buf = smaller; // the old buffer holds only dead slots: dropping it drops nothing
        } else {
            self.buf.drain(..self.head); // dead `ManuallyDrop`s: nothing is dropped
        }
        self.head = 0;
    }
}

impl<T> Drop for SlideVec<T> {
    fn drop(&mut self) {
        for slot in &mut self.buf[self.head..] {
            // SAFETY: the slots from `head` on are live (the invariant), and the sequence is
            // going away, so each is dropped exactly once, here.
            unsafe { ManuallyDrop::drop(slot) };
        }
    }
}

impl<T: Clone> Clone for SlideVec<T> {
    fn clone(&self) -> SlideVec<T> {
        SlideVec {
            buf: self
                .as_slice()
                .iter()
                .cloned()
                .map(ManuallyDrop::new)
                .collect(),
            head: 0,
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for SlideVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::rc::Rc;

    /// Notes its drop in a shared log, so a double drop or a leak shows.
    #[derive(Clone, Debug)]
    struct Noisy(u32, Rc<RefCell<Vec<u32>>>);

    impl Drop for Noisy {
        fn drop(&mut self) {
            self.1.borrow_mut().push(self.0);
        }
    }

    fn filled(n: u32, log: &Rc<RefCell<Vec<u32>>>) -> SlideVec<Noisy> {
        let mut v = SlideVec::new();
        for i in 0..n {
            v.push(Noisy(i, Rc::clone(log)));
        }
        v
    }

    fn ids(v: &SlideVec<Noisy>) -> Vec<u32> {
        v.as_slice().iter().map(|n| n.0).collect()
    }

    #[test]
    fn every_value_is_dropped_exactly_once() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut v = filled(10, &log);
        v.take_front(3, drop);
        assert_eq!(*log.borrow(), [0, 1, 2]);
        assert_eq!(v.pop_front().map(|n| n.0), Some(3));
        v.insert(1, Noisy(100, Rc::clone(&log)));
        assert_eq!(ids(&v), [4, 100, 5, 6, 7, 8, 9]);
        let copy = v.clone();
        assert_eq!(format!("{:?}", v.as_slice().len()), "7");
        drop(v);
        drop(copy);
        let mut dropped = log.borrow().clone();
        dropped.sort_unstable();
        let mut expected: Vec<u32> = (0..10).chain([100]).chain((4..10).chain([100])).collect();
        expected.sort_unstable();
        assert_eq!(dropped, expected);
    }

    #[test]
    fn compaction_keeps_the_live_values_in_order() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut v = filled(1_000, &log);
        for expected_front in 0..990 {
            assert_eq!(v.as_slice()[0].0, expected_front);
            v.take_front(1, drop);
            assert!(v.head <= v.len(), "compacted once half is dead");
        }
        assert_eq!(ids(&v), (990..1_000).collect::<Vec<_>>());
        assert!(v.capacity() <= 8 * v.len().max(1));
        v.clear();
        assert_eq!((v.len(), v.capacity()), (0, 0));
        assert_eq!(log.borrow().len(), 1_000);
    }

    #[test]
    fn a_panic_in_the_handler_drops_the_rest_once() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut v = filled(6, &log);
        let result = catch_unwind(AssertUnwindSafe(|| {
            v.take_front(4, |n| assert!(n.0 != 1, "fails on 1"));
        }));
        assert!(result.is_err());
        assert_eq!(*log.borrow(), [0, 1, 2, 3]);
        assert_eq!(ids(&v), [4, 5]);
        drop(v);
        assert_eq!(*log.borrow(), [0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn gallop_finds_the_prefix_at_every_length() {
        for len in 0..70usize {
            let items: Vec<usize> = (0..len).collect();
            for prefix in 0..=len {
                assert_eq!(gallop(&items, |&i| i < prefix), prefix, "{prefix} of {len}");
            }
        }
    }

    #[test]
    fn taking_more_than_there_is_panics_before_anything_changes() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut v = filled(3, &log);
        let result = catch_unwind(AssertUnwindSafe(|| v.take_front(4, drop)));
        assert!(result.is_err());
        assert_eq!(ids(&v), [0, 1, 2]);
        assert!(log.borrow().is_empty());
        assert_eq!(SlideVec::<u8>::new().pop_front(), None);
    }
}
