//! What hostile and stalled clients cost `slidewin serve` (issue 29): the memory held by
//! 20,000 gRPC calls whose message never comes, and the time from SIGTERM to exit with a
//! dashboard open and with a gRPC client that never takes its answer.
//!
//! It runs the built binary as a child (`RELIABILITY_BIN`, default `target/release/slidewin`),
//! and, given `RELIABILITY_BEFORE=<another slidewin binary>`, that one too, interleaved, for a
//! before-and-after table:
//!
//! ```sh
//! cargo build --release -p slidewin-cli
//! RELIABILITY_BEFORE=/path/to/old/slidewin cargo bench -p slidewin-server --bench reliability
//! ```
//!
//! - **Half-open calls** (`RELIABILITY_CALLS`, default 20,000, over connections of 125 calls
//!   each): each call sends its headers and a body that never ends. The figure is the server's
//!   resident memory (`VmRSS`) once every call has been sent and has been answered or held for
//!   a second, less its memory before; and how many calls were answered at once (shed).
//! - **Stops**: SIGTERM with a dashboard's event stream open, and with a gRPC client whose
//!   flow-control window stays at 0 (its call's answer never taken); the time until the process
//!   exits, or `>` the bound (`RELIABILITY_STOP_BOUND_S`, default 30) when it had to be killed.
//!
//! `cargo bench` passes `--bench`; without it (`cargo test --benches`) this does nothing.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;

type Body = BoxBody<Bytes, std::convert::Infallible>;

/// A `slidewin serve` child on free ports, and where it listens.
struct Serving {
    child: Child,
    grpc: String,
    http: String,
}

impl Serving {
    fn start(binary: &str) -> Serving {
        let mut child = Command::new(binary)
            .args([
                "serve",
                "--grpc-addr",
                "127.0.0.1:0",
                "--http-addr",
                "127.0.0.1:0",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{binary}: {e}"));
        let stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let (mut grpc, mut http) = (None, None);
        for line in std::io::BufRead::lines(stdout) {
            let line = line.expect("a line");
            let line = line.trim();
            if let Some(addr) = line.strip_prefix("Envoy RLS gRPC") {
                grpc = addr.split_whitespace().next().map(str::to_owned);
            }
            if let Some(url) = line.strip_prefix("dashboard") {
                let url = url.split_whitespace().next().unwrap_or_default();
                http = Some(
                    url.trim_start_matches("http://")
                        .trim_end_matches('/')
                        .to_owned(),
                );
            }
            if line.starts_with("curl ") {
                break;
            }
        }
        Serving {
            child,
            grpc: grpc.expect("it prints its gRPC address"),
            http: http.expect("it prints its dashboard's address"),
        }
    }

    /// Its resident memory, in KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("its /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("VmRSS")
    }

    /// SIGTERM, then the time until it exits, or `None` if it had not by `bound` (then killed).
    fn stop_within(self, bound: Duration) -> Option<Duration> {
        let pid = self.child.id();
        let mut child = self.child;
        // The exit is waited for on a thread of its own, which says when it came.
        let (exited, exit) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let _ = child.wait();
            let _ = exited.send(Instant::now());
            child
        });
        let sent = Instant::now();
        let killed = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(killed.success());
        let took = exit.recv_timeout(bound).ok().map(|at| at - sent);
        if took.is_none() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        drop(waiter.join());
        took
    }
}

/// An HTTP/2 connection to `addr`, its streams' window `window` if given.
async fn h2(addr: &str, window: Option<u32>) -> hyper::client::conn::http2::SendRequest<Body> {
    let stream = TcpStream::connect(addr).await.expect("gRPC listens");
    let mut builder = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
    builder.timer(TokioTimer::new());
    if let Some(window) = window {
        builder.initial_stream_window_size(window);
    }
    let (client, connection) = builder
        .handshake(TokioIo::new(stream))
        .await
        .expect("the HTTP/2 handshake");
    tokio::spawn(connection);
    client
}

fn call(addr: &str, body: Body) -> http::Request<Body> {
    http::Request::post(format!(
        "http://{addr}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
    ))
    .header(http::header::CONTENT_TYPE, "application/grpc")
    .header("te", "trailers")
    .body(body)
    .expect("a request")
}

