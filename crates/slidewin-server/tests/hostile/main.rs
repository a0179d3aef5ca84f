//! Hostile clients, the payload half of issue 21: each hostile request through the real ports
//! gets a clear error naming what was wrong, with bounded work, and the service keeps
//! answering the others. Then property tests of the config loader and `/json`, and crafted
//! keys that must not reach another rule's, domain's or descriptor's counts, on memory and on
//! Redis. A module a kind of request (`grpc`, `units`, `bodies`, `fuzz`, `keys`); the
//! findings of reviews and attacks in `attacks/`, a file per group.

/// The helpers shared with the `server` binary, in `tests/support/`.
mod support {
    pub(crate) use super::server;
}
#[path = "../support/server.rs"]
mod server;

// Memory figures are counted, not estimated (tests/hostile/attacks/memory.rs).
#[global_allocator]
static ALLOCATOR: slidewin_test_support::counting_alloc::CountingAllocator =
    slidewin_test_support::counting_alloc::CountingAllocator;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry as PbEntry, RateLimitOverride as PbOverride,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code as PbCode;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{
    RateLimitRequest as PbRequest, RateLimitResponse as PbResponse,
};
use envoy_types::pb::google::protobuf::UInt64Value;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use proptest::prelude::*;
use proptest::test_runner::{RngSeed, TestCaseError};
use server::Served;
use slidewin::Moment;
use slidewin::time::ManualClock;
use slidewin_redis::RedisLimiter;
use slidewin_server::{
    Bounds, Code, Config, Endpoints, Engine, Entry, FailurePolicy, LimitOverride, Metrics,
    RateLimitRequest, RequestDescriptor, ServeOptions, Unit,
};
use slidewin_store::{Backend, Memory, Redis};
use slidewin_test_support::redis::RedisServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CONFIG: &str = "\
domain: api
descriptors:
  - key: client
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: gcra
    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: gcra}
  - key: counter
    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: sliding_counter}
  - key: fixed
    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: fixed_window}
  - key: both
    limits:
      - {name: burst, quota: 3 per second}
      - {name: hourly, quota: 100 per hour}
";

/// Every limited key of [`CONFIG`]: each a limit of 3.
const LIMITED: [&str; 5] = ["client", "gcra", "counter", "fixed", "both"];

// ---- A service on real ports ----

struct Running {
    served: Served,
    /// Fresh values for the "is it still serving?" requests.
    fresh: AtomicU64,
}

impl std::ops::Deref for Running {
    type Target = Served;

    fn deref(&self) -> &Served {
        &self.served
    }
}

/// A service of `yaml` on `backend` with `bounds`, its engine on a manual clock at 1,000 s:
/// the service, its clock and its metrics.
fn service_of<B: Backend>(
    backend: B,
    yaml: &str,
    bounds: Bounds,
) -> (Endpoints<B>, Arc<ManualClock>, Metrics) {
    let config = Config::parse(yaml, "test.yaml").expect("the test's config is valid");
    let clock = Arc::new(ManualClock::new(Moment::from_secs(1_000)));
    let metrics = Metrics::new();
    let engine = Engine::new(backend, config, clock.clone(), bounds, metrics.clone())
        .expect("the backend holds the rules");
    (Endpoints::new(engine, vec![]), clock, metrics)
}

/// The test listeners' options: free ports, the admin surfaces closed.
fn data_plane_only() -> ServeOptions {
    ServeOptions {
        admin: false,
        ..server::local()
    }
}

async fn start<B: Backend>(backend: B, yaml: &str) -> Running {
    let (service, _, _) = service_of(backend, yaml, Bounds::default());
    Running {
        served: Served::start(service, &data_plane_only()).await,
        fresh: AtomicU64::new(0),
    }
}

/// `ShouldRateLimit` of `request` on the gRPC port `grpc`, from a client that may send what
/// the server must refuse.
async fn should_rate_limit(
    grpc: SocketAddr,
    request: PbRequest,
) -> Result<PbResponse, tonic::Status> {
    RateLimitServiceClient::connect(format!("http://{grpc}"))
        .await
        .expect("gRPC connects")
        .max_encoding_message_size(usize::MAX)
        .should_rate_limit(request)
        .await
        .map(tonic::Response::into_inner)
}

/// `POST /json` of `body` (as JSON) on the HTTP port `http`: the status and the body.
async fn post_json(http: SocketAddr, body: impl Into<Bytes>) -> (u16, String) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{http}/json"))
        .header("content-type", "application/json")
        .body(Full::new(body.into()))
        .unwrap();
    let response = client.request(request).await.expect("HTTP answers");
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

impl Running {
    async fn stop(self) {
        self.served.stop().await;
    }

    async fn grpc(&self, request: PbRequest) -> Result<PbResponse, tonic::Status> {
        should_rate_limit(self.grpc, request).await
    }

    async fn json(&self, body: impl Into<Bytes>) -> (u16, String) {
        post_json(self.http, body).await
    }

    /// A normal client is still answered, on both ports, by a limit that counts.
    async fn still_serving(&self) {
        let n = self.fresh.fetch_add(1, Ordering::Relaxed);
        let value = format!("bystander-{n}");
        let answer = self
            .grpc(request("api", &[("client", &value)]))
            .await
            .expect("a normal gRPC request is answered");
        assert_eq!(answer.overall_code, PbCode::Ok as i32);
        assert_eq!(answer.statuses[0].limit_remaining, 2);
        let (status, body) = self.json(json_request("client", &value)).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("\"limitRemaining\":1"), "{body}");
    }
}

fn request(domain: &str, entries: &[(&str, &str)]) -> PbRequest {
    PbRequest {
        domain: domain.to_owned(),
        descriptors: vec![descriptor(entries)],
        hits_addend: 0,
    }
}

fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(key, value)| PbEntry {
                key: (*key).to_owned(),
                value: (*value).to_owned(),
            })
            .collect(),
        ..Default::default()
    }
}

fn json_request(key: &str, value: &str) -> String {
    format!(
        r#"{{"domain":"api","descriptors":[{{"entries":[{{"key":"{key}","value":"{value}"}}]}}]}}"#
    )
}

fn assert_status(status: &tonic::Status, code: tonic::Code, names: &[&str]) {
    assert_eq!(status.code(), code, "{status:?}");
    for name in names {
        assert!(
            status.message().contains(name),
            "`{name}` not in {:?}",
            status.message()
        );
    }
}

async fn redis_backend(server: &RedisServer) -> Redis {
    let limiter = RedisLimiter::connect(&server.url())
        .await
        .expect("redis connects");
    Redis::new(limiter.with_failure_policy(FailurePolicy::Closed)).with_layer_clock()
}

/// Reads an HTTP/1.1 answer's status line and headers from `stream`.
async fn read_head(stream: &mut tokio::net::TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut byte).await.expect("the answer");
        assert!(
            n > 0,
            "closed before an answer: {:?}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

mod bodies;
mod fuzz;
mod grpc;
mod keys;
mod units;

// ---- Issue 29: its findings' regression tests, a file per group under attacks/ ----

mod attacks {
    use super::*;

    mod browsers;
    mod dashboard;
    mod memory;
    mod overrides;
    mod redis_down;
    mod stop;
}
