//! Period's rules on random dates and datetimes: Strict is jiff's `until`, Clamp counts the
//! most whole clamped months, the fields add back up, and a period reversed is negated.

use jiff::civil::{Date, DateTime, date};
use jiff::tz::TimeZone;
use jiff::{Span, Unit, ZonedDateTime};
use proptest::prelude::*;
use slidewin::Period;
use slidewin::period::MonthEnd;

/// A date from 1900 to about 2100 (so every day of month 1..=31 comes up).
fn any_date() -> impl Strategy<Value = Date> {
    (0..73_000i64).prop_map(|d| date(1900, 1, 1).checked_add(Span::new().days(d)).unwrap())
}

fn any_datetime() -> impl Strategy<Value = DateTime> {
    (any_date(), 0..86_400i64, 0..3i32).prop_map(|(d, secs, frac)| {
        // Some fractions of a second, so nanoseconds are carried too.
        d.at(0, 0, 0, 0)
            .checked_add(
                Span::new()
                    .seconds(secs)
                    .nanoseconds(i64::from(frac) * 250_000_000),
            )
            .unwrap()
    })
}

/// Two datetimes less than two seconds apart, at any nanosecond: periods whose only non-zero
/// part may be a fraction of a second.
fn close_datetimes() -> impl Strategy<Value = (DateTime, DateTime)> {
    (any_datetime(), -2_000_000_000..2_000_000_000i64)
        .prop_map(|(a, ns)| (a, a.checked_add(Span::new().nanoseconds(ns)).unwrap()))
}

/// `start + n` months with the day clamped to the target month's last day, written out by
/// hand rather than through jiff's arithmetic.
fn add_months_clamped(start: Date, n: i64) -> Date {
    let index = i64::from(start.year()) * 12 + i64::from(start.month()) - 1 + n;
    let year = i16::try_from(index.div_euclid(12)).unwrap();
    let month = i8::try_from(index.rem_euclid(12) + 1).unwrap();
    let last = date(year, month, 1).days_in_month();
    date(year, month, start.day().min(last))
}

/// A span's fields with the sub-second ones summed into nanoseconds, as `Period` keeps them.
fn span_fields(s: &Span) -> [i64; 7] {
    [
        i64::from(s.get_years()),
        i64::from(s.get_months()),
        i64::from(s.get_days()),
        i64::from(s.get_hours()),
        s.get_minutes(),
        s.get_seconds(),
        s.get_milliseconds() * 1_000_000 + s.get_microseconds() * 1_000 + s.get_nanoseconds(),
    ]
}

fn period_fields(p: &Period) -> [i64; 7] {
    [
        p.years(),
        p.months(),
        p.days(),
        p.hours(),
        p.minutes(),
        p.seconds(),
        p.nanoseconds(),
    ]
}

