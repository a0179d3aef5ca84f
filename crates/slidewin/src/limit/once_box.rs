//! [`OnceBox`]: a box made on first use through `&self`, in one word.
//!
//! [`Keyed`](crate::Keyed) keeps one per shard, so that a limiter holds only the shards its
//! keys have reached: `OnceLock<Box<T>>` would do, in twice the space (its state word beside the
//! pointer), and a limiter keeps 64 of them inline.
//!
//! The one `unsafe` idea: the pointer is null until a box leaked by `Box::into_raw` is
//! published into it by a single compare-and-swap; after that it never changes, and only `Drop`
//! (with `&mut self`, so no borrow is live) takes the box back. `once_cell`'s `race::OnceBox` is
//! the same.

// The module's unsafe is confined to `get`, `get_or_init` and `Drop`.
#![allow(unsafe_code)]

use std::fmt;
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

/// A `Box<T>` made by the first [`get_or_init`](OnceBox::get_or_init). Threads that race to
/// make it may each make one; the first published wins, and the others drop theirs.
pub(crate) struct OnceBox<T> {
    /// Null, or a pointer from `Box::into_raw`, owned by this value.
    ptr: AtomicPtr<T>,
    /// Owns a `T`: for the drop check, and so that it is `Send` only if `T` is.
    owns: PhantomData<Box<T>>,
}

// SAFETY: a shared `OnceBox` hands out `&T` to every thread (so `T: Sync`), and the `T` one
// thread makes through `get_or_init` is dropped by whichever thread drops the `OnceBox` (so
// `T: Send`): the bounds of `OnceLock<T>`'s `Sync`.
unsafe impl<T: Send + Sync> Sync for OnceBox<T> {}

impl<T> OnceBox<T> {
    /// Empty: nothing allocated.
    pub(crate) const fn new() -> OnceBox<T> {
        OnceBox {
            ptr: AtomicPtr::new(ptr::null_mut()),
            owns: PhantomData,
        }
    }

    /// The value, if it has been made: one load.
    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        let ptr = self.ptr.load(Ordering::Acquire);
        // SAFETY: non-null only once `get_or_init` published a pointer from `Box::into_raw`,
        // with `Release` (paired with this `Acquire`, so the value it points to is visible). It
        // is never changed again, and freed only by `Drop`, which needs `&mut self`: it outlives
        // the borrow of `self` returned.
        unsafe { ptr.as_ref() }
    }

    /// The value, made by `make` if there is none yet.
    #[cold]
    #[inline(never)]
    pub(crate) fn get_or_init(&self, make: impl FnOnce() -> T) -> &T {
        if let Some(value) = self.get() {
            return value;
        }
        let new = Box::into_raw(Box::new(make()));
        let published =
            self.ptr
                .compare_exchange(ptr::null_mut(), new, Ordering::AcqRel, Ordering::Acquire);
        match published {
            // SAFETY: `new` is from `Box::into_raw`, now published and owned by `self`: as in
            // `get`, it lives as long as `self` is borrowed.
            Ok(_) => unsafe { &*new },
            Err(theirs) => {
                // SAFETY: `new` was never published, so nothing else can see it: it is still
                // only ours, from `Box::into_raw`.
                drop(unsafe { Box::from_raw(new) });
                // SAFETY: `theirs` is non-null (the exchange expected null), published by the
                // thread that won, with `Release`, read here with `Acquire`: as in `get`.
                unsafe { &*theirs }
            }
        }
    }
}

impl<T> Drop for OnceBox<T> {
    fn drop(&mut self) {
        let ptr = *self.ptr.get_mut();
        if !ptr.is_null() {
            // SAFETY: a pointer from `Box::into_raw`, published once and never freed before;
            // `&mut self` means no `&T` from `get` is still alive.
            drop(unsafe { Box::from_raw(ptr) });
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for OnceBox<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OnceBox").field(&self.get()).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier};

    use super::*;

    /// Counts the values made and dropped.
    #[derive(Debug)]
    struct Counted<'a>(&'a AtomicUsize);

    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn make(live: &AtomicUsize) -> Counted<'_> {
        live.fetch_add(1, Ordering::Relaxed);
        Counted(live)
    }

    #[test]
    fn made_once_then_kept_then_dropped() {
        let live = AtomicUsize::new(0);
        let slot = OnceBox::new();
        assert!(slot.get().is_none());
        assert_eq!(format!("{slot:?}"), "OnceBox(None)");
        let first: *const Counted<'_> = slot.get_or_init(|| make(&live));
        let again: *const Counted<'_> = slot.get_or_init(|| unreachable!("already made"));
        assert_eq!(first, again);
        assert!(slot.get().is_some_and(|value| ptr::eq(value, first)));
        assert_eq!(live.load(Ordering::Relaxed), 1);
        drop(slot);
        assert_eq!(
            live.load(Ordering::Relaxed),
            0,
            "the value was dropped with its box"
        );
        assert_eq!(size_of::<OnceBox<Counted<'_>>>(), 8);
    }

    /// Threads released together all try to make it: every one sees the same value, and the
    /// values of those that lost are dropped at once.
    #[test]
    fn threads_racing_see_one_value_and_leak_none() {
        const THREADS: usize = 8;
        for _ in 0..100 {
            let live = AtomicUsize::new(0);
            let slot = OnceBox::new();
            let start = Arc::new(Barrier::new(THREADS));
            let seen: Vec<usize> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..THREADS)
                    .map(|_| {
                        let start = Arc::clone(&start);
                        let (slot, live) = (&slot, &live);
                        scope.spawn(move || {
                            start.wait();
                            ptr::from_ref(slot.get_or_init(|| make(live))).addr()
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            assert!(seen.iter().all(|&at| at == seen[0]), "{seen:?}");
            assert_eq!(
                live.load(Ordering::Relaxed),
                1,
                "the losers' values are dropped"
            );
            drop(slot);
            assert_eq!(live.load(Ordering::Relaxed), 0);
        }
    }
}
