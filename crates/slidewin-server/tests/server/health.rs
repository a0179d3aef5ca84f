//! Health that tells the truth (issue 31), asked as a load balancer asks it: `GET
//! /healthcheck` (envoy ratelimit's path) and `/healthz`, and the standard
//! `grpc.health.v1.Health` through the client generated from its proto (tonic-health's), on
//! the real ports.

use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use slidewin::time::MonotonicClock;
use slidewin_server::{
    Bounds, Config, ConnectionLimits, Endpoints, Engine, FailurePolicy, Metrics, ServeOptions,
    connect_redis,
};
use slidewin_store::{Backend, Memory};
use slidewin_test_support::redis::{RedisServer, free_port};
use tonic::Code;
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

use crate::support::server::{self, Served};

const CONFIG: &str = "\
domain: api
descriptors:
  - key: client
    rate_limit: {unit: minute, requests_per_unit: 3}
";

/// The names the service answers for: the server as a whole, Envoy's service, envoy
/// ratelimit's name.
const NAMES: [&str; 3] = [
    "",
    "envoy.service.ratelimit.v3.RateLimitService",
    "ratelimit",
];

fn service<B: Backend>(backend: B) -> Endpoints<B> {
    let config = Config::parse(CONFIG, "test.yaml").expect("the test's config is valid");
    let engine = Engine::new(
        backend,
        config,
        std::sync::Arc::new(MonotonicClock),
        Bounds::default(),
        Metrics::new(),
    )
    .expect("the backend holds the rules");
    Endpoints::new(engine, vec![])
}

async fn health_client(served: &Served) -> HealthClient<Channel> {
    let channel = Channel::from_shared(format!("http://{}", served.grpc))
        .expect("a URI")
        .connect()
        .await
        .expect("gRPC connects");
    HealthClient::new(channel)
}

async fn check(client: &mut HealthClient<Channel>, name: &str) -> Result<ServingStatus, Code> {
    let request = HealthCheckRequest {
        service: name.to_owned(),
    };
    match client.check(request).await {
        Ok(answer) => Ok(status_of(&answer.into_inner())),
        Err(status) => Err(status.code()),
    }
}

fn status_of(answer: &HealthCheckResponse) -> ServingStatus {
    ServingStatus::try_from(answer.status).expect("a known status")
}

/// `GET path` on the HTTP listener: its status and body.
async fn get(served: &Served, path: &str) -> (u16, String) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let uri = format!("http://{}{path}", served.http);
    let response = client
        .get(uri.parse().unwrap())
        .await
        .expect("HTTP answers");
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// The next status a watch sends that is not `skip`.
async fn next_other(
    stream: &mut tonic::Streaming<HealthCheckResponse>,
    skip: ServingStatus,
) -> ServingStatus {
    loop {
        let answer = stream
            .message()
            .await
            .expect("the watch goes on")
            .expect("a message");
        if status_of(&answer) != skip {
            return status_of(&answer);
        }
    }
}

#[tokio::test]
async fn issue_31_every_health_route_says_serving_with_the_standard_client() {
    let served = Served::start(service(Memory::new()), &server::local()).await;
    for path in ["/healthcheck", "/healthz"] {
        assert_eq!(get(&served, path).await, (200, "OK\n".to_owned()), "{path}");
    }
    let mut client = health_client(&served).await;
    for name in NAMES {
        assert_eq!(
            check(&mut client, name).await,
            Ok(ServingStatus::Serving),
            "{name:?}"
        );
    }
    // A service it does not run is unknown, as the health protocol says.
    assert_eq!(
        check(&mut client, "no.such.Service").await,
        Err(Code::NotFound)
    );
    served.stop().await;
}

