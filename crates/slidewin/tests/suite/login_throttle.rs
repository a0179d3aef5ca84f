//! The login throttle example, run on a replay: its exact output, and its answers to bad flags
//! and bad lines.

#[path = "../../examples/login_throttle/throttle.rs"]
mod throttle;

const REPLAY: &str = include_str!("../../examples/login_throttle/replay.txt");

fn run(args: &[&str], input: &str) -> (u8, String, String) {
    run_bytes(args, input.as_bytes())
}

fn run_bytes(args: &[&str], input: &[u8]) -> (u8, String, String) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = throttle::run(&args, input, &mut out, &mut err);
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

#[test]
fn replay_prints_exactly_this() {
    let (code, out, err) = run(&["--replay"], REPLAY);
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(
        out,
        "\
login throttle: a user is refused after 3 failed attempts in the last 10s; alice's password is letmein
      0s  mallory: wrong password (1 of 3 failed attempts in the last 10s)
      1s  mallory: wrong password (2 of 3 failed attempts in the last 10s)
      2s  mallory: wrong password (3 of 3 failed attempts in the last 10s); refused until 10s
      3s  mallory: refused: 3 failed attempts in the last 10s; try again in 7s
      5s  alice: welcome
  9.999s  mallory: refused: 3 failed attempts in the last 10s; try again in 0.001s
     10s  mallory: forgot the failed attempt at 0s
     10s  mallory: wrong password (3 of 3 failed attempts in the last 10s); refused until 11s
   10.5s  alice: wrong password (1 of 3 failed attempts in the last 10s)
     11s  mallory: forgot the failed attempt at 1s
     11s  mallory: wrong password (3 of 3 failed attempts in the last 10s); refused until 12s
     25s  alice: forgot the failed attempt at 10.5s
     25s  mallory: forgot the failed attempt at 2s
     25s  mallory: forgot the failed attempt at 10s
     25s  mallory: forgot the failed attempt at 11s
     25s  alice: welcome
"
    );
}

#[test]
fn flags_set_the_threshold_and_the_window() {
    let input = "0 bob a\n1 bob b\n1.5 bob c\n2 bob d\n";
    let (code, out, _) = run(
        &["--max-attempts=2", "--window", "1500ms", "--replay"],
        input,
    );
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(
        lines,
        [
            "      0s  bob: wrong password (1 of 2 failed attempts in the last 1.5s)",
            "      1s  bob: wrong password (2 of 2 failed attempts in the last 1.5s); refused until 1.5s",
            "    1.5s  bob: forgot the failed attempt at 0s",
            "    1.5s  bob: wrong password (2 of 2 failed attempts in the last 1.5s); refused until 2.5s",
            "      2s  bob: refused: 2 failed attempts in the last 1.5s; try again in 0.5s",
        ]
    );
    // A plain number is seconds.
    let (code, out, _) = run(&["--window", "2.5", "--replay"], "");
    assert_eq!(code, 0);
    assert!(out.contains("in the last 2.5s"), "{out}");
}

