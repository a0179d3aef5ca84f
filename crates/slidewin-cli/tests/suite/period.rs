//! `slidewin period`, run as a built binary.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn slidewin(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_slidewin"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the slidewin binary runs");
    let input = stdin.unwrap_or("").to_owned();
    let mut pipe = child.stdin.take().unwrap();
    // Written from a thread so a large input cannot deadlock against a full stdout pipe.
    let writer = std::thread::spawn(move || pipe.write_all(input.as_bytes()));
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    output
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

#[test]
fn the_fb_timeinterval_example_in_text_and_json() {
    let o = slidewin(&["period", "2000-05-15", "2026-10-28"], None);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "26 years 5 months 13 days\n");
    let o = slidewin(&["period", "2000-05-15", "2026-10-28", "--json"], None);
    assert_eq!(
        stdout(&o),
        "{\"years\":26,\"months\":5,\"days\":13,\"hours\":0,\"minutes\":0,\"seconds\":0,\"nanoseconds\":0}\n"
    );
}

#[test]
fn month_end_conventions() {
    let clamp = slidewin(&["period", "2024-02-29", "2025-02-28"], None);
    assert_eq!(stdout(&clamp), "1 year\n");
    let strict = slidewin(
        &[
            "period",
            "2024-02-29",
            "2025-02-28",
            "--month-end",
            "strict",
        ],
        None,
    );
    assert_eq!(stdout(&strict), "11 months 30 days\n");
    let negative = slidewin(&["period", "2025-02-28", "2024-02-29"], None);
    assert_eq!(stdout(&negative), "-1 year\n");
}

#[test]
fn zoned_datetimes_across_spring_forward() {
    let o = slidewin(
        &[
            "period",
            "2024-03-09T21:00[America/New_York]",
            "2024-03-10T21:00[America/New_York]",
        ],
        None,
    );
    assert_eq!(stdout(&o), "1 day\n", "{}", stderr(&o));
    // The same civil datetimes placed in the zone by --tz; 20:00 is 22 elapsed hours.
    let o = slidewin(
        &[
            "period",
            "2024-03-09T21:00",
            "2024-03-10T20:00",
            "--tz",
            "America/New_York",
            "--json",
        ],
        None,
    );
    assert_eq!(
        stdout(&o),
        "{\"years\":0,\"months\":0,\"days\":0,\"hours\":22,\"minutes\":0,\"seconds\":0,\"nanoseconds\":0}\n"
    );
}

#[test]
fn civil_datetimes_show_hours_minutes_seconds() {
    let o = slidewin(&["period", "2026-01-31T22:00", "2026-03-01T06:30:15"], None);
    assert_eq!(stdout(&o), "1 month 8 hours 30 minutes 15 seconds\n");
    let o = slidewin(
        &[
            "period",
            "2026-01-31T22:00",
            "2026-03-01T06:30:15",
            "--units",
            "2",
        ],
        None,
    );
    assert_eq!(stdout(&o), "1 month\n");
}

#[test]
fn bad_values_name_the_value_and_exit_2() {
    let o = slidewin(&["period", "2024-13-01", "2025-01-01"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("\"2024-13-01\""), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());

    let o = slidewin(
        &["period", "2024-01-01", "2025-01-01", "--tz", "Mars/Base"],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("Mars/Base"));

    let o = slidewin(
        &[
            "period",
            "2024-03-09T21:00[America/New_York]",
            "2024-03-10T21:00[Asia/Tokyo]",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("Asia/Tokyo"), "{}", stderr(&o));

    let o = slidewin(&["period", "2024-01-01"], None);
    assert_eq!(o.status.code(), Some(2));
    let o = slidewin(&["period", "2024-01-01", "--month-end", "sometimes"], None);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn stdin_mode_answers_every_line_and_exits_2_on_a_bad_one() {
    let input = "2000-05-15 2026-10-28\n\
                 2026-01-31 2026-02-30\n\
                 2026-01-31   2026-03-01\n\
                 only-one\n\
                 2024-02-29 2025-02-28\n";
    let o = slidewin(&["period", "-"], Some(input));
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stdout(&o),
        "26 years 5 months 13 days\n\n1 month 1 day\n\n1 year\n"
    );
    let err = stderr(&o);
    assert!(
        err.contains("line 2:") && err.contains("\"2026-02-30\""),
        "{err}"
    );
    assert!(err.contains("line 4:") && err.contains("only-one"), "{err}");
    assert_eq!(err.lines().count(), 2);

    let o = slidewin(&["period", "-", "--json"], Some(input));
    assert_eq!(o.status.code(), Some(2));
    let lines: Vec<String> = stdout(&o).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 5);
    assert!(lines[1].starts_with("{\"error\":\"line 2: invalid END \\\"2026-02-30\\\""));
    assert!(lines[2].starts_with("{\"years\":0,\"months\":1,\"days\":1,"));
}

#[test]
fn stdin_mode_all_good_exits_0_and_keeps_order() {
    let mut input = String::new();
    let mut want = String::new();
    for day in 1..=28 {
        for months in 0..40 {
            let end_year = 2020 + (months / 12);
            let end_month = 1 + months % 12;
            input.push_str(&format!(
                "2020-01-{day:02} {end_year}-{end_month:02}-{day:02}\n"
            ));
            want.push_str(&format!("{}\n", whole_months(months)));
        }
    }
    let o = slidewin(&["period", "-", "--month-end", "strict"], Some(&input));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), want);
}

