//! The layer on an axum `Router`, driven with `oneshot`: every body runs against the memory
//! backend, a Redis of its own and a shared Redis Cluster, through one macro, on a
//! `ManualClock` (the Redis backend on the layer's clock), and must give the same answers on
//! all three.

use crate::support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::{get, post};
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use slidewin::limit::{Kind, Rule, RuleSet};
use slidewin::time::ManualClock;
use slidewin::{Clock, Moment};
use slidewin_http::{
    Backend, Key, Limit, Memory, MissingKey, RateLimitLayer, RateLimitLayerBuilder,
};
// The store's own Redis backend, so that the tests build without the `redis` feature too.
use slidewin_redis::RedisLimiter;
use slidewin_store::Redis;
use slidewin_test_support::redis::{RedisCluster, RedisServer};
use support::members;
use tower::ServiceExt;

fn rule(name: &str, kind: Kind, quota: &str) -> Rule {
    Rule::new(name, kind, quota.parse().unwrap()).unwrap()
}

fn rules(each: impl IntoIterator<Item = Rule>) -> RuleSet {
    RuleSet::new(each).unwrap()
}

/// Where a body's layer keeps its counts, on a clock the body moves.
struct Harness<B> {
    backend: B,
    clock: ManualClock,
    _server: Option<RedisServer>,
    _cluster: Option<Arc<RedisCluster>>,
}

impl<B: Backend + Clone> Harness<B> {
    fn builder(&self) -> RateLimitLayerBuilder<B, ManualClock> {
        RateLimitLayer::builder(self.backend.clone()).clock(self.clock.clone())
    }

    fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }

    fn now(&self) -> Moment {
        self.clock.now()
    }
}

/// A moment well inside Redis's exact range, as Unix time.
const START: Moment = Moment::from_secs(1_700_000_000);

fn memory() -> Harness<Memory> {
    Harness {
        backend: Memory::new(),
        clock: ManualClock::new(START),
        _server: None,
        _cluster: None,
    }
}

async fn redis() -> Harness<Redis> {
    let server = RedisServer::start();
    let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
    Harness {
        backend: Redis::new(limiter).with_layer_clock(),
        clock: ManualClock::new(START),
        _server: Some(server),
        _cluster: None,
    }
}

async fn cluster(prefix: &str) -> Harness<Redis> {
    let cluster = RedisCluster::shared();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let limiter = RedisLimiter::connect_cluster(&urls)
        .await
        .unwrap()
        .with_prefix(prefix);
    Harness {
        backend: Redis::new(limiter).with_layer_clock(),
        clock: ManualClock::new(START),
        _server: None,
        _cluster: Some(cluster),
    }
}

/// Writes each body as a test against memory, a Redis of its own and a shared Redis Cluster.
macro_rules! on_every_backend {
    ($($(#[doc = $doc:literal])* async fn $name:ident($h:ident) $body:block)*) => {
        mod memory {
            use super::*;
            $($(#[doc = $doc])* #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let $h = memory();
                $body
            })*
        }
        mod redis {
            use super::*;
            $($(#[doc = $doc])* #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let $h = redis().await;
                $body
            })*
        }
        mod cluster {
            use super::*;
            $($(#[doc = $doc])* #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let $h = cluster(stringify!($name)).await;
                $body
            })*
        }
    };
}

/// A router with `/`, `/search`, `/other` and `POST /upload`, behind `layer`.
fn app<B: Backend, C: Clock + Send + Sync + 'static>(layer: RateLimitLayer<B, C>) -> Router {
    Router::new()
        .route("/", get(|| async { "home" }))
        .route("/search", get(|| async { "found" }))
        .route("/other", get(|| async { "other" }))
        .route("/upload", post(|| async { "stored" }))
        .layer(layer)
}

const CLIENT: &str = "203.0.113.7:40000";

/// A GET of `path` from [`CLIENT`].
fn get_from(path: &str, peer: &str) -> Request<Body> {
    let mut request = Request::get(path).body(Body::empty()).unwrap();
    request.extensions_mut().insert(axum::extract::ConnectInfo(
        peer.parse::<SocketAddr>().unwrap(),
    ));
    request
}

async fn call(app: &Router, request: Request<Body>) -> Response<Body> {
    app.clone().oneshot(request).await.unwrap()
}

async fn status(app: &Router, path: &str) -> StatusCode {
    call(app, get_from(path, CLIENT)).await.status()
}

fn header<'a>(response: &'a Response<Body>, name: &str) -> Option<&'a str> {
    response.headers().get(name).map(|v| v.to_str().unwrap())
}