#[test]
fn bad_flags_exit_2_with_a_message_naming_the_value() {
    for (args, message) in [
        (
            &["--max-attempts", "0"][..],
            "--max-attempts takes a whole number from 1, got `0`",
        ),
        (&["--max-attempts", "many"][..], "got `many`"),
        (
            &["--window", "0s"][..],
            "--window `0s`: the span must be longer than zero, got 0ns",
        ),
        (&["--window", "-5s"][..], "got `-5s`"),
        (&["--window", "soon"][..], "got `soon`"),
        (&["--window"][..], "--window needs a value"),
        (&["--frobnicate"][..], "unknown flag `--frobnicate`"),
    ] {
        let (code, out, err) = run(args, "");
        assert_eq!(code, 2, "{args:?}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(err.contains(message), "{args:?}: {err}");
        assert!(err.contains("usage: login_throttle"), "{args:?}: {err}");
    }
}

#[test]
fn login_throttle_quotes_a_huge_flag_value_cut() {
    let huge = "9".repeat(100_000);
    for args in [
        &["--window", &huge][..],
        &["--max-attempts", &huge][..],
        &[&huge[..]][..],
    ] {
        let (code, _, err) = run(args, "");
        assert_eq!(code, 2);
        let message = err.lines().next().unwrap();
        assert!(
            message.len() < 400,
            "{} bytes: {message:.80}",
            message.len()
        );
        assert!(message.contains("(100000 bytes)"), "{message:.300}");
    }
    let (code, out, _) = run(&["--help"], "");
    assert_eq!(code, 0);
    assert!(out.starts_with("usage: login_throttle"));
}

/// Like the slidewin CLI's stdin mode: a bad line is named on stderr and skipped, the lines
/// after it are read, and the exit status is 2 at the end.
#[test]
fn malformed_lines_are_reported_and_skipped() {
    let (code, out, err) = run(
        &["--replay"],
        "# comment\n\nsoon alice letmein\n3 alice\n4 alice letmein\n",
    );
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "line 3: the time `soon` is not a number of seconds such as 12 or 9.999\n\
         line 4: expected `SECONDS USER PASSWORD`, got `3 alice`\n"
    );
    assert!(out.ends_with("      4s  alice: welcome\n"), "{out}");
}

#[test]
fn interactive_mode_reads_user_password_lines() {
    let (code, out, err) = run(&[], "alice nope\nalice letmein\n");
    assert_eq!((code, err.as_str()), (0, ""));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[1].starts_with("type `USER PASSWORD` lines"));
    assert!(lines[2].ends_with("alice: wrong password (1 of 3 failed attempts in the last 10s)"));
    assert!(lines[3].ends_with("alice: welcome"));
}

/// Issue 17: `18446744070 m a` with `--max-attempts 1` panicked ("past `Moment::MAX`") computing
/// when the user would be let in again. A time must leave a window's room before the end of
/// the timeline; one past that is a bad line, and the throttle goes on.
#[test]
fn login_throttle_replay_refuses_a_time_past_the_timeline() {
    let (code, out, err) = run(
        &["--replay", "--max-attempts", "1"],
        "18446744070 m a\n18446744063.709551615 m a\n18446744063.709551616 m b\n",
    );
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "line 1: the time `18446744070` is past the end of the timeline: with a window of 10s, \
         replay times go up to 18446744063.709551615\n\
         line 3: the time `18446744063.709551616` is past the end of the timeline: with a window \
         of 10s, replay times go up to 18446744063.709551615\n"
    );
    // The last time that fits is taken, and its end is on the timeline: Moment::MAX.
    assert!(
        out.ends_with(
            "18446744063.71s  m: wrong password (1 of 1 failed attempts in the last 10s); \
             refused until 18446744073.71s\n"
        ),
        "{out}"
    );
    // A longer window leaves less room; a number past u64 is past the end too.
    let (code, _, err) = run(
        &["--replay", "--window", "18000000000"],
        "99999999999999999999999 m a\n446744073.709551616 m a\n",
    );
    assert_eq!(code, 2);
    assert!(
        err.starts_with("line 1: the time `99999999999999999999999` is past the end"),
        "{err}"
    );
    assert!(
        err.ends_with(
            "line 2: the time `446744073.709551616` is past the end of the timeline: with a \
             window of 18000000000s, replay times go up to 446744073.709551615\n"
        ),
        "{err}"
    );
}

/// Issue 17: with replay times going backwards the throttle counted each attempt at its own
/// time as if nothing were wrong ("3 of 3 failed attempts"). A time before the last one taken
/// is a bad line naming both; the same time again is fine.
#[test]
fn login_throttle_replay_refuses_time_going_backwards() {
    let (code, out, err) = run(
        &["--replay"],
        "1000 m a\n3 m b\n999.999999999 m c\n1000 m d\n1000.5 m e\n",
    );
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "line 2: the time `3` is before line 1's `1000`; replay times must not go back\n\
         line 3: the time `999.999999999` is before line 1's `1000`; replay times must not go back\n"
    );
    let lines: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(
        lines,
        [
            "   1000s  m: wrong password (1 of 3 failed attempts in the last 10s)",
            "   1000s  m: wrong password (2 of 3 failed attempts in the last 10s)",
            " 1000.5s  m: wrong password (3 of 3 failed attempts in the last 10s); refused until 1010s",
        ]
    );
    // The lines: only `3` is a time the throttle takes, and it is the first.
    let (code, out, err) = run(&["--replay"], "18446744073.7 m a\n-0 m a\n1e3 m a\n3 m a\n");
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 3, "{err}");
    assert!(
        out.ends_with("      3s  m: wrong password (1 of 3 failed attempts in the last 10s)\n")
    );
}

