//! Threads hammering one limiter: exact totals, and no window over the limit.

#![allow(
    clippy::cast_possible_truncation,
    reason = "counts and indices in tests are far below 2^32"
)]

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use slidewin::{
    AtomicLimiter, Clock, FixedWindow, Gcra, Keyed, Moment, SharedLimiter, SlidingCounter,
    SlidingLog,
};

const THREADS: usize = 4;

thread_local! {
    /// The time this thread's last clock reading gave.
    static LAST_READ: Cell<Moment> = const { Cell::new(Moment::ZERO) };
}

/// A clock that moves a few nanoseconds at every reading, shared by all threads, and tells
/// each thread what its own last reading was.
struct TickingClock {
    next: AtomicU64,
    step: u64,
}

impl Clock for TickingClock {
    fn now(&self) -> Moment {
        let now = Moment::from_nanos(self.next.fetch_add(self.step, Ordering::SeqCst));
        LAST_READ.with(|last| last.set(now));
        now
    }
}

fn spawn_all<T: Send + 'static>(work: impl Fn(usize) -> T + Send + Sync + 'static) -> Vec<T> {
    let work = Arc::new(work);
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let work = Arc::clone(&work);
            thread::spawn(move || work(i))
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Every admitted time is recorded; no window `(t - span, t]` may hold more than the limit.
#[test]
fn sliding_log_under_threads_never_exceeds_the_limit_in_any_window() {
    const LIMIT: usize = 10;
    const SPAN: u64 = 1_000;
    let limiter = Arc::new(
        SharedLimiter::<SlidingLog>::new(
            slidewin::Quota::new(LIMIT as u64, Duration::from_nanos(SPAN)).unwrap(),
        )
        .unwrap(),
    );
    let clock = Arc::new(TickingClock {
        next: AtomicU64::new(1_000_000),
        step: 7,
    });
    let per_thread = {
        let (limiter, clock) = (Arc::clone(&limiter), Arc::clone(&clock));
        spawn_all(move |_| {
            let mut admitted = Vec::new();
            for _ in 0..20_000 {
                if limiter.check_now(&*clock, 1).unwrap().allowed() {
                    admitted.push(LAST_READ.with(Cell::get).as_nanos());
                }
            }
            admitted
        })
    };
    let mut admitted: Vec<u64> = per_thread.into_iter().flatten().collect();
    admitted.sort_unstable();
    assert!(admitted.len() > 1_000, "only {} admitted", admitted.len());
    // The worst window ends at an admission; both ends are found by binary search.
    for (i, &end) in admitted.iter().enumerate() {
        let start = admitted.partition_point(|&t| t + SPAN <= end);
        assert!(
            i + 1 - start <= LIMIT,
            "{} admitted in the window ending at {end}",
            i + 1 - start
        );
    }
}

/// At one moment, however the threads interleave, exactly the quota is admitted; then exactly
/// what refills.
#[test]
fn atomic_gcra_admits_exact_totals_under_threads() {
    let limiter =
        Arc::new(AtomicLimiter::<Gcra>::new("1000/s burst 100".parse().unwrap()).unwrap());
    let barrier = Arc::new(Barrier::new(THREADS));
    let steps = [(0, 100), (10, 10), (10, 0), (1_000, 100), (1_005, 5)];
    let totals = {
        let (limiter, barrier) = (Arc::clone(&limiter), Arc::clone(&barrier));
        spawn_all(move |_| {
            steps
                .iter()
                .map(|&(at_ms, _)| {
                    barrier.wait();
                    (0..500)
                        .filter(|_| {
                            limiter
                                .check(Moment::from_millis(at_ms), 1)
                                .unwrap()
                                .allowed()
                        })
                        .count()
                })
                .collect::<Vec<_>>()
        })
    };
    for (step, &(at_ms, expected)) in steps.iter().enumerate() {
        let admitted: usize = totals.iter().map(|t| t[step]).sum();
        assert_eq!(admitted, expected, "at {at_ms} ms");
    }
}

#[test]
fn atomic_fixed_window_admits_exactly_the_limit_per_window_under_threads() {
    let limiter = Arc::new(AtomicLimiter::<FixedWindow>::new("250/s".parse().unwrap()).unwrap());
    let per_thread = {
        let limiter = Arc::clone(&limiter);
        spawn_all(move |i| {
            let mut per_window = [0usize; 3];
            for n in 0..3_000u64 {
                // Each thread walks the three windows at its own pace.
                let window = ((n + i as u64 * 7) / 1_000) % 3;
                let at = Moment::from_millis(window * 1_000 + n % 1_000);
                if limiter.check(at, 1).unwrap().allowed() {
                    per_window[window as usize] += 1;
                }
            }
            per_window
        })
    };
    // A thread still in window 0 after another moved on to window 1 counts in window 1 (the
    // limiter's timeline never goes back), so the split by the threads' own windows varies;
    // the total is exact: each window fills before any thread leaves it.
    let total: usize = per_thread.iter().flatten().sum();
    assert_eq!(total, 750, "{per_thread:?}");
}

#[test]
fn shared_sliding_counter_and_keyed_log_admit_exact_totals_under_threads() {
    let counter =
        Arc::new(SharedLimiter::<SlidingCounter>::new("300/minute".parse().unwrap()).unwrap());
    let keyed = Arc::new(Keyed::<u64, SlidingLog>::new("50/minute".parse().unwrap()).unwrap());
    let per_thread = {
        let (counter, keyed) = (Arc::clone(&counter), Arc::clone(&keyed));
        spawn_all(move |_| {
            let now = Moment::from_secs(30);
            let from_counter = (0..1_000)
                .filter(|_| counter.check(now, 1).unwrap().allowed())
                .count();
            let mut per_key = [0usize; 8];
            for n in 0..4_000u64 {
                let key = n % 8;
                if keyed.check(&key, now, 1).unwrap().allowed() {
                    per_key[key as usize] += 1;
                }
            }
            (from_counter, per_key)
        })
    };
    assert_eq!(per_thread.iter().map(|t| t.0).sum::<usize>(), 300);
    for key in 0..8 {
        assert_eq!(
            per_thread.iter().map(|t| t.1[key]).sum::<usize>(),
            50,
            "key {key}"
        );
    }
}
