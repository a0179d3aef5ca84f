//! Model checks of `WindowMetrics`'s bucket recycling under loom: every interleaving of the
//! threads, not just the ones a run happens to hit.
//!
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p slidewin --test loom_window_metrics --profile loom`
//! (scripts/test runs it, in its own target directory).
//!
//! The ring here has 2 buckets of 2 ns (epochs 0 and 2 share slot 0), so an add at 4 ns
//! recycles the bucket of 0 ns while other threads add or read.
//!
//! A recycle is some twenty atomic operations, so the models bound the preemptions per
//! execution to 3 (loom's advice for larger models; `LOOM_MAX_PREEMPTIONS` overrides it):
//! every interleaving with up to three forced thread switches is explored.
#![cfg(loom)]

use std::time::Duration;

use loom::sync::Arc;
use loom::thread;
use slidewin::stats::MetricEvent;
use slidewin::{Moment, WindowMetrics};

const PASS: MetricEvent = MetricEvent::Pass;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}

fn ring() -> Arc<WindowMetrics> {
    Arc::new(WindowMetrics::new(Duration::from_nanos(4), 2, Moment::ZERO).unwrap())
}

fn at(nanos: u64) -> Moment {
    Moment::from_nanos(nanos)
}

fn spawn(
    metrics: &Arc<WindowMetrics>,
    f: impl FnOnce(&WindowMetrics) + Send + 'static,
) -> thread::JoinHandle<()> {
    let metrics = Arc::clone(metrics);
    thread::spawn(move || f(&metrics))
}

/// Sentinel sets the new start, then zeroes the counters under a try-lock: an add for the new
/// window landing in between is erased. Here two threads add to the new bucket while both
/// race to recycle it: both adds count, and nothing of the old bucket does.
#[test]
fn sentinel_reset_race_loses_no_current_add() {
    model(|| {
        let metrics = ring();
        metrics.add(at(0), PASS, 5);
        let a = spawn(&metrics, |m| m.add(at(4), PASS, 1));
        let b = spawn(&metrics, |m| m.add(at(5), PASS, 1));
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(metrics.stats(at(5)).count(PASS), 2);
        assert_eq!(metrics.current_bucket(at(5)).unwrap().count(PASS), 2);
    });
}

/// An add for the old bucket racing the recycle lands in its own bucket (then recycled away
/// with it) or in the fresher one; the add for the new bucket is always counted.
#[test]
fn late_add_lands_in_its_bucket_or_a_fresher_one() {
    model(|| {
        let metrics = ring();
        let late = spawn(&metrics, |m| m.add(at(1), PASS, 1));
        let fresh = spawn(&metrics, |m| m.add(at(4), PASS, 10));
        late.join().unwrap();
        fresh.join().unwrap();
        let count = metrics.stats(at(4)).count(PASS);
        assert!(count == 10 || count == 11, "{count}");
    });
}

/// A read during the recycle sees the bucket before it (out of this read's window) or after
/// it: never the old count under the new time, nor a half-settled (wrapped) one.
#[test]
fn a_read_racing_a_recycle_sees_no_torn_bucket() {
    model(|| {
        let metrics = ring();
        metrics.add(at(0), PASS, 5);
        let writer = spawn(&metrics, |m| m.add(at(4), PASS, 1));
        let reader = {
            let metrics = Arc::clone(&metrics);
            thread::spawn(move || metrics.stats(at(4)).count(PASS))
        };
        writer.join().unwrap();
        let count = reader.join().unwrap();
        assert!(count <= 1, "{count}");
        assert_eq!(metrics.stats(at(4)).count(PASS), 1);
    });
}

/// Min and max start afresh in a recycled bucket, even when both of its first two samples race
/// the recycle.
#[test]
fn response_times_of_a_recycled_bucket() {
    model(|| {
        let metrics = ring();
        metrics.add_rt(at(0), Duration::from_nanos(1));
        let a = spawn(&metrics, |m| m.add_rt(at(4), Duration::from_nanos(5)));
        let b = spawn(&metrics, |m| m.add_rt(at(5), Duration::from_nanos(3)));
        a.join().unwrap();
        b.join().unwrap();
        let stats = metrics.stats(at(5));
        assert_eq!(stats.rt_count(), 2);
        assert_eq!(stats.rt_sum(), Duration::from_nanos(8));
        assert_eq!(stats.min_rt(), Some(Duration::from_nanos(3)));
        assert_eq!(stats.max_rt(), Some(Duration::from_nanos(5)));
    });
}

/// Claims of one slot take turns. Here the claim for epoch 2 may still be settling when 100
/// is added under it and the claim for epoch 4 begins; if that claim could go ahead, the
/// stalled one would then set the base from its older snapshot, and the 100 of epoch 2 would
/// count in epoch 4 as well.
#[test]
fn a_claim_waits_for_a_settling_claim_of_the_same_slot() {
    model(|| {
        let metrics = ring();
        metrics.add(at(0), PASS, 5);
        let a = spawn(&metrics, |m| m.add(at(4), PASS, 1));
        spawn(&metrics, |m| m.add(at(5), PASS, 100)).join().unwrap();
        let b = spawn(&metrics, |m| m.add(at(8), PASS, 10));
        a.join().unwrap();
        b.join().unwrap();
        // The add at 4 lands in its bucket (then recycled) or in the newest one.
        let count = metrics.stats(at(8)).count(PASS);
        assert!(count == 10 || count == 11, "{count}");
        assert_eq!(metrics.current_bucket(at(8)).unwrap().count(PASS), count);
    });
}

/// A bucket saturated at `u64::MAX` is recycled while a late add lands: the saturation leaves
/// with its bucket, and the new bucket counts exactly.
#[test]
fn a_saturated_bucket_recycled_under_a_late_add() {
    model(|| {
        let metrics = ring();
        metrics.add(at(0), PASS, u64::MAX);
        let late = spawn(&metrics, |m| m.add(at(1), PASS, 5));
        let fresh = spawn(&metrics, |m| m.add(at(4), PASS, 1));
        late.join().unwrap();
        fresh.join().unwrap();
        let count = metrics.stats(at(4)).count(PASS);
        assert!(count == 1 || count == 6, "{count}");
    });
}

/// Two large adds (compare-and-swaps against the bucket's count) race a recycle: together
/// they reach 2^63 and saturate, or the late one stays in the old bucket. Never the old
/// bucket's 3 on top, nor a wrapped count.
#[test]
fn large_adds_racing_a_recycle_saturate_or_count_exactly() {
    model(|| {
        let metrics = ring();
        metrics.add(at(0), PASS, 3);
        let late = spawn(&metrics, |m| m.add(at(1), PASS, 1 << 62));
        let fresh = spawn(&metrics, |m| m.add(at(4), PASS, 1 << 62));
        late.join().unwrap();
        fresh.join().unwrap();
        let count = metrics.stats(at(4)).count(PASS);
        assert!(count == 1 << 62 || count == u64::MAX, "{count}");
    });
}

/// A read racing a large add that recycles the bucket and one that saturates it sees the
/// bucket before (out of the read's window), the first add, or saturation.
#[test]
fn a_read_racing_large_adds_sees_them_or_saturation() {
    model(|| {
        let metrics = ring();
        metrics.add(at(0), PASS, 3);
        let writer = spawn(&metrics, |m| {
            m.add(at(4), PASS, (1 << 63) - 1);
            m.add(at(4), PASS, 1 << 36);
        });
        let reader = {
            let metrics = Arc::clone(&metrics);
            thread::spawn(move || metrics.stats(at(4)).count(PASS))
        };
        writer.join().unwrap();
        let seen = reader.join().unwrap();
        assert!([0, (1 << 63) - 1, u64::MAX].contains(&seen), "{seen}");
        assert_eq!(metrics.stats(at(4)).count(PASS), u64::MAX);
    });
}

/// A small add that takes a bucket to 2^63 (crossing a multiple of 2^36, so it checks and
/// marks the bucket saturated) races the recycle of that bucket: the mark never reaches the
/// new bucket, which counts exactly whichever bucket the add landed in.
#[test]
fn a_small_add_marking_saturation_races_a_recycle() {
    model(|| {
        let metrics = ring();
        metrics.add(at(4), PASS, (1 << 63) - 1);
        let small = spawn(&metrics, |m| m.add(at(5), PASS, 1));
        let fresh = spawn(&metrics, |m| m.add(at(8), PASS, 1));
        small.join().unwrap();
        fresh.join().unwrap();
        let count = metrics.stats(at(8)).count(PASS);
        assert!(count == 1 || count == 2, "{count}");
    });
}
