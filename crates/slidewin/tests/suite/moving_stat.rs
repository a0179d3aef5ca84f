//! `MovingStat` at its edges, the two tests of the article that reads Facebook's `MovingStat`
//! ("Học từ Facebook #69") as written, and a regression test for each of the three bugs of
//! Facebook's version.

use std::time::Duration;

use slidewin::stats::SampleError;
use slidewin::time::ManualClock;
use slidewin::{Clock, ConfigError, Moment, MovingStat};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn ms(m: u64) -> Moment {
    Moment::from_millis(m)
}

fn stat(span: u64, bucket: u64) -> MovingStat {
    MovingStat::new(secs(span), secs(bucket), Moment::ZERO).unwrap()
}

/// The article's first test: 30 events 100 ms apart read as sum 30 at 10/s; 61 s later, all zero.
#[test]
fn fb_article_rate_over_elapsed_time_then_zero_after_silence() {
    let clock = ManualClock::new(Moment::ZERO);
    let mut s = MovingStat::new(secs(60), secs(1), clock.now()).unwrap();
    for _ in 0..30 {
        s.add_now(&clock, 1.0).unwrap();
        clock.advance(Duration::from_millis(100));
    }
    let t = s.tally_now(&clock);
    assert_eq!((t.sum(), t.rate()), (30.0, 10.0));
    clock.advance(secs(61));
    let t = s.tally_now(&clock);
    assert_eq!((t.sum(), t.count(), t.buckets()), (0.0, 0, 0));
}

/// The article's second test: 5 at 0 s and 7 at 5 s, span 10 s, read at 11.5 s: sum 7.
#[test]
fn fb_article_only_expired_buckets_leave() {
    let mut s = stat(10, 1);
    s.add(Moment::ZERO, 5.0).unwrap();
    s.add(Moment::from_secs(5), 7.0).unwrap();
    assert_eq!(s.tally(ms(11_500)).sum(), 7.0);
}

/// Facebook's `evict` loop required `head.next`, so the last bucket never left: after 30 events
/// in 3 s and 61 s of silence it still reported 10. Every bucket leaves here, and the memory
/// goes with it at the next add.
#[test]
fn fb_movingstat_keeps_last_bucket() {
    let mut s = stat(60, 1);
    for i in 0..30 {
        s.add(ms(i * 100), 1.0).unwrap();
    }
    assert_eq!(s.len(), 3);
    let t = s.tally(Moment::from_secs(64));
    assert_eq!((t.sum(), t.count(), t.min(), t.max()), (0.0, 0, None, None));
    assert_eq!(t.mean(), None);
    assert_eq!(t.rate(), 0.0);
    // The first add after the silence drops all three old buckets.
    s.add(Moment::from_secs(64), 2.0).unwrap();
    assert_eq!(s.len(), 1);
    assert_eq!(s.tally(Moment::from_secs(64)).sum(), 2.0);
}

/// Facebook dropped a bucket once its **start** passed the cutoff, losing samples that were
/// still inside the window. A bucket here leaves when its last instant has.
#[test]
fn fb_movingstat_drops_bucket_by_end_not_start() {
    let mut s = stat(10, 1);
    s.add(ms(900), 1.0).unwrap(); // bucket [0 s, 1 s)
    // At 10.5 s the cutoff is 0.5 s: the bucket started before it, the sample at 0.9 s is inside.
    assert_eq!(s.tally(ms(10_500)).count(), 1);
    // The bucket's last instant is 1 s - 1 ns: it leaves exactly when that is `window` old.
    let last = Moment::from_nanos(1_000_000_000 - 1);
    assert_eq!(
        s.tally(last + secs(10) - Duration::from_nanos(1)).count(),
        1
    );
    assert_eq!(s.tally(last + secs(10)).count(), 0);
}

