//! 1,000,000 calls over 10,000 keys leave nothing behind once the keys go quiet: no key is
//! held, every call got its answer, one task ran per key, and the debouncer holds no more
//! bytes than a new one (measured by a counting allocator). Alone in its binary, so that no
//! other test's allocations are counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use slidewin_shape::{Debouncer, Runtime};
use slidewin_test_support::counting_alloc::{CountingAllocator, held};

#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator;

const CALLS: u64 = 1_000_000;
const KEYS: u64 = 10_000;

/// Bytes that dropping `d` gives back: what it holds.
fn bytes_held(d: Debouncer<u64, u64>) -> isize {
    let before = held();
    drop(d);
    before - held()
}

#[test]
fn a_million_calls_over_ten_thousand_keys_leave_nothing_behind() {
    let tokio_rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    tokio_rt.block_on(async {
        let rt = Runtime::new(64).unwrap();
        let fresh: Debouncer<u64, u64> = Debouncer::new(&rt, Duration::from_millis(50)).unwrap();
        let fresh_bytes = bytes_held(fresh);

        let d: Debouncer<u64, u64> = Debouncer::new(&rt, Duration::from_millis(50)).unwrap();
        let ran = Arc::new(AtomicU64::new(0));
        let mut peak_keys = 0;
        let mut peak_bytes = 0;
        let base = held();
        // 100 rounds over every key, 1 ms apart: each key's calls merge into one run.
        for i in 0..CALLS {
            if i % KEYS == 0 && i > 0 {
                peak_keys = peak_keys.max(d.len());
                peak_bytes = peak_bytes.max(held() - base);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let ran = Arc::clone(&ran);
            drop(d.call(i % KEYS, async move { ran.fetch_add(1, Ordering::Relaxed) }));
        }
        assert_eq!(peak_keys, 10_000);
        tokio::time::sleep(Duration::from_millis(60)).await;
        tokio::task::yield_now().await;

        assert_eq!(ran.load(Ordering::Relaxed), KEYS, "one run per key");
        assert_eq!(rt.inspect().registered, KEYS);
        assert_eq!(rt.inspect().finished, KEYS);
        assert_eq!(d.len(), 0, "every key was freed");
        let after = bytes_held(d);
        println!(
            "debouncer bytes: new {fresh_bytes}, peak {peak_bytes} (process), after quiet {after}"
        );
        assert!(
            peak_bytes > 1_000_000,
            "the flood was measured: {peak_bytes}"
        );
        assert_eq!(after, fresh_bytes, "nothing left behind");
    });
}
