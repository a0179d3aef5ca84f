//! `WindowMetrics` at its edges, and a regression test for each of Sentinel's bugs the issue
//! names (the reset race itself is in `loom_window_metrics.rs` and `metrics_concurrency.rs`).

use std::time::Duration;

use slidewin::stats::MetricEvent;
use slidewin::{ConfigError, Moment, WindowMetrics};

fn ms(m: u64) -> Moment {
    Moment::from_millis(m)
}

/// Sentinel's default: 2 buckets of 500 ms.
fn sentinel_default() -> WindowMetrics {
    WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO).unwrap()
}

const PASS: MetricEvent = MetricEvent::Pass;

/// A bucket covers `[start, start + len)` and is valid while `now < start + span`. Sentinel
/// deprecated a bucket only when `now - start > interval` (its name for the span), so exactly on
/// a boundary it summed `sampleCount + 1` buckets (PR #3480).
#[test]
fn sentinel_pr3480_bucket_boundary() {
    let m = sentinel_default();
    m.add(ms(0), PASS, 1); // [0, 500 ms)
    m.add(ms(500), PASS, 10); // [500 ms, 1 s)
    assert_eq!(m.stats(ms(999)).count(PASS), 11);
    // At 1 s the bucket that started 1 s ago is out: only [500 ms, 1 s) and [1 s, 1.5 s).
    let at_boundary = m.stats(ms(1_000));
    assert_eq!(at_boundary.count(PASS), 10);
    assert_eq!(at_boundary.start(), ms(500));
    assert_eq!(m.buckets(ms(1_000)).len(), 1);
}

/// With one bucket (`sampleCount = 1`), Sentinel's `getPreviousWindow` found the current bucket (the ring
/// has one slot) and returned it as the previous one (#3309). Here the previous bucket is the
/// one before the current, or nothing once its slot has been taken.
#[test]
fn sentinel_3309_previous_window_one_sample() {
    let m = WindowMetrics::new(Duration::from_secs(1), 1, Moment::ZERO).unwrap();
    m.add(ms(300), PASS, 5);
    // At 1.2 s the slot still holds [0, 1 s): that is the previous bucket.
    let previous = m.previous_bucket(ms(1_200)).unwrap();
    assert_eq!((previous.start(), previous.count(PASS)), (ms(0), 5));
    assert!(m.current_bucket(ms(1_200)).is_none());
    // Once [1 s, 2 s) is recorded in, the previous bucket is gone: not the current one.
    m.add(ms(1_300), PASS, 3);
    assert!(m.previous_bucket(ms(1_400)).is_none());
    assert_eq!(m.current_bucket(ms(1_400)).unwrap().count(PASS), 3);
    assert_eq!(
        m.stats(ms(1_400)).count(PASS),
        3,
        "one sample: the window is one bucket"
    );
}

/// sentinel-golang #409: after the clock was set back, writes failed ("the provided time is
/// already behind") and every read logged errors. Here a write with an older time is counted
/// in the newest bucket, and a read at an older time reads at the newest bucket.
#[test]
fn sentinel_golang_409_time_backwards() {
    let m = sentinel_default();
    m.add(Moment::from_secs(100), PASS, 1);
    // The clock goes back 50 s.
    m.add(Moment::from_secs(50), PASS, 1);
    m.add_rt(Moment::from_secs(50), Duration::from_millis(3));
    let back = m.stats(Moment::from_secs(50));
    assert_eq!(back.count(PASS), 2);
    assert_eq!(back.min_rt(), Some(Duration::from_millis(3)));
    assert_eq!(m.stats(Moment::from_secs(100)).count(PASS), 2);
    // Read at the newest bucket's end: [99.5 s, 100.5 s) whole.
    assert_eq!(back.covered(), Duration::from_nanos(999_999_999));
    assert!(back.rate(PASS).is_finite());
    // A late write still inside the window goes into its own bucket.
    m.add(ms(99_700), PASS, 4);
    let buckets = m.buckets(Moment::from_secs(100));
    let starts: Vec<_> = buckets.iter().map(|b| b.start()).collect();
    assert_eq!(starts, [ms(99_500), ms(100_000)]);
    assert_eq!(buckets[0].count(PASS), 4);
    // Time comes forward again: everything in order.
    m.add(ms(100_600), PASS, 8);
    assert_eq!(m.stats(ms(100_600)).count(PASS), 10); // [100 s, 100.5 s) and [100.5 s, 101 s)
}

