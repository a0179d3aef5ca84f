//! Period: the examples and bugs of Facebook's `TimeInterval` (as the article "Học từ Facebook
//! #69" reads it) as regressions, the two month-end conventions,
//! daylight-saving changes, negative periods, humanized text.

use jiff::civil::{Date, date};
use jiff::{Span, ZonedDateTime};
use slidewin::Period;
use slidewin::period::{Labels, MonthEnd, PeriodError};

fn dates(a: Date, b: Date, m: MonthEnd) -> (i64, i64, i64) {
    let p = Period::between_dates(a, b, m).unwrap();
    (p.years(), p.months(), p.days())
}

fn zoned(s: &str) -> ZonedDateTime {
    s.parse().unwrap()
}

/// Days from one date to another: what the article's `naivePeriod` starts from.
fn days_between(a: Date, b: Date) -> i64 {
    i64::from(a.until(b).unwrap().get_days())
}

#[test]
fn fb_timeinterval_2000_05_15_to_2026_10_28_is_26y_5m_13d() {
    let (a, b) = (date(2000, 5, 15), date(2026, 10, 28));
    for m in [MonthEnd::Clamp, MonthEnd::Strict] {
        assert_eq!(dates(a, b, m), (26, 5, 13));
    }
    // The bug the article warns about: 30-day months give 26 years 10 months 2 days.
    let days = days_between(a, b);
    let months = days / 30;
    assert_eq!((months / 12, months % 12, days - months * 30), (26, 10, 2));
}

#[test]
fn fb_timeinterval_2026_01_31_to_2026_03_01_is_1m_1d() {
    let (a, b) = (date(2026, 1, 31), date(2026, 3, 1));
    assert_eq!(dates(a, b, MonthEnd::Clamp), (0, 1, 1));
    assert_eq!(dates(a, b, MonthEnd::Strict), (0, 1, 1));
    // The article's `naivePeriod` gives 29 days.
    assert_eq!(days_between(a, b), 29);
}

#[test]
fn fb_timeinterval_leap_day_2024_02_29_to_2025_02_28_is_one_year_under_clamp() {
    let (a, b) = (date(2024, 2, 29), date(2025, 2, 28));
    assert_eq!(dates(a, b, MonthEnd::Clamp), (1, 0, 0));
    assert_eq!(dates(a, b, MonthEnd::Strict), (0, 11, 30));
    // The next day is one year and one day, under both.
    assert_eq!(dates(a, date(2025, 3, 1), MonthEnd::Clamp), (1, 0, 1));
    assert_eq!(dates(a, date(2025, 3, 1), MonthEnd::Strict), (1, 0, 1));
}

#[test]
fn fb_timeinterval_months_are_added_from_the_start_never_month_by_month() {
    let jan31 = date(2026, 1, 31);
    let one = Span::new().months(1);
    let stepwise = jan31.checked_add(one).unwrap().checked_add(one).unwrap();
    assert_eq!(stepwise, date(2026, 3, 28));
    assert_eq!(
        jan31.checked_add(Span::new().months(2)).unwrap(),
        date(2026, 3, 31)
    );
    // So 31/1 -> 31/3 is two whole months, and 31/1 -> 28/3 is 1 month 28 days, not 2 months.
    assert_eq!(dates(jan31, date(2026, 3, 31), MonthEnd::Clamp), (0, 2, 0));
    assert_eq!(dates(jan31, date(2026, 3, 28), MonthEnd::Clamp), (0, 1, 28));
}

#[test]
fn jan_31_to_feb_28_is_a_month_only_under_clamp() {
    let (a, b) = (date(2026, 1, 31), date(2026, 2, 28));
    assert_eq!(dates(a, b, MonthEnd::Clamp), (0, 1, 0));
    assert_eq!(dates(a, b, MonthEnd::Strict), (0, 0, 28));
    // In a leap year February ends on the 29th, so the 28th is short of a month.
    assert_eq!(
        dates(date(2024, 1, 31), date(2024, 2, 28), MonthEnd::Clamp),
        (0, 0, 28)
    );
    assert_eq!(
        dates(date(2024, 1, 31), date(2024, 2, 29), MonthEnd::Clamp),
        (0, 1, 0)
    );
}

#[test]
fn zero_and_one_day() {
    let d = date(2026, 6, 1);
    let zero = Period::between_dates(d, d, MonthEnd::Clamp).unwrap();
    assert!(zero.is_zero() && !zero.is_negative());
    assert_eq!(zero.to_string(), "0 days");
    assert_eq!(dates(d, date(2026, 6, 2), MonthEnd::Clamp), (0, 0, 1));
    let t = d.at(12, 0, 0, 0);
    assert_eq!(
        Period::between_datetimes(t, t, MonthEnd::Clamp)
            .unwrap()
            .to_string(),
        "0 seconds"
    );
}

