//! Calendar quotas at their edges: daylight-saving days of 23 and 25 hours, cycles anchored on
//! the 29th to the 31st, leap years, zones whose rules changed, the boundary instant, time
//! going back and the end of the timeline.

use std::time::Duration;

use jiff::Timestamp;
use jiff::civil::{DateTime, Weekday, date};
use jiff::tz::TimeZone;
use slidewin::limit::{Calendar, CalendarQuota, CalendarUnit, Kind, LimitError, Rule, RuleSet};
use slidewin::period::MonthEnd;
use slidewin::{ConfigError, Keyed, Limiter, Moment};

fn at(text: &str) -> Moment {
    Moment::try_from(text.parse::<Timestamp>().unwrap()).unwrap()
}

fn zone(name: &str) -> TimeZone {
    TimeZone::get(name).unwrap()
}

fn quota(text: &str, zone_name: &str) -> CalendarQuota {
    text.parse::<CalendarQuota>()
        .unwrap()
        .in_zone(zone(zone_name))
}

/// The window holding `now`, as two RFC 3339 instants.
fn window(q: &CalendarQuota, now: Moment) -> (String, String) {
    let w = q.window(now);
    let show = |m: Moment| Timestamp::from(m).to_string();
    (show(w.start()), show(w.end()))
}

fn pair(start: &str, end: &str) -> (String, String) {
    (start.to_string(), end.to_string())
}

fn midnight(y: i16, m: i8, d: i8) -> DateTime {
    date(y, m, d).at(0, 0, 0, 0)
}

#[test]
fn paris_spring_forward_day_is_23_hours() {
    let q = quota("1 per calendar day", "Europe/Paris");
    let w = q.window(at("2026-03-29T12:00:00Z"));
    assert_eq!(w.end() - w.start(), Duration::from_secs(23 * 3600));
    assert_eq!(
        window(&q, at("2026-03-29T12:00:00Z")),
        pair("2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z")
    );
}

#[test]
fn paris_fall_back_day_is_25_hours() {
    let q = quota("1 per calendar day", "Europe/Paris");
    let w = q.window(at("2026-10-25T12:00:00Z"));
    assert_eq!(w.end() - w.start(), Duration::from_secs(25 * 3600));
    assert_eq!(
        window(&q, at("2026-10-25T12:00:00Z")),
        pair("2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z")
    );
}

#[test]
fn limiter_follows_the_short_and_the_long_day() {
    let mut limiter = Limiter::new(Calendar::new(quota("2 per calendar day", "Europe/Paris")));
    // 21:59:59 UTC on the 23-hour day is still that day in Paris (23:59:59 CEST).
    assert!(
        limiter
            .check(at("2026-03-29T21:59:59Z"), 2)
            .unwrap()
            .allowed()
    );
    let denied = limiter.check(at("2026-03-29T21:59:59Z"), 1).unwrap();
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(1)));
    assert!(
        limiter
            .check(at("2026-03-29T22:00:00Z"), 2)
            .unwrap()
            .allowed()
    );

    // On the 25-hour day, 23:30 UTC is 00:30 the next day: a new window.
    assert!(
        limiter
            .check(at("2026-10-25T22:30:00Z"), 2)
            .unwrap()
            .allowed()
    );
    let denied = limiter.check(at("2026-10-25T22:59:00Z"), 1).unwrap();
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(60)));
    assert!(
        limiter
            .check(at("2026-10-25T23:00:00Z"), 1)
            .unwrap()
            .allowed()
    );
}

#[test]
fn the_boundary_instant_starts_the_new_window() {
    let mut limiter = Limiter::new(Calendar::new(quota("1 per calendar month", "UTC")));
    let last = Moment::from_nanos(at("2026-12-01T00:00:00Z").as_nanos() - 1);
    assert!(limiter.check(last, 1).unwrap().allowed());
    let denied = limiter.check(last, 1).unwrap();
    assert_eq!(denied.retry_after(), Some(Duration::from_nanos(1)));
    let first = limiter.check(at("2026-12-01T00:00:00Z"), 1).unwrap();
    assert!(first.allowed());
    assert_eq!(first.reset_after(), Duration::from_secs(31 * 86_400));
}

