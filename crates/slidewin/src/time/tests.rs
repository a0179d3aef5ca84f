//! `Moment`'s arithmetic and conversions at their edges, and the clocks.

use std::sync::Arc;

use super::*;

#[test]
fn arithmetic_at_the_edges() {
    assert_eq!(Moment::ZERO.checked_sub(Duration::from_nanos(1)), None);
    assert_eq!(Moment::MAX.checked_add(Duration::from_nanos(1)), None);
    assert_eq!(Moment::ZERO.checked_add(Duration::MAX), None);
    assert_eq!(
        Moment::MAX.checked_sub(Duration::from_nanos(u64::MAX)),
        Some(Moment::ZERO)
    );
    assert_eq!(
        Moment::from_secs(1) - Moment::from_secs(2),
        Duration::ZERO,
        "saturates like Instant"
    );
    let mut t = Moment::from_secs(1);
    t += Duration::from_secs(1);
    t -= Duration::from_millis(500);
    assert_eq!(t, Moment::from_millis(1_500));
}

#[test]
#[should_panic(expected = "is past Moment::MAX")]
fn add_past_max_panics_with_the_values() {
    let _ = Moment::MAX + Duration::from_nanos(1);
}

#[test]
#[should_panic(expected = "is before the origin")]
fn sub_before_origin_panics_with_the_values() {
    let _ = Moment::ZERO - Duration::from_nanos(1);
}

#[test]
fn display_and_debug() {
    assert_eq!(Moment::from_millis(1_500).to_string(), "1.5s");
    assert_eq!(format!("{:?}", Moment::from_millis(250)), "Moment(250ms)");
}

#[test]
fn conversions_reject_out_of_range_values_by_name() {
    let err = Moment::try_from(UNIX_EPOCH - Duration::from_secs(1)).unwrap_err();
    assert!(err.to_string().contains("before 1970"), "{err}");
    let far: jiff::Timestamp = "2600-01-01T00:00:00Z".parse().unwrap();
    let err = Moment::try_from(far).unwrap_err();
    assert!(err.to_string().contains("2600-01-01T00:00:00Z"), "{err}");
    let err = Moment::try_from(Duration::MAX).unwrap_err();
    assert!(err.to_string().contains("18446744073709551615"), "{err}");
    // The last moment converts both ways.
    let last = jiff::Timestamp::from(Moment::MAX);
    assert_eq!(Moment::try_from(last), Ok(Moment::MAX));
}

#[test]
fn system_clock_agrees_with_jiff() {
    let before = Moment::try_from(jiff::Timestamp::now()).unwrap();
    let now = SystemClock.now();
    let after = Moment::try_from(jiff::Timestamp::now()).unwrap();
    assert!(before <= now && now <= after);
}

#[test]
fn monotonic_clocks_share_an_origin_and_never_go_back() {
    let mut last = MonotonicClock.now();
    for _ in 0..1_000 {
        let now = MonotonicClock.now();
        assert!(now >= last);
        last = now;
    }
}

#[test]
fn manual_clock_clones_share_time_and_overflow_is_refused() {
    let a = ManualClock::new(Moment::from_secs(1));
    let b = a.clone();
    assert_eq!(b.advance(Duration::from_secs(1)), Moment::from_secs(2));
    assert_eq!(a.now(), Moment::from_secs(2));
    a.set(Moment::MAX);
    assert_eq!(b.checked_advance(Duration::from_nanos(1)), None);
    assert_eq!(b.checked_advance(Duration::MAX), None);
    assert_eq!(a.now(), Moment::MAX, "a refused advance leaves the clock");
    let via_trait: &dyn Clock = &Arc::new(b);
    assert_eq!(via_trait.now(), Moment::MAX);
}