fn whole_months(n: i32) -> String {
    let (y, m) = (n / 12, n % 12);
    let unit = |v: i32, one: &str, many: &str| format!("{v} {}", if v == 1 { one } else { many });
    match (y, m) {
        (0, 0) => "0 days".to_owned(),
        (0, m) => unit(m, "month", "months"),
        (y, 0) => unit(y, "year", "years"),
        (y, m) => format!(
            "{} {}",
            unit(y, "year", "years"),
            unit(m, "month", "months")
        ),
    }
}

#[test]
fn stdin_mode_survives_a_line_that_is_not_utf8() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_slidewin"))
        .args(["period", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(b"2026-01-01 2026-01-14\n\xff\xfe 2026-01-01\r\n2026-01-01 2026-02-01")
        .unwrap();
    drop(pipe);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    // The last line has no newline and is still answered.
    assert_eq!(stdout(&o), "13 days\n\n1 month\n");
    assert!(stderr(&o).contains("line 2: not UTF-8"), "{}", stderr(&o));
}

#[test]
fn end_with_dash_is_refused() {
    let o = slidewin(&["period", "-", "2024-01-01"], Some(""));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("2024-01-01"));
}

/// The text a run prints, or its exit code and stderr when it fails.
fn answer(args: &[&str]) -> String {
    let mut all = vec!["period"];
    all.extend_from_slice(args);
    let o = slidewin(&all, None);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o).trim_end().to_owned()
}

#[test]
fn an_offset_makes_the_value_an_instant() {
    let (east, west) = ("2024-01-01T00:00+01:00", "2024-01-01T00:00-01:00");
    // Without --tz, measured in UTC; with it, in that zone. Never the offsets dropped.
    assert_eq!(answer(&[east, west]), "2 hours");
    assert_eq!(answer(&[east, west, "--tz", "UTC"]), "2 hours");
    assert_eq!(answer(&[east, west, "--tz", "Asia/Tokyo"]), "2 hours");
    assert_eq!(answer(&[west, east]), "-2 hours");
    assert_eq!(
        answer(&[east, west, "--json"]),
        "{\"years\":0,\"months\":0,\"days\":0,\"hours\":2,\"minutes\":0,\"seconds\":0,\"nanoseconds\":0}"
    );
    // RFC 3339's "-00:00" (offset unknown) is the instant at UTC.
    assert_eq!(
        answer(&["2024-01-01T00:00-00:00", "2024-01-01T00:00+00:00"]),
        "0 seconds"
    );
}

#[test]
fn a_z_value_is_an_instant_not_an_error() {
    assert_eq!(
        answer(&["2024-01-01T00:00Z", "2024-01-01T02:00+01:00"]),
        "1 hour"
    );
    assert_eq!(
        answer(&["2024-01-01T00:00:00z", "2024-02-01T00:00:00Z"]),
        "1 month"
    );
}

#[test]
fn instants_are_measured_on_the_calendar_of_tz() {
    // 21:00 in New York before spring-forward to 21:00 the next day: 23 hours elapsed.
    let (a, b) = ("2024-03-10T02:00Z", "2024-03-11T01:00Z");
    assert_eq!(answer(&[a, b]), "23 hours"); // UTC's days are all 24 hours
    assert_eq!(answer(&[a, b, "--tz", "America/New_York"]), "1 day");
    // Without --tz, a zoned value's zone is the calendar, and the instant is converted to it.
    assert_eq!(answer(&["2024-03-09T21:00[America/New_York]", b]), "1 day");
    // A civil value beside an instant, without --tz, is read in UTC; with it, in --tz.
    let (civil, instant) = ("2024-01-01T00:00", "2024-01-01T00:00+01:00");
    assert_eq!(answer(&[civil, instant]), "-1 hour");
    assert_eq!(
        answer(&[civil, instant, "--tz", "Europe/Paris"]),
        "0 seconds"
    );
    assert_eq!(answer(&["2024-01-01", "2024-01-02T00:00Z"]), "1 day");
}