#[test]
fn months_anchored_on_the_29th_to_the_31st_clamp_by_default() {
    for (day, feb_2025, feb_2024) in [
        (29, "2025-02-28T00:00:00Z", "2024-02-29T00:00:00Z"),
        (30, "2025-02-28T00:00:00Z", "2024-02-29T00:00:00Z"),
        (31, "2025-02-28T00:00:00Z", "2024-02-29T00:00:00Z"),
    ] {
        let q = quota("1 per calendar month", "UTC").anchored(midnight(2026, 1, day));
        let start = |t: &str| window(&q, at(t)).0;
        assert_eq!(
            start("2025-03-10T00:00:00Z"),
            feb_2025,
            "from the {day}th, 2025"
        );
        assert_eq!(
            start("2024-03-10T00:00:00Z"),
            feb_2024,
            "from the {day}th, 2024"
        );
        // A month long enough has the day itself.
        assert_eq!(
            start("2025-04-10T00:00:00Z"),
            format!("2025-03-{day}T00:00:00Z")
        );
    }
    let from_31st = quota("1 per calendar month", "UTC").anchored(midnight(2026, 1, 31));
    assert_eq!(
        window(&from_31st, at("2026-05-01T00:00:00Z")),
        pair("2026-04-30T00:00:00Z", "2026-05-31T00:00:00Z")
    );
}

#[test]
fn months_anchored_on_the_31st_strictly_start_after_a_short_month() {
    let q = quota("1 per calendar month", "UTC")
        .anchored(midnight(2026, 1, 31))
        .with_month_end(MonthEnd::Strict);
    // No April 31st: April's cycle starts on May 1, and runs to May 31.
    assert_eq!(
        window(&q, at("2026-04-30T12:00:00Z")),
        pair("2026-03-31T00:00:00Z", "2026-05-01T00:00:00Z")
    );
    assert_eq!(
        window(&q, at("2026-05-01T00:00:00Z")),
        pair("2026-05-01T00:00:00Z", "2026-05-31T00:00:00Z")
    );
}

#[test]
fn a_year_from_february_29_in_leap_and_common_years() {
    let clamp = quota("1 per calendar year", "UTC").anchored(midnight(2024, 2, 29));
    assert_eq!(
        window(&clamp, at("2025-06-01T00:00:00Z")),
        pair("2025-02-28T00:00:00Z", "2026-02-28T00:00:00Z")
    );
    assert_eq!(
        window(&clamp, at("2028-03-01T00:00:00Z")),
        pair("2028-02-29T00:00:00Z", "2029-02-28T00:00:00Z")
    );
    let strict = clamp.with_month_end(MonthEnd::Strict);
    assert_eq!(
        window(&strict, at("2025-02-28T12:00:00Z")),
        pair("2024-02-29T00:00:00Z", "2025-03-01T00:00:00Z")
    );
}

#[test]
fn a_leap_february_is_29_days_and_a_leap_year_366() {
    let month = quota("1 per calendar month", "UTC");
    let w = month.window(at("2024-02-15T00:00:00Z"));
    assert_eq!(w.end() - w.start(), Duration::from_secs(29 * 86_400));
    let year = quota("1 per calendar year", "UTC");
    let w = year.window(at("2024-07-01T00:00:00Z"));
    assert_eq!(w.end() - w.start(), Duration::from_secs(366 * 86_400));
    let w = year.window(at("2100-07-01T00:00:00Z")); // not a leap year: a century
    assert_eq!(w.end() - w.start(), Duration::from_secs(365 * 86_400));
}

