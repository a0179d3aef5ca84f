//! The login throttle example, run on a replay: its exact output, and its answers to bad flags.

#[path = "../examples/login_throttle/throttle.rs"]
mod throttle;

const REPLAY: &str = include_str!("../examples/login_throttle/replay.txt");

fn run(args: &[&str], input: &str) -> (u8, String, String) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = throttle::run(&args, input.as_bytes(), &mut out, &mut err);
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
    let (code, out, _) = run(&["--help"], "");
    assert_eq!(code, 0);
    assert!(out.starts_with("usage: login_throttle"));
}

#[test]
fn malformed_lines_are_reported_and_skipped() {
    let (code, out, err) = run(
        &["--replay"],
        "# comment\n\nsoon alice letmein\n3 alice\n4 alice letmein\n",
    );
    assert_eq!(code, 0);
    assert_eq!(
        err,
        "line 3: expected `SECONDS USER PASSWORD`, got `soon alice letmein`\n\
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