#[test]
fn an_offset_beside_a_zone_must_be_the_zones() {
    // jiff's rule: the offset must be one the zone has at that datetime, else an error.
    let o = slidewin(
        &[
            "period",
            "2024-01-01T00:00+01:00[Europe/Paris]",
            "2024-01-01T00:00+05:00[Europe/Paris]",
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("invalid END \"2024-01-01T00:00+05:00[Europe/Paris]\""),
        "{err}"
    );
    // In a fold the offset picks which of the two 01:30s is meant.
    assert_eq!(
        answer(&[
            "2024-11-03T01:30-04:00[America/New_York]",
            "2024-11-03T01:30-05:00[America/New_York]",
        ]),
        "1 hour"
    );
}

#[test]
fn a_zero_period_is_never_negative() {
    // Half a second is measured and shown, in both directions.
    let (half, whole) = ("2024-06-01T10:00:00.5", "2024-06-01T10:00:00");
    assert_eq!(answer(&[half, whole]), "-0.5 seconds");
    assert_eq!(answer(&[whole, half]), "0.5 seconds");
    assert_eq!(
        answer(&[half, whole, "--json"]),
        "{\"years\":0,\"months\":0,\"days\":0,\"hours\":0,\"minutes\":0,\"seconds\":0,\"nanoseconds\":-500000000}"
    );
    assert_eq!(answer(&[half, half]), "0 seconds");
    assert_eq!(
        answer(&["2024-06-01T10:00:00.000000001", "2024-06-01T10:01:30.25"]),
        "1 minute 30.249999999 seconds"
    );
}

#[test]
fn units_zero_is_an_error() {
    let o = slidewin(
        &["period", "2024-01-01", "2025-02-03", "--units", "0"],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("'0'") && err.contains("--units"), "{err}");
    assert!(stdout(&o).is_empty());
    assert_eq!(
        answer(&["2024-01-01", "2025-02-03", "--units", "1"]),
        "1 year"
    );
}

#[test]
fn a_leap_second_is_refused() {
    for value in [
        "2016-12-31T23:59:60Z",
        "2016-12-31T23:59:60.5+00:00",
        "2016-12-31T23:59:60",
        "20161231T235960Z",
        "2016-12-31 23:59:60[UTC]",
    ] {
        let o = slidewin(&["period", value, "2017-01-01T00:00Z"], None);
        assert_eq!(o.status.code(), Some(2), "{value}");
        let err = stderr(&o);
        assert!(
            err.contains(&format!("invalid START \"{value}\"")) && err.contains("leap second"),
            "{err}"
        );
    }
    // :59 is fine, and a 60 elsewhere is not a leap second.
    assert_eq!(
        answer(&["2016-12-31T23:59:59Z", "2017-01-01T00:00Z"]),
        "1 second"
    );
    // In stdin mode the line is named and the others are answered.
    let o = slidewin(
        &["period", "-"],
        Some("2016-12-31T23:59:60Z 2017-01-01T00:00Z\n2016-12-31 2017-01-01\n"),
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stdout(&o), "\n1 day\n");
    assert!(
        stderr(&o).contains("line 1: invalid START"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_huge_stdin_line_is_quoted_cut() {
    let huge = 100 * 1024 * 1024;
    let mut input = "9".repeat(huge);
    input.push_str("\n2024-01-01 2024-01-02\n");
    let o = slidewin(&["period", "-"], Some(&input));
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.len() < 1_000, "{} bytes on stderr", err.len());
    assert!(
        err.starts_with("slidewin period: line 1: ")
            && err.contains(&format!("{} bytes", huge + 1)),
        "{err}"
    );
    assert!(err.contains("999\"…"), "{err}");
    assert_eq!(stdout(&o), "\n1 day\n");
    // Under --json the error line is cut the same way.
    let o = slidewin(&["period", "-", "--json"], Some(&input));
    let out = stdout(&o);
    assert!(
        out.len() < 1_000 && out.starts_with("{\"error\":\"line 1: "),
        "{out}"
    );
}

#[test]
fn a_long_value_is_quoted_cut() {
    // Long enough to be cut, short enough for one argument (Linux takes 128 KiB).
    let long = format!("2024-01-01T00:00[{}]", "é".repeat(20_000));
    let o = slidewin(&["period", &long, "2024-01-02"], None);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.len() < 1_000, "{} bytes: {err}", err.len());
    assert!(err.contains(&format!("({} bytes)", long.len())), "{err}");
    // A line under the length limit but not a pair is cut too, on a char boundary.
    let line = format!("{} x y\n", "é".repeat(1_000));
    let o = slidewin(&["period", "-"], Some(&line));
    let err = stderr(&o);
    assert!(
        err.len() < 1_000 && err.contains("expected `START END`"),
        "{err}"
    );
}