/// Sentinel's QPS divides the valid buckets' sum by the whole interval: just after a boundary
/// the newest bucket has barely begun, and with the default 2 x 500 ms QPS reads half the
/// truth. Here the rate divides by the time the valid buckets cover: within one bucket's worth
/// of the truth, which for a steady rate is within 0.2%.
#[test]
fn rate_divides_by_the_time_covered_not_the_interval() {
    let m = sentinel_default();
    let mut sentinel_low = f64::MAX;
    for t in 0..10_000 {
        m.add(ms(t), PASS, 1); // 1,000 per second
        if t >= 1_000 && t % 7 == 0 {
            let stats = m.stats(ms(t));
            let ours = stats.rate(PASS);
            assert!((998.0..=1_002.0).contains(&ours), "at {t} ms: {ours}");
            let sentinel = stats.count(PASS) as f64 / 1.0;
            sentinel_low = sentinel_low.min(sentinel);
        }
        if t == 5_000 {
            // Exactly on the boundary: 501 events (4.5 s to 5 s inclusive) over 500 ms.
            let stats = m.stats(ms(5_000));
            assert_eq!(
                (stats.count(PASS), stats.covered()),
                (501, Duration::from_millis(500))
            );
        }
    }
    assert!(sentinel_low < 510.0, "{sentinel_low}");
}

#[test]
fn rate_counts_from_start_in_the_first_interval() {
    let m = WindowMetrics::new(Duration::from_secs(10), 10, Moment::from_secs(100)).unwrap();
    for t in 0..2_000 {
        m.add(ms(100_000 + t), PASS, 1);
    }
    let stats = m.stats(ms(102_000));
    assert_eq!(stats.start(), Moment::from_secs(100));
    assert_eq!(stats.covered(), Duration::from_secs(2));
    assert_eq!(stats.rate(PASS), 1_000.0);
}

#[test]
fn empty_and_one_event() {
    let m = sentinel_default();
    let stats = m.stats(ms(100));
    for event in MetricEvent::ALL {
        assert_eq!(stats.count(event), 0);
        assert_eq!(stats.rate(event), 0.0);
    }
    assert_eq!((stats.rt_count(), stats.rt_sum()), (0, Duration::ZERO));
    assert_eq!(
        (stats.avg_rt(), stats.min_rt(), stats.max_rt()),
        (None, None, None)
    );
    assert_eq!(stats.exception_ratio(), None);
    assert_eq!(
        stats.covered(),
        Duration::from_millis(500),
        "at least one bucket"
    );

    m.add(ms(100), MetricEvent::Exception, 1);
    let stats = m.stats(ms(100));
    assert_eq!(stats.count(MetricEvent::Exception), 1);
    assert_eq!(stats.exception_ratio(), Some(1.0));
    assert_eq!(m.buckets(ms(100)).len(), 1);
}

#[test]
fn response_times() {
    let m = sentinel_default();
    for rt in [40, 10, 30, 20] {
        m.add_rt(ms(100), Duration::from_millis(rt));
    }
    m.add_rt(ms(600), Duration::from_millis(5));
    let stats = m.stats(ms(600));
    assert_eq!(stats.rt_count(), 5);
    assert_eq!(stats.rt_sum(), Duration::from_millis(105));
    assert_eq!(stats.avg_rt(), Some(Duration::from_millis(21)));
    assert_eq!(stats.min_rt(), Some(Duration::from_millis(5)));
    assert_eq!(stats.max_rt(), Some(Duration::from_millis(40)));
    // A bucket reused for a later time starts its min and max afresh.
    m.add_rt(ms(1_100), Duration::from_millis(60));
    let stats = m.stats(ms(1_100));
    assert_eq!(stats.min_rt(), Some(Duration::from_millis(5)));
    assert_eq!(
        m.current_bucket(ms(1_100)).unwrap().min_rt(),
        Some(Duration::from_millis(60))
    );
    // Min and max hold 78 hours; beyond, they read as saturated. The sum is exact.
    m.add_rt(ms(1_200), Duration::from_secs(100 * 3_600));
    let bucket = m.current_bucket(ms(1_200)).unwrap();
    assert_eq!(bucket.max_rt(), Some(Duration::MAX));
    assert_eq!(
        bucket.rt_sum(),
        Duration::from_secs(100 * 3_600) + Duration::from_millis(60)
    );
}

