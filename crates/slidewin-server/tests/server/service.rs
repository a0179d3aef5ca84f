//! The service through its real sockets: Envoy's gRPC with a tonic client, `POST /json` and the
//! admin routes with hyper's client, on memory and on Redis; reloads; a graceful stop.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry as PbEntry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest as PbRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code as PbCode;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use slidewin::Moment;
use slidewin::time::ManualClock;
use slidewin_redis::RedisLimiter;
use slidewin_server::{Bounds, Config, Endpoints, Engine, FailurePolicy, Metrics, ServeOptions};
use slidewin_store::{Backend, BackendKind, Memory, Redis};
use slidewin_test_support::redis::RedisServer;
use support::server::{self, Served};

use crate::support;

const CONFIG: &str = "\
domain: api
descriptors:
  - key: client
    rate_limit:
      unit: minute
      requests_per_unit: 3
  - key: user
    limits:
      - {name: burst, quota: 2 per second}
      - {name: hourly, quota: 100 per hour}
";

/// A service on free ports of 127.0.0.1, its clock at the caller's hand.
struct Running<B: Backend> {
    served: Served,
    service: Endpoints<B>,
    clock: Arc<ManualClock>,
}

impl<B: Backend> std::ops::Deref for Running<B> {
    type Target = Served;

    fn deref(&self) -> &Served {
        &self.served
    }
}

async fn start<B: Backend>(backend: B, yaml: &str, admin: bool) -> Running<B> {
    let config = Config::parse(yaml, "test.yaml").expect("the test's config is valid");
    start_with(backend, config, vec![], admin).await
}

async fn start_with<B: Backend>(
    backend: B,
    config: Config,
    paths: Vec<std::path::PathBuf>,
    admin: bool,
) -> Running<B> {
    let clock = Arc::new(ManualClock::new(Moment::from_secs(1_000)));
    let engine = Engine::new(
        backend,
        config,
        clock.clone(),
        Bounds::default(),
        Metrics::new(),
    )
    .expect("the backend holds the rules");
    let service = Endpoints::new(engine, paths);
    let options = ServeOptions {
        admin,
        ..server::local()
    };
    Running {
        served: Served::start(service.clone(), &options).await,
        service,
        clock,
    }
}

/// A service whose config is read from `path` (a file or a directory), as it is now.
async fn start_on<B: Backend>(backend: B, path: &Path) -> Running<B> {
    let config = Config::load(&[path.to_path_buf()]).expect("the test's config is valid");
    start_with(backend, config, vec![path.to_path_buf()], true).await
}

impl<B: Backend> Running<B> {
    /// The requests per unit of the limit one entry in domain `api` falls under.
    async fn limit_of(&self, key: &str, value: &str) -> u32 {
        let answer = self.grpc_check("api", key, value).await.unwrap();
        answer.statuses[0]
            .current_limit
            .as_ref()
            .expect("a limit applies")
            .requests_per_unit
    }

    /// The overall code for one entry in domain `api`.
    async fn code(&self, key: &str, value: &str) -> i32 {
        self.grpc_check("api", key, value)
            .await
            .unwrap()
            .overall_code
    }

    async fn stop(self) {
        self.served.stop().await;
    }

    async fn grpc_check(
        &self,
        domain: &str,
        key: &str,
        value: &str,
    ) -> Result<envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse, tonic::Status>
    {
        let mut client = RateLimitServiceClient::connect(format!("http://{}", self.grpc))
            .await
            .expect("gRPC connects");
        client
            .should_rate_limit(PbRequest {
                domain: domain.to_owned(),
                descriptors: vec![RateLimitDescriptor {
                    entries: vec![PbEntry {
                        key: key.to_owned(),
                        value: value.to_owned(),
                    }],
                    ..Default::default()
                }],
                hits_addend: 0,
            })
            .await
            .map(tonic::Response::into_inner)
    }

    async fn http(
        &self,
        method: &str,
        path: &str,
        body: impl Into<Bytes>,
    ) -> (u16, http::HeaderMap, String) {
        http_call(self.http, method, path, body.into()).await
    }
}

async fn http_call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Bytes,
) -> (u16, http::HeaderMap, String) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let request = http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header("content-type", "application/json")
        .body(Full::new(body))
        .unwrap();
    let response = client.request(request).await.expect("HTTP answers");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

