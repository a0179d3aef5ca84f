//! Issue 31: an envoy ratelimit manifest's environment, the image alone changed. The binary
//! runs as `ratelimit` (the command manifests name) with envoy ratelimit's variables only, on a
//! config tree laid out as `RUNTIME_ROOT` expects and a Redis on a Unix socket with a password.

#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use slidewin_test_support::redis::RedisServer;

pub(crate) const CONFIG: &str = "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2}\n";

/// envoy ratelimit's listeners on free ports of 127.0.0.1, and its logs at info.
pub(crate) const LOCAL: [(&str, &str); 7] = [
    ("LOG_LEVEL", "info"),
    ("HOST", "127.0.0.1"),
    ("PORT", "0"),
    ("GRPC_HOST", "127.0.0.1"),
    ("GRPC_PORT", "0"),
    ("DEBUG_HOST", "127.0.0.1"),
    ("DEBUG_PORT", "0"),
];

/// A fresh directory for `test`.
pub(crate) fn fresh_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("slidewin-envoy-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `$root/ratelimit/config/config.yaml` as a Kubernetes `ConfigMap` mounts it: a link into a
/// hidden `..data` directory.
fn runtime_tree(root: &Path) {
    let config = root.join("ratelimit").join("config");
    std::fs::create_dir_all(config.join("..data")).unwrap();
    std::fs::write(config.join("..data").join("config.yaml"), CONFIG).unwrap();
    std::os::unix::fs::symlink("..data/config.yaml", config.join("config.yaml")).unwrap();
}

/// The binary under envoy ratelimit's name, as an image would hold it.
pub(crate) fn ratelimit_binary(dir: &Path) -> PathBuf {
    let link = dir.join("ratelimit");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_slidewin"), &link).unwrap();
    link
}

pub(crate) struct Addresses {
    pub(crate) grpc: String,
    pub(crate) http: String,
    pub(crate) admin: String,
    pub(crate) metrics: String,
}

/// What the service prints, read up to its curl line: each listener's address.
pub(crate) fn addresses(child: &mut Child) -> Addresses {
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (mut grpc, mut http, mut admin, mut metrics) = (None, None, None, None);
    let after = |line: &str, label: &str| {
        line.trim().strip_prefix(label).map(|rest| {
            rest.split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned()
        })
    };
    let host_of = |url: String| {
        url.trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap()
            .to_owned()
    };
    for line in stdout.lines() {
        let line = line.unwrap();
        grpc = grpc.or_else(|| after(&line, "Envoy RLS gRPC"));
        http = http.or_else(|| after(&line, "HTTP API").map(host_of));
        admin = admin.or_else(|| after(&line, "admin ").map(host_of));
        metrics = metrics.or_else(|| {
            after(&line, "Prometheus").map(|u| u.trim_start_matches("http://").to_owned())
        });
        if line.trim_start().starts_with("curl ") {
            break;
        }
    }
    Addresses {
        grpc: grpc.expect("it prints the gRPC address"),
        http: http.expect("it prints the HTTP API's address"),
        admin: admin.expect("it prints the admin address"),
        // Printed only with USE_PROMETHEUS.
        metrics: metrics.unwrap_or_default(),
    }
}

/// An HTTP/1.1 exchange: `request` (a method and path, and the rest of the head), and `body`.
fn exchange(addr: &str, request: &str, body: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("it listens");
    write!(
        stream,
        "{request}\r\nhost: {addr}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

pub(crate) fn get(addr: &str, path: &str) -> String {
    exchange(addr, &format!("GET {path} HTTP/1.1"), "")
}

pub(crate) async fn rls(grpc: &str, user: &str) -> (Code, Vec<(String, String)>) {
    let mut client = RateLimitServiceClient::connect(format!("http://{grpc}"))
        .await
        .unwrap();
    let answer = client
        .should_rate_limit(RateLimitRequest {
            domain: "edge".into(),
            descriptors: vec![RateLimitDescriptor {
                entries: vec![Entry {
                    key: "user".into(),
                    value: user.into(),
                }],
                ..Default::default()
            }],
            hits_addend: 1,
        })
        .await
        .unwrap()
        .into_inner();
    let headers = answer
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.clone(), h.value.clone()))
        .collect();
    (answer.overall_code(), headers)
}

#[test]
fn issue_31_an_envoy_ratelimit_manifest_runs_with_only_the_image_changed() {
    let dir = fresh_dir("manifest");
    runtime_tree(&dir.join("data"));
    let socket = dir.join("redis.sock");
    let _redis = RedisServer::start_with(&[
        "--unixsocket".to_owned(),
        socket.display().to_string(),
        "--requirepass".to_owned(),
        "s3cret pass/1".to_owned(),
    ]);
    let logs = dir.join("stderr.log");
    let mut child = Command::new(ratelimit_binary(&dir))
        .env_clear()
        .envs([
            ("RUNTIME_ROOT", dir.join("data").to_str().unwrap()),
            ("RUNTIME_SUBDIRECTORY", "ratelimit"),
            ("RUNTIME_APPDIRECTORY", "config"),
            ("RUNTIME_WATCH_ROOT", "false"),
            ("RUNTIME_IGNOREDOTFILES", "true"),
            ("REDIS_SOCKET_TYPE", "unix"),
            ("REDIS_URL", socket.to_str().unwrap()),
            ("REDIS_AUTH", "default:s3cret pass/1"),
            ("USE_PROMETHEUS", "true"),
            ("PROMETHEUS_ADDR", "127.0.0.1:0"),
            ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
        ])
        .envs(LOCAL)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&logs).unwrap())
        .spawn()
        .unwrap();
    let at = addresses(&mut child);

    // The probes.
    let health = get(&at.http, "/healthcheck");
    assert!(
        health.starts_with("HTTP/1.1 200") && health.ends_with("OK\n"),
        "{health}"
    );
    // RLS, counted in Redis, with envoy ratelimit's headers. The runtime, and the client's
    // connections with it, are gone before the stop, so that the drain waits for nothing.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert_eq!(runtime.block_on(rls(&at.grpc, "ann")).0, Code::Ok);
    let (code, headers) = runtime.block_on(rls(&at.grpc, "ann"));
    drop(runtime);
    assert_eq!(code, Code::Ok);
    assert!(
        headers.contains(&("ratelimit-remaining".to_owned(), "0".to_owned())),
        "{headers:?}"
    );
    // POST /json shares the counts: ann's third in the minute is over.
    let json = exchange(
        &at.http,
        "POST /json HTTP/1.1\r\ncontent-type: application/json",
        r#"{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}"#,
    );
    assert!(json.contains(r#""overallCode":"OVER_LIMIT""#), "{json}");
    // Prometheus at PROMETHEUS_ADDR, open; the admin surfaces on the debug port, not on PORT.
    let (metrics_addr, metrics_path) = at.metrics.split_at(at.metrics.find('/').unwrap());
    let metrics = get(metrics_addr, metrics_path);
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    // And under envoy ratelimit's names, for its dashboards and alerts.
    assert!(
        metrics.contains(
            "ratelimit_service_rate_limit_over_limit{domain=\"edge\",key1=\"user\",key2=\"\"} 1"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("slidewin_rate_limit_over_limit_total{domain=\"edge\",rule=\"user\"} 1"),
        "{metrics}"
    );
    assert!(get(&at.http, "/api/stats").starts_with("HTTP/1.1 404"));
    assert!(get(&at.admin, "/api/stats").starts_with("HTTP/1.1 200"));

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(child.wait().unwrap().code(), Some(0));
    // USE_STATSD was left at envoy ratelimit's default, true: the logs say it is not served.
    let logged = std::fs::read_to_string(&logs).unwrap();
    assert!(logged.contains("USE_STATSD is not false"), "{logged}");
    assert!(
        !logged.contains("s3cret"),
        "the password is never logged: {logged}"
    );
}

/// A flag given with `--envoy-env` wins over the variable; a variable slidewin cannot honour
/// stops the start, naming it and the value.
#[test]
fn issue_31_envoy_env_refuses_what_it_cannot_honour_and_flags_win() {
    let refused = Command::new(env!("CARGO_BIN_EXE_slidewin"))
        .args(["serve", "--envoy-env"])
        .env_clear()
        .envs([
            ("BACKEND_TYPE", "memcache"),
            ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
        ])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("BACKEND_TYPE=\"memcache\" is not supported"),
        "{err}"
    );
    assert!(
        err.contains("CONFIG_TYPE=\"GRPC_XDS_SOTW\" is not supported"),
        "{err}"
    );

    // The default RUNTIME_ROOT is not here: --config, given, is read as well, so the start
    // fails on the default's absence, naming it.
    let dir = fresh_dir("flags");
    let file = dir.join("config.yaml");
    std::fs::write(&file, CONFIG).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_slidewin"))
        .args(["serve", "--envoy-env", "--redis", "redis://127.0.0.1:1/"])
        .args([
            "--http-addr",
            "127.0.0.1:0",
            "--grpc-addr",
            "127.0.0.1:0",
            "--admin-addr",
            "127.0.0.1:0",
        ])
        .env_clear()
        .env("USE_STATSD", "false")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("/srv/runtime_data/current/config"), "{err}");
}