/// Facebook divided by the whole window: 30 reconnects in the first 3 s of a 30 s window read
/// as 1/s, and 20 read as 0.67/s, under its threshold of 1/s, though the client was looping at
/// 6.7/s. The rate here divides by the time covered since `start`.
#[test]
fn fb_movingstat_rate_divides_by_time_covered() {
    let mut s = stat(30, 1);
    for i in 0..20 {
        s.add(ms(i * 150), 1.0).unwrap();
    }
    let t = s.tally(Moment::from_secs(3));
    assert_eq!(t.covered(), secs(3));
    assert!((t.rate() - 20.0 / 3.0).abs() < 1e-9, "{}", t.rate());
    // Facebook's figure, for the record: the same sum over the whole window.
    assert!(t.sum() / 30.0 < 1.0);
    // A single early sample is not a rate of billions per second: at least one bucket.
    let mut s = stat(30, 1);
    s.add(Moment::from_nanos(1), 1.0).unwrap();
    assert_eq!(s.tally(Moment::from_nanos(2)).covered(), secs(1));
}

#[test]
fn rate_counts_from_start_not_from_the_first_sample() {
    let mut s = MovingStat::new(secs(60), secs(1), Moment::from_secs(100)).unwrap();
    s.add(Moment::from_secs(120), 10.0).unwrap();
    let t = s.tally(Moment::from_secs(120));
    assert_eq!(t.covered(), secs(20));
    assert_eq!(t.rate(), 0.5);
    // Once the window has passed, the buckets counted cover the window and the part of the
    // oldest bucket that is outside it: a steady rate reads exactly.
    let mut s = stat(60, 1);
    for i in 0..200_000 {
        s.add(ms(i), 1.0).unwrap(); // 1,000 per second
    }
    // At 200 s the cutoff is 140 s: buckets [140 s, 141 s) to [199 s, 200 s), 60 s of them.
    let t = s.tally(ms(200_000));
    assert_eq!((t.covered(), t.count()), (secs(60), 60_000));
    assert_eq!(t.rate(), 1_000.0);
    // Mid-bucket, the oldest bucket is counted whole and so is the time it covers.
    let t = s.tally(ms(200_500));
    assert_eq!(
        (t.covered(), t.count()),
        (Duration::from_millis(60_500), 60_000)
    );
}

#[test]
fn empty_and_one_sample() {
    let s = stat(10, 1);
    let t = s.tally(Moment::from_secs(5));
    assert_eq!((t.sum(), t.count(), t.buckets()), (0.0, 0, 0));
    assert_eq!((t.min(), t.max(), t.mean()), (None, None, None));
    assert!(s.is_empty());

    let mut s = stat(10, 1);
    s.add(Moment::from_secs(5), -2.5).unwrap();
    let t = s.tally(Moment::from_secs(5));
    assert_eq!((t.sum(), t.count(), t.buckets()), (-2.5, 1, 1));
    assert_eq!(
        (t.min(), t.max(), t.mean()),
        (Some(-2.5), Some(-2.5), Some(-2.5))
    );
}

/// An event at `t` is inside at `now` when `now - window < t <= now`; with 1 ns buckets the
/// stat is exact, so the boundary shows.
#[test]
fn window_boundary_with_nanosecond_buckets() {
    let mut s = MovingStat::new(
        Duration::from_nanos(10),
        Duration::from_nanos(1),
        Moment::ZERO,
    )
    .unwrap();
    s.add(Moment::from_nanos(5), 1.0).unwrap();
    assert_eq!(s.tally(Moment::from_nanos(14)).count(), 1);
    assert_eq!(
        s.tally(Moment::from_nanos(15)).count(),
        0,
        "exactly 10 ns old: left"
    );
    // Reads never count a sample after `now`... except at the stat's own latest time: a read
    // before it reads at it (the timeline never goes back).
    s.add(Moment::from_nanos(20), 1.0).unwrap();
    assert_eq!(s.tally(Moment::from_nanos(3)).count(), 1);
}

#[test]
fn memory_stays_within_window_over_bucket_plus_one() {
    let mut s = stat(60, 1);
    for i in 0..1_000_000 {
        s.add(ms(i / 10), 1.0).unwrap(); // 10,000 per second for 100 s
        assert!(s.len() <= 61);
    }
    let t = s.tally(ms(99_999));
    assert_eq!(t.count(), 610_000); // 61 buckets: [39 s, 40 s) has instants inside (39.999 s, 99.999 s]
    assert_eq!(t.buckets(), 61);
}

