//! `slidewin serve` as a process: what it prints works as printed, SIGHUP reloads its config,
//! and SIGTERM stops it with exit code 0.

#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

pub(crate) struct Serving {
    pub(crate) child: Child,
    /// The first line it prints: the backend and the config.
    banner: String,
    /// Where its HTTP API and Envoy's RLS gRPC listen.
    pub(crate) http: String,
    pub(crate) grpc: String,
    curl: String,
}

/// Starts `slidewin serve` on free ports with `args`, and reads what it prints up to its curl
/// line.
fn serve(args: &[&str]) -> Serving {
    serve_logging(args, Stdio::null())
}

/// As [`serve`], its logs going to `logs`.
fn serve_logging(args: &[&str], logs: Stdio) -> Serving {
    let mut command = serve_command();
    command.args(args);
    started(command, logs)
}

/// `slidewin serve` on free ports of 127.0.0.1: more arguments may follow.
pub(crate) fn serve_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_slidewin"));
    command.args([
        "serve",
        "--grpc-addr",
        "127.0.0.1:0",
        "--http-addr",
        "127.0.0.1:0",
    ]);
    command
}

/// `command` spawned, its logs going to `logs`, and what it prints read up to its curl line.
pub(crate) fn started(mut command: Command, logs: Stdio) -> Serving {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(logs)
        .spawn()
        .expect("slidewin runs");
    let stdout = BufReader::new(child.stdout.take().expect("its stdout"));
    let (mut banner, mut http, mut grpc, mut curl) = (None, None, None, None);
    for line in stdout.lines() {
        let line = line.expect("a line");
        banner.get_or_insert_with(|| line.clone());
        if let Some(url) = line.trim().strip_prefix("dashboard") {
            http = Some(
                url.trim()
                    .trim_start_matches("http://")
                    .trim_end_matches('/')
                    .to_owned(),
            );
        }
        if let Some(addr) = line.trim().strip_prefix("Envoy RLS gRPC") {
            grpc = Some(addr.trim().to_owned());
        }
        if line.trim_start().starts_with("curl ") {
            curl = Some(line.trim().to_owned());
            break;
        }
    }
    Serving {
        child,
        banner: banner.expect("it prints a banner"),
        http: http.expect("it prints the dashboard's URL"),
        grpc: grpc.expect("it prints the gRPC address"),
        curl: curl.expect("it prints a curl line"),
    }
}

