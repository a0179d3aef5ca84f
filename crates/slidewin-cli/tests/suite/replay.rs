//! Issue 33: `slidewin replay`, through the built binary: a config tried on recorded requests
//! at their own times, against the config in force; the same input gives the same bytes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Two a minute, and three a minute: a user's third request in a minute is where they differ.
const TWO: &str = "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2}\n";
const THREE: &str = "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 3}\n";

/// ann at 0 s, 10 s, 20.5 s (in Unix seconds) and 60.5 s, when her first has left the
/// window; bob in a domain no config knows; a blank line.
const LINES: &str = r#"{"time":"2026-12-06T10:00:00Z","domain":"edge","descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}
{"time":"2026-12-06T10:00:10Z","domain":"edge","descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}
{"time":1796551220.5,"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}

{"time":"2026-12-06T10:01:00.5Z","domain":"edge","descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}
{"time":"2026-12-06T10:01:01Z","domain":"other","descriptors":[{"entries":[{"key":"user","value":"bob"}]}]}
"#;

fn configs(test: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("slidewin-replay-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (two, three) = (dir.join("two.yaml"), dir.join("three.yaml"));
    std::fs::write(&two, TWO).unwrap();
    std::fs::write(&three, THREE).unwrap();
    (two, three)
}

fn replay(args: &[&str], config: &Path, input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_slidewin"))
        .arg("replay")
        .arg("--config")
        .arg(config)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A replay that stops early (a line it refuses) closes its input: the rest is not read.
    let written = child.stdin.take().unwrap().write_all(input.as_bytes());
    assert!(written.is_ok() || written.is_err_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe));
    child.wait_with_output().unwrap()
}

/// `config` replayed on `input` with `--json`: it succeeds, and this is its report.
fn json_report(config: &Path, input: &str) -> serde_json::Value {
    let out = replay(&["--json"], config, input);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn issue_33_replay_reports_per_limit_the_keys_denied_and_what_changed() {
    let (two, three) = configs("text");
    let against = ["--against", three.to_str().unwrap()];
    let out = replay(&against, &two, LINES);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(
        text.contains("from 2026-12-06T10:00:00Z to 2026-12-06T10:01:01Z"),
        "{text}"
    );
    assert!(
        text.contains("5 requests: 1 over the limit, 0 refused; 1 descriptors matched no limit"),
        "{text}"
    );
    // ann: admitted at 0, 10 and 60.5 s (her first had left the window), denied at 20.5 s.
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("edge "))
        .unwrap();
    let columns: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(columns, ["edge", "user", "3", "1"], "{text}");
    assert!(
        text.contains("1 edge                 user                     user=ann"),
        "{text}"
    );
    assert!(text.contains("1 of 5 requests decided otherwise"), "{text}");
    assert!(
        text.contains("line 3  2026-12-06T10:00:20.5Z  OK -> OVER_LIMIT  edge user=ann"),
        "{text}"
    );
    // Deterministic: the same input, the same bytes.
    assert_eq!(replay(&against, &two, LINES).stdout, out.stdout);
}

#[test]
fn issue_33_replay_speaks_json() {
    let (two, three) = configs("json");
    let out = replay(
        &["--json", "--against", three.to_str().unwrap()],
        &two,
        LINES,
    );
    assert_eq!(out.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["decided"]["over_limit"], 1);
    assert_eq!(report["decided"]["limits"][0]["denied"], 1);
    assert_eq!(report["decided"]["denied_most"][0]["entries"], "user=ann");
    assert_eq!(report["against"]["decided"]["over_limit"], 0);
    assert_eq!(report["against"]["changed"], 1);
    assert_eq!(report["against"]["changed_first"][0]["line"], 3);
    assert_eq!(report["against"]["changed_first"][0]["after"], "OVER_LIMIT");
}

#[test]
fn issue_33_replay_names_the_line_it_cannot_read() {
    let (two, _) = configs("bad");
    for (line, said) in [
        (r#"{"domain":"edge","descriptors":[]}"#, "no `time`"),
        (
            r#"{"time":"yesterday","domain":"edge"}"#,
            "`time` \"yesterday\"",
        ),
        (r#"{"time":-5,"domain":"edge"}"#, "Unix seconds from 0"),
        (r#"{"time":1,"domain":"edge","bogus":true}"#, "the request"),
        ("not json", "not a JSON object"),
    ] {
        let input = format!("{}\n{line}\n", LINES.lines().next().unwrap());
        let out = replay(&[], &two, &input);
        assert_eq!(out.status.code(), Some(2), "{line}");
        let error = String::from_utf8_lossy(&out.stderr);
        assert!(
            error.contains("line 2: ") && error.contains(said),
            "{line}: {error}"
        );
    }
    // A line past the bound is refused by its length, not read whole.
    let long = format!("{{\"time\":1,\"domain\":\"{}\"}}\n", "x".repeat(2 << 20));
    let out = replay(&[], &two, &long);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the most a line may hold"));
}

/// A calendar day in Tokyo: the recorded times are Unix time, so the day turns at midnight
/// there (15:00 UTC), and the request at that instant is the new day's first.
#[test]
fn issue_33_replay_dates_calendar_quotas_in_their_zone() {
    let dir = std::env::temp_dir().join(format!("slidewin-replay-calendar-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("daily.yaml");
    std::fs::write(
        &config,
        "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {name: daily, quota: 1 per calendar day, zone: Asia/Tokyo}\n",
    )
    .unwrap();
    let line = |time: &str| {
        format!(
            "{{\"time\":\"{time}\",\"domain\":\"edge\",\"descriptors\":[{{\"entries\":[{{\"key\":\"user\",\"value\":\"ann\"}}]}}]}}\n"
        )
    };
    let input = [
        "2026-12-06T14:59:59Z",
        "2026-12-06T15:00:00Z",
        "2026-12-06T15:00:01Z",
    ]
    .map(line)
    .concat();
    let report = json_report(&config, &input);
    assert_eq!(report["decided"]["limits"][0]["admitted"], 2);
    assert_eq!(report["decided"]["limits"][0]["denied"], 1);
}

/// Corrections of an estimate replayed: 800 tokens charged, 500 sent back with
/// `is_negative_hits`, then 700. With `refunds: true` the 700 fit; without, the correction is
/// kept and they are denied: what turning refunds on would change, before it ships.
#[test]
fn issue_33_replay_gives_back_negative_hits_where_the_limit_refunds() {
    let dir = std::env::temp_dir().join(format!("slidewin-replay-refunds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let limit = |refunds: &str| {
        format!(
            "domain: ai\ndescriptors:\n  - key: api_key\n    rate_limit: {{name: tokens, quota: 1000 per minute{refunds}}}\n"
        )
    };
    let (refunding, keeping) = (dir.join("refunds.yaml"), dir.join("keeps.yaml"));
    std::fs::write(&refunding, limit(", refunds: true")).unwrap();
    std::fs::write(&keeping, limit("")).unwrap();
    let line = |second: u32, hits: u32, negative: bool| {
        format!(
            "{{\"time\":\"2026-12-06T10:00:{second:02}Z\",\"domain\":\"ai\",\"descriptors\":[{{\"entries\":[{{\"key\":\"api_key\",\"value\":\"k1\"}}],\"hits_addend\":{hits},\"is_negative_hits\":{negative}}}]}}\n"
        )
    };
    let input = [line(0, 800, false), line(5, 500, true), line(6, 700, false)].concat();
    let decided = |config: &Path| {
        let report = json_report(config, &input);
        report["decided"]["limits"][0]["denied"].as_u64().unwrap()
    };
    assert_eq!(decided(&refunding), 0);
    assert_eq!(decided(&keeping), 1);
}