#[test]
fn samoa_skipped_a_day_in_2011_so_that_day_is_no_window() {
    // Pacific/Apia moved from UTC-10 to UTC+14 at the end of 2011-12-29: no December 30.
    let q = quota("1 per calendar day", "Pacific/Apia");
    assert_eq!(
        window(&q, at("2011-12-30T09:59:59Z")),
        pair("2011-12-29T10:00:00Z", "2011-12-30T10:00:00Z")
    );
    // The next instant is December 31 in Apia: the 30th, a window of no length, is skipped.
    let w = q.window(at("2011-12-30T10:00:00Z"));
    assert_eq!(
        Timestamp::from(w.start()).to_string(),
        "2011-12-30T10:00:00Z"
    );
    assert_eq!(w.end() - w.start(), Duration::from_secs(86_400));
    let start = q.zone().to_datetime(Timestamp::from(w.start()));
    assert_eq!(start.date(), date(2011, 12, 31));
}

#[test]
fn moscow_changed_its_offset_in_2014_giving_a_25_hour_day() {
    // Europe/Moscow went from UTC+4 to UTC+3 on 2014-10-26 at 02:00, for good.
    let q = quota("1 per calendar day", "Europe/Moscow");
    let w = q.window(at("2014-10-26T12:00:00Z"));
    assert_eq!(
        window(&q, at("2014-10-26T12:00:00Z")),
        pair("2014-10-25T20:00:00Z", "2014-10-26T21:00:00Z")
    );
    assert_eq!(w.end() - w.start(), Duration::from_secs(25 * 3600));
    // A year later the day is 24 hours, at the new offset.
    let w = q.window(at("2015-10-26T12:00:00Z"));
    assert_eq!(
        Timestamp::from(w.start()).to_string(),
        "2015-10-25T21:00:00Z"
    );
}

#[test]
fn an_anchor_time_the_clock_skipped_moves_forward_by_the_gap() {
    // Days from 02:30 in New York: 2026-03-08 has no 02:30 (02:00 jumps to 03:00).
    let q =
        quota("1 per calendar day", "America/New_York").anchored(date(2026, 1, 1).at(2, 30, 0, 0));
    let (start, end) = window(&q, at("2026-03-08T12:00:00Z"));
    assert_eq!(start, "2026-03-08T07:30:00Z"); // 03:30 EDT, RFC 5545's choice
    assert_eq!(end, "2026-03-09T06:30:00Z"); // 02:30 EDT
    // A repeated time: 01:30 on 2026-11-01 is there twice; the window starts at the first.
    let q =
        quota("1 per calendar day", "America/New_York").anchored(date(2026, 1, 1).at(1, 30, 0, 0));
    assert_eq!(
        window(&q, at("2026-11-01T12:00:00Z")).0,
        "2026-11-01T05:30:00Z"
    );
}

#[test]
fn weeks_start_on_monday_or_the_day_named() {
    let iso = quota("1 per calendar week", "UTC");
    // 2026-12-06 is a Sunday.
    assert_eq!(
        window(&iso, at("2026-12-06T12:00:00Z")),
        pair("2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z")
    );
    let sunday = quota("1 per calendar week from sunday", "UTC");
    assert_eq!(sunday.anchor().weekday(), Weekday::Sunday);
    assert_eq!(
        window(&sunday, at("2026-12-06T12:00:00Z")),
        pair("2026-12-06T00:00:00Z", "2026-12-13T00:00:00Z")
    );
}

#[test]
fn a_billing_cycle_from_the_15th_in_paris() {
    let q = quota("10000 per calendar month", "Europe/Paris").anchored(midnight(2026, 1, 15));
    assert_eq!(
        window(&q, at("2026-11-20T10:00:00Z")),
        pair("2026-11-14T23:00:00Z", "2026-12-14T23:00:00Z")
    );
    // Before the anchor's own date, the cycles run back the same way.
    assert_eq!(
        window(&q, at("2025-03-01T00:00:00Z")).0,
        "2025-02-14T23:00:00Z"
    );
}

