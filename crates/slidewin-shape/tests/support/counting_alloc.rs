//! A global allocator that counts the bytes held by the whole process (allocated minus
//! freed), so that memory figures are measured, not estimated. Shared by the memory test and
//! the memory bench through `#[path]`.

// Each user takes a part.
#![allow(dead_code, unreachable_pub)]
// A global allocator cannot be written without `unsafe`; it only forwards to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// Forwards to [`System`] and keeps a tally of the bytes held.
pub struct CountingAllocator;

static HELD: AtomicIsize = AtomicIsize::new(0);

fn size(bytes: usize) -> isize {
    isize::try_from(bytes).unwrap_or(isize::MAX)
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the tally is
// an atomic add that never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded under the caller's guarantees.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            HELD.fetch_add(size(layout.size()), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded under the caller's guarantees.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            HELD.fetch_add(size(layout.size()), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded under the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) };
        HELD.fetch_sub(size(layout.size()), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded under the caller's guarantees.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            HELD.fetch_add(size(new_size) - size(layout.size()), Ordering::Relaxed);
        }
        new
    }
}

/// Bytes held by the process now.
pub fn held() -> isize {
    HELD.load(Ordering::Relaxed)
}