/// Issue 31: `REDIS_TYPE=SENTINEL` through the binary: checks go to the primary the sentinel
/// names, with `REDIS_AUTH`, and after a failover to the new primary, counts kept. A flag given
/// (`--response-headers draft`) wins over the variables (none, envoy ratelimit's default).
#[test]
fn issue_31_sentinel_failover_through_the_binary() {
    use slidewin_test_support::sentinel::SentinelSet;
    let set = SentinelSet::start(Some("pw"));
    let dir = fresh_dir("sentinel");
    runtime_tree(&dir.join("data"));
    let mut child = Command::new(ratelimit_binary(&dir))
        .args(["--response-headers", "draft"])
        .env_clear()
        .envs([
            ("RUNTIME_ROOT", dir.join("data").to_str().unwrap()),
            ("RUNTIME_SUBDIRECTORY", "ratelimit"),
            ("REDIS_TYPE", "SENTINEL"),
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", &format!("mymaster,127.0.0.1:{}", set.port)),
            ("REDIS_AUTH", "pw"),
            ("USE_STATSD", "false"),
        ])
        .envs(LOCAL)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let at = addresses(&mut child);
    let check = || {
        exchange(
            &at.http,
            "POST /json HTTP/1.1\r\ncontent-type: application/json",
            r#"{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"bo"}]}]}"#,
        )
        .to_ascii_lowercase()
    };
    let first = check();
    assert!(
        first.contains(r#""overallcode":"ok""#) && first.contains("ratelimit-policy"),
        "{first}"
    );
    assert!(!first.contains("slidewin-degraded"), "{first}");
    set.failover(Some("pw"));
    // Answered by the failure policy until the service asks the sentinel again (bounded).
    let second = (0..100_000)
        .map(|_| check())
        .find(|answer| !answer.contains("slidewin-degraded"))
        .expect("the new primary answers");
    assert!(second.contains(r#""overallcode":"ok""#), "{second}");
    let third = check();
    assert!(third.contains(r#""overallcode":"over_limit""#), "{third}");
    child.kill().unwrap();
    child.wait().unwrap();
}