fn get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("it listens");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([format!("-{name}"), child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

#[test]
fn the_printed_curl_line_works_and_sigterm_exits_0() {
    let mut serving = serve(&[]);
    assert!(serving.curl.contains(&serving.http), "{}", serving.curl);
    let out = Command::new("sh")
        .args(["-c", &serving.curl])
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains(r#""overallCode":"OK""#), "{text}");
    assert!(
        text.to_ascii_lowercase()
            .contains("ratelimit-policy: \"burst\";q=10;w=1"),
        "{text}"
    );
    // A SIGHUP with nothing to reload is logged, and the service goes on.
    signal(&serving.child, "HUP");
    assert!(get(&serving.http, "/healthz").contains("200 OK"));
    assert!(get(&serving.http, "/healthcheck").contains("200 OK"));
    signal(&serving.child, "TERM");
    let status = serving.child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "a graceful stop exits 0");
}

/// Issue 31: on SIGTERM health fails first, while the listeners still answer, for
/// `--drain-delay`; the process then drains and exits 0 (here killed: the delay is long).
#[test]
fn issue_31_sigterm_fails_health_while_the_listeners_still_answer() {
    let mut serving = serve(&["--drain-delay", "3600"]);
    let ok = get(&serving.http, "/healthcheck");
    assert!(
        ok.starts_with("HTTP/1.1 200") && ok.ends_with("OK\n"),
        "{ok}"
    );
    signal(&serving.child, "TERM");
    // The stop is asynchronous: ask until health fails (bounded; no timing is asserted).
    let failing = (0..100_000)
        .map(|_| get(&serving.http, "/healthcheck"))
        .find(|answer| answer.starts_with("HTTP/1.1 500"))
        .expect("health fails after SIGTERM");
    assert!(failing.contains("not ready: draining"), "{failing}");
    // Still answering: a new connection and a check.
    assert!(get(&serving.http, "/healthz").starts_with("HTTP/1.1 500"));
    serving.child.kill().unwrap();
    serving.child.wait().unwrap();
}

/// Issue 31: a Redis that does not answer fails health by default, naming the backend and
/// the policy; `--ready-when-degraded` counts the failure policy's answers as healthy.
#[test]
fn issue_31_ready_when_degraded_through_the_binary() {
    let down = [
        "--redis",
        "redis://127.0.0.1:1/",
        "--failure-policy",
        "closed",
    ];
    for (extra, expected) in [
        (None, "HTTP/1.1 500"),
        (Some("--ready-when-degraded"), "HTTP/1.1 200"),
    ] {
        let mut args = down.to_vec();
        args.extend(extra);
        let mut serving = serve(&args);
        let answer = get(&serving.http, "/healthcheck");
        assert!(answer.starts_with(expected), "{extra:?}: {answer}");
        assert!(answer.contains("the redis backend is"), "{answer}");
        assert!(answer.contains("failure policy (closed)"), "{answer}");
        signal(&serving.child, "TERM");
        assert_eq!(serving.child.wait().unwrap().code(), Some(0));
    }
}

/// Issue 31: `--tls-client-ca` reaches the listeners. A file with an authority serves (the
/// handshakes themselves are tested in slidewin-server's `mtls`); one with none stops the
/// start, naming it.
#[test]
fn issue_31_tls_client_ca_through_the_binary() {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert = config_file("mtls", "cert.pem", &certified.cert.pem());
    let key = cert.with_file_name("key.pem");
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let ca = cert.with_file_name("client-ca.pem");
    std::fs::write(&ca, certified.cert.pem()).unwrap();
    let tls = |ca: &std::path::Path| {
        [
            "--tls-cert".to_owned(),
            cert.display().to_string(),
            "--tls-key".to_owned(),
            key.display().to_string(),
            "--tls-client-ca".to_owned(),
            ca.display().to_string(),
        ]
    };
    let args = tls(&ca);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut serving = serve(&args);
    assert!(
        serving.banner.starts_with("slidewin serve"),
        "{}",
        serving.banner
    );
    signal(&serving.child, "TERM");
    assert_eq!(serving.child.wait().unwrap().code(), Some(0));

    let empty = ca.with_file_name("empty-ca.pem");
    std::fs::write(&empty, "no certificate here\n").unwrap();
    let out = serve_command().args(tls(&empty)).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&empty.display().to_string()), "{err}");
    assert!(err.contains("no CERTIFICATE"), "{err}");
    let _ = std::fs::remove_dir_all(cert.parent().unwrap());
}

