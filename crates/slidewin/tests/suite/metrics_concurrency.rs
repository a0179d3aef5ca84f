//! Threads hammering one `WindowMetrics` across bucket recycles: exact totals, and reads that
//! are never torn.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use slidewin::stats::MetricEvent;
use slidewin::{Moment, WindowMetrics};

const THREADS: u64 = 4;
const PASS: MetricEvent = MetricEvent::Pass;

/// Each round, every worker adds to a bucket the ring last held two rounds ago, so the first
/// add of the round recycles it while the others race with the recycle (Sentinel's lost-update
/// race). The workers start each round together, spinning on a shared round number (a
/// sleeping barrier would wake them microseconds apart, and the race would never happen).
/// After each round the bucket holds exactly what the round added, and the window exactly the
/// last two rounds. A reader thread reads throughout and never sees more than could be there.
#[test]
fn rounds_across_recycles_count_exactly() {
    const WORKERS: u64 = 2;
    const ROUNDS: u64 = 50_000;
    const PER_WORKER: u64 = 64;
    const BUCKET: u64 = 1_000;
    let metrics = WindowMetrics::new(Duration::from_nanos(2 * BUCKET), 2, Moment::ZERO).unwrap();
    // Round `r` starts when `round` is `r + 1`; `finished` counts the workers done with it.
    let round = AtomicU64::new(0);
    let finished = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let max_seen = AtomicU64::new(0);
    let wait_until = |cond: &dyn Fn() -> bool| {
        let mut spins = 0_u32;
        while !cond() {
            spins += 1;
            if spins % 64 == 0 {
                thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    };
    thread::scope(|scope| {
        for worker in 0..WORKERS {
            let (metrics, round, finished) = (&metrics, &round, &finished);
            scope.spawn(move || {
                for r in 0..ROUNDS {
                    wait_until(&|| round.load(Ordering::Acquire) > r);
                    for i in 0..PER_WORKER {
                        let t = Moment::from_nanos(r * BUCKET + (i * 7 + worker) % BUCKET);
                        metrics.add(t, PASS, 1);
                        if i % 4 == 0 {
                            metrics.add_rt(t, Duration::from_nanos(100 + worker * 10 + r % 3));
                        }
                    }
                    finished.fetch_add(1, Ordering::AcqRel);
                }
            });
        }
        {
            let (metrics, round, done, max_seen) = (&metrics, &round, &done, &max_seen);
            scope.spawn(move || {
                while !done.load(Ordering::Acquire) {
                    let r = round.load(Ordering::Acquire).saturating_sub(1);
                    let now = Moment::from_nanos(r * BUCKET + BUCKET - 1);
                    let count = metrics.stats(now).count(PASS);
                    max_seen.fetch_max(count, Ordering::Relaxed);
                    assert!(count <= 2 * WORKERS * PER_WORKER, "torn read: {count}");
                    thread::yield_now();
                }
            });
        }
        // Should an assertion below fail, let the workers and the reader finish (the scope
        // joins them before the panic goes on).
        let _release = Release(&round, &done);
        let mut erased = Vec::new();
        for r in 0..ROUNDS {
            round.store(r + 1, Ordering::Release);
            wait_until(&|| finished.load(Ordering::Acquire) == (r + 1) * WORKERS);
            let now = Moment::from_nanos(r * BUCKET + BUCKET - 1);
            let bucket = metrics.current_bucket(now).unwrap();
            if bucket.count(PASS) != WORKERS * PER_WORKER {
                erased.push((r, bucket.count(PASS)));
                continue;
            }
            assert_eq!(bucket.rt_count(), WORKERS * PER_WORKER / 4, "round {r}");
            let fastest = Duration::from_nanos(100 + r % 3);
            assert_eq!(bucket.min_rt(), Some(fastest), "round {r}");
            let slowest = Duration::from_nanos(100 + (WORKERS - 1) * 10 + r % 3);
            assert_eq!(bucket.max_rt(), Some(slowest), "round {r}");
            let window = metrics.stats(now).count(PASS);
            assert_eq!(window, WORKERS * PER_WORKER * (r.min(1) + 1), "round {r}");
        }
        done.store(true, Ordering::Release);
        assert!(
            erased.is_empty(),
            "rounds whose counts were lost: {erased:?}"
        );
    });
    assert!(max_seen.load(Ordering::Relaxed) > 0);
}

/// On drop: every round released, the reader stopped.
struct Release<'a>(&'a AtomicU64, &'a AtomicBool);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.store(u64::MAX, Ordering::Release);
        self.1.store(true, Ordering::Release);
    }
}

/// Threads reading one shared clock that ticks at every reading, so their adds interleave
/// across bucket boundaries as they would in a service (a thread delayed between its clock
/// read and its add makes a late add). Every add whose bucket is in the final window is
/// counted there: none is erased by a recycle, and none is counted twice.
#[test]
fn free_running_threads_lose_no_add_of_the_window() {
    const PER_THREAD: usize = 200_000;
    const BUCKET: u64 = 64;
    const SAMPLES: u64 = 4;
    let metrics =
        WindowMetrics::new(Duration::from_nanos(BUCKET * SAMPLES), 4, Moment::ZERO).unwrap();
    let clock = AtomicU64::new(0);
    let times = Mutex::new(Vec::new());
    thread::scope(|scope| {
        for _ in 0..THREADS {
            let (metrics, clock, times) = (&metrics, &clock, &times);
            scope.spawn(move || {
                let mut mine = Vec::with_capacity(PER_THREAD);
                for _ in 0..PER_THREAD {
                    let t = clock.fetch_add(1, Ordering::SeqCst);
                    metrics.add(Moment::from_nanos(t), PASS, 1);
                    mine.push(t);
                }
                times.lock().unwrap().extend(mine);
            });
        }
    });
    let times = times.into_inner().unwrap();
    let end = clock.load(Ordering::SeqCst) - 1;
    let top = end / BUCKET;
    let stats = metrics.stats(Moment::from_nanos(end));
    for (i, bucket) in metrics.buckets(Moment::from_nanos(end)).iter().enumerate() {
        let epoch = bucket.start().as_nanos() / BUCKET;
        let own = times.iter().filter(|&&t| t / BUCKET == epoch).count() as u64;
        // Its own adds, and perhaps late adds of older buckets: never fewer.
        assert!(
            bucket.count(PASS) >= own,
            "bucket {i}: {} < {own}",
            bucket.count(PASS)
        );
    }
    let in_window = times
        .iter()
        .filter(|&&t| t / BUCKET + SAMPLES > top)
        .count() as u64;
    let total = THREADS * PER_THREAD as u64;
    assert!(
        stats.count(PASS) >= in_window,
        "{} < {in_window}",
        stats.count(PASS)
    );
    assert!(stats.count(PASS) <= total);
}
