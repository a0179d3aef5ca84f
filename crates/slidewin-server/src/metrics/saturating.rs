//! Counts that stop at their largest value instead of wrapping. A request's hits are a
//! client's number (a descriptor's `hits_addend` is any `u64`), and a Prometheus counter that
//! wraps goes down, which a scraper reads as a restart: two requests of `u64::MAX` hits would
//! turn a rule's `total_hits` into a small number.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use prometheus_client::metrics::{counter, gauge};

/// A counter of hits, saturating at `u64::MAX`.
pub(crate) type HitCounter = counter::Counter<u64, SaturatingU64>;

/// envoy ratelimit's gauge of hits, saturating at `i64::MAX`.
pub(crate) type HitGauge = gauge::Gauge<i64, SaturatingI64>;

/// Below this an add takes `fetch_add` (one instruction, as a plain counter), since no
/// number of threads adding this much at once can carry a count from below `SAFE` past the
/// top; elsewhere it takes a compare-and-swap loop that stops at the top.
const SMALL: u64 = 1 << 32;
const SAFE: u64 = 1 << 62;

#[derive(Debug, Default)]
pub(crate) struct SaturatingU64(AtomicU64);

impl counter::Atomic<u64> for SaturatingU64 {
    fn inc(&self) -> u64 {
        self.inc_by(1)
    }

    #[inline]
    fn inc_by(&self, v: u64) -> u64 {
        if v <= SMALL && self.0.load(Relaxed) < SAFE {
            return self.0.fetch_add(v, Relaxed);
        }
        let add = |n: u64| Some(n.saturating_add(v));
        self.0
            .fetch_update(Relaxed, Relaxed, add)
            .unwrap_or_else(|n| n)
    }

    fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

#[derive(Debug, Default)]
pub(crate) struct SaturatingI64(AtomicI64);

impl SaturatingI64 {
    /// `f` applied to the value, atomically; the value before.
    fn update(&self, f: impl Fn(i64) -> i64) -> i64 {
        self.0
            .fetch_update(Relaxed, Relaxed, |n| Some(f(n)))
            .unwrap_or_else(|n| n)
    }
}

impl gauge::Atomic<i64> for SaturatingI64 {
    fn inc(&self) -> i64 {
        self.inc_by(1)
    }

    #[inline]
    fn inc_by(&self, v: i64) -> i64 {
        let small = u64::try_from(v).is_ok_and(|v| v <= SMALL);
        if small && u64::try_from(self.0.load(Relaxed)).is_ok_and(|n| n < SAFE) {
            return self.0.fetch_add(v, Relaxed);
        }
        self.update(|n| n.saturating_add(v))
    }

    fn dec(&self) -> i64 {
        self.dec_by(1)
    }

    fn dec_by(&self, v: i64) -> i64 {
        self.update(|n| n.saturating_sub(v))
    }

    fn set(&self, v: i64) -> i64 {
        self.0.swap(v, Relaxed)
    }

    fn get(&self) -> i64 {
        self.0.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use counter::Atomic as _;
    use gauge::Atomic as _;

    #[test]
    fn a_hit_counter_stops_at_the_top_and_stays_there() {
        let count = SaturatingU64::default();
        assert_eq!(count.inc_by(3), 0);
        assert_eq!(count.inc_by(u64::MAX), 3);
        assert_eq!(count.get(), u64::MAX);
        count.inc();
        count.inc_by(SMALL);
        assert_eq!(count.get(), u64::MAX);
        let near = SaturatingU64(AtomicU64::new(SAFE));
        near.inc_by(1);
        assert_eq!(near.get(), SAFE + 1);
    }

    #[test]
    fn a_hit_gauge_stops_at_either_end() {
        let gauge = SaturatingI64::default();
        gauge.inc_by(i64::MAX);
        gauge.inc_by(5);
        gauge.inc();
        assert_eq!(gauge.get(), i64::MAX);
        gauge.set(i64::MIN + 1);
        gauge.dec_by(2);
        assert_eq!(gauge.get(), i64::MIN);
        gauge.inc_by(-1);
        assert_eq!(gauge.get(), i64::MIN);
        gauge.set(0);
        gauge.inc_by(7);
        gauge.dec();
        assert_eq!(gauge.get(), 6);
    }

    /// Threads adding at once lose no add below the top.
    #[test]
    fn adds_from_threads_all_count() {
        let count = std::sync::Arc::new(SaturatingU64::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let count = std::sync::Arc::clone(&count);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        count.inc_by(3);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(count.get(), 120_000);
    }
}