/// Min and max carry only 16 bits of their epoch. A slot recycled exactly 2^16 epochs later
/// must not read the old ones as its own: the claim empties them.
#[test]
fn min_and_max_do_not_alias_an_epoch_two_to_the_sixteen_back() {
    let m = WindowMetrics::new(Duration::from_nanos(2), 1, Moment::ZERO).unwrap();
    m.add_rt(Moment::from_nanos(1), Duration::from_nanos(7));
    let later = Moment::from_nanos(2 << 16); // epoch 65,536, the same slot and tag
    m.add(later, PASS, 1);
    let stats = m.stats(later);
    assert_eq!(
        (stats.count(PASS), stats.min_rt(), stats.max_rt()),
        (1, None, None)
    );
}

#[test]
fn buckets_previous_and_current() {
    let m = WindowMetrics::new(Duration::from_secs(4), 4, Moment::ZERO).unwrap();
    for s in [0, 1, 3, 4] {
        m.add(Moment::from_secs(s), PASS, s + 1);
    }
    let now = ms(4_500);
    let buckets: Vec<_> = m
        .buckets(now)
        .iter()
        .map(|b| (b.start().as_secs_f64(), b.count(PASS), b.covered()))
        .collect();
    assert_eq!(
        buckets,
        [
            (1.0, 2, Duration::from_secs(1)),
            (3.0, 4, Duration::from_secs(1)),
            (4.0, 5, Duration::from_secs(1)),
        ]
    );
    assert_eq!(m.current_bucket(now).unwrap().count(PASS), 5);
    assert_eq!(m.previous_bucket(now).unwrap().count(PASS), 4);
    assert_eq!(m.stats(now).count(PASS), 11);
    assert!(
        m.previous_bucket(Moment::from_secs(6)).is_none(),
        "nothing in [5 s, 6 s)"
    );
}

#[test]
fn huge_jumps_in_time() {
    let m = sentinel_default();
    m.add(Moment::from_secs(1), PASS, 1);
    let far = Moment::from_secs(500 * 365 * 86_400);
    assert_eq!(m.stats(far).count(PASS), 0);
    m.add(far, PASS, 2);
    assert_eq!(m.stats(far).count(PASS), 2);
    m.add(Moment::MAX, PASS, 3);
    let stats = m.stats(Moment::MAX);
    assert_eq!(stats.count(PASS), 3);
    assert!(stats.rate(PASS).is_finite());
    // Everything before is now older than the window: counted at the end of the timeline.
    m.add(Moment::ZERO, PASS, 4);
    assert_eq!(m.stats(Moment::ZERO).count(PASS), 7);
}

/// Issue 17: `add(Pass, u64::MAX)` then `add(Pass, 5)` in one bucket read 4 (the counter
/// wrapped). A bucket saturates at 2^63: it reads `u64::MAX`, and so does the window.
#[test]
fn a_bucket_count_past_u64_max_saturates_instead_of_wrapping() {
    let m = sentinel_default();
    m.add(ms(100), PASS, u64::MAX);
    m.add(ms(100), PASS, 5);
    assert_eq!(m.current_bucket(ms(100)).unwrap().count(PASS), u64::MAX);
    assert_eq!(m.stats(ms(100)).count(PASS), u64::MAX);
    assert_eq!(m.sum(ms(100), PASS), u64::MAX);
    // The other events of the bucket are untouched.
    m.add(ms(100), MetricEvent::Block, 7);
    assert_eq!(m.stats(ms(100)).count(MetricEvent::Block), 7);
    // The saturation leaves with its bucket: the next bucket of the same slot counts afresh.
    m.add(ms(1_100), PASS, 3);
    assert_eq!(m.stats(ms(1_100)).count(PASS), 3);
    assert_eq!(m.sum(ms(1_100), PASS), 3);
}