#[test]
fn time_going_back_counts_in_the_later_window() {
    let mut limiter = Limiter::new(Calendar::new(quota("2 per calendar day", "UTC")));
    assert!(
        limiter
            .check(at("2026-12-06T00:00:00Z"), 2)
            .unwrap()
            .allowed()
    );
    // Back to the day before: still counted in (and denied by) the 6th.
    let back = limiter.check(at("2026-12-05T23:00:00Z"), 1).unwrap();
    assert!(!back.allowed());
    assert_eq!(back.retry_after(), Some(Duration::from_secs(25 * 3600)));
    assert!(
        limiter
            .check(at("2026-12-07T00:00:00Z"), 2)
            .unwrap()
            .allowed()
    );
}

#[test]
fn the_end_of_the_timeline_is_in_the_last_window() {
    let q = quota("2 per calendar year", "UTC");
    let last = q.window(Moment::MAX);
    assert_eq!(
        Timestamp::from(last.start()).to_string(),
        "2554-01-01T00:00:00Z"
    );
    assert_eq!(last.end(), Moment::MAX);
    assert!(last.contains(Moment::MAX));
    let mut limiter = Limiter::new(Calendar::new(q));
    assert!(limiter.check(Moment::MAX, 1).unwrap().allowed());
    assert!(limiter.check(Moment::MAX, 1).unwrap().allowed());
    // Not a new window each time: the count holds.
    assert!(!limiter.check(Moment::MAX, 1).unwrap().allowed());
}

#[test]
fn the_start_of_the_timeline_and_a_huge_jump() {
    // In Tokyo the first day began before the epoch: its window starts at 0.
    let q = quota("1 per calendar day", "Asia/Tokyo");
    assert_eq!(
        window(&q, Moment::ZERO),
        pair("1970-01-01T00:00:00Z", "1970-01-01T15:00:00Z")
    );
    let mut limiter = Limiter::new(Calendar::new(q));
    assert!(limiter.check(Moment::ZERO, 1).unwrap().allowed());
    assert!(!limiter.check(Moment::ZERO, 1).unwrap().allowed());
    let later = at("2500-06-01T00:00:00Z");
    assert!(limiter.check(later, 1).unwrap().allowed());
}

#[test]
fn empty_and_too_costly_checks() {
    let mut limiter = Limiter::new(Calendar::new(quota("3 per calendar day", "UTC")));
    let question = limiter.check(at("2026-12-06T10:00:00Z"), 0).unwrap();
    assert!(question.allowed());
    assert_eq!(
        (question.remaining(), question.reset_after()),
        (3, Duration::ZERO)
    );
    assert_eq!(
        limiter.check(at("2026-12-06T10:00:00Z"), 4),
        Err(LimitError::CostTooHigh { cost: 4, max: 3 })
    );
    let one = limiter.check(at("2026-12-06T10:00:00Z"), 1).unwrap();
    assert_eq!(
        (one.remaining(), one.reset_after()),
        (2, Duration::from_secs(14 * 3600))
    );
}

#[test]
fn a_rule_set_joins_a_calendar_month_and_a_rate() {
    let set = RuleSet::new([
        Rule::new("burst", Kind::Gcra, "10/s".parse().unwrap()).unwrap(),
        Rule::calendar("monthly", quota("3 per calendar month", "Europe/Paris")).unwrap(),
    ])
    .unwrap();
    let keyed = Keyed::<String, _>::new(set);
    for _ in 0..3 {
        assert!(
            keyed
                .check("k", at("2026-11-30T22:00:00Z"), 1)
                .unwrap()
                .allowed()
        );
    }
    let denied = keyed.check("k", at("2026-11-30T22:00:00Z"), 1).unwrap();
    assert_eq!(denied.binding(), 1);
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(3600)));
    assert!(
        keyed
            .check("k", at("2026-11-30T23:00:00Z"), 1)
            .unwrap()
            .allowed()
    );
}