fn json_request(key: &str, value: &str) -> String {
    format!(
        r#"{{"domain":"api","descriptors":[{{"entries":[{{"key":"{key}","value":"{value}"}}]}}]}}"#
    )
}

async fn redis_backend(server: &RedisServer) -> Redis {
    let limiter = RedisLimiter::connect(&server.url())
        .await
        .expect("redis connects");
    Redis::new(limiter.with_failure_policy(FailurePolicy::Closed)).with_layer_clock()
}

/// Runs one async test body on the memory backend and on a Redis server of its own.
macro_rules! on_both_backends {
    ($memory:ident, $redis:ident, |$backend:ident| $body:expr) => {
        #[tokio::test]
        async fn $memory() {
            let $backend = Memory::new();
            $body.await;
        }

        #[tokio::test]
        async fn $redis() {
            let server = RedisServer::start();
            let $backend = redis_backend(&server).await;
            $body.await;
        }
    };
}

async fn grpc_decides_through_the_real_port<B: Backend>(backend: B) {
    let running = start(backend, CONFIG, true).await;
    for left in [2, 1, 0] {
        let answer = running.grpc_check("api", "client", "ann").await.unwrap();
        assert_eq!(answer.overall_code, PbCode::Ok as i32);
        let status = &answer.statuses[0];
        assert_eq!(status.limit_remaining, left);
        let limit = status.current_limit.as_ref().unwrap();
        assert_eq!((limit.requests_per_unit, limit.unit), (3, 2 /* MINUTE */));
        let names: Vec<&str> = answer
            .response_headers_to_add
            .iter()
            .map(|h| h.key.as_str())
            .collect();
        assert_eq!(names, ["ratelimit-policy", "ratelimit"]);
    }
    let denied = running.grpc_check("api", "client", "ann").await.unwrap();
    assert_eq!(denied.overall_code, PbCode::OverLimit as i32);
    assert_eq!(denied.statuses[0].code, PbCode::OverLimit as i32);
    assert!(
        denied
            .response_headers_to_add
            .iter()
            .any(|h| h.key == "retry-after")
    );
    // Another client has its own window; a minute later, ann has hers back.
    let bob = running.grpc_check("api", "client", "bob").await.unwrap();
    assert_eq!(bob.overall_code, PbCode::Ok as i32);
    running.clock.advance(Duration::from_secs(60));
    let back = running.grpc_check("api", "client", "ann").await.unwrap();
    assert_eq!(back.overall_code, PbCode::Ok as i32);
    // A request out of bounds is INVALID_ARGUMENT, naming the bound.
    let empty = running.grpc_check("", "client", "ann").await.unwrap_err();
    assert_eq!(empty.code(), tonic::Code::InvalidArgument);
    assert!(empty.message().contains("domain"), "{}", empty.message());
    running.stop().await;
}

mod after_response;
mod leases;
mod observed;
mod reloads;
mod same_fields;
mod stop;

on_both_backends!(grpc_memory, grpc_redis, |backend| {
    grpc_decides_through_the_real_port(backend)
});