/// `RateLimit`'s one member: (policy, r, t).
fn rate_limit(response: &Response<Body>) -> (String, i64, i64) {
    let field = header(response, "ratelimit").expect("a RateLimit field");
    let mut all = members(field);
    assert_eq!(all.len(), 1, "{field}");
    let (name, params) = all.remove(0);
    assert_eq!(params.len(), 2, "{field}");
    assert_eq!((params[0].0.as_str(), params[1].0.as_str()), ("r", "t"));
    (name, params[0].1, params[1].1)
}

async fn json(response: Response<Body>) -> serde_json::Value {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).expect("a JSON body")
}

on_every_backend! {
    /// Up to the limit, 200s with the fields; then a 429 problem with `Retry-After`, parsed back.
    async fn admits_up_to_the_limit_then_answers_429_with_the_fields(h) {
        let layer = h
            .builder()
            .limit(Limit::new(rules([
                rule("burst", Kind::SlidingLog, "3/s"),
                rule("hourly", Kind::SlidingLog, "1000/hour"),
            ])))
            .build()
            .unwrap();
        let app = app(layer);
        for left in (0..3).rev() {
            let response = call(&app, get_from("/", CLIENT)).await;
            assert_eq!(response.status(), StatusCode::OK);
            let policy = header(&response, "ratelimit-policy").unwrap();
            assert_eq!(
                members(policy),
                [
                    ("burst".into(), vec![("q".into(), 3), ("w".into(), 1)]),
                    ("hourly".into(), vec![("q".into(), 1000), ("w".into(), 3600)]),
                ]
            );
            assert_eq!(rate_limit(&response), ("burst".into(), left, 1));
            assert_eq!(header(&response, "retry-after"), None);
        }
        h.advance(Duration::from_millis(400));
        let denied = call(&app, get_from("/", CLIENT)).await;
        assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(header(&denied, "retry-after"), Some("1")); // 600 ms, rounded up
        assert_eq!(rate_limit(&denied), ("burst".into(), 0, 1));
        assert_eq!(header(&denied, "content-type"), Some("application/problem+json"));
        let body = json(denied).await;
        assert_eq!(body["type"], slidewin_http::QUOTA_EXCEEDED);
        assert_eq!(body["status"], 429);
        assert_eq!(body["violated-policies"], serde_json::json!(["burst"]));
        assert_eq!(body["retry-after"], 1);
    }

    /// The window is `(now - span, now]`: a request leaves it exactly one span later.
    async fn the_window_slides_at_its_boundary(h) {
        let layer = h
            .builder()
            .limit(Limit::new(rules([rule("api", Kind::SlidingLog, "2 per 10s")])))
            .build()
            .unwrap();
        let app = app(layer);
        assert_eq!(status(&app, "/").await, StatusCode::OK);
        h.advance(Duration::from_secs(5));
        assert_eq!(status(&app, "/").await, StatusCode::OK);
        h.advance(Duration::from_nanos(4_999_999_999)); // 1 ns before the first leaves
        let denied = call(&app, get_from("/", CLIENT)).await;
        assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(header(&denied, "retry-after"), Some("1"));
        h.advance(Duration::from_nanos(1));
        assert_eq!(status(&app, "/").await, StatusCode::OK);
        assert_eq!(status(&app, "/").await, StatusCode::TOO_MANY_REQUESTS);
    }

    /// A request denied by one policy is counted against none: "hourly" keeps its units
    /// (governor #16, the denied request that still consumed).
    async fn a_denial_under_two_policies_consumes_from_neither(h) {
        let layer = h
            .builder()
            .limit(Limit::new(rules([
                rule("burst", Kind::SlidingLog, "2/s"),
                rule("hourly", Kind::SlidingLog, "5/hour"),
            ])))
            .build()
            .unwrap();
        let app = app(layer.clone());
        for _ in 0..2 {
            assert_eq!(status(&app, "/").await, StatusCode::OK);
        }
        for _ in 0..10 {
            assert_eq!(status(&app, "/").await, StatusCode::TOO_MANY_REQUESTS);
        }
        h.advance(Duration::from_secs(1));
        let next = call(&app, get_from("/", CLIENT)).await;
        assert_eq!(next.status(), StatusCode::OK);
        // 2 of 5 left this hour: only the three admitted requests counted.
        let (name, left, _) = rate_limit(&next);
        assert_eq!((name.as_str(), left), ("hourly", 2));
        assert_eq!(status(&app, "/").await, StatusCode::OK);
        let last = call(&app, get_from("/", CLIENT)).await;
        assert_eq!(last.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(rate_limit(&last), ("burst".into(), 0, 1));
        h.advance(Duration::from_secs(1));
        let fifth = call(&app, get_from("/", CLIENT)).await;
        let (name, left, _) = rate_limit(&fifth);
        assert_eq!((name.as_str(), left), ("hourly", 0));
        let over = call(&app, get_from("/", CLIENT)).await;
        assert_eq!(over.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(json(over).await["violated-policies"], serde_json::json!(["hourly"]));
        let now = h.now();
        assert_eq!(layer.policy("burst").unwrap().passed(now), 5);
        assert_eq!(layer.policy("burst").unwrap().denied(now), 11);
        assert_eq!(layer.policy("hourly").unwrap().denied(now), 1);
    }

    /// Clones of the layer, and the routers made from them, share their counts.
    async fn clones_share_the_limits(h) {
        let layer = h
            .builder()
            .limit(Limit::new(rules([rule("api", Kind::Gcra, "2/minute")])).key(Key::global()))
            .build()
            .unwrap();
        let one = app(layer.clone());
        let two = Router::new().route("/", get(|| async { "two" })).layer(layer);
        assert_eq!(status(&one, "/").await, StatusCode::OK);
        assert_eq!(status(&two, "/").await, StatusCode::OK);
        assert_eq!(status(&one, "/").await, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(status(&two, "/").await, StatusCode::TOO_MANY_REQUESTS);
    }

    /// Limits select by route and method; the first that selects decides; the rest pass with
    /// no fields.
    async fn limits_are_chosen_by_route_and_method(h) {
        let layer = h
            .builder()
            .limit(Limit::new(rules([rule("search", Kind::SlidingLog, "1/minute")])).route("/search"))
            .limit(
                Limit::new(rules([rule("writes", Kind::SlidingCounter, "1/minute")]))
                    .method(Method::POST),
            )
            .limit(
                Limit::new(rules([rule("dev", Kind::FixedWindow, "1/minute")]))
                    .when(|parts| parts.headers.contains_key("x-dev")),
            )
            .build()
            .unwrap();
        let app = app(layer);
        let search = call(&app, get_from("/search", CLIENT)).await;
        assert_eq!(rate_limit(&search).0, "search");
        assert_eq!(status(&app, "/search").await, StatusCode::TOO_MANY_REQUESTS);
        let other = call(&app, get_from("/other", CLIENT)).await;
        assert_eq!(other.status(), StatusCode::OK);
        assert_eq!(header(&other, "ratelimit"), None);
        assert_eq!(header(&other, "ratelimit-policy"), None);
        let upload = || {
            let mut request = get_from("/upload", CLIENT);
            *request.method_mut() = Method::POST;
            request
        };
        assert_eq!(rate_limit(&call(&app, upload()).await).0, "writes");
        assert_eq!(call(&app, upload()).await.status(), StatusCode::TOO_MANY_REQUESTS);
        let dev = || {
            let mut request = get_from("/other", CLIENT);
            request.headers_mut().insert("x-dev", "1".parse().unwrap());
            request
        };
        assert_eq!(call(&app, dev()).await.status(), StatusCode::OK);
        assert_eq!(call(&app, dev()).await.status(), StatusCode::TOO_MANY_REQUESTS);
        // Still unlimited without the header.
        assert_eq!(status(&app, "/other").await, StatusCode::OK);
    }

    /// Each key counts apart: clients, and API keys in a header.
    async fn keys_count_apart(h) {
        let layer = h
            .builder()
            .limit(
                Limit::new(rules([rule("per-key", Kind::SlidingLog, "1/minute")]))
                    .route("/search")
                    .key(Key::header("x-api-key".parse().unwrap())),
            )
            .limit(Limit::new(rules([rule("per-ip", Kind::Gcra, "1/minute")])))
            .build()
            .unwrap();
        let app = app(layer);
        let with_key = |key: &str| {
            let mut request = get_from("/search", CLIENT);
            request.headers_mut().insert("x-api-key", key.parse().unwrap());
            request
        };
        assert_eq!(call(&app, with_key("a")).await.status(), StatusCode::OK);
        assert_eq!(call(&app, with_key("b")).await.status(), StatusCode::OK);
        assert_eq!(call(&app, with_key("a")).await.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(call(&app, get_from("/", "198.51.100.1:1")).await.status(), StatusCode::OK);
        assert_eq!(call(&app, get_from("/", "198.51.100.2:1")).await.status(), StatusCode::OK);
        assert_eq!(
            call(&app, get_from("/", "198.51.100.1:2")).await.status(),
            StatusCode::TOO_MANY_REQUESTS
        );
    }

    /// A request costs what its limit's function says; a cost the policy can never admit is
    /// a 429 without `Retry-After`, and takes nothing.
    async fn a_request_costs_its_size(h) {
        let layer = h
            .builder()
            .limit(
                Limit::new(rules([rule("upload-kib", Kind::SlidingLog, "10/minute")]))
                    .route("/upload")
                    .cost_fn(|parts| {
                        let bytes: u64 = parts.headers["content-length"].to_str().unwrap().parse().unwrap();
                        bytes.div_ceil(1024)
                    }),
            )
            .build()
            .unwrap();
        let app = app(layer);
        let upload = |bytes: u64| {
            let mut request = get_from("/upload", CLIENT);
            *request.method_mut() = Method::POST;
            request.headers_mut().insert("content-length", bytes.into());
            request
        };
        let first = call(&app, upload(4 * 1024)).await;
        assert_eq!(rate_limit(&first), ("upload-kib".into(), 6, 60));
        let huge = call(&app, upload(11 * 1024)).await;
        assert_eq!(huge.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(header(&huge, "retry-after"), None);
        let body = json(huge).await;
        assert_eq!(body["violated-policies"], serde_json::json!(["upload-kib"]));
        assert!(body["detail"].as_str().unwrap().contains("11"), "{body}");
        let second = call(&app, upload(6 * 1024 - 100)).await;
        assert_eq!(rate_limit(&second), ("upload-kib".into(), 0, 60));
        let third = call(&app, upload(1)).await;
        assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(header(&third, "retry-after"), Some("60"));
    }

    /// A request without its key: a 500 by default, or through unlimited.
    async fn a_missing_key_denies_with_500_or_passes(h) {
        let limit = || Limit::new(rules([rule("api", Kind::Gcra, "1/minute")])).key(Key::header("x-api-key".parse().unwrap()));
        let deny = app(h.builder().limit(limit()).build().unwrap());
        let response = call(&deny, get_from("/", CLIENT)).await;
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(header(&response, "ratelimit"), None);
        let body = json(response).await;
        assert_eq!(body["status"], 500);
        assert_eq!(body["detail"], "the request has no key for the policy `api`");
        let pass = app(h.builder().limit(limit()).missing_key(MissingKey::Pass).build().unwrap());
        for _ in 0..3 {
            assert_eq!(status(&pass, "/").await, StatusCode::OK);
        }
        // A limit may choose for itself: the layer denies, this one lets keyless requests by.
        let optional = app(h.builder().limit(limit().missing_key(MissingKey::Pass)).build().unwrap());
        assert_eq!(status(&optional, "/").await, StatusCode::OK);
        // No peer address recorded at all: peer IP keys are missing too.
        let by_ip = app(h.builder().limit(Limit::new(rules([rule("ip", Kind::Gcra, "1/minute")]))).build().unwrap());
        let bare = Request::get("/").body(Body::empty()).unwrap();
        assert_eq!(call(&by_ip, bare).await.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }

    /// A shadow policy decides and sends its fields but never denies; its would-be denials
    /// are counted, and the enforced policies still count the requests.
    async fn a_shadow_policy_never_denies_and_counts(h) {
        let layer = h
            .builder()
            .limit(
                Limit::new(rules([
                    rule("enforced", Kind::SlidingLog, "4/minute"),
                    rule("new", Kind::SlidingLog, "2/minute"),
                ]))
                .shadow("new")
                .unwrap(),
            )
            .build()
            .unwrap();
        let app = app(layer.clone());
        for _ in 0..4 {
            let response = call(&app, get_from("/", CLIENT)).await;
            assert_eq!(response.status(), StatusCode::OK);
            assert_eq!(header(&response, "retry-after"), None);
        }
        let fifth = call(&app, get_from("/", CLIENT)).await;
        assert_eq!(fifth.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(json(fifth).await["violated-policies"], serde_json::json!(["enforced"]));
        let now = h.now();
        let (enforced, new) = (layer.policy("enforced").unwrap(), layer.policy("new").unwrap());
        assert_eq!((enforced.passed(now), enforced.denied(now)), (4, 1));
        assert_eq!((new.passed(now), new.shadow_denied(now), new.denied(now)), (4, 2, 0));
        assert!(new.is_shadow() && !enforced.is_shadow());
    }

    /// A whole layer in shadow mode lets everything through, with the fields as they would be.
    async fn a_shadow_layer_lets_everything_through(h) {
        let layer = h
            .builder()
            .limit(Limit::new(rules([rule("api", Kind::FixedWindow, "2/minute")])))
            .shadow(true)
            .build()
            .unwrap();
        let app = app(layer.clone());
        for left in [1, 0, 0, 0] {
            let response = call(&app, get_from("/", CLIENT)).await;
            assert_eq!(response.status(), StatusCode::OK);
            assert_eq!(rate_limit(&response).1, left);
            assert_eq!(header(&response, "retry-after"), None);
        }
        assert_eq!(layer.policy("api").unwrap().shadow_denied(h.now()), 2);
    }

    /// The statistics: passed, denied, and the wrapped service's latency on the layer's clock.
    async fn the_stats_count_and_time_the_inner_service(h) {
        let layer = h
            .builder()
            .limit(Limit::new(rules([rule("api", Kind::SlidingLog, "2/minute")])))
            .build()
            .unwrap();
        let clock = h.clock.clone();
        let app = Router::new()
            .route("/", get(move || {
                let clock = clock.clone();
                async move {
                    clock.advance(Duration::from_millis(7));
                    "slow"
                }
            }))
            .route("/fail", get(|| async { StatusCode::BAD_GATEWAY }))
            .layer(layer.clone());
        assert_eq!(status(&app, "/").await, StatusCode::OK);
        assert_eq!(status(&app, "/fail").await, StatusCode::BAD_GATEWAY);
        assert_eq!(status(&app, "/").await, StatusCode::TOO_MANY_REQUESTS);
        let api = layer.policy("api").unwrap();
        let stats = api.requests().stats(h.now());
        use slidewin::stats::MetricEvent;
        assert_eq!(stats.count(MetricEvent::Pass), 2);
        assert_eq!(api.denials().stats(h.now()).count(MetricEvent::Block), 1);
        assert_eq!(stats.count(MetricEvent::Success), 1);
        assert_eq!(stats.count(MetricEvent::Exception), 1);
        assert_eq!(stats.max_rt(), Some(Duration::from_millis(7)));
        assert_eq!(stats.min_rt(), Some(Duration::ZERO));
        // A minute later, the window has moved past them.
        h.advance(Duration::from_secs(61));
        assert_eq!(layer.policy("api").unwrap().passed(h.now()), 0);
    }

    /// Without statistics, the limits and fields are the same and the statistics read zeros.
    async fn statistics_can_be_turned_off(h) {
        let layer = h
            .builder()
            .limit(Limit::new(rules([rule("api", Kind::SlidingLog, "1/minute")])))
            .stats(false)
            .build()
            .unwrap();
        let app = app(layer.clone());
        assert_eq!(rate_limit(&call(&app, get_from("/", CLIENT)).await), ("api".into(), 0, 60));
        assert_eq!(status(&app, "/").await, StatusCode::TOO_MANY_REQUESTS);
        let api = layer.policy("api").unwrap();
        assert_eq!((api.passed(h.now()), api.denied(h.now())), (0, 0));
    }

    /// The legacy headers, on request.
    async fn legacy_headers_on_request(h) {
        let layer = h
            .builder()
            .limit(Limit::new(rules([rule("api", Kind::SlidingLog, "5/minute")])))
            .legacy_headers(true)
            .build()
            .unwrap();
        let response = call(&app(layer), get_from("/", CLIENT)).await;
        assert_eq!(header(&response, "x-ratelimit-limit"), Some("5"));
        assert_eq!(header(&response, "x-ratelimit-remaining"), Some("4"));
        assert_eq!(header(&response, "x-ratelimit-reset"), Some("60"));
    }

    /// A clock that goes back, or jumps decades ahead, answers without a panic.
    async fn time_going_back_and_huge_jumps(h) {
        let layer = h
            .builder()
            .limit(Limit::new(rules([rule("api", Kind::SlidingLog, "1/minute")])))
            .build()
            .unwrap();
        let app = app(layer);
        assert_eq!(status(&app, "/").await, StatusCode::OK);
        h.clock.set(START.checked_sub(Duration::from_secs(3600)).unwrap());
        assert_eq!(status(&app, "/").await, StatusCode::TOO_MANY_REQUESTS);
        h.clock.set(START.checked_add(Duration::from_secs(40 * 365 * 86_400)).unwrap());
        assert_eq!(status(&app, "/").await, StatusCode::OK);
        assert_eq!(status(&app, "/").await, StatusCode::TOO_MANY_REQUESTS);
    }

    /// 64 clients at once on one key under a sliding log, with the clock moving: no window of
    /// the policy ever admits more than its limit, and each full window admits exactly it.
    async fn sixty_four_clients_never_get_more_than_the_limit(h) {
        let layer = h
            .builder()
            .limit(Limit::new(rules([rule("api", Kind::SlidingLog, "50/s")])).key(Key::global()))
            .build()
            .unwrap();
        let app = app(layer);
        // The clock moves in steps of 250 ms; between steps, 64 clients send 4 requests each.
        let mut admitted_per_step = Vec::new();
        for _ in 0..12 {
            let admitted = Arc::new(Mutex::new(0u64));
            let clients: Vec<_> = (0..64)
                .map(|_| {
                    let (app, admitted) = (app.clone(), Arc::clone(&admitted));
                    tokio::spawn(async move {
                        for _ in 0..4 {
                            if status(&app, "/").await == StatusCode::OK {
                                *admitted.lock().unwrap_or_else(PoisonError::into_inner) += 1;
                            }
                        }
                    })
                })
                .collect();
            for client in clients {
                client.await.unwrap();
            }
            admitted_per_step.push(*admitted.lock().unwrap_or_else(PoisonError::into_inner));
            h.advance(Duration::from_millis(250));
        }
        // Any four consecutive steps are one window (its oldest step leaves as the fifth
        // begins): each admits exactly the limit, since 256 requests ask for more.
        assert_eq!(admitted_per_step[0], 50, "{admitted_per_step:?}");
        for window in admitted_per_step.windows(4) {
            assert_eq!(window.iter().sum::<u64>(), 50, "{admitted_per_step:?}");
        }
    }
}

/// Calendar windows through the layer, on every backend.
mod calendar;