#[test]
fn huge_jumps_in_time() {
    let mut s = stat(60, 1);
    s.add(Moment::from_secs(1), 1.0).unwrap();
    // 500 years later: everything has left, nothing overflows.
    let far = Moment::from_secs(500 * 365 * 86_400);
    assert_eq!(s.tally(far).count(), 0);
    s.add(far, 3.0).unwrap();
    assert_eq!(s.len(), 1);
    assert_eq!(s.tally(far).sum(), 3.0);
    // The end of the timeline.
    s.add(Moment::MAX, 4.0).unwrap();
    let t = s.tally(Moment::MAX);
    assert_eq!((t.sum(), t.count()), (4.0, 1));
    // From the first bucket with an instant inside the window to the timeline's last instant.
    assert_eq!(t.covered(), Duration::from_nanos(60_709_551_615));
}

#[test]
fn time_going_backwards() {
    let mut s = stat(10, 1);
    s.add(Moment::from_secs(20), 1.0).unwrap();
    // Late but inside the window: into its own bucket (made for it), in order.
    s.add(ms(15_500), 2.0).unwrap();
    s.add(ms(12_100), 4.0).unwrap();
    s.add(ms(15_700), 8.0).unwrap();
    assert_eq!(s.len(), 3);
    let t = s.tally(Moment::from_secs(20));
    assert_eq!((t.sum(), t.count()), (15.0, 4));
    // It leaves with its bucket.
    assert_eq!(s.tally(ms(22_999)).sum(), 15.0);
    assert_eq!(s.tally(ms(23_000)).sum(), 11.0);
    // Older than the window on the stat's timeline (at or before 20 s - 10 s): counted at 20 s,
    // as if it had just arrived, instead of nowhere.
    s.add(Moment::from_secs(10), 16.0).unwrap();
    s.add(Moment::ZERO, 32.0).unwrap();
    assert_eq!(s.tally(Moment::from_secs(29)).sum(), 49.0);
    // A read at an earlier time reads at the latest time added.
    assert_eq!(
        s.tally(Moment::from_secs(1)),
        s.tally(Moment::from_secs(20))
    );
}

#[test]
fn clear_forgets_samples() {
    let mut s = stat(10, 1);
    s.add(Moment::from_secs(1), 1.0).unwrap();
    s.clear();
    assert!(s.is_empty());
    assert_eq!(s.tally(Moment::from_secs(1)).count(), 0);
}

/// Issue 17: `MovingStat` took NaN, and its bucket's sum (and the window's) became NaN until
/// the bucket left. NaN is refused with an error naming it, and nothing changes: not the
/// figures, not the timeline.
#[test]
fn nan_sample_is_refused_and_the_figures_stay_numbers() {
    let mut s = stat(10, 1);
    s.add(Moment::from_secs(5), 2.0).unwrap();
    let refused = s.add(Moment::from_secs(5), f64::NAN);
    assert!(matches!(refused, Err(SampleError::NotFinite { sample }) if sample.is_nan()));
    assert_eq!(
        refused.unwrap_err().to_string(),
        "a sample must be a finite number, got NaN"
    );
    // Refused at a later time too, and that time is not taken onto the stat's timeline.
    assert!(s.add(Moment::from_secs(100), f64::NAN).is_err());
    let t = s.tally(Moment::from_secs(5));
    assert_eq!(
        (t.sum(), t.count(), t.min(), t.max()),
        (2.0, 1, Some(2.0), Some(2.0))
    );
    assert_eq!(t.mean(), Some(2.0));
    // A late sample at 1 s is still inside the window at 5 s, the latest time added.
    s.add(Moment::from_secs(1), 3.0).unwrap();
    assert_eq!(s.tally(Moment::from_secs(5)).sum(), 5.0);
}

