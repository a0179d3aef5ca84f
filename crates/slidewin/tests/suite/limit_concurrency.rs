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

use slidewin::limit::{FixedWindow, Gcra, LimitError, SlidingCounter, SlidingLog};
use slidewin::{Clock, Keyed, Moment, SharedLimiter};

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
    let limiter = Arc::new(SharedLimiter::new(
        SlidingLog::new(slidewin::Quota::new(LIMIT as u64, Duration::from_nanos(SPAN)).unwrap())
            .unwrap(),
    ));
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
    let limiter = Arc::new(SharedLimiter::new(
        Gcra::new("1000/s burst 100".parse().unwrap()).unwrap(),
    ));
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
    let limiter = Arc::new(SharedLimiter::new(
        FixedWindow::new("250/s".parse().unwrap()).unwrap(),
    ));
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
    let counter = Arc::new(SharedLimiter::new(
        SlidingCounter::new("300/minute".parse().unwrap()).unwrap(),
    ));
    let keyed = Arc::new(Keyed::<u64, _>::new(
        SlidingLog::new("50/minute".parse().unwrap()).unwrap(),
    ));
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

/// Threads flooding a capped `Keyed` with new keys while they share a hot key, with time
/// moving on so that keys go idle and give way: the cap holds at every moment, the hot key is
/// never over-admitted, and every place under the cap comes back (none is lost to a race).
#[test]
fn keyed_flood_at_the_cap_under_threads_holds_the_cap_and_the_hot_key() {
    const CAP: usize = 500;
    const PER_THREAD: u64 = 40_000;
    const HOT: u64 = u64::MAX;
    let limiter = Arc::new(
        Keyed::<u64, _>::new(
            SlidingLog::new(slidewin::Quota::new(5, Duration::from_micros(100)).unwrap()).unwrap(),
        )
        .with_max_keys(CAP)
        .unwrap(),
    );
    let clock = Arc::new(TickingClock {
        next: AtomicU64::new(1),
        step: 3,
    });
    let per_thread = {
        let (limiter, clock) = (Arc::clone(&limiter), Arc::clone(&clock));
        spawn_all(move |thread| {
            let (mut hot, mut refused, mut admitted) = (Vec::new(), 0u64, 0u64);
            for i in 0..PER_THREAD {
                let key = thread as u64 * PER_THREAD + i;
                match limiter.check_now(&key, &*clock, 1) {
                    Ok(decision) => admitted += u64::from(decision.allowed()),
                    Err(LimitError::KeysFull { cap }) => {
                        assert_eq!(cap, CAP);
                        refused += 1;
                    }
                    Err(other) => panic!("{other}"),
                }
                if i % 16 == 0 {
                    // The hot key may itself be refused at the cap (it is new each time it has
                    // gone idle); when admitted, its time is recorded.
                    if let Ok(d) = limiter.check_now(&HOT, &*clock, 1) {
                        if d.allowed() {
                            hot.push(LAST_READ.with(Cell::get));
                        }
                    }
                }
                assert!(limiter.len() <= CAP);
            }
            (hot, refused, admitted)
        })
    };
    let mut hot: Vec<Moment> = per_thread.iter().flat_map(|(h, _, _)| h.clone()).collect();
    hot.sort_unstable();
    for (i, t) in hot.iter().enumerate() {
        let in_window = hot[..=i]
            .iter()
            .filter(|&&u| t.as_nanos() - u.as_nanos() < 100_000)
            .count();
        assert!(
            in_window <= 5,
            "{in_window} hot admissions in the window ending at {t}"
        );
    }
    let refused: u64 = per_thread.iter().map(|(_, r, _)| r).sum();
    let admitted: u64 = per_thread.iter().map(|(_, _, a)| a).sum();
    assert!(
        refused > 0 && admitted > CAP as u64,
        "{refused} refused, {admitted} admitted"
    );
    // The places taken are the keys held, one for one: none lost to a race, none doubled.
    let held = limiter.len();
    let found = (0..THREADS as u64 * PER_THREAD)
        .chain([HOT])
        .filter(|key| limiter.reset(key))
        .count();
    assert_eq!(found, held);
    assert!(limiter.is_empty());
    // And every place comes back.
    let later = Moment::from_secs(10);
    for key in 0..CAP as u64 {
        assert!(
            limiter.check(&key, later, 1).unwrap().allowed(),
            "place {key}"
        );
    }
    assert!(limiter.check(&(CAP as u64), later, 1).is_err());
}

/// Threads on two limiters sharing one memory budget, keys coming, logs growing, sweeps and
/// resets going on: the budget is never overdrawn (it is read after every refusal), and once
/// every key is gone exactly nothing is left on it.
#[test]
fn threads_on_one_memory_budget_never_overdraw_it_and_leave_nothing() {
    use slidewin::limit::MemoryBudget;
    const BUDGET: usize = 48 * 1024;
    let budget = Arc::new(MemoryBudget::new(BUDGET));
    let quota = || "64/s".parse().unwrap();
    let logs = Arc::new(
        Keyed::<u64, _>::new(SlidingLog::new(quota()).unwrap())
            .with_max_keys(10_000)
            .unwrap()
            .with_memory_budget(Arc::clone(&budget), |_| 0),
    );
    let strings = Arc::new(
        Keyed::<String, _>::new(SlidingLog::new(quota()).unwrap())
            .with_memory_budget(Arc::clone(&budget), |k: &String| k.capacity()),
    );
    let barrier = Arc::new(Barrier::new(THREADS));
    let refused = AtomicU64::new(0);
    thread::scope(|scope| {
        for t in 0..THREADS as u64 {
            let (logs, strings, barrier, budget) = (&logs, &strings, &barrier, &budget);
            let refused = &refused;
            scope.spawn(move || {
                barrier.wait();
                for i in 0..20_000u64 {
                    let key = (i * 7 + t) % 500;
                    let now = Moment::from_millis(i / 8);
                    let answer = if i % 3 == 0 {
                        strings
                            .check(format!("k{key}").as_str(), now, 1)
                            .map(|_| ())
                    } else {
                        logs.check(&key, now, 1).map(|_| ())
                    };
                    match answer {
                        Ok(()) => {}
                        Err(LimitError::MemoryFull { .. }) => {
                            refused.fetch_add(1, Ordering::Relaxed);
                            assert!(budget.used_bytes() <= BUDGET, "{budget:?}");
                        }
                        Err(other) => panic!("{other}"),
                    }
                    if i % 997 == 0 {
                        logs.sweep(now);
                        logs.reset(&key);
                    }
                }
            });
        }
    });
    assert!(
        refused.load(Ordering::Relaxed) > 0,
        "the budget was reached"
    );
    assert!(budget.used_bytes() <= BUDGET, "{budget:?}");
    let later = Moment::from_secs(3_600);
    logs.sweep(later);
    strings.sweep(later);
    assert!(logs.is_empty() && strings.is_empty());
    assert_eq!(budget.used_bytes(), 0, "{budget:?}");
}