#[test]
fn new_york_spring_forward_is_one_day_not_23_hours() {
    let a = zoned("2024-03-09T21:00[America/New_York]");
    let b = zoned("2024-03-10T21:00[America/New_York]");
    assert_eq!(b.timestamp().duration_since(a.timestamp()).as_hours(), 23);
    for m in [MonthEnd::Clamp, MonthEnd::Strict] {
        let p = Period::between_zoned(&a, &b, m).unwrap();
        assert_eq!((p.days(), p.hours()), (1, 0), "{m:?}");
        assert_eq!(p.to_string(), "1 day");
        // The other direction is the negation.
        let back = Period::between_zoned(&b, &a, m).unwrap();
        assert_eq!(back, -p);
        assert_eq!(back.to_string(), "-1 day");
    }
}

#[test]
fn new_york_fall_back_is_one_day_not_25_hours() {
    let a = zoned("2024-11-02T21:00[America/New_York]");
    let b = zoned("2024-11-03T21:00[America/New_York]");
    assert_eq!(b.timestamp().duration_since(a.timestamp()).as_hours(), 25);
    for m in [MonthEnd::Clamp, MonthEnd::Strict] {
        let p = Period::between_zoned(&a, &b, m).unwrap();
        assert_eq!((p.days(), p.hours()), (1, 0));
        assert_eq!(Period::between_zoned(&b, &a, m).unwrap(), -p);
    }
    // 24 elapsed hours end at 20:00, short of the 25-hour calendar day: 0 days 24 hours.
    let c = zoned("2024-11-03T20:00[America/New_York]");
    assert_eq!(c.timestamp().duration_since(a.timestamp()).as_hours(), 24);
    let p = Period::between_zoned(&a, &c, MonthEnd::Clamp).unwrap();
    assert_eq!((p.days(), p.hours()), (0, 24));
    assert_eq!(p.to_string(), "24 hours");
}

#[test]
fn a_month_across_a_dst_change_is_a_month() {
    let a = zoned("2024-02-15T09:30[Europe/Berlin]");
    let b = zoned("2024-04-15T09:30[Europe/Berlin]");
    let p = Period::between_zoned(&a, &b, MonthEnd::Clamp).unwrap();
    assert_eq!(p.to_string(), "2 months");
}

#[test]
fn different_time_zones_are_an_error_naming_both() {
    let a = zoned("2024-03-09T21:00[America/New_York]");
    let b = zoned("2024-03-10T21:00[Asia/Tokyo]");
    let err = Period::between_zoned(&a, &b, MonthEnd::Clamp).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("America/New_York") && text.contains("Asia/Tokyo"),
        "{text}"
    );
    assert!(matches!(err, PeriodError::DifferentTimeZones { .. }));
    // Converting one first is the caller's move.
    let b = b.with_time_zone(a.time_zone().clone());
    assert!(Period::between_zoned(&a, &b, MonthEnd::Clamp).is_ok());
}

#[test]
fn an_alias_of_the_same_zone_is_the_same_zone() {
    let a = zoned("2024-03-09T21:00[America/New_York]");
    let b = zoned("2024-03-10T21:00[US/Eastern]");
    let p = Period::between_zoned(&a, &b, MonthEnd::Clamp).unwrap();
    assert_eq!(p.to_string(), "1 day");
    // Different zones at the same instant are still refused.
    let c = a.with_time_zone(jiff::tz::TimeZone::get("Asia/Tokyo").unwrap());
    assert!(Period::between_zoned(&a, &c, MonthEnd::Strict).is_err());
}

#[test]
fn extreme_dates_do_not_panic() {
    let (lo, hi) = (Date::MIN, Date::MAX);
    for m in [MonthEnd::Clamp, MonthEnd::Strict] {
        let p = Period::between_dates(lo, hi, m).unwrap();
        assert_eq!(Period::between_dates(hi, lo, m).unwrap(), -p);
        assert!(p.years() > 19_000);
    }
    let d = date(9999, 12, 31).at(23, 59, 59, 999_999_999);
    let e = date(-9999, 1, 1).at(0, 0, 0, 0);
    assert!(Period::between_datetimes(e, d, MonthEnd::Clamp).is_ok());
}

#[test]
fn negative_periods_are_the_negation_of_the_forward_one() {
    // Counting backwards under Clamp would give 11 months 28 days here; we give -1 year.
    let (a, b) = (date(2024, 2, 29), date(2025, 2, 28));
    let back = Period::between_dates(b, a, MonthEnd::Clamp).unwrap();
    assert_eq!((back.years(), back.months(), back.days()), (-1, 0, 0));
    assert!(back.is_negative());
    // Under Strict the negation differs from jiff's backward count here, and that is the
    // documented choice: jiff counts back from 2025-02-28, giving -11 months -28 days.
    let strict = Period::between_dates(b, a, MonthEnd::Strict).unwrap();
    assert_eq!(
        (strict.years(), strict.months(), strict.days()),
        (0, -11, -30)
    );
    let jiff_back = b.until((jiff::Unit::Year, a)).unwrap();
    assert_eq!((jiff_back.get_months(), jiff_back.get_days()), (-11, -28));
}

