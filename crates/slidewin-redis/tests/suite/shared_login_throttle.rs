//! The shared login throttle example: two of them on one Redis share the counts, one goes on
//! through an outage by its policy, and its flags and lines are read as `login_throttle`
//! reads them.

use crate::support;

#[path = "../../examples/shared_login_throttle/throttle.rs"]
mod throttle;

use std::io::Write;
use std::time::Duration;

use slidewin::limit::Kind;
use slidewin_redis::{FailurePolicy, RedisLimiter};
use support::{RedisServer, until_available};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

async fn run(url: &str, input: &[u8]) -> (u8, String, String) {
    let args = strings(&["--redis", url, "--window", "1h", "--prefix", "test"]);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = throttle::run(&args, input, &mut out, &mut err).await;
    (
        code,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

#[tokio::test]
async fn two_processes_share_the_attempt_counts() {
    let server = RedisServer::start();
    let url = server.url();
    let (code, first, _) = run(&url, b"mallory a\nmallory b\n").await;
    assert_eq!(code, 0);
    assert!(
        first.contains("mallory: wrong password (2 of 3 failed attempts"),
        "{first}"
    );
    // The second process sees the first one's two failures.
    let (_, second, _) = run(&url, b"mallory c\nmallory d\nalice letmein\n").await;
    let lines: Vec<&str> = second.lines().skip(1).collect();
    assert!(
        lines[0].contains("mallory: wrong password (3 of 3 failed attempts"),
        "{second}"
    );
    assert!(
        lines[1]
            .starts_with("mallory: refused: 3 failed attempts in the last 3600s; try again in "),
        "{second}"
    );
    assert_eq!(lines[2], "alice: welcome");
    // And so does the first, run again.
    let (_, again, _) = run(&url, b"mallory letmein\n").await;
    assert!(again.contains("mallory: refused"), "{again}");
}

#[tokio::test]
async fn bad_flags_exit_2_naming_the_value() {
    let long = "9".repeat(100_000);
    for (args, message) in [
        (
            &["--max-attempts", "0"][..],
            "error: --max-attempts takes a whole number from 1, got `0`\n",
        ),
        (
            &["--on-redis-down", "maybe"][..],
            "error: --on-redis-down takes `closed` or `open`, got `maybe`\n",
        ),
        (
            &["--window", "0"][..],
            "error: --window `0`: the span must be longer than zero, got 0ns\n",
        ),
        (
            &["--window", "soon"][..],
            "error: --window takes a duration such as 10s, got `soon`: ",
        ),
        (
            &["--window", "-1"][..],
            "error: --window takes a duration such as 10s, got `-1`: ",
        ),
        (&["--window"][..], "error: --window needs a value\n"),
        (
            &["--max-attempts", "100001"][..],
            "error: --max-attempts 100001 --window `10s`: SlidingLog on Redis cannot represent \
             the quota `100001 per 10s`: it keeps a time per unit admitted, so its limit can \
             be at most 100000 (Rules::MAX_SLIDING_LOG_LIMIT); SlidingCounter and Gcra keep two \
             numbers\n",
        ),
        (
            &["--window", "1.0000005"][..],
            "error: --max-attempts 3 --window `1.0000005`: SlidingLog on Redis cannot \
             represent the quota `3 per 1s 500ns`: Redis counts in whole microseconds, and the \
             span is not\n",
        ),
        (&["--max-attempts", &long][..], "(100000 bytes)`\n"),
        (&[&long[..]][..], "error: unknown flag `999"),
    ] {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = throttle::run(&strings(args), &b""[..], &mut out, &mut err).await;
        let err = String::from_utf8(err).unwrap();
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(message), "{args:?}: {err}");
        // A value is quoted to a few hundred bytes, however long.
        assert!(err.find("\n\nusage:").unwrap() < 400, "{args:?}: {err}");
    }
}

/// `--window 10` is ten seconds here as in `login_throttle`, and every form that one takes
/// means the same span.
#[test]
fn the_window_reads_as_login_throttle_reads_it() {
    let ms = Duration::from_millis;
    for (text, span) in [
        ("10", ms(10_000)),
        ("1.5", ms(1_500)),
        ("10s", ms(10_000)),
        ("500ms", ms(500)),
        ("1m 30s", ms(90_000)),
        ("PT10S", ms(10_000)),
        ("1h", ms(3_600_000)),
    ] {
        let config = throttle::parse_flags(&strings(&["--window", text]))
            .unwrap()
            .unwrap();
        assert_eq!(
            throttle::quota(&config.rules).span(),
            span,
            "--window {text}"
        );
        assert_eq!(throttle::quota(&config.rules).limit(), 3);
        let inline = throttle::parse_flags(&strings(&[&format!("--window={text}")]))
            .unwrap()
            .unwrap();
        assert_eq!(
            throttle::quota(&inline.rules).span(),
            span,
            "--window={text}"
        );
    }
    let config = throttle::parse_flags(&[]).unwrap().unwrap();
    assert_eq!(throttle::quota(&config.rules).span(), ms(10_000));
    // One rule, the exact sliding log, named for what it counts.
    let rule = &config.rules.rule_set().rules()[0];
    assert_eq!((rule.name(), rule.kind()), ("failed", Kind::SlidingLog));
    assert_eq!(config.policy, FailurePolicy::Closed);
}

#[tokio::test]
async fn a_long_line_is_skipped_and_quoted_to_two_hundred_bytes() {
    let server = RedisServer::start();
    let mut input = vec![b'x'; 4 << 20];
    input.extend_from_slice(b"\nalice letmein\n");
    let (code, out, err) = run(&server.url(), &input).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        err,
        format!(
            "line 1: longer than 1024 bytes (4194304), skipped: `{}... (1025 bytes)`\n",
            "x".repeat(200)
        )
    );
    assert!(out.ends_with("\nalice: welcome\n"), "{out}");
}

