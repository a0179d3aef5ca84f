//! The key flood and its memory promise, sized by keys rather than by time.
//!
//! Four tasks send distinct keys to a rule of their own (`1 per 5 seconds`) as fast as the
//! service answers, until the service has decided [`FLOOD_KEYS`] of them: ten times the key
//! cap, however long that takes on the machine at hand (a loaded machine once reached only 8.2
//! times the cap in a run's time). The soak waits for that count before its SIGTERM, at most
//! [`FLOOD_GRACE`] past the run's end; short of it, the memory promise fails, saying how far the
//! flood got.
//!
//! The service's resident memory is read every [`SAMPLE_EVERY`] keys decided, and the promise
//! compares two windows of keys, not of time: the peak while keys `1x..5x` the cap were decided
//! against the peak while keys `5x..10x` were (the first `1x` fill the cap). On a fast machine
//! and on a slow one the windows hold the same keys and the same number of samples.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::client::{Decision, Record, Via, grpc_check, grpc_connect, grpc_request, nanos};
use crate::server::rss_kib;

/// `--max-keys`: the flood's rule holds at most this many keys.
pub(crate) const KEY_CAP: u64 = 1000;
/// The flood's size: the distinct keys the service must decide before the SIGTERM.
pub(crate) const FLOOD_KEYS: u64 = 10 * KEY_CAP;
/// The flood's tasks, each a gRPC connection, closed loop.
pub(crate) const FLOOD_TASKS: usize = 4;
/// A resident-memory sample every this many keys decided: 40 in the first window, 50 in the
/// second.
pub(crate) const SAMPLE_EVERY: u64 = KEY_CAP / 10;
/// How long past the run's end the soak waits for the flood to reach [`FLOOD_KEYS`]: generous,
/// so that only a service that (nearly) stopped answering fails it.
pub(crate) const FLOOD_GRACE: Duration = Duration::from_secs(120);

/// The windows' bounds in keys decided: samples at keys in `(FIRST.0, FIRST.1]` against those
/// in `(SECOND.0, SECOND.1]`.
const FIRST: (u64, u64) = (KEY_CAP, 5 * KEY_CAP);
const SECOND: (u64, u64) = (5 * KEY_CAP, FLOOD_KEYS);

/// Resident memory when the flood had `keys` keys decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sample {
    pub(crate) keys: u64,
    /// Nanoseconds from the run's start.
    pub(crate) at: u64,
    pub(crate) kib: u64,
}

/// The flood's shared state: its tasks write it, the soak reads it.
pub(crate) struct Flood {
    /// The next key's index (keys sent, errors included).
    next: AtomicU64,
    /// Keys decided (OK or `OVER_LIMIT`, not degraded): what reached the limiter.
    decided: AtomicU64,
    /// When the `FLOOD_KEYS`th key was decided, nanoseconds from the run's start; 0 until then.
    done_at: AtomicU64,
    reached: tokio::sync::Notify,
    samples: Mutex<Vec<Sample>>,
}

/// What the flood did, for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FloodRun {
    /// When its tasks began, nanoseconds from the run's start.
    pub(crate) start: u64,
    /// Keys decided.
    pub(crate) keys: u64,
    /// When it reached [`FLOOD_KEYS`], if it did.
    pub(crate) done_at: Option<u64>,
    pub(crate) samples: Vec<Sample>,
}

impl Flood {
    pub(crate) fn new() -> Flood {
        Flood {
            next: AtomicU64::new(0),
            decided: AtomicU64::new(0),
            done_at: AtomicU64::new(0),
            reached: tokio::sync::Notify::new(),
            samples: Mutex::new(Vec::new()),
        }
    }

    /// Returns once the flood has reached [`FLOOD_KEYS`] (at once if it has).
    pub(crate) async fn reached(&self) {
        if self.decided.load(Ordering::Acquire) < FLOOD_KEYS {
            // `notify_one` keeps its permit for a waiter that comes later.
            self.reached.notified().await;
        }
    }

