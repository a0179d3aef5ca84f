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

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

fn config_with_limit(limit: u32) -> String {
    format!(
        "domain: api\ndescriptors:\n  - key: client\n    rate_limit: {{unit: minute, requests_per_unit: {limit}}}\n  - key: other\n    rate_limit: {{unit: minute, requests_per_unit: 1}}\n"
    )
}

async fn reload_raising_a_limit_keeps_counts_limitador_522<B: Backend>(backend: B) {
    let dir = tempdir();
    let file = dir.join("ratelimit.yaml");
    write(&file, &config_with_limit(3));
    let running = start_on(backend, &file).await;
    for _ in 0..3 {
        assert_eq!(running.code("client", "ann").await, PbCode::Ok as i32);
    }
    assert_eq!(
        running.code("client", "ann").await,
        PbCode::OverLimit as i32
    );
    write(&file, &config_with_limit(5));
    assert_eq!(running.service.reload().await.unwrap(), 2);
    // The three admitted still count: two more, and remaining is against the new limit.
    let answer = running.grpc_check("api", "client", "ann").await.unwrap();
    assert_eq!(
        (answer.overall_code, answer.statuses[0].limit_remaining),
        (PbCode::Ok as i32, 1)
    );
    assert_eq!(
        answer.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        5
    );
    let answer = running.grpc_check("api", "client", "ann").await.unwrap();
    assert_eq!(
        (answer.overall_code, answer.statuses[0].limit_remaining),
        (PbCode::Ok as i32, 0)
    );
    assert_eq!(
        running.code("client", "ann").await,
        PbCode::OverLimit as i32
    );
    let (_, _, stats) = running.http("GET", "/api/stats", "").await;
    assert!(stats.contains(r#""version":2"#), "{stats}");
    running.stop().await;
}

on_both_backends!(
    raising_a_limit_keeps_counts_memory_limitador_522,
    raising_a_limit_keeps_counts_redis_limitador_522,
    |backend| reload_raising_a_limit_keeps_counts_limitador_522(backend)
);

#[tokio::test]
async fn an_invalid_reload_keeps_the_config_in_force_and_says_why() {
    let dir = tempdir();
    let file = dir.join("ratelimit.yaml");
    write(&file, &config_with_limit(1));
    let running = start_on(Memory::new(), &file).await;
    assert_eq!(running.code("client", "ann").await, PbCode::Ok as i32);
    write(
        &file,
        "domain: api\ndescriptors:\n  - key: client\n    rate_limit: {unit: fortnight, requests_per_unit: 9}\n",
    );
    let err = running.service.reload().await.unwrap_err().to_string();
    assert!(
        err.contains("ratelimit.yaml:4:") && err.contains("fortnight"),
        "{err}"
    );
    // The old limit still holds.
    assert_eq!(
        running.code("client", "ann").await,
        PbCode::OverLimit as i32
    );
    let (_, _, stats) = running.http("GET", "/api/stats", "").await;
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["config"]["version"], 1);
    assert_eq!(stats["config"]["errors_total"], 1);
    assert!(
        stats["config"]["last_error"]["message"]
            .as_str()
            .unwrap()
            .contains("fortnight")
    );
    let (_, _, metrics) = running.http("GET", "/metrics", "").await;
    assert!(
        metrics.contains(r#"slidewin_config_loads_total{result="error"} 1"#),
        "{metrics}"
    );
    // A good file again: the error is history (counted), no longer the files' state.
    write(&file, &config_with_limit(2));
    assert_eq!(running.service.reload().await.unwrap(), 2);
    let (_, _, stats) = running.http("GET", "/api/stats", "").await;
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert!(stats["config"]["last_error"].is_null(), "{stats}");
    assert_eq!(stats["config"]["errors_total"], 1);
    running.stop().await;
}

#[tokio::test]
async fn a_rule_removed_frees_its_state_and_comes_back_fresh() {
    let dir = tempdir();
    let file = dir.join("ratelimit.yaml");
    write(&file, &config_with_limit(1));
    let running = start_on(Memory::new(), &file).await;
    running.grpc_check("api", "other", "x").await.unwrap();
    assert_eq!(running.code("other", "x").await, PbCode::OverLimit as i32);
    write(
        &file,
        "domain: api\ndescriptors:\n  - key: client\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
    );
    running.service.reload().await.unwrap();
    let stats = running.service.engine().rule_stats();
    assert_eq!(stats.len(), 1, "the removed rule is gone: {stats:?}");
    let (_, _, metrics) = running.http("GET", "/metrics", "").await;
    assert!(
        !metrics.contains("api.other"),
        "its series went with it: {metrics}"
    );
    // No limit now: OK with no current limit.
    let answer = running.grpc_check("api", "other", "x").await.unwrap();
    assert!(answer.statuses[0].current_limit.is_none());
    write(&file, &config_with_limit(1));
    running.service.reload().await.unwrap();
    assert_eq!(running.code("other", "x").await, PbCode::Ok as i32);
    running.stop().await;
}

/// Waits for the watcher's next load (a bound of 20 s against a hang, not a timing claim).
async fn next_load<B: Backend>(
    service: &Endpoints<B>,
    rx: &mut tokio::sync::watch::Receiver<slidewin_server::LoadTally>,
) -> slidewin_server::LoadTally {
    let _ = service;
    tokio::time::timeout(Duration::from_secs(20), rx.changed())
        .await
        .expect("the watcher reloads")
        .expect("the service lives");
    *rx.borrow_and_update()
}

#[tokio::test]
async fn a_changed_file_is_reloaded() {
    let dir = tempdir();
    let file = dir.join("ratelimit.yaml");
    write(&file, &config_with_limit(1));
    let running = start_on(Memory::new(), &dir).await;
    let mut loads = running.service.load_tally();
    let _watch = slidewin_server::watch_config(&running.service).unwrap();
    // A file beside the config that is not one (a log, say) reloads nothing; the config's
    // change after it does, and is the first load seen.
    write(&dir.join("serve.log"), "a log line\n");
    write(&file, &config_with_limit(7));
    let tally = next_load(&running.service, &mut loads).await;
    assert_eq!(tally.version, 2);
    assert_eq!(running.limit_of("client", "ann").await, 7);
    write(&file, "domain: [");
    let tally = next_load(&running.service, &mut loads).await;
    assert_eq!((tally.version, tally.errors), (2, 1));
    running.stop().await;
}

#[cfg(unix)]
#[tokio::test]
async fn a_configmap_symlink_swap_is_reloaded() {
    use std::os::unix::fs::symlink;
    // Kubernetes mounts a ConfigMap as `..<timestamp>/` directories, a `..data` link to the
    // current one, and a link per key through `..data`; an update swaps `..data` atomically.
    let dir = tempdir();
    std::fs::create_dir(dir.join("..v1")).unwrap();
    write(&dir.join("..v1/ratelimit.yaml"), &config_with_limit(1));
    symlink("..v1", dir.join("..data")).unwrap();
    symlink("..data/ratelimit.yaml", dir.join("ratelimit.yaml")).unwrap();
    let running = start_on(Memory::new(), &dir).await;
    let mut loads = running.service.load_tally();
    let _watch = slidewin_server::watch_config(&running.service).unwrap();
    std::fs::create_dir(dir.join("..v2")).unwrap();
    write(&dir.join("..v2/ratelimit.yaml"), &config_with_limit(9));
    symlink("..v2", dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    let tally = next_load(&running.service, &mut loads).await;
    assert_eq!(tally.version, 2);
    assert_eq!(running.limit_of("client", "ann").await, 9);
    running.stop().await;
}

/// A fresh directory under the target directory, removed by nobody (the target is scratch).
fn tempdir() -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("slidewin-server-test-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A backend whose checks wait for a gate: a check in flight, for as long as the test wants.
struct Gated {
    memory: Memory,
    gate: Arc<tokio::sync::Semaphore>,
    entered: Arc<tokio::sync::Notify>,
}

impl Backend for Gated {
    type Store = <Memory as Backend>::Store;

    fn store(&self, rules: slidewin::limit::RuleSet) -> Result<Self::Store, slidewin::ConfigError> {
        self.memory.store(rules)
    }

    async fn check(
        &self,
        store: &Self::Store,
        key: slidewin_store::RequestKey<'_>,
        now: Moment,
        cost: u64,
    ) -> Result<slidewin_store::Checked, slidewin_store::BackendError> {
        self.entered.notify_one();
        let _permit = self.gate.acquire().await.expect("the gate stays open");
        self.memory.check(store, key, now, cost).await
    }

    fn kind(&self) -> BackendKind {
        BackendKind::Memory
    }

    fn keys(&self, store: &Self::Store) -> Option<u64> {
        self.memory.keys(store)
    }

    fn carry(&self, to: &Self::Store, from: &Self::Store, now: Moment) -> usize {
        self.memory.carry(to, from, now)
    }
}

#[tokio::test]
async fn a_stop_finishes_the_checks_in_flight_and_refuses_new_connections() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let entered = Arc::new(tokio::sync::Notify::new());
    let backend = Gated {
        memory: Memory::new(),
        gate: gate.clone(),
        entered: entered.clone(),
    };
    let mut running = start(backend, CONFIG, true).await;
    let grpc = running.grpc;
    let in_flight = tokio::spawn(async move {
        let mut client = RateLimitServiceClient::connect(format!("http://{grpc}"))
            .await
            .unwrap();
        client
            .should_rate_limit(PbRequest {
                domain: "api".into(),
                descriptors: vec![RateLimitDescriptor {
                    entries: vec![PbEntry {
                        key: "client".into(),
                        value: "ann".into(),
                    }],
                    ..Default::default()
                }],
                hits_addend: 0,
            })
            .await
    });
    entered.notified().await;
    running.served.signal_stop();
    // The listeners close: a new connection is refused (bounded wait for the stop to land).
    let refused = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if tokio::net::TcpStream::connect(running.http).await.is_err() {
                break;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(refused.is_ok(), "the HTTP listener closed");
    assert!(!running.served.is_finished(), "a check is still in flight");
    gate.add_permits(1);
    let answer = in_flight
        .await
        .unwrap()
        .expect("the check in flight is answered");
    assert_eq!(answer.into_inner().overall_code, PbCode::Ok as i32);
    running.served.stop().await;
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

/// Issue 30: the README's `/search` rule was `example.path__search` in the `RateLimit` fields,
/// `path_/search` in `currentLimit.name` and on the dashboard, and `example.path_/search` in
/// the metrics. Each limit now has one name, the same in every place.
#[tokio::test]
async fn issue_30_one_name_per_rule_in_fields_json_metrics_and_stats() {
    let yaml = "\
domain: example
descriptors:
  - key: path
    value: /search
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: user
    rate_limit: {name: search, quota: 5/minute}
";
    let running = start(Memory::new(), yaml, true).await;
    for (key, value, name) in [
        ("path", "/search", "path__search"),
        ("user", "ann", "search"),
    ] {
        let request = format!(
            r#"{{"domain":"example","descriptors":[{{"entries":[{{"key":"{key}","value":"{value}"}}]}}]}}"#
        );
        let (status, headers, body) = running.http("POST", "/json", request).await;
        assert_eq!(status, 200, "{body}");
        let quoted = format!("\"{name}\";");
        for field in ["ratelimit-policy", "ratelimit"] {
            let value = headers[field].to_str().unwrap();
            assert!(value.starts_with(&quoted), "{field}: {value}");
        }
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["statuses"][0]["currentLimit"]["name"], name);
    }
    let (_, _, metrics) = running.http("GET", "/metrics", "").await;
    for name in ["path__search", "search"] {
        let series =
            format!(r#"slidewin_rate_limit_total_hits_total{{domain="example",rule="{name}"}} 1"#);
        assert!(metrics.contains(&series), "{metrics}");
    }
    let (_, _, stats) = running.http("GET", "/api/stats", "").await;
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    let names: Vec<&str> = stats["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| rule["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["path__search", "search"]);
    running.stop().await;
}

/// Issue 30: the service and the layer chose the binding limit by different rules, so for the
/// same rules they could name different limits in `RateLimit`, and one 429 carried `t=57`
/// beside `Retry-After: 49`. Both now use the core's `Binding`: for the same rule set and the
/// same history they send the same `RateLimit-Policy`, `RateLimit` and `Retry-After`, and a
/// denial's `t` is its `Retry-After`.
mod same_fields {
    use super::*;
    use axum::Router;
    use axum::routing::get;
    use proptest::prelude::*;
    use slidewin::limit::{Kind, Rule, RuleSet};
    use slidewin_http::{Key, Limit, RateLimitLayer};
    use slidewin_server::{Code, Entry, RateLimitRequest, RequestDescriptor};
    use tower::ServiceExt;

    const KINDS: [Kind; 4] = [
        Kind::SlidingLog,
        Kind::SlidingCounter,
        Kind::FixedWindow,
        Kind::Gcra,
    ];

    #[derive(Clone, Debug)]
    struct Spec {
        kind: Kind,
        limit: u64,
        span_secs: u64,
        shadow: bool,
    }

    fn spec() -> impl Strategy<Value = Spec> {
        (0..KINDS.len(), 3u64..8, 1u64..6, prop::bool::weighted(0.3)).prop_map(
            |(kind, limit, span_secs, shadow)| Spec {
                kind: KINDS[kind],
                limit,
                span_secs,
                shadow,
            },
        )
    }

    /// The config: the enforced rules in one `limits` list, the shadow ones in another.
    fn yaml(specs: &[Spec]) -> String {
        let mut text = String::from("domain: p\ndescriptors:\n");
        for (key, shadow) in [("enforced", false), ("watched", true)] {
            let part: Vec<(usize, &Spec)> = specs
                .iter()
                .enumerate()
                .filter(|(_, s)| s.shadow == shadow)
                .collect();
            if part.is_empty() {
                continue;
            }
            text += &format!("  - key: {key}\n    shadow_mode: {shadow}\n    limits:\n");
            for (i, s) in part {
                text += &format!(
                    "      - {{name: r{i}, quota: {} per {} seconds, algorithm: {}}}\n",
                    s.limit,
                    s.span_secs,
                    s.kind.name()
                );
            }
        }
        text
    }

    fn layer_of(specs: &[Spec], clock: &ManualClock) -> Router {
        let rules = specs.iter().enumerate().map(|(i, s)| {
            let quota = format!("{} per {} seconds", s.limit, s.span_secs);
            Rule::new(&format!("r{i}"), s.kind, quota.parse().unwrap()).unwrap()
        });
        // The layer lists its policies in its rules' order: enforced first, as the config.
        let (enforced, shadow): (Vec<_>, Vec<_>) = rules.zip(specs).partition(|(_, s)| !s.shadow);
        let mut limit = Limit::new(
            RuleSet::new(enforced.iter().chain(&shadow).map(|(r, _)| r.clone())).unwrap(),
        )
        .key(Key::global())
        .cost_fn(|parts| parts.headers["x-cost"].to_str().unwrap().parse().unwrap());
        for (rule, _) in &shadow {
            limit = limit.shadow(rule.name()).unwrap();
        }
        let layer = RateLimitLayer::builder(Memory::new())
            .clock(clock.clone())
            .limit(limit)
            .build()
            .unwrap();
        Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer)
    }

    fn request(specs: &[Spec], cost: u64) -> RateLimitRequest {
        let mut descriptors = Vec::new();
        for (key, shadow) in [("enforced", false), ("watched", true)] {
            if specs.iter().any(|s| s.shadow == shadow) {
                descriptors.push(RequestDescriptor::new(vec![Entry::new(key, "v")]));
            }
        }
        let mut request = RateLimitRequest::new("p", descriptors);
        request.hits_addend = cost;
        request
    }

    type Fields = (bool, Option<String>, Option<String>, Option<String>);

    fn field(value: Option<&http::HeaderValue>) -> Option<String> {
        value.map(|v| v.to_str().unwrap().to_owned())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn the_layer_and_the_service_send_the_same_fields(
            specs in prop::collection::vec(spec(), 1..4),
            history in prop::collection::vec((0u64..2_500, 1u64..4), 1..40),
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            runtime.block_on(async {
                let clock = ManualClock::new(Moment::from_secs(1_000));
                let config = Config::parse(&yaml(&specs), "p.yaml").unwrap();
                let engine = Engine::new(
                    Memory::new(),
                    config,
                    Arc::new(clock.clone()),
                    Bounds::default(),
                    Metrics::new(),
                )
                .unwrap();
                let layer = layer_of(&specs, &clock);
                for (step, (wait_ms, cost)) in history.into_iter().enumerate() {
                    clock.advance(Duration::from_millis(wait_ms));
                    let answer = engine.should_rate_limit(&request(&specs, cost)).await.unwrap();
                    let header = |name: &str| {
                        answer.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v)
                    };
                    let service: Fields = (
                        answer.overall_code == Code::OverLimit,
                        field(header("ratelimit-policy")),
                        field(header("ratelimit")),
                        field(header("retry-after")),
                    );
                    let http = http::Request::get("/")
                        .header("x-cost", cost)
                        .body(axum::body::Body::empty())
                        .unwrap();
                    let response = layer.clone().oneshot(http).await.unwrap();
                    let headers = response.headers();
                    let layer_fields: Fields = (
                        response.status() == http::StatusCode::TOO_MANY_REQUESTS,
                        field(headers.get("ratelimit-policy")),
                        field(headers.get("ratelimit")),
                        field(headers.get("retry-after")),
                    );
                    prop_assert_eq!(&service, &layer_fields, "step {}", step);
                    if let (Some(limit), Some(retry)) = (&service.2, &service.3) {
                        prop_assert!(limit.ends_with(&format!(";t={retry}")), "{} {}", limit, retry);
                    }
                }
                Ok(())
            })?;
        }
    }
}

/// Issue 31: a descriptor that matches no rule is answered OK, as envoy ratelimit answers it,
/// and counted, so that a typo in the config or the client shows: by domain when the config
/// has the domain, and without the domain's text (which clients choose) when it does not.
#[tokio::test]
async fn issue_31_descriptors_that_match_no_rule_are_counted() {
    let running = start(Memory::new(), CONFIG, true).await;
    for (domain, key) in [("api", "clinet"), ("api", "client"), ("apii", "client")] {
        let body = format!(
            r#"{{"domain":"{domain}","descriptors":[{{"entries":[{{"key":"{key}","value":"v"}}]}},{{"entries":[{{"key":"nope","value":"v"}}]}}]}}"#
        );
        let (status, _, answer) = running.http("POST", "/json", body).await;
        assert_eq!(status, 200, "{answer}");
    }
    let (_, _, metrics) = running.http("GET", "/metrics", "").await;
    // In `api`: `clinet` once and `nope` twice; both of `apii`'s.
    assert!(
        metrics
            .contains(r#"slidewin_descriptors_unmatched_total{domain="api",reason="no_rule"} 3"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            r#"slidewin_descriptors_unmatched_total{domain="",reason="unknown_domain"} 2"#
        ),
        "{metrics}"
    );
    assert!(
        !metrics.contains("apii"),
        "a client's domain is never a label"
    );
    running.stop().await;
}

/// Issue 31 (envoyproxy/ratelimit#286): "who was limited" is answered on `/metrics` by the
/// keys denied most, ranked, in a fixed number of series, without a label per key otherwise.
#[tokio::test]
async fn issue_31_the_keys_denied_most_are_ranked_series() {
    let running = start(Memory::new(), CONFIG, true).await;
    // ann: 3 admitted, then 4 denied; bo: 3 admitted, then 1 denied.
    for (value, times) in [("ann", 7), ("bo", 4)] {
        for _ in 0..times {
            running
                .http("POST", "/json", json_request("client", value))
                .await;
        }
    }
    let (_, _, metrics) = running.http("GET", "/metrics", "").await;
    // A family's series come in no set order: sorted, rank 1 first.
    let mut ranked: Vec<&str> = metrics
        .lines()
        .filter(|line| line.starts_with("slidewin_top_denied_keys{"))
        .collect();
    ranked.sort_unstable();
    assert_eq!(
        ranked,
        [
            r#"slidewin_top_denied_keys{rank="1",domain="api",rule="client",limit="client",key="client=ann"} 4"#,
            r#"slidewin_top_denied_keys{rank="2",domain="api",rule="client",limit="client",key="client=bo"} 1"#,
        ],
        "{metrics}"
    );
    running.stop().await;
}
