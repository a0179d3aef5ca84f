//! [`backoff`]: how the lock-free structures wait for another thread's few stores.

/// Waits a little for another thread's few stores: spins first, then gives up the core (under
/// loom, yields to the model's scheduler).
pub(crate) fn backoff(spins: &mut u32) {
    *spins += 1;
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}
