//! The shared login throttle example: two of them on one Redis share the counts.

mod support;

#[path = "../examples/shared_login_throttle/throttle.rs"]
mod throttle;

use support::RedisServer;

async fn run(url: &str, input: &str) -> (u8, String, String) {
    let args: Vec<String> = ["--redis", url, "--window", "1h", "--prefix", "test"]
        .iter()
        .map(|a| a.to_string())
        .collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = throttle::run(&args, input.as_bytes(), &mut out, &mut err).await;
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
    let (code, first, _) = run(&url, "mallory a\nmallory b\n").await;
    assert_eq!(code, 0);
    assert!(
        first.contains("mallory: wrong password (2 of 3 failed attempts"),
        "{first}"
    );
    // The second process sees the first one's two failures.
    let (_, second, _) = run(&url, "mallory c\nmallory d\nalice letmein\n").await;
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
    let (_, again, _) = run(&url, "mallory letmein\n").await;
    assert!(again.contains("mallory: refused"), "{again}");
}

#[tokio::test]
async fn bad_flags_exit_2_naming_the_value() {
    let args: Vec<String> = ["--max-attempts", "0"]
        .iter()
        .map(|a| a.to_string())
        .collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = throttle::run(&args, &b""[..], &mut out, &mut err).await;
    let err = String::from_utf8(err).unwrap();
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--max-attempts `0`"), "{err}");
}