/// Exact below 2^63, saturated from it, whether the bucket gets there in one add, in large
/// adds, or one event at a time across the bound.
#[test]
fn a_bucket_counts_exactly_below_two_to_the_63_and_saturates_at_it() {
    let m = sentinel_default();
    m.add(ms(100), PASS, (1 << 63) - 3);
    m.add(ms(100), PASS, 1);
    m.add(ms(100), PASS, 1);
    assert_eq!(m.sum(ms(100), PASS), (1 << 63) - 1);
    m.add(ms(100), PASS, 1);
    assert_eq!(m.sum(ms(100), PASS), u64::MAX);
    // Many small adds past 2^64 never come back to a small count.
    for _ in 0..3 {
        m.add(ms(100), PASS, (1 << 36) - 1);
    }
    m.add(ms(100), PASS, 1 << 63);
    m.add(ms(100), PASS, 1 << 62);
    assert_eq!(m.stats(ms(100)).count(PASS), u64::MAX);

    // A bucket that counts one event at a time crosses 2^63 on a multiple of 2^36 of the
    // cumulative counter: here the slot's counter starts from an odd base (the bucket before
    // in this slot counted 12_345).
    let m = WindowMetrics::new(Duration::from_secs(1), 1, Moment::ZERO).unwrap();
    m.add(ms(100), PASS, 12_345);
    m.add(ms(1_100), PASS, (1 << 63) - 2);
    assert_eq!(m.sum(ms(1_100), PASS), (1 << 63) - 2);
    m.add(ms(1_100), PASS, 1);
    assert_eq!(m.sum(ms(1_100), PASS), (1 << 63) - 1);
    m.add(ms(1_100), PASS, 1);
    assert_eq!(m.sum(ms(1_100), PASS), u64::MAX);
    // Small adds on (the first crosses a multiple of 2^36 and marks the bucket), then large
    // ones that would wrap it: saturated throughout.
    for n in [(1 << 36) - 1, (1 << 36) - 1, 1 << 63, u64::MAX, 1] {
        m.add(ms(1_100), PASS, n);
        assert_eq!(m.stats(ms(1_100)).count(PASS), u64::MAX, "after {n}");
    }
}

/// Unsaturated buckets sum exactly past 2^63 in a window, and the window's sum saturates at
/// `u64::MAX` instead of wrapping.
#[test]
fn window_sums_of_large_buckets_saturate_at_u64_max() {
    let m = WindowMetrics::new(Duration::from_secs(3), 3, Moment::ZERO).unwrap();
    let big = (1 << 63) - 1;
    m.add(Moment::from_secs(0), PASS, big);
    m.add(Moment::from_secs(1), PASS, big);
    assert_eq!(m.stats(Moment::from_secs(1)).count(PASS), u64::MAX - 1);
    assert_eq!(m.sum(Moment::from_secs(1), PASS), u64::MAX - 1);
    m.add(Moment::from_secs(2), PASS, 2);
    let stats = m.stats(Moment::from_secs(2));
    assert_eq!(stats.count(PASS), u64::MAX);
    assert_eq!(m.sum(Moment::from_secs(2), PASS), u64::MAX);
    assert!(stats.rate(PASS).is_finite());
    // Each bucket on its own is exact.
    let counts: Vec<u64> = m
        .buckets(Moment::from_secs(2))
        .iter()
        .map(|b| b.count(PASS))
        .collect();
    assert_eq!(counts, [big, big, 2]);
}

/// Issue 17: two `add_rt(Duration::MAX)` wrapped the RT sum, though the docs said it was exact.
/// A bucket's sum saturates at 2^63 ns and reads `Duration::MAX`; so do the average and max.
#[test]
fn rt_sum_of_two_duration_max_saturates_instead_of_wrapping() {
    let m = sentinel_default();
    m.add_rt(ms(100), Duration::MAX);
    m.add_rt(ms(100), Duration::MAX);
    let stats = m.stats(ms(100));
    assert_eq!(stats.rt_count(), 2);
    assert_eq!(stats.rt_sum(), Duration::MAX);
    assert_eq!(stats.avg_rt(), Some(Duration::MAX));
    assert_eq!(stats.max_rt(), Some(Duration::MAX));
    assert_eq!(stats.min_rt(), Some(Duration::MAX));
    // A short RT afterwards: the min is exact again, the sum stays saturated.
    m.add_rt(ms(100), Duration::from_millis(2));
    let stats = m.stats(ms(100));
    assert_eq!(stats.min_rt(), Some(Duration::from_millis(2)));
    assert_eq!((stats.rt_count(), stats.rt_sum()), (3, Duration::MAX));
    // The next bucket of the slot is exact again.
    m.add_rt(ms(1_100), Duration::from_millis(2));
    assert_eq!(m.stats(ms(1_100)).rt_sum(), Duration::from_millis(2));
}

