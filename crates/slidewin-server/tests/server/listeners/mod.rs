//! The listeners' bounds through real sockets: slowloris headers and bodies, thousands of idle
//! connections, the connection cap, a gRPC connection that never sends its preface, one that
//! answers pings but makes no call, and TLS on both listeners (a self-signed certificate made
//! at test time).
//!
//! No test sleeps or asserts on the wall clock: each sets small timeouts through the options
//! and waits, boundedly, for the server to close a connection (a read answering 0 or an
//! error); an outer `tokio::time::timeout` only guards against a hang.

use crate::support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry as PbEntry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest as PbRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code as PbCode;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use slidewin::Moment;
use slidewin::time::ManualClock;
use slidewin_server::{
    Bounds, Config, ConnectionLimits, Endpoints, Engine, Listeners, Metrics, ServeOptions, TlsFiles,
};
use slidewin_store::Memory;
use support::server::{self, Served};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls;

const CONFIG: &str = "\
domain: api
descriptors:
  - key: client
    rate_limit:
      unit: second
      requests_per_unit: 1000000
";

/// The hang guard: no bounded wait below should come near it.
const HANG: Duration = Duration::from_secs(30);

/// How long a slow client waits for the server's close before it sends its next byte.
const PACE: Duration = Duration::from_millis(20);

struct Running(Served);

impl std::ops::Deref for Running {
    type Target = Served;

    fn deref(&self) -> &Served {
        &self.0
    }
}

impl Running {
    async fn stop(self) {
        tokio::time::timeout(HANG, self.0.stop())
            .await
            .expect("the server stops");
    }
}

/// The test's config in memory, on a clock that stays put.
fn engine() -> Engine<Memory> {
    let config = Config::parse(CONFIG, "test.yaml").expect("the test's config is valid");
    Engine::new(
        Memory::new(),
        config,
        Arc::new(ManualClock::new(Moment::from_secs(1_000))),
        Bounds::default(),
        Metrics::new(),
    )
    .expect("memory holds the rules")
}

async fn start(limits: ConnectionLimits, tls: Option<TlsFiles>) -> Running {
    let engine = engine();
    let options = ServeOptions {
        admin: false,
        limits,
        tls,
        ..server::local()
    };
    Running(Served::start(Endpoints::new(engine, vec![]), &options).await)
}

/// Small timeouts, so that the server's closes come soon.
fn quick() -> ConnectionLimits {
    ConnectionLimits {
        header_read_timeout: Duration::from_millis(300),
        request_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_secs(2),
        ..ConnectionLimits::default()
    }
}

const JSON: &str =
    r#"{"domain":"api","descriptors":[{"entries":[{"key":"client","value":"ann"}]}]}"#;

fn json_request() -> String {
    format!(
        "POST /json HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{JSON}",
        JSON.len()
    )
}

/// `POST /json` over `io`, read to the close: the whole answer.
async fn post_json<I: AsyncRead + AsyncWrite + Unpin>(mut io: I) -> String {
    io.write_all(json_request().as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = io.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// A plain-text `POST /json` on a new connection answers 200.
async fn json_ok(http: SocketAddr) {
    let answer = tokio::time::timeout(HANG, async {
        post_json(TcpStream::connect(http).await.unwrap()).await
    })
    .await
    .expect("answered");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

async fn grpc_ok(grpc: SocketAddr) {
    let mut client = RateLimitServiceClient::connect(format!("http://{grpc}"))
        .await
        .expect("gRPC connects");
    let answer = client.should_rate_limit(grpc_request()).await.unwrap();
    assert_eq!(answer.into_inner().overall_code, PbCode::Ok as i32);
}

fn grpc_request() -> PbRequest {
    PbRequest {
        domain: "api".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![PbEntry {
                key: "client".into(),
                value: "ann".into(),
            }],
            ..Default::default()
        }],
        hits_addend: 1,
    }
}

/// Waits (boundedly) for the server to close `stream`; what it said before, if anything.
async fn closed_by_server(stream: &mut TcpStream) -> String {
    let mut said = Vec::new();
    tokio::time::timeout(HANG, async {
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => said.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .expect("the server closes the connection");
    String::from_utf8_lossy(&said).into_owned()
}

/// Sends `head`, then the bytes of `then` (over and over) one at a time, each after waiting
/// [`PACE`] for the server to close, until it does. The bytes trickled, and what the server
/// said.
async fn trickle(stream: &mut TcpStream, head: &[u8], then: &[u8]) -> (usize, String) {
    let mut sent = 0;
    let mut said = Vec::new();
    stream.write_all(head).await.unwrap();
    tokio::time::timeout(HANG, async {
        let mut buf = [0u8; 1024];
        loop {
            match tokio::time::timeout(PACE, stream.read(&mut buf)).await {
                Ok(Ok(0) | Err(_)) => break,
                Ok(Ok(n)) => said.extend_from_slice(&buf[..n]),
                Err(_) => {
                    let byte = then[sent % then.len()];
                    if stream.write_all(&[byte]).await.is_err() {
                        break;
                    }
                    sent += 1;
                }
            }
        }
    })
    .await
    .expect("the server closes the slow connection");
    (sent, String::from_utf8_lossy(&said).into_owned())
}

/// [`quick`], but with an idle timeout no test waits for: a close comes from another bound.
fn quick_not_idle() -> ConnectionLimits {
    ConnectionLimits {
        idle_timeout: HANG * 2,
        ..quick()
    }
}

/// The first bytes of every HTTP/2 connection.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

mod http2;
mod slow;
mod tls;