/// Signs, NaN, infinities, exponents, more than nine decimals: each a bad line naming its
/// time, and the next line is read.
#[test]
fn login_throttle_replay_refuses_times_that_are_not_seconds_from_zero() {
    let (code, out, err) = run(
        &["--replay"],
        "-0 m a\n-5 m a\n+1 m a\nNaN m a\ninf m a\n1e3 m a\n. m a\n1.0000000001 m a\n0x10 m a\n\
         2.5 alice letmein\n",
    );
    assert_eq!(code, 2);
    let sign = "has a sign; replay times are seconds from 0, such as 12 or 9.999";
    let not_seconds = "is not a number of seconds such as 12 or 9.999";
    let expected = [
        format!("line 1: the time `-0` {sign}"),
        format!("line 2: the time `-5` {sign}"),
        format!("line 3: the time `+1` {sign}"),
        format!("line 4: the time `NaN` {not_seconds}"),
        format!("line 5: the time `inf` {not_seconds}"),
        format!("line 6: the time `1e3` {not_seconds}"),
        format!("line 7: the time `.` {not_seconds}"),
        "line 8: the time `1.0000000001` has more than nine decimals (finer than a nanosecond)"
            .to_string(),
        format!("line 9: the time `0x10` {not_seconds}"),
    ];
    assert_eq!(err.lines().collect::<Vec<_>>(), expected);
    assert!(out.ends_with("    2.5s  alice: welcome\n"), "{out}");
}

/// A line that is not UTF-8 is a bad line, not the end of the input (it was an I/O error that
/// stopped the throttle with status 1).
#[test]
fn login_throttle_reports_a_line_that_is_not_utf8_and_goes_on() {
    let (code, out, err) = run_bytes(&["--replay"], b"1 m \xff\xfe\n2 alice letmein\n");
    assert_eq!(code, 2);
    assert_eq!(err, "line 1: not UTF-8: `1 m \u{fffd}\u{fffd}`\n");
    assert!(out.ends_with("      2s  alice: welcome\n"), "{out}");
}

/// Issue 17: a 100 MB line with no space was echoed whole to stderr. What an error quotes is
/// cut to 200 bytes, saying how long the line was, and a line past 4 KiB is not held whole.
#[test]
fn login_throttle_quotes_a_huge_line_cut() {
    let huge = "a".repeat(1_000_000);
    let (code, out, err) = run(&["--replay"], &format!("{huge}\n1 alice letmein\n"));
    assert_eq!(code, 2);
    assert!(err.len() < 300, "{} bytes on stderr", err.len());
    assert_eq!(
        err,
        format!(
            "line 1: longer than 4096 bytes: `{}…` (1000000 bytes)\n",
            "a".repeat(200)
        )
    );
    assert!(out.ends_with("      1s  alice: welcome\n"), "{out}");
    // Under the cap, a bad line is quoted cut too, at a character boundary.
    let long = format!("x{}", "é".repeat(1_500));
    let (code, _, err) = run(&[], &long);
    assert_eq!(code, 2);
    assert_eq!(
        err,
        format!(
            "line 1: expected `USER PASSWORD`, got `x{}…` (3001 bytes)\n",
            "é".repeat(99)
        )
    );
    // The same in interactive mode, at the end of the input without a newline.
    let (code, _, err) = run(&[], &"b".repeat(5_000));
    assert_eq!(code, 2);
    assert!(
        err.ends_with("…` (5000 bytes)\n") && err.len() < 300,
        "{err}"
    );
}