/// Across buckets the RT sum is exact past `u64::MAX` nanoseconds (584 years): each bucket holds
/// up to 2^63 ns, and the window adds them in 128 bits.
#[test]
fn rt_sum_is_exact_across_buckets_past_u64_nanoseconds() {
    let m = WindowMetrics::new(Duration::from_secs(3), 3, Moment::ZERO).unwrap();
    let just_below = Duration::from_nanos((1 << 63) - 1);
    for s in 0..3 {
        m.add_rt(Moment::from_secs(s), just_below);
    }
    let stats = m.stats(Moment::from_secs(2));
    let exact = Duration::from_nanos((1 << 63) - 1) * 3;
    assert!(exact > Duration::from_nanos(u64::MAX));
    assert_eq!(stats.rt_sum(), exact);
    assert_eq!(stats.avg_rt(), Some(just_below));
    // One more nanosecond in a bucket reaches 2^63: that bucket saturates.
    m.add_rt(Moment::from_secs(2), Duration::from_nanos(1));
    assert_eq!(m.stats(Moment::from_secs(2)).rt_sum(), Duration::MAX);
    assert_eq!(m.stats(Moment::from_secs(2)).rt_count(), 4);
}

/// Min and max hold RTs up to 78 hours exactly; a longer one reads `Duration::MAX` (it read as
/// 78 hours, a smaller number than what was recorded).
#[test]
fn min_and_max_rt_past_78_hours_read_saturated_not_smaller() {
    let m = sentinel_default();
    let exact = Duration::from_nanos((1 << 48) - 3);
    m.add_rt(ms(100), exact);
    let stats = m.stats(ms(100));
    assert_eq!((stats.min_rt(), stats.max_rt()), (Some(exact), Some(exact)));
    m.add_rt(ms(100), exact + Duration::from_nanos(1));
    let stats = m.stats(ms(100));
    assert_eq!(
        (stats.min_rt(), stats.max_rt()),
        (Some(exact), Some(Duration::MAX))
    );
    assert_eq!(stats.rt_sum(), exact * 2 + Duration::from_nanos(1));
}

#[test]
fn bad_configurations_are_errors_naming_the_value() {
    let new = |span: Duration, n: u32| WindowMetrics::new(span, n, Moment::ZERO);
    assert_eq!(new(Duration::ZERO, 2).unwrap_err(), ConfigError::ZeroSpan);
    assert_eq!(
        new(Duration::from_secs(1), 0).unwrap_err().to_string(),
        "buckets must be at least 1, got 0"
    );
    assert_eq!(
        new(Duration::from_secs(1), 70_000).unwrap_err().to_string(),
        "buckets must be at most 65536, got 70000"
    );
    assert_eq!(
        new(Duration::from_nanos(1_000), 3).unwrap_err(),
        ConfigError::SpanNotDivisible {
            span: Duration::from_nanos(1_000),
            buckets: 3
        }
    );
    assert!(matches!(
        new(Duration::from_nanos(2), 2).unwrap_err(),
        ConfigError::SpanNotDivisible { .. }
    ));
    assert!(matches!(
        new(Duration::MAX, 2).unwrap_err(),
        ConfigError::SpanTooLong { .. }
    ));
    let m = new(Duration::from_secs(60), 60).unwrap();
    assert_eq!(
        (m.span(), m.bucket(), m.bucket_count()),
        (Duration::from_secs(60), Duration::from_secs(1), 60)
    );
    assert!(format!("{m:?}").contains("span: 60s, buckets: 60"));
}

#[test]
fn is_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<WindowMetrics>();
}