/// A check of `client` = `ann` in the built-in example's domain, framed for gRPC.
fn check_message() -> Bytes {
    // domain "example", one descriptor of one entry client = ann, as protobuf's bytes.
    let entry = [b"\x0a\x06client".as_slice(), b"\x12\x03ann"].concat();
    let descriptor = [&[0x0a, u8::try_from(entry.len()).unwrap()][..], &entry].concat();
    let message = [
        b"\x0a\x07example".as_slice(),
        &[0x12, u8::try_from(descriptor.len()).unwrap()],
        &descriptor,
    ]
    .concat();
    let mut framed = vec![0, 0, 0, 0, u8::try_from(message.len()).unwrap()];
    framed.extend_from_slice(&message);
    Bytes::from(framed)
}

/// The server's memory before and while `calls` half-open calls are sent, and how many were
/// answered at once.
async fn half_open(serving: &Serving, calls: usize) -> (u64, u64, usize) {
    const PER_CONNECTION: usize = 125;
    let before = serving.rss_kib();
    let mut answered = Vec::new();
    for _ in 0..calls.div_ceil(PER_CONNECTION) {
        let client = h2(&serving.grpc, None).await;
        for _ in 0..PER_CONNECTION {
            let mut client = client.clone();
            let never = StreamBody::new(futures_util::stream::pending::<
                Result<Frame<Bytes>, std::convert::Infallible>,
            >());
            let request = call(&serving.grpc, never.boxed());
            answered.push(tokio::spawn(async move {
                if client.ready().await.is_err() {
                    return false;
                }
                let sent = client.send_request(request);
                tokio::time::timeout(Duration::from_secs(1), sent)
                    .await
                    .is_ok()
            }));
        }
    }
    let mut at_once = 0;
    for answer in answered {
        at_once += usize::from(answer.await.unwrap_or(false));
    }
    (before, serving.rss_kib(), at_once)
}

/// A gRPC client that makes one call and never takes its answer.
async fn stalled_client(serving: &Serving) {
    let mut client = h2(&serving.grpc, Some(0)).await;
    client.ready().await.expect("ready");
    let request = call(&serving.grpc, Full::new(check_message()).boxed());
    let answer = client
        .send_request(request)
        .await
        .expect("the answer's headers");
    std::mem::forget(answer);
    std::mem::forget(client);
}

/// A dashboard's event stream, its first snapshot read.
async fn dashboard(serving: &Serving) -> TcpStream {
    use tokio::io::AsyncWriteExt;
    let mut stream = TcpStream::connect(&serving.http)
        .await
        .expect("HTTP listens");
    let head = "GET /api/events HTTP/1.1\r\nhost: localhost\r\naccept: text/event-stream\r\n\r\n";
    stream.write_all(head.as_bytes()).await.expect("sent");
    let mut reader = BufReader::new(&mut stream);
    let mut line = String::new();
    while !line.starts_with("data: ") {
        line.clear();
        reader.read_line(&mut line).await.expect("a line");
    }
    stream
}

fn shown(stop: Option<Duration>, bound: Duration) -> String {
    match stop {
        Some(took) => format!("{} ms", took.as_millis()),
        None => format!("> {} s (killed)", bound.as_secs()),
    }
}

fn main() {
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("reliability: run it with `cargo bench --bench reliability`");
        return;
    }
    let env = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    let now = env("RELIABILITY_BIN", "target/release/slidewin");
    let calls: usize = env("RELIABILITY_CALLS", "20000").parse().expect("a count");
    let bound = Duration::from_secs(env("RELIABILITY_STOP_BOUND_S", "30").parse().expect("s"));
    let mut binaries = vec![("now", now)];
    if let Ok(before) = std::env::var("RELIABILITY_BEFORE") {
        binaries.insert(0, ("before", before));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!(
        "| binary | half-open calls | RSS before | RSS held | held | answered at once | SIGTERM to exit, a dashboard open | SIGTERM to exit, a stalled gRPC client |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (name, binary) in &binaries {
        let serving = Serving::start(binary);
        let (before, held, at_once) = runtime.block_on(half_open(&serving, calls));
        let _ = serving.stop_within(bound);

        let serving = Serving::start(binary);
        let stream = runtime.block_on(dashboard(&serving));
        let with_dashboard = serving.stop_within(bound);
        drop(stream);

        let serving = Serving::start(binary);
        runtime.block_on(stalled_client(&serving));
        let with_stalled = serving.stop_within(bound);

        println!(
            "| {name} | {calls} | {} MiB | {} MiB | +{} MiB | {at_once} | {} | {} |",
            before / 1024,
            held / 1024,
            held.saturating_sub(before) / 1024,
            shown(with_dashboard, bound),
            shown(with_stalled, bound),
        );
    }
    runtime.shutdown_background();
}