fn new_york() -> TimeZone {
    TimeZone::get("America/New_York").unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3_000))]

    #[test]
    fn strict_is_jiffs_until_with_largest_unit_year(a in any_date(), b in any_date()) {
        let (start, end) = if a <= b { (a, b) } else { (b, a) };
        let p = Period::between_dates(start, end, MonthEnd::Strict).unwrap();
        let span = start.until((Unit::Year, end)).unwrap();
        prop_assert_eq!(
            (p.years(), p.months(), p.days()),
            (i64::from(span.get_years()), i64::from(span.get_months()), i64::from(span.get_days()))
        );
    }

    #[test]
    fn clamp_counts_the_most_whole_clamped_months(a in any_date(), b in any_date()) {
        let (start, end) = if a <= b { (a, b) } else { (b, a) };
        let p = Period::between_dates(start, end, MonthEnd::Clamp).unwrap();
        prop_assert!((0..12).contains(&p.months()) && p.years() >= 0 && p.days() >= 0);
        let n = p.total_months();
        let anchor = add_months_clamped(start, n);
        prop_assert!(anchor <= end);
        prop_assert!(add_months_clamped(start, n + 1) > end);
        // start + months + days == end, and the days are less than the next month.
        prop_assert_eq!(anchor.checked_add(Span::new().days(p.days())).unwrap(), end);
        prop_assert_eq!(start.checked_add(p.to_span()).unwrap(), end);
    }

    #[test]
    fn the_conventions_differ_only_past_the_28th(a in any_date(), b in any_date()) {
        let clamp = Period::between_dates(a, b, MonthEnd::Clamp).unwrap();
        let strict = Period::between_dates(a, b, MonthEnd::Strict).unwrap();
        if a.min(b).day() <= 28 {
            prop_assert_eq!(clamp, strict);
        }
        // Clamp never counts fewer whole months.
        prop_assert!(clamp.total_months().abs() >= strict.total_months().abs());
    }

    #[test]
    fn reversed_is_negated(a in any_date(), b in any_date()) {
        for m in [MonthEnd::Clamp, MonthEnd::Strict] {
            let forward = Period::between_dates(a, b, m).unwrap();
            let back = Period::between_dates(b, a, m).unwrap();
            prop_assert_eq!(back, -forward);
            prop_assert_eq!(forward.is_negative(), b < a);
        }
    }

    #[test]
    fn strict_datetimes_are_jiffs_until(a in any_datetime(), b in any_datetime()) {
        let (start, end) = if a <= b { (a, b) } else { (b, a) };
        let p = Period::between_datetimes(start, end, MonthEnd::Strict).unwrap();
        let span = start.until((Unit::Year, end)).unwrap();
        prop_assert_eq!(period_fields(&p), span_fields(&span));
        let clamp = Period::between_datetimes(start, end, MonthEnd::Clamp).unwrap();
        prop_assert_eq!(start.checked_add(clamp.to_span()).unwrap(), end);
        prop_assert!(clamp.hours() < 24 && clamp.minutes() < 60 && clamp.seconds() < 60);
    }

    #[test]
    fn zoned_periods_in_new_york(a in any_datetime(), b in any_datetime()) {
        let tz = new_york();
        let za: ZonedDateTime = a.to_zoned_datetime(tz.clone()).unwrap();
        let zb: ZonedDateTime = b.to_zoned_datetime(tz).unwrap();
        let (start, end) = if za.timestamp() <= zb.timestamp() { (&za, &zb) } else { (&zb, &za) };
        let strict = Period::between_zoned(start, end, MonthEnd::Strict).unwrap();
        let span = start.until((Unit::Year, end)).unwrap();
        prop_assert_eq!(period_fields(&strict), span_fields(&span));

        let clamp = Period::between_zoned(start, end, MonthEnd::Clamp).unwrap();
        let n = clamp.total_months();
        let months = |k: i64| start.checked_add(Span::new().years(k / 12).months(k % 12)).unwrap();
        prop_assert!(months(n).timestamp() <= end.timestamp());
        prop_assert!(months(n + 1).timestamp() > end.timestamp());
        // From the anchor, whole calendar days, then the elapsed time, reach the end.
        let days = months(n).checked_add(Span::new().days(clamp.days())).unwrap();
        prop_assert!(days.timestamp() <= end.timestamp());
        let rest = Span::new()
            .hours(clamp.hours())
            .minutes(clamp.minutes())
            .seconds(clamp.seconds())
            .nanoseconds(clamp.nanoseconds());
        prop_assert_eq!(days.checked_add(rest).unwrap().timestamp(), end.timestamp());
        prop_assert_eq!(Period::between_zoned(end, start, MonthEnd::Clamp).unwrap(), -clamp);
    }

    #[test]
    fn the_text_is_signed_like_the_period(
        (a, b) in prop_oneof![close_datetimes(), (any_datetime(), any_datetime())],
        units in 1..8usize,
    ) {
        for m in [MonthEnd::Clamp, MonthEnd::Strict] {
            let forward = Period::between_datetimes(a, b, m).unwrap();
            let back = Period::between_datetimes(b, a, m).unwrap();
            prop_assert_eq!(back, -forward);
            prop_assert_eq!(forward.is_negative(), b < a);
            prop_assert_eq!(forward.is_zero(), a == b);
            let (text, back_text) = (forward.humanize(units), back.humanize(units));
            // Zero reads "0 seconds", never "-0 ..."; anything else is signed like the period
            // and reads the same both ways but for the sign.
            prop_assert_eq!(text == "0 seconds", forward.is_zero());
            prop_assert!(!text.starts_with("-0 "), "{}", text);
            prop_assert_eq!(text.starts_with('-'), forward.is_negative());
            if forward.is_negative() {
                prop_assert_eq!(&text[1..], back_text);
            } else if !forward.is_zero() {
                prop_assert_eq!(format!("-{text}"), back_text);
            }
        }
    }
}