/// Issue 31: `--redis-ca` is read at the start; one that cannot be read stops it, naming the
/// file (the TLS handshake itself is tested in slidewin-server's `tls` tests).
#[test]
fn issue_31_an_unreadable_redis_ca_stops_the_start_naming_it() {
    let out = serve_command()
        .args(["--redis", "rediss://localhost:6380/"])
        .args(["--redis-ca", "/nonexistent/slidewin/ca.pem"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/slidewin/ca.pem"), "{err}");
}

/// Issue 33: `--partition-key-secret-file` is read at the start; a secret shorter than 16
/// bytes stops it, naming the flag, the file and the bound.
#[test]
fn issue_33_a_short_partition_key_secret_stops_the_start() {
    let file = config_file("pk", "secret", "short secret\n");
    let out = serve_command()
        .arg("--partition-key-secret-file")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--partition-key-secret-file"), "{err}");
    assert!(err.contains(&*file.to_string_lossy()), "{err}");
    assert!(err.contains("at least 16"), "{err}");
}

/// A `--metrics-path` that is no path, or an admin token file that cannot be read, stops the
/// start with status 2 before anything listens, naming what is wrong.
#[test]
fn a_bad_metrics_path_or_admin_token_file_stops_the_start_naming_it() {
    let out = serve_command()
        .args(["--metrics-addr", "127.0.0.1:0", "--metrics-path", "metrics"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--metrics-path"), "{err}");
    assert!(err.contains("must start with /"), "{err}");

    let out = serve_command()
        .args(["--admin-token-file", "/nonexistent/slidewin/token"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/slidewin/token"), "{err}");
}

/// `text` in a file `name` of a fresh directory of its own (`test` names it).
fn config_file(test: &str, name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("slidewin-cli-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    file
}

#[test]
fn sighup_reloads_the_config() {
    let file = config_file(
        "sighup",
        "ratelimit.yaml",
        "domain: example\ndescriptors:\n  - key: client\n    rate_limit: {unit: second, requests_per_unit: 5}\n",
    );
    let mut serving = serve(&["--config", file.to_str().unwrap()]);
    assert!(get(&serving.http, "/api/config").contains(r#""version":1"#));
    signal(&serving.child, "HUP");
    // The reload is asynchronous: ask until it shows (bounded, and no timing is asserted).
    let reloaded =
        (0..100_000).any(|_| get(&serving.http, "/api/config").contains(r#""version":2"#));
    assert!(reloaded, "SIGHUP reloaded the config");
    signal(&serving.child, "TERM");
    assert_eq!(serving.child.wait().unwrap().code(), Some(0));
}

/// Issue 31: `--merge-domains` (envoy ratelimit's `MERGE_DOMAIN_CONFIG`) serves one domain from
/// two files, and reloads keep merging; without it the start is refused, naming the domain.
#[test]
fn issue_31_merge_domains_through_the_binary() {
    let first = config_file(
        "merge",
        "a.yaml",
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {quota: 5/s}\n",
    );
    let dir = first.parent().unwrap().to_owned();
    std::fs::write(
        dir.join("b.yaml"),
        "domain: api\ndescriptors:\n  - key: ip\n    rate_limit: {quota: 9/s}\n",
    )
    .unwrap();
    let config = dir.to_str().unwrap();
    let refused = Command::new(env!("CARGO_BIN_EXE_slidewin"))
        .args([
            "serve",
            "--grpc-addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
        ])
        .args(["--config", config])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("duplicate domain `api`"), "{err}");

    let mut serving = serve(&["--config", config, "--merge-domains"]);
    let shown = get(&serving.http, "/api/config");
    assert!(
        shown.contains(r#""key":"user""#) && shown.contains(r#""key":"ip""#),
        "{shown}"
    );
    signal(&serving.child, "HUP");
    let reloaded =
        (0..100_000).any(|_| get(&serving.http, "/api/config").contains(r#""version":2"#));
    assert!(reloaded, "SIGHUP reloaded the merged config");
    signal(&serving.child, "TERM");
    assert_eq!(serving.child.wait().unwrap().code(), Some(0));
}

#[test]
fn a_bad_config_is_refused_at_start_naming_the_place() {
    let file = config_file(
        "bad",
        "bad.yaml",
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {quota: 5 per fortnight}\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_slidewin"))
        .args([
            "serve",
            "--config",
            file.to_str().unwrap(),
            "--grpc-addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.yaml:4:") && err.contains("fortnight"),
        "{err}"
    );
}

#[test]
fn logs_are_json_lines_when_asked() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_slidewin"))
        .args([
            "serve",
            "--grpc-addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
            "--log-format",
            "json",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("slidewin runs");
    let mut stderr = BufReader::new(child.stderr.take().expect("its stderr"));
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(
        line.starts_with('{') && line.trim_end().ends_with('}'),
        "{line}"
    );
    assert!(
        line.contains(r#""message":"slidewin serve is listening""#),
        "{line}"
    );
    assert!(line.contains(r#""level":"INFO""#), "{line}");
    signal(&child, "TERM");
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// A port of 127.0.0.1 where nothing listens, below the kernel's ephemeral ports (from 32768 on
/// Linux): a client reconnecting to it is never handed it as its own port (and so never
/// connects to itself).
fn quiet_port() -> u16 {
    let start = 20_000 + u16::try_from(std::process::id() % 10_000).expect("below 10,000");
    (start..32_000)
        .chain(10_000..start)
        .find(|port| std::net::TcpListener::bind(("127.0.0.1", *port)).is_ok())
        .expect("a free port")
}

/// Issue 29, finding 9: `serve --redis URL` exited 1 when nothing answered there. A service
/// restarted during a Redis outage comes up, says it is down (in its log, the URL's password
/// hidden, and its first line) and answers by its policy.
#[test]
fn serve_starts_while_redis_is_down() {
    let port = quiet_port();
    let url = format!("redis://:hunter2@127.0.0.1:{port}");
    let mut serving = serve_logging(
        &["--redis", &url, "--failure-policy", "closed"],
        Stdio::piped(),
    );
    assert_eq!(
        serving.banner,
        "slidewin serve: redis backend (down: answering by --failure-policy closed until it \
         answers), config built-in example"
    );
    // Logged before the first line was printed: the first log line is the warning.
    let mut logs = BufReader::new(serving.child.stderr.take().expect("its logs"));
    let mut warning = String::new();
    logs.read_line(&mut warning).unwrap();
    assert!(warning.contains("WARN"), "{warning}");
    assert!(
        warning.contains(&format!(
            "starting without Redis (Redis at redis://:***@127.0.0.1:{port} is unavailable"
        )),
        "{warning}"
    );
    assert!(
        warning.contains("answering by the failure policy (closed)"),
        "{warning}"
    );
    assert!(!warning.contains("hunter2"), "{warning}");
    let stats = get(&serving.http, "/api/stats");
    assert!(stats.contains(r#""kind":"redis""#), "{stats}");
    assert!(
        stats.contains(r#""state":"down""#) || stats.contains(r#""state":"probing""#),
        "{stats}"
    );
    let out = Command::new("sh")
        .args(["-c", &serving.curl])
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    assert!(text.starts_with("http/1.1 429"), "{text}");
    assert!(text.contains("slidewin-degraded: closed"), "{text}");
    signal(&serving.child, "TERM");
    assert_eq!(serving.child.wait().unwrap().code(), Some(0));
}

/// A Redis address without its scheme is refused at once, told the URL it may mean.
#[test]
fn a_redis_address_without_a_scheme_is_told_the_url() {
    let out = Command::new(env!("CARGO_BIN_EXE_slidewin"))
        .args(["serve", "--redis", "127.0.0.1:6379"])
        .args(["--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("did you mean redis://127.0.0.1:6379?"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "it never started serving");
}

/// Issue 29: with the config replaced by a FIFO, one SIGHUP left the service answering none of
/// its checks, and SIGTERM was ignored until SIGKILL. The reload is now refused by name, the
/// config in force keeps answering, and SIGTERM stops it.
#[test]
fn hostile_29_a_fifo_in_the_configs_place_blocks_nothing() {
    let file = config_file(
        "fifo",
        "ratelimit.yaml",
        "domain: example\ndescriptors:\n  - key: client\n    rate_limit: {unit: second, requests_per_unit: 5}\n",
    );
    let mut serving = serve(&["--config", file.to_str().unwrap()]);
    std::fs::remove_file(&file).unwrap();
    let made = Command::new("mkfifo")
        .arg(&file)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    for _ in 0..3 {
        signal(&serving.child, "HUP");
    }
    // Each reload is refused (asked until the refusals show; no timing is asserted), and the
    // checks go on being answered meanwhile.
    let refused = (0..100_000).any(|_| {
        let config = get(&serving.http, "/api/config");
        assert!(config.contains(r#""version":1"#), "{config}");
        get(&serving.http, "/api/stats").contains("a FIFO")
    });
    assert!(refused, "the reload was refused, naming the FIFO");
    let out = Command::new("sh")
        .args(["-c", &serving.curl])
        .output()
        .expect("curl runs");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("HTTP/1.1 200"));
    signal(&serving.child, "TERM");
    assert_eq!(serving.child.wait().unwrap().code(), Some(0));
}

/// Issue 30: text logs kept their ANSI colour codes when stderr was a pipe or a file, so a log
/// collector stored `\x1b[33m WARN\x1b[0m`. Off a terminal they are plain text.
#[test]
fn issue_30_text_logs_off_a_terminal_have_no_colour_codes() {
    let url = format!("redis://127.0.0.1:{}", quiet_port());
    let mut serving = serve_logging(
        &["--redis", &url, "--failure-policy", "open"],
        Stdio::piped(),
    );
    let mut logs = BufReader::new(serving.child.stderr.take().expect("its logs"));
    let mut warning = String::new();
    logs.read_line(&mut warning).unwrap();
    assert!(warning.contains(" WARN "), "{warning:?}");
    assert!(!warning.contains('\x1b'), "{warning:?}");
    signal(&serving.child, "TERM");
    assert_eq!(serving.child.wait().unwrap().code(), Some(0));
}
