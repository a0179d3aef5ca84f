//! A global allocator that counts the bytes held (allocated minus freed), per thread and for
//! the whole process, so that memory figures are measured, not estimated: per thread for
//! synchronous code, per process where tasks run on other threads (tokio). A test or bench
//! installs it with `#[global_allocator] static ALLOC: CountingAllocator = CountingAllocator;`.

// A global allocator cannot be written without `unsafe`; it only forwards to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};

/// Forwards to [`System`] and keeps a tally of the bytes held, per thread and in all.
pub struct CountingAllocator;

thread_local! {
    // Const-initialized and without a destructor: reading it never allocates.
    static HELD: Cell<isize> = const { Cell::new(0) };
}

static HELD_BY_PROCESS: AtomicIsize = AtomicIsize::new(0);

fn tally(delta: isize) {
    HELD_BY_PROCESS.fetch_add(delta, Ordering::Relaxed);
    // `try_with` fails only while the thread is being torn down; it is still counted above.
    let _ = HELD.try_with(|held| held.set(held.get() + delta));
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the tally is
// arithmetic on a thread-local and an atomic, neither of which allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded under the caller's guarantees.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            tally(layout.size() as isize);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded under the caller's guarantees.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            tally(layout.size() as isize);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded under the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) };
        tally(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded under the caller's guarantees.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            tally(new_size as isize - layout.size() as isize);
        }
        new
    }
}

/// Runs `f` and returns its result with the bytes it left allocated on this thread (what the
/// result holds on the heap, if `f` frees everything else).
pub fn held_after<R>(f: impl FnOnce() -> R) -> (R, isize) {
    let before = HELD.with(Cell::get);
    let result = f();
    (result, HELD.with(Cell::get) - before)
}

/// Bytes held by the whole process now.
pub fn held() -> isize {
    HELD_BY_PROCESS.load(Ordering::Relaxed)
}
