//! Issue 29, finding 9: starting with Redis down. `slidewin serve --redis URL` exited 1 when
//! nothing answered at the URL; a service restarted during an outage must come up, answer by
//! its failure policy on both ports, show its backend down on the dashboard, and answer
//! exactly once Redis is up.

use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse as PbResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code as PbCode;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use slidewin::time::MonotonicClock;
use slidewin_redis::CircuitState;
use slidewin_server::{Bounds, Config, Endpoints, Engine, FailurePolicy, Metrics, connect_redis};
use slidewin_store::{Backend, BackendState, Redis};
use slidewin_test_support::redis::{RedisServer, free_port};

use crate::support::server::{Served, local};
use crate::{CONFIG, json_request, request};

/// A service on free ports, its admin surfaces open, on `backend`, as `slidewin serve` makes
/// it: the engine on the monotonic clock, Redis deciding by its own.
async fn serve(backend: Redis) -> Served {
    let config = Config::parse(CONFIG, "test.yaml").expect("the test's config is valid");
    let engine = Engine::new(
        backend,
        config,
        Arc::new(MonotonicClock),
        Bounds::default(),
        Metrics::new(),
    )
    .expect("the backend holds the rules");
    Served::start(Endpoints::new(engine, vec![]), &local()).await
}

async fn grpc(served: &Served, value: &str) -> PbResponse {
    RateLimitServiceClient::connect(format!("http://{}", served.grpc))
        .await
        .expect("gRPC connects")
        .should_rate_limit(request("api", &[("client", value)]))
        .await
        .expect("a gRPC answer")
        .into_inner()
}

/// The `Slidewin-Degraded` header of a gRPC answer.
fn degraded(answer: &PbResponse) -> Option<&str> {
    answer
        .response_headers_to_add
        .iter()
        .find(|h| h.key == "slidewin-degraded")
        .map(|h| h.value.as_str())
}

/// `method path` on the HTTP port: the status, the `Slidewin-Degraded` header, the body.
async fn http(
    served: &Served,
    method: &str,
    path: &str,
    body: String,
) -> (u16, Option<String>, String) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let request = http::Request::builder()
        .method(method)
        .uri(format!("http://{}{path}", served.http))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let response = client.request(request).await.expect("HTTP answers");
    let status = response.status().as_u16();
    let header = response
        .headers()
        .get("slidewin-degraded")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, header, String::from_utf8_lossy(&body).into_owned())
}

/// `/api/stats`' backend.
async fn backend_stats(served: &Served) -> serde_json::Value {
    let (status, _, body) = http(served, "GET", "/api/stats", String::new()).await;
    assert_eq!(status, 200, "{body}");
    let stats: serde_json::Value = serde_json::from_str(&body).unwrap();
    stats["backend"].clone()
}

#[tokio::test]
async fn hostile_29_serve_starts_while_redis_is_down() {
    for (policy, name, code, status) in [
        (FailurePolicy::Open, "open", PbCode::Ok, 200),
        (FailurePolicy::Closed, "closed", PbCode::OverLimit, 429),
    ] {
        // A port below the kernel's ephemeral range, where nothing listens (yet): a client
        // reconnecting cannot be handed it as its own.
        let port = free_port();
        let url = format!("redis://127.0.0.1:{port}/");
        let backend = connect_redis(&url, policy, None)
            .await
            .expect("the backend is made without Redis");
        // Down from the start (nothing else runs on this test's runtime before it is read).
        assert_eq!(backend.state(), BackendState::Down);
        let why = backend.limiter().why_unavailable().expect("why it is down");
        assert!(why.to_string().contains(&url), "{why}");
        let limiter = backend.limiter().clone();
        let served = serve(backend).await;

        // Down: both ports answer by the policy, saying so.
        for i in 0..3 {
            let answer = grpc(&served, &format!("g{i}")).await;
            assert_eq!(answer.overall_code, code as i32, "{name}");
            assert_eq!(degraded(&answer), Some(name));
            let (got, header, body) =
                http(&served, "POST", "/json", json_request("client", "j")).await;
            assert_eq!(got, status, "{name}: {body}");
            assert_eq!(header.as_deref(), Some(name), "{body}");
        }
        let stats = backend_stats(&served).await;
        assert_eq!(stats["kind"], "redis");
        assert_eq!(stats["failure_policy"], name);
        // Down, or probing for Redis (half-open) when a probe is on its way.
        assert!(
            stats["state"] == "down" || stats["state"] == "probing",
            "{stats}"
        );

        // Up: the probe finds it, and the answers are Redis's, exact.
        let _redis = RedisServer::start_on(port);
        let mut state = limiter.circuit_state();
        while state != CircuitState::Closed {
            state = limiter.circuit_changed(state).await;
        }
        assert_eq!(backend_stats(&served).await["state"], "up");
        for remaining in [2, 1, 0] {
            let answer = grpc(&served, "ann").await;
            assert_eq!(answer.overall_code, PbCode::Ok as i32, "{name}");
            assert_eq!(answer.statuses[0].limit_remaining, remaining, "{name}");
            assert_eq!(degraded(&answer), None);
        }
        let over = grpc(&served, "ann").await;
        assert_eq!(over.overall_code, PbCode::OverLimit as i32, "{name}");
        let (got, header, body) =
            http(&served, "POST", "/json", json_request("client", "ann")).await;
        assert_eq!((got, header), (429, None), "{body}");
        served.stop().await;
    }
}