    /// The run's figures, `start` being when the tasks began.
    pub(crate) fn run(&self, start: u64) -> FloodRun {
        let done_at = self.done_at.load(Ordering::Acquire);
        FloodRun {
            start,
            keys: self.decided.load(Ordering::Acquire),
            done_at: (done_at > 0).then_some(done_at),
            samples: self
                .samples
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }

    /// Counts a decided key, sampling the service's memory on every `SAMPLE_EVERY`th.
    fn count(&self, at: u64, pid: u32) {
        let keys = self.decided.fetch_add(1, Ordering::AcqRel) + 1;
        if keys.is_multiple_of(SAMPLE_EVERY)
            && let Some(kib) = rss_kib(pid)
        {
            self.samples
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Sample { keys, at, kib });
        }
        if keys == FLOOD_KEYS {
            self.done_at.store(at.max(1), Ordering::Release);
            self.reached.notify_one();
        }
    }
}

/// One flood task: distinct keys as fast as the service answers, until the flood has
/// `FLOOD_KEYS` decided or the soak stops.
pub(crate) async fn flood_client(
    grpc: String,
    base: Instant,
    stop: Arc<AtomicBool>,
    flood: Arc<Flood>,
    pid: u32,
) -> Vec<Record> {
    let mut records = Vec::new();
    let Some(mut client) = grpc_connect(&grpc) else {
        return records;
    };
    while !stop.load(Ordering::Relaxed) && flood.decided.load(Ordering::Acquire) < FLOOD_KEYS {
        let n = flood.next.fetch_add(1, Ordering::Relaxed);
        let send = nanos(base);
        let (decision, degraded) =
            grpc_check(&mut client, grpc_request("flood", format!("f{n}"))).await;
        let answer = nanos(base);
        let decided = matches!(decision, Decision::Ok | Decision::Over);
        records.push(Record {
            send,
            answer,
            key: u32::MAX,
            via: Via::Flood,
            decision,
            degraded,
        });
        if decided && !degraded {
            flood.count(answer, pid);
        } else if !decided {
            // A refused connection answers at once: do not spin on it.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    records
}

/// The peak and the number of samples taken at keys in `(from, to]`.
fn window(samples: &[Sample], (from, to): (u64, u64)) -> (u64, usize) {
    let inside = samples.iter().filter(|s| s.keys > from && s.keys <= to);
    inside.fold((0, 0), |(peak, n), s| (peak.max(s.kib), n + 1))
}

/// The memory promise: the flood reached ten times the cap, and the second window's peak is
/// within a tenth (at least 2 MiB) of the first's. `refusals` is the service's key-cap refusal
/// count and `peak` the run's peak resident memory in KiB, for the figures.
pub(crate) fn memory_row(run: &FloodRun, refusals: &str, peak: u64) -> (bool, String) {
    let (first_peak, first_n) = window(&run.samples, FIRST);
    let (second_peak, second_n) = window(&run.samples, SECOND);
    let bound = first_peak + (first_peak / 10).max(2048);
    let secs = |nanos: u64| Duration::from_nanos(nanos).as_secs_f64();
    let reach = match run.done_at {
        Some(done) => format!(
            "{} distinct flood keys decided ({}x the cap of {KEY_CAP}) in {:.1} s ({:.1} s to {:.1} s)",
            run.keys,
            FLOOD_KEYS / KEY_CAP,
            secs(done.saturating_sub(run.start)),
            secs(run.start),
            secs(done)
        ),
        None => format!(
            "the flood fell short: {} of {FLOOD_KEYS} keys decided ({:.1}x the cap of {KEY_CAP}) by {} s past the run's end",
            run.keys,
            run.keys as f64 / KEY_CAP as f64,
            FLOOD_GRACE.as_secs()
        ),
    };
    let ok = run.done_at.is_some() && first_n > 0 && second_n > 0 && second_peak <= bound;
    let figures = format!(
        "{reach}, {refusals} key-cap refusals; RSS peak {:.1} MiB; keys {}x-{}x the cap: peak {first_peak} KiB ({first_n} samples), {}x-{}x: {second_peak} KiB ({second_n} samples), bound {bound} KiB",
        peak as f64 / 1024.0,
        FIRST.0 / KEY_CAP,
        FIRST.1 / KEY_CAP,
        SECOND.0 / KEY_CAP,
        SECOND.1 / KEY_CAP,
    );
    (ok, figures)
}

#[cfg(test)]
mod tests {
    use super::{FLOOD_KEYS, FloodRun, KEY_CAP, SAMPLE_EVERY, Sample, memory_row};

    const SECOND: u64 = 1_000_000_000;

    /// A sample every `SAMPLE_EVERY` keys up to `keys`, `nanos_per_key` apart, each at `kib(k)`.
    fn run(keys: u64, nanos_per_key: u64, kib: impl Fn(u64) -> u64) -> FloodRun {
        let start = 2 * SECOND;
        let at = |k: u64| start + k * nanos_per_key;
        FloodRun {
            start,
            keys,
            done_at: (keys >= FLOOD_KEYS).then(|| at(FLOOD_KEYS)),
            samples: (1..=keys / SAMPLE_EVERY)
                .map(|i| i * SAMPLE_EVERY)
                .map(|k| Sample {
                    keys: k,
                    at: at(k),
                    kib: kib(k),
                })
                .collect(),
        }
    }

    #[test]
    fn a_slow_flood_that_reaches_ten_times_the_cap_passes() {
        // 400 keys a second: 25 s for the flood, longer than a 20 s run.
        let (ok, figures) = memory_row(&run(FLOOD_KEYS, SECOND / 400, |_| 12_000), "0", 12_000);
        assert!(ok, "{figures}");
        assert!(
            figures.starts_with("10000 distinct flood keys decided (10x the cap of 1000) in 25.0 s (2.0 s to 27.0 s)"),
            "{figures}"
        );
        assert!(figures.contains("(40 samples)"), "{figures}");
        assert!(figures.contains("(50 samples)"), "{figures}");
    }

    #[test]
    fn a_flood_short_of_ten_times_the_cap_fails_saying_how_far_it_got() {
        let (ok, figures) = memory_row(&run(8_200, SECOND / 400, |_| 12_000), "0", 12_000);
        assert!(!ok, "{figures}");
        assert!(
            figures.starts_with("the flood fell short: 8200 of 10000 keys decided (8.2x the cap"),
            "{figures}"
        );
    }

    #[test]
    fn memory_that_grows_with_the_keys_past_the_bound_fails() {
        // 1 KiB more per 2 keys: 2,500 KiB more at 10x than at 5x, over the 2,048 KiB bound.
        let (ok, figures) = memory_row(&run(FLOOD_KEYS, SECOND / 2000, |k| 12_000 + k / 2), "0", 0);
        assert!(!ok, "{figures}");
        assert!(figures.contains("bound 16548 KiB"), "{figures}");
    }

    #[test]
    fn the_windows_are_keys_not_time_and_the_cap_filling_is_not_compared() {
        // The memory climbs while the first `KEY_CAP` keys fill the cap, then stays flat: only
        // samples after the fill are compared. The second window is 5x..10x whatever the times.
        let filling = |k: u64| if k <= KEY_CAP { 100_000 } else { 12_000 };
        let (ok, figures) = memory_row(&run(FLOOD_KEYS, SECOND / 100, filling), "0", 0);
        assert!(ok, "{figures}");
        assert!(figures.contains("peak 12000 KiB (40 samples)"), "{figures}");
        // A growth inside 5x..10x is seen however fast the keys came.
        let late = |k: u64| if k > 9 * KEY_CAP { 20_000 } else { 12_000 };
        for pace in [SECOND / 100_000, SECOND / 100] {
            assert!(!memory_row(&run(FLOOD_KEYS, pace, late), "0", 0).0);
        }
    }

    #[test]
    fn no_samples_in_a_window_fails() {
        let mut flood = run(FLOOD_KEYS, SECOND / 2000, |_| 12_000);
        flood.samples.retain(|s| s.keys <= 5 * KEY_CAP);
        let (ok, figures) = memory_row(&flood, "0", 0);
        assert!(!ok, "{figures}");
        assert!(figures.contains("(0 samples)"), "{figures}");
    }
}