#[tokio::test]
async fn lines_are_read_a_kilobyte_at_most_and_counted_whole() {
    let mut input = Vec::new();
    input.extend_from_slice(&[b'a'; 3000]);
    input.extend_from_slice(b"\nshort\n\nlast without an end");
    let mut input = tokio::io::BufReader::with_capacity(100, &input[..]);
    let mut line = Vec::new();
    let mut lines = Vec::new();
    while let Some(length) = throttle::next_line(&mut input, &mut line).await.unwrap() {
        assert!(line.capacity() <= 2 * (throttle::MAX_LINE + 1));
        lines.push((length, String::from_utf8(line.clone()).unwrap()));
    }
    assert_eq!(
        lines,
        [
            (3000, "a".repeat(throttle::MAX_LINE + 1)),
            (5, "short".to_string()),
            (0, String::new()),
            (19, "last without an end".to_string()),
        ]
    );
}

/// What the throttle writes, a line at a time, to a test waiting for it.
struct Lines(mpsc::UnboundedSender<String>, Vec<u8>);

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.1.extend_from_slice(buf);
        while let Some(end) = self.1.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.1.drain(..=end).collect();
            let _ = self
                .0
                .send(String::from_utf8_lossy(&line[..end]).into_owned());
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn an_outage_refuses_every_login_says_so_and_ends_when_redis_is_back() {
    let mut server = RedisServer::start();
    let port = server.port;
    let redis = RedisLimiter::connect(&server.url())
        .await
        .unwrap()
        .with_prefix("test")
        .with_failure_policy(FailurePolicy::Closed)
        .with_circuit_backoff(Duration::from_millis(1), Duration::from_millis(10))
        .unwrap();
    let rules = throttle::parse_flags(&strings(&["--window", "1h"]))
        .unwrap()
        .unwrap()
        .rules;
    let (lines, mut said) = mpsc::unbounded_channel();
    let (mut out, mut err) = (Lines(lines, Vec::new()), Vec::new());
    let (mut typing, input) = tokio::io::duplex(1 << 16);
    let serving = throttle::serve(
        &redis,
        &rules,
        FailurePolicy::Closed,
        tokio::io::BufReader::new(input),
        &mut out,
        &mut err,
    );
    let script = async {
        let _header = said.recv().await.unwrap();
        let mut attempt = async |line: &str| {
            typing
                .write_all(format!("{line}\n").as_bytes())
                .await
                .unwrap();
            said.recv().await.unwrap()
        };
        let counted = "mallory: wrong password (1 of 3 failed attempts in the last 3600s)";
        assert_eq!(attempt("mallory a").await, counted);
        server.kill();
        let refused = "refused: Redis is down, and every login is refused until it is back \
                       (--on-redis-down closed)";
        assert_eq!(attempt("mallory b").await, format!("mallory: {refused}"));
        assert_eq!(attempt("alice letmein").await, format!("alice: {refused}"));
        // Back, empty (it keeps nothing on disk).
        server.restart();
        until_available(&redis).await;
        assert_eq!(attempt("alice letmein").await, "alice: welcome");
        assert_eq!(attempt("mallory c").await, counted);
        drop(typing);
    };
    let (served, ()) = tokio::join!(serving, script);
    served.unwrap();
    let err = String::from_utf8(err).unwrap();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    let down = format!(
        "warning: deciding without Redis until it is back (Redis at redis://127.0.0.1:{port}/ \
         is unavailable: "
    );
    assert!(lines[0].starts_with(&down), "{err}");
    assert!(
        lines[0].ends_with("): every login is refused (--on-redis-down closed)"),
        "{err}"
    );
    assert_eq!(lines[1], "Redis is back: failed attempts are counted again");
}

#[tokio::test]
async fn failing_open_checks_passwords_without_counting() {
    let mut server = RedisServer::start();
    let redis = RedisLimiter::connect(&server.url())
        .await
        .unwrap()
        .with_failure_policy(FailurePolicy::Open);
    let rules = throttle::parse_flags(&[]).unwrap().unwrap().rules;
    server.kill();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let input = &b"mallory a\nmallory b\nmallory c\nmallory d\nalice letmein\n"[..];
    throttle::serve(
        &redis,
        &rules,
        FailurePolicy::Open,
        input,
        &mut out,
        &mut err,
    )
    .await
    .unwrap();
    let (out, err) = (
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    );
    let lines: Vec<&str> = out.lines().skip(1).collect();
    let not_counted = "mallory: wrong password (not counted: Redis is down)";
    assert_eq!(
        lines,
        [
            not_counted,
            not_counted,
            not_counted,
            not_counted,
            "alice: welcome"
        ]
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.ends_with("): failed attempts are not counted (--on-redis-down open)\n"),
        "{err}"
    );
}