#[test]
fn rules_of_kind_calendar_need_a_calendar_quota() {
    let err = Rule::new("m", Kind::Calendar, "5/s".parse().unwrap()).unwrap_err();
    assert!(matches!(err, ConfigError::CalendarQuota { .. }), "{err}");
    assert_eq!("calendar".parse::<Kind>().unwrap(), Kind::Calendar);
    let rule = Rule::calendar("m", quota("5 per calendar week", "UTC")).unwrap();
    assert_eq!(rule.quota().limit(), 5);
    assert_eq!(
        rule.quota().span(),
        Duration::from_secs((7 * 24 + 1) * 3600)
    );
}

#[test]
fn a_reload_keeps_the_count_when_the_windows_are_the_same() {
    let monthly = |text: &str, zone_name: &str| {
        Keyed::<String, _>::new(RuleSet::from(
            Rule::calendar("m", quota(text, zone_name)).unwrap(),
        ))
    };
    let old = monthly("5 per calendar month", "UTC");
    let now = at("2026-12-06T00:00:00Z");
    assert!(old.check("k", now, 4).unwrap().allowed());
    // The same windows, a lower limit: the count is kept and cut.
    let lower = monthly("3 per calendar month", "UTC");
    assert_eq!(lower.carry_from(&old, now), 1);
    assert!(!lower.check("k", now, 1).unwrap().allowed());
    // Another zone: other windows, and a fresh count.
    let paris = monthly("3 per calendar month", "Europe/Paris");
    assert_eq!(paris.carry_from(&lower, now), 0);
    assert!(paris.check("k", now, 3).unwrap().allowed());
}

#[test]
fn calendar_quota_text_and_its_errors() {
    for (text, unit) in [
        ("10000 per calendar month", CalendarUnit::Month),
        ("  5/calendar Day ", CalendarUnit::Day),
        ("5 / CALENDAR year", CalendarUnit::Year),
        ("5 per calendar week from Sunday", CalendarUnit::Week),
    ] {
        assert_eq!(
            text.parse::<CalendarQuota>().unwrap().unit(),
            unit,
            "{text}"
        );
    }
    let err = |text: &str| text.parse::<CalendarQuota>().unwrap_err().to_string();
    assert_eq!(
        err("5 per calendar fortnight"),
        "the quota `5 per calendar fortnight` is not valid at byte 15: expected day, week, \
         month or year after `calendar`, found `fortnight`"
    );
    assert!(
        err("5 per month").contains("expected `calendar`"),
        "{}",
        err("5 per month")
    );
    assert!(err("5 per calendar month from sunday").contains("has none"));
    assert!(err("5 per calendar week from someday").contains("expected a weekday"));
    assert!(err("0 per calendar day").contains("at least 1"));
    assert!(err("5 per calendar").contains("expected a space and more"));
    assert!(err("5 per calendar day; 6 per calendar week").contains("holds one quota"));
    // The fixed-span grammar points at the calendar one.
    let q = "5 per calendar month"
        .parse::<slidewin::Quota>()
        .unwrap_err();
    assert!(q.to_string().contains("CalendarQuota"), "{q}");
}

#[test]
fn calendar_quota_display_names_what_is_not_the_default() {
    let q = quota("5 per calendar month", "Europe/Paris");
    assert_eq!(q.to_string(), "5 per calendar month in Europe/Paris");
    // The 1st of another month and year is the default's phase: not shown.
    assert_eq!(
        q.clone().anchored(midnight(2026, 7, 1)).to_string(),
        "5 per calendar month in Europe/Paris"
    );
    assert_eq!(
        q.anchored(midnight(2026, 7, 15)).to_string(),
        "5 per calendar month from 2026-07-15T00:00:00 in Europe/Paris"
    );
    let week = CalendarQuota::new(1, CalendarUnit::Week)
        .unwrap()
        .week_starts(Weekday::Monday);
    assert_eq!(week.unwrap().to_string(), "1 per calendar week");
}