/// An infinite sample is refused as well: `inf` and `-inf` in one bucket would sum to NaN.
#[test]
fn infinite_samples_are_refused() {
    let mut s = stat(10, 1);
    for x in [f64::INFINITY, f64::NEG_INFINITY] {
        let err = s.add(Moment::from_secs(1), x).unwrap_err();
        assert_eq!(err, SampleError::NotFinite { sample: x });
        assert!(err.to_string().ends_with(&format!("got {x:?}")), "{err}");
        let err = s
            .add_now(&ManualClock::new(Moment::from_secs(1)), x)
            .unwrap_err();
        assert_eq!(err, SampleError::NotFinite { sample: x });
    }
    assert!(s.is_empty());
    let t = s.tally(Moment::from_secs(1));
    assert_eq!((t.sum(), t.count()), (0.0, 0));
}

/// Finite samples whose bucket sum would overflow to an infinity (and then, with one of the
/// other sign, to NaN) are refused; the window's sum of finite bucket sums may read as an
/// infinity, never as NaN.
#[test]
fn a_sample_that_would_take_its_bucket_sum_past_f64_max_is_refused() {
    let mut s = stat(10, 1);
    s.add(Moment::from_secs(1), f64::MAX).unwrap();
    let err = s.add(Moment::from_secs(1), f64::MAX).unwrap_err();
    assert_eq!(err, SampleError::SumOverflow { sample: f64::MAX });
    assert_eq!(s.tally(Moment::from_secs(1)).sum(), f64::MAX);
    // Back down is fine.
    s.add(Moment::from_secs(1), -f64::MAX).unwrap();
    assert_eq!(s.tally(Moment::from_secs(1)).sum(), 0.0);
    s.add(Moment::from_secs(1), -f64::MAX).unwrap();
    let err = s.add(Moment::from_secs(1), -f64::MAX).unwrap_err();
    assert!(err.to_string().ends_with("past -f64::MAX"), "{err}");
    // A late sample is checked against its own bucket.
    s.add(Moment::from_secs(3), 1.0).unwrap();
    assert!(s.add(Moment::from_secs(1), -f64::MAX).is_err());
    s.add(Moment::from_secs(2), -f64::MAX).unwrap();
    let t = s.tally(Moment::from_secs(3));
    assert_eq!(t.count(), 5);
    assert_eq!(t.sum(), f64::NEG_INFINITY); // buckets of -MAX, -MAX and 1: each finite
    assert_eq!(t.mean(), Some(f64::NEG_INFINITY));
    assert!(!t.rate().is_nan());
    assert_eq!(t.rate_per(Duration::ZERO), 0.0); // not -inf * 0 = NaN
}

#[test]
fn bad_configurations_are_errors_naming_the_value() {
    let zero = MovingStat::new(Duration::ZERO, secs(1), Moment::ZERO).unwrap_err();
    assert_eq!(zero, ConfigError::ZeroSpan);
    let err = MovingStat::new(secs(10), Duration::ZERO, Moment::ZERO).unwrap_err();
    assert_eq!(err, ConfigError::ZeroBucket);
    assert_eq!(
        err.to_string(),
        "the bucket length must be longer than zero, got 0ns"
    );
    let err = MovingStat::new(secs(1), secs(2), Moment::ZERO).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the bucket length 2s is longer than the span 1s"
    );
    let err = MovingStat::new(secs(10), Duration::from_millis(3_000), Moment::ZERO).unwrap_err();
    assert_eq!(
        err,
        ConfigError::SpanNotMultipleOfBucket {
            span: secs(10),
            bucket: secs(3)
        }
    );
    let err = MovingStat::new(Duration::MAX, secs(1), Moment::ZERO).unwrap_err();
    assert!(matches!(err, ConfigError::SpanTooLong { .. }), "{err}");
    // A bucket as long as the span is fine: one bucket, counted while any instant is inside.
    assert!(MovingStat::new(secs(1), secs(1), Moment::ZERO).is_ok());
}

#[test]
fn debug_shows_the_configuration() {
    let s = stat(10, 1);
    let debug = format!("{s:?}");
    assert!(
        debug.contains("span: 10s") && debug.contains("bucket: 1s"),
        "{debug}"
    );
}