/// On the stop, health fails first, while both listeners still accept and answer; the drain
/// begins only after the delay (here far longer than the test).
#[tokio::test]
async fn issue_31_health_fails_before_the_listeners_close() {
    let options = ServeOptions {
        limits: ConnectionLimits {
            drain_delay: Duration::from_secs(3_600),
            ..ConnectionLimits::default()
        },
        ..server::local()
    };
    let mut served = Served::start(service(Memory::new()), &options).await;
    let mut watcher = health_client(&served).await;
    let request = HealthCheckRequest {
        service: NAMES[1].to_owned(),
    };
    let mut watch = watcher.watch(request).await.expect("a watch").into_inner();
    let first = watch.message().await.unwrap().expect("the status now");
    assert_eq!(status_of(&first), ServingStatus::Serving);

    served.signal_stop();
    assert_eq!(
        next_other(&mut watch, ServingStatus::Serving).await,
        ServingStatus::NotServing
    );
    let (status, body) = get(&served, "/healthcheck").await;
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("draining"), "{body}");
    // A new connection is still taken, and its checks answered: the load balancer has the
    // delay to stop sending.
    let mut fresh = health_client(&served).await;
    assert_eq!(check(&mut fresh, "").await, Ok(ServingStatus::NotServing));
    let (status, body) = get(&served, "/healthz").await;
    assert_eq!(status, 500, "{body}");
    assert!(!served.is_finished());
}

/// A Redis that does not answer fails health, naming the backend and the policy that answers
/// for it; an operator who counts degraded answers as healthy gets `200 OK: degraded` and
/// `SERVING`.
#[tokio::test]
async fn issue_31_a_backend_down_fails_health_unless_degraded_counts() {
    let url = format!("redis://127.0.0.1:{}/", free_port());
    for ready_when_degraded in [false, true] {
        let backend = connect_redis(&url, FailurePolicy::Open, None)
            .await
            .expect("the backend is made without Redis");
        let endpoints = service(backend).with_ready_when_degraded(ready_when_degraded);
        let served = Served::start(endpoints, &server::local()).await;
        let (status, body) = get(&served, "/healthcheck").await;
        assert!(body.contains("the redis backend is"), "{body}");
        assert!(body.contains("failure policy (open)"), "{body}");
        let mut client = health_client(&served).await;
        let grpc = check(&mut client, "").await;
        if ready_when_degraded {
            assert_eq!(status, 200, "{body}");
            assert!(body.starts_with("OK: degraded, "), "{body}");
            assert_eq!(grpc, Ok(ServingStatus::Serving));
        } else {
            assert_eq!(status, 500, "{body}");
            assert!(body.starts_with("not ready: "), "{body}");
            assert_eq!(grpc, Ok(ServingStatus::NotServing));
        }
        served.stop().await;
    }
}

/// A watch follows the backend: `NOT_SERVING` while Redis is away, `SERVING` once it answers.
#[tokio::test]
async fn issue_31_a_health_watch_follows_redis_coming_back() {
    let port = free_port();
    let backend = connect_redis(
        &format!("redis://127.0.0.1:{port}/"),
        FailurePolicy::Closed,
        None,
    )
    .await
    .expect("the backend is made without Redis");
    let served = Served::start(service(backend), &server::local()).await;
    let mut client = health_client(&served).await;
    let request = HealthCheckRequest {
        service: String::new(),
    };
    let mut watch = client.watch(request).await.expect("a watch").into_inner();
    let first = watch.message().await.unwrap().expect("the status now");
    assert_eq!(status_of(&first), ServingStatus::NotServing);
    let _redis = RedisServer::start_on(port);
    assert_eq!(
        next_other(&mut watch, ServingStatus::NotServing).await,
        ServingStatus::Serving
    );
    assert_eq!(get(&served, "/healthcheck").await.0, 200);
    served.stop().await;
}

/// Watches last as long as their clients like, so they are bounded: one past the bound is
/// refused by name, and a check is still answered.
#[tokio::test]
async fn issue_31_health_watches_are_bounded() {
    // The watches are left open: the stop cuts them at once.
    let options = ServeOptions {
        limits: ConnectionLimits {
            drain_timeout: Duration::ZERO,
            ..ConnectionLimits::default()
        },
        ..server::local()
    };
    let served = Served::start(service(Memory::new()), &options).await;
    let mut client = health_client(&served).await;
    let mut open = Vec::new();
    for _ in 0..ConnectionLimits::MAX_HEALTH_WATCHES {
        let request = HealthCheckRequest {
            service: String::new(),
        };
        open.push(client.watch(request).await.expect("a watch").into_inner());
    }
    let request = HealthCheckRequest {
        service: String::new(),
    };
    let refused = client.watch(request).await.expect_err("one too many");
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert!(
        refused.message().contains("MAX_HEALTH_WATCHES"),
        "{refused:?}"
    );
    assert_eq!(check(&mut client, "").await, Ok(ServingStatus::Serving));
    served.stop().await;
    drop(open);
}
