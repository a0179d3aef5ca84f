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
fn the_seed_example_in_text_and_json() {
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