#[test]
fn humanized_text_largest_units_first() {
    let p = Period::between_dates(date(2023, 1, 10), date(2026, 3, 25), MonthEnd::Clamp).unwrap();
    assert_eq!(p.humanize(2), "3 years 2 months");
    assert_eq!(p.humanize(0), "3 years"); // at least one unit
    let p = Period::between_dates(date(2026, 1, 1), date(2026, 1, 14), MonthEnd::Clamp).unwrap();
    assert_eq!(p.humanize(2), "13 days");
    // 3 years 0 months 5 days in two units: the months' place is empty, days are not pulled up.
    let p = Period::between_dates(date(2023, 1, 1), date(2026, 1, 6), MonthEnd::Clamp).unwrap();
    assert_eq!(p.humanize(2), "3 years");
    assert_eq!(p.humanize(3), "3 years 5 days");
    assert_eq!(p.to_string(), "3 years 5 days");
    let one = Period::between_dates(date(2025, 1, 1), date(2026, 2, 2), MonthEnd::Clamp).unwrap();
    assert_eq!(one.to_string(), "1 year 1 month 1 day");
    let vi = Labels::new([
        ("năm", "năm"),
        ("tháng", "tháng"),
        ("ngày", "ngày"),
        ("giờ", "giờ"),
        ("phút", "phút"),
        ("giây", "giây"),
    ]);
    let p = Period::between_dates(date(2023, 1, 10), date(2026, 3, 25), MonthEnd::Clamp).unwrap();
    assert_eq!(p.humanize_with(&vi, 2), "3 năm 2 tháng");
}

#[test]
fn datetimes_carry_hours_minutes_seconds() {
    let a = date(2026, 1, 31).at(23, 0, 0, 0);
    let b = date(2026, 2, 28).at(22, 59, 58, 250_000_000);
    // Jan 31 23:00 + 1 month is Feb 28 23:00, after b: so 0 months under Clamp.
    let p = Period::between_datetimes(a, b, MonthEnd::Clamp).unwrap();
    assert_eq!(
        (
            p.months(),
            p.days(),
            p.hours(),
            p.minutes(),
            p.seconds(),
            p.nanoseconds()
        ),
        (0, 27, 23, 59, 58, 250_000_000)
    );
    assert_eq!(p.to_string(), "27 days 23 hours 59 minutes 58.25 seconds");
    assert_eq!(a.checked_add(p.to_span()).unwrap(), b);
}

#[test]
fn a_zero_period_is_never_negative() {
    let half = date(2024, 6, 1).at(10, 0, 0, 500_000_000);
    let whole = date(2024, 6, 1).at(10, 0, 0, 0);
    let back = Period::between_datetimes(half, whole, MonthEnd::Clamp).unwrap();
    assert!(back.is_negative() && !back.is_zero());
    assert_eq!(back.to_string(), "-0.5 seconds");
    assert_eq!(back.humanize(1), "-0.5 seconds");
    let forward = Period::between_datetimes(whole, half, MonthEnd::Clamp).unwrap();
    assert_eq!(forward, -back);
    assert_eq!(forward.to_string(), "0.5 seconds");
    // A zero period is not negative, and so never reads "-0".
    let zero = Period::between_datetimes(half, half, MonthEnd::Strict).unwrap();
    assert!(zero.is_zero() && !zero.is_negative());
    assert_eq!(zero.to_string(), "0 seconds");
    assert_eq!((-zero).to_string(), "0 seconds");
}

#[test]
fn a_fraction_of_a_second_is_written_with_the_seconds() {
    let start = date(2026, 1, 1).at(0, 0, 0, 0);
    let text = |end: jiff::civil::DateTime, units: usize| {
        Period::between_datetimes(start, end, MonthEnd::Clamp)
            .unwrap()
            .humanize(units)
    };
    assert_eq!(
        text(date(2026, 1, 1).at(0, 1, 30, 250_000_000), 6),
        "1 minute 30.25 seconds"
    );
    assert_eq!(
        text(date(2026, 1, 1).at(0, 0, 0, 1), 6),
        "0.000000001 seconds"
    );
    assert_eq!(
        text(date(2026, 1, 1).at(0, 0, 1, 500_000_000), 6),
        "1.5 seconds"
    );
    assert_eq!(text(date(2026, 1, 1).at(0, 0, 1, 0), 6), "1 second");
    // Seconds outside the window of units take their fraction with them.
    assert_eq!(
        text(date(2026, 1, 1).at(0, 1, 0, 500_000_000), 1),
        "1 minute"
    );
    assert_eq!(
        text(date(2026, 1, 1).at(0, 1, 0, 500_000_000), 2),
        "1 minute 0.5 seconds"
    );
    // Other labels: the plural, and the fraction written the same way.
    let short = Labels::new([
        ("y", "y"),
        ("mo", "mo"),
        ("d", "d"),
        ("h", "h"),
        ("min", "min"),
        ("s", "secs"),
    ]);
    let p = Period::between_datetimes(date(2026, 1, 1).at(0, 0, 2, 0), start, MonthEnd::Clamp);
    assert_eq!(p.unwrap().humanize_with(&short, 2), "-2 secs");
    let p = Period::between_datetimes(
        start,
        date(2026, 1, 1).at(0, 0, 1, 750_000_000),
        MonthEnd::Clamp,
    );
    assert_eq!(p.unwrap().humanize_with(&short, 2), "1.75 secs");
}