async fn json_answers_200_then_429<B: Backend>(backend: B) {
    let on_redis = backend.kind() != BackendKind::Memory;
    let running = start(backend, CONFIG, true).await;
    for left in [1, 0] {
        let (status, headers, body) = running
            .http("POST", "/json", json_request("user", "u1"))
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            headers["ratelimit-policy"],
            r#""burst";q=2;w=1, "hourly";q=100;w=3600"#
        );
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["overallCode"], "OK");
        assert_eq!(body["statuses"][0]["currentLimit"]["name"], "burst");
        assert_eq!(
            body["statuses"][0]["limitRemaining"].as_u64().unwrap_or(0),
            left
        );
    }
    let (status, headers, body) = running
        .http("POST", "/json", json_request("user", "u1"))
        .await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(headers["ratelimit"], r#""burst";r=0;t=1"#);
    assert!(body.contains(r#""overallCode":"OVER_LIMIT""#), "{body}");
    // Issue 32: on Redis, the next check in the wait is answered by the denial kept, and
    // counted; the answer is the same.
    let (status, headers, _) = running
        .http("POST", "/json", json_request("user", "u1"))
        .await;
    assert_eq!(status, 429);
    assert_eq!(headers["ratelimit"], r#""burst";r=0;t=1"#);
    let (_, _, metrics) = running.http("GET", "/metrics", "").await;
    let kept = if on_redis { 1 } else { 0 };
    let line = format!("slidewin_denied_cache_answers_total {kept}\n");
    assert!(metrics.contains(&line), "{metrics}");
    let (_, _, stats) = running.http("GET", "/api/stats", "").await;
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(
        stats["backend"]["denied_cache_answers_total"], kept,
        "{stats}"
    );
    running.stop().await;
}

on_both_backends!(
    json_memory,
    json_redis,
    |backend| json_answers_200_then_429(backend)
);

#[tokio::test]
async fn json_refuses_bad_requests_by_name() {
    let running = start(Memory::new(), CONFIG, true).await;
    let (status, _, body) = running.http("POST", "/json", "{not json").await;
    assert_eq!(status, 400);
    assert!(body.contains("invalid request"), "{body}");
    // Nesting 10,000 deep is refused at the first value of the wrong shape, unread.
    for deep in [
        format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)),
        format!(
            r#"{{"domain":"api","descriptors":{}{}}}"#,
            "[".repeat(10_000),
            "]".repeat(10_000)
        ),
    ] {
        let (status, _, body) = running.http("POST", "/json", deep).await;
        assert_eq!(status, 400);
        assert!(body.contains("invalid type"), "{body}");
    }
    let (status, _, body) = running
        .http(
            "POST",
            "/json",
            r#"{"domain":"api","descriptors":[],"extra":1}"#,
        )
        .await;
    assert_eq!(status, 400);
    assert!(body.contains("extra"), "{body}");
    let (status, _, _) = running.http("POST", "/json", vec![b' '; 2 << 20]).await;
    assert_eq!(status, 413);
    let many = format!(
        r#"{{"domain":"api","descriptors":[{}]}}"#,
        vec![r#"{"entries":[{"key":"client","value":"x"}]}"#; 65].join(",")
    );
    let (status, _, body) = running.http("POST", "/json", many).await;
    assert_eq!(status, 400);
    assert!(body.contains("max_descriptors"), "{body}");
    let long = json_request("client", &"v".repeat(1025));
    let (status, _, body) = running.http("POST", "/json", long).await;
    assert_eq!(status, 400);
    assert!(body.contains("max_text_len"), "{body}");
    running.stop().await;
}

#[tokio::test]
async fn admin_routes_show_the_service_and_can_be_closed() {
    let running = start(Memory::new(), CONFIG, true).await;
    let (status, _, body) = running.http("GET", "/healthz", "").await;
    assert_eq!((status, body.as_str()), (200, "OK\n"));
    running
        .http("POST", "/json", json_request("client", "ann"))
        .await;
    running
        .http("POST", "/json", json_request("user", "u"))
        .await;
    let (status, _, body) = running.http("GET", "/api/config", "").await;
    assert_eq!(status, 200);
    let config: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(config["version"], 1);
    assert_eq!(config["domains"][0]["domain"], "api");
    let (status, _, body) = running.http("GET", "/api/stats", "").await;
    assert_eq!(status, 200);
    let stats: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(stats["rules"][0]["last_minute"]["passed"], 1);
    assert_eq!(stats["rules"][0]["keys"], 1);
    assert_eq!(stats["backend"]["kind"], "memory");
    let (status, headers, body) = running.http("GET", "/metrics", "").await;
    assert_eq!(status, 200);
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    assert!(
        body.contains(r#"slidewin_rate_limit_total_hits_total{domain="api",rule="client"} 1"#),
        "{body}"
    );
    assert!(body.contains("slidewin_decision_seconds_count 2"), "{body}");
    assert!(
        body.contains(r#"slidewin_backend_state{state="up"} 1"#),
        "{body}"
    );
    assert!(
        !body.contains("ann"),
        "no metric is labelled by key: {body}"
    );
    running.stop().await;

    let closed = start(Memory::new(), CONFIG, false).await;
    for path in ["/api/stats", "/api/config", "/metrics", "/"] {
        let (status, _, _) = closed.http("GET", path, "").await;
        assert_eq!(status, 404, "{path}");
    }
    let (status, _, _) = closed
        .http("POST", "/json", json_request("client", "ann"))
        .await;
    assert_eq!(status, 200);
    closed.stop().await;
}

#[tokio::test]
async fn redis_down_answers_by_the_failure_policy_and_says_so() {
    let mut server = RedisServer::start();
    for (policy, code, way) in [
        (FailurePolicy::Open, PbCode::Ok, "open"),
        (FailurePolicy::Closed, PbCode::OverLimit, "closed"),
    ] {
        server.restart();
        let limiter = RedisLimiter::connect(&server.url())
            .await
            .expect("redis connects");
        let backend = Redis::new(limiter.with_failure_policy(policy)).with_layer_clock();
        let running = start(backend, CONFIG, true).await;
        let up = running.grpc_check("api", "client", "ann").await.unwrap();
        assert_eq!(up.overall_code, PbCode::Ok as i32);
        assert!(
            !up.response_headers_to_add
                .iter()
                .any(|h| h.key == "slidewin-degraded")
        );
        server.kill();
        let down = running.grpc_check("api", "client", "ann").await.unwrap();
        assert_eq!(down.overall_code, code as i32, "{way}");
        let header = down
            .response_headers_to_add
            .iter()
            .find(|h| h.key == "slidewin-degraded")
            .expect("the answer says it was made without Redis");
        assert_eq!(header.value, way);
        let (_, _, stats) = running.http("GET", "/api/stats", "").await;
        let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
        assert_eq!(stats["backend"]["kind"], "redis");
        assert_eq!(stats["backend"]["failure_policy"], way);
        assert_ne!(stats["backend"]["state"], "up", "{stats}");
        assert!(stats["backend"]["errors_total"].as_u64().unwrap() >= 1);
        running.stop().await;
    }
}

#[tokio::test]
async fn grpc_redis_cluster() {
    let cluster = slidewin_test_support::redis::RedisCluster::shared();
    let urls = cluster.urls();
    let seeds: Vec<&str> = urls.iter().map(String::as_str).collect();
    let limiter = RedisLimiter::connect_cluster(&seeds)
        .await
        .expect("the cluster connects");
    let backend = Redis::new(limiter.with_failure_policy(FailurePolicy::Closed)).with_layer_clock();
    assert_eq!(backend.kind(), BackendKind::RedisCluster);
    grpc_decides_through_the_real_port(backend).await;
}

#[tokio::test]
async fn a_descriptor_can_set_its_own_limit() {
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
    let running = start(Memory::new(), CONFIG, true).await;
    let mut client = RateLimitServiceClient::connect(format!("http://{}", running.grpc))
        .await
        .unwrap();
    let ask = |unit: i32| PbRequest {
        domain: "api".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![PbEntry {
                key: "tenant".into(),
                value: "acme".into(),
            }],
            limit: Some(RateLimitOverride {
                requests_per_unit: 2,
                unit,
            }),
            ..Default::default()
        }],
        hits_addend: 0,
    };
    // `tenant` has no limit in the config: the request's own applies, 2 a second.
    for left in [1, 0] {
        let answer = client.should_rate_limit(ask(1)).await.unwrap().into_inner();
        assert_eq!(answer.overall_code, PbCode::Ok as i32);
        assert_eq!(answer.statuses[0].limit_remaining, left);
        let limit = answer.statuses[0].current_limit.as_ref().unwrap();
        assert_eq!((limit.requests_per_unit, limit.unit), (2, 1));
    }
    let over = client.should_rate_limit(ask(1)).await.unwrap().into_inner();
    assert_eq!(over.overall_code, PbCode::OverLimit as i32);
    let unknown = client.should_rate_limit(ask(0)).await.unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::InvalidArgument);
    assert!(unknown.message().contains("unit"), "{}", unknown.message());
    // The same over JSON, by protobuf's JSON names.
    let body = r#"{"domain":"api","descriptors":[{"entries":[{"key":"tenant","value":"json"}],"limit":{"requestsPerUnit":1,"unit":"MINUTE"}}]}"#;
    assert_eq!(running.http("POST", "/json", body).await.0, 200);
    assert_eq!(running.http("POST", "/json", body).await.0, 429);
    let bad = body.replace("MINUTE", "FORTNIGHT");
    let (status, _, text) = running.http("POST", "/json", bad).await;
    assert_eq!(status, 400);
    assert!(text.contains("FORTNIGHT"), "{text}");
    running.stop().await;
}
