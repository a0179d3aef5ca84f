//! The calendar counter against a reference that finds each check's window from scratch: a
//! cycle's first day is any date that satisfies the unit's rule (any day; the weekday; the
//! anchor's day, or the month's last if shorter; the anchor's month and day), found by
//! walking the days around the check, and a window runs from the start of one such day in
//! the zone to the start of the next. Zones with daylight saving at 02:00 and at midnight,
//! half-hour shifts and a skipped day.

use std::time::Duration;

use jiff::Timestamp;
use jiff::civil::{Date, Weekday, date};
use jiff::tz::TimeZone;
use proptest::prelude::*;
use slidewin::limit::{Calendar, CalendarQuota, CalendarUnit};
use slidewin::{Limiter, Moment};

const ZONES: [&str; 7] = [
    "UTC",
    "Europe/Paris",
    "America/New_York",
    "America/Santiago",    // daylight saving changes at midnight
    "Australia/Lord_Howe", // a 30-minute shift
    "Pacific/Apia",        // skipped 2011-12-30
    "Asia/Kathmandu",
];

/// What the reference knows of a quota: its unit, zone and the day its cycles align to.
#[derive(Clone, Debug)]
struct Spec {
    unit: CalendarUnit,
    zone: &'static str,
    /// A date of the anchor's phase: its weekday, day of month, or month and day.
    anchor: Date,
}

impl Spec {
    fn quota(&self, limit: u64) -> CalendarQuota {
        CalendarQuota::new(limit, self.unit)
            .unwrap()
            .in_zone(TimeZone::get(self.zone).unwrap())
            .anchored(self.anchor.at(0, 0, 0, 0))
    }

    /// Whether a cycle starts on `d`.
    fn starts_on(&self, d: Date) -> bool {
        let day_or_last = |day: i8| d.day() == day.min(d.days_in_month());
        match self.unit {
            CalendarUnit::Day => true,
            CalendarUnit::Week => d.weekday() == self.anchor.weekday(),
            CalendarUnit::Month => day_or_last(self.anchor.day()),
            CalendarUnit::Year => {
                d.month() == self.anchor.month() && day_or_last(self.anchor.day())
            }
        }
    }

    /// The first instant of `d` in the zone, as Unix nanoseconds.
    fn start_of(&self, d: Date) -> u64 {
        let tz = TimeZone::get(self.zone).unwrap();
        let first = d.to_zoned_datetime(tz).unwrap().start_of_day().unwrap();
        u64::try_from(first.timestamp().as_nanosecond().max(0)).unwrap()
    }

    /// The window holding `now`, walking every day around it.
    fn window(&self, now: Moment) -> (u64, u64) {
        let tz = TimeZone::get(self.zone).unwrap();
        let today = tz.to_datetime(Timestamp::from(now)).date();
        let reach = if self.unit == CalendarUnit::Year {
            400
        } else {
            40
        };
        let mut d = today.checked_sub(jiff::Span::new().days(reach)).unwrap();
        let mut starts = Vec::new();
        for _ in 0..2 * reach {
            if self.starts_on(d) {
                starts.push(self.start_of(d));
            }
            d = d.tomorrow().unwrap();
        }
        let n = now.as_nanos();
        let i = starts.iter().rposition(|&s| s <= n).unwrap();
        (starts[i], starts[i + 1])
    }
}

fn spec() -> impl Strategy<Value = Spec> {
    let unit = prop::sample::select(CalendarUnit::ALL.to_vec());
    let zone = prop::sample::select(ZONES.to_vec());
    let anchor = prop_oneof![
        Just(date(2024, 1, 1)),
        Just(date(2024, 2, 29)),
        (1..=31i8).prop_map(|day| date(2024, 1, day)),
        (0..7i8).prop_map(|d| date(2024, 1, 1)
            .checked_add(jiff::Span::new().days(d))
            .unwrap()),
    ];
    (unit, zone, anchor).prop_map(|(unit, zone, anchor)| Spec { unit, zone, anchor })
}

/// A trace: a start between 2010 and 2030, then steps of minutes to weeks, some back.
fn trace() -> impl Strategy<Value = (u64, Vec<(i64, u64)>)> {
    const HOUR: i64 = 3_600_000_000_000;
    let start = 1_262_304_000u64..1_893_456_000; // 2010 to 2030, in seconds
    let delta = prop_oneof![
        4 => 0..HOUR,
        3 => 0..30 * 24 * HOUR,
        1 => Just(0),
        1 => -48 * HOUR..0,
        1 => 300 * 24 * HOUR..400 * 24 * HOUR,
    ];
    let cost = prop_oneof![3 => Just(1u64), 1 => 0..=4u64];
    (start, proptest::collection::vec((delta, cost), 1..24))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn windows_match_the_walk_over_days(spec in spec(), (start, steps) in trace()) {
        let q = spec.quota(1);
        let mut now = start * 1_000_000_000;
        for (delta, _) in steps {
            now = now.saturating_add_signed(delta);
            let w = q.window(Moment::from_nanos(now));
            let (s, e) = spec.window(Moment::from_nanos(now));
            prop_assert_eq!((w.start().as_nanos(), w.end().as_nanos()), (s, e), "at {}", now);
        }
    }

    #[test]
    fn decisions_match_a_count_per_window(spec in spec(), (start, steps) in trace()) {
        const LIMIT: u64 = 4;
        let mut limiter = Limiter::new(Calendar::new(spec.quota(LIMIT)));
        // The reference: the latest window anything was admitted in (a clock gone back
        // counts in it; a question, cost 0, records nothing), and its count.
        let mut kept: Option<((u64, u64), u64)> = None;
        let mut now = start * 1_000_000_000;
        for (delta, cost) in steps {
            now = now.saturating_add_signed(delta);
            let w = spec.window(Moment::from_nanos(now));
            let (window, count) = match kept {
                Some((window, count)) if w.0 < window.1 => (window, count),
                _ => (w, 0),
            };
            let left = Duration::from_nanos(window.1 - now.min(window.1));
            let got = limiter.check(Moment::from_nanos(now), cost).unwrap();
            let allowed = count + cost <= LIMIT;
            prop_assert_eq!(got.allowed(), allowed, "at {}", now);
            if allowed {
                prop_assert_eq!(got.remaining(), LIMIT - count - cost);
                let reset = if count + cost > 0 { left } else { Duration::ZERO };
                prop_assert_eq!(got.reset_after(), reset);
                if cost > 0 {
                    kept = Some((window, count + cost));
                }
            } else {
                prop_assert_eq!(got.remaining(), LIMIT - count);
                prop_assert_eq!(got.retry_after(), Some(left));
            }
        }
    }
}

#[test]
fn the_reference_knows_a_week_from_sunday() {
    let spec = Spec {
        unit: CalendarUnit::Week,
        zone: "UTC",
        anchor: date(2024, 1, 7),
    };
    assert_eq!(spec.anchor.weekday(), Weekday::Sunday);
    let now = Moment::try_from("2026-12-06T12:00:00Z".parse::<Timestamp>().unwrap()).unwrap();
    let (s, _) = spec.window(now);
    assert_eq!(
        Timestamp::from(Moment::from_nanos(s)).to_string(),
        "2026-12-06T00:00:00Z"
    );
}
