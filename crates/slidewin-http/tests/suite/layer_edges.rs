//! The layer where one backend or one setting matters: tokio's paused clock, the key cap, a
//! spoofed `X-Forwarded-For`, Redis going down, values refused when the layer is built, a
//! real socket, and a property test against the limiter it wraps.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use proptest::prelude::*;
use slidewin::limit::{Kind, Rule, RuleSet};
use slidewin::time::ManualClock;
use slidewin::{Clock, Keyed, Moment};
use slidewin_http::{
    ForwardedHeader, HttpConfigError, Key, Limit, Memory, RateLimitFields, RateLimitLayer,
    TrustedProxies,
};
use slidewin_redis::{FailurePolicy, RedisLimiter};
use slidewin_shape::TokioClock;
use slidewin_store::Redis;
use slidewin_test_support::redis::RedisServer;
use tower::ServiceExt;

fn rule(name: &str, kind: Kind, quota: &str) -> Rule {
    Rule::new(name, kind, quota.parse().unwrap()).unwrap()
}

fn app(
    layer: RateLimitLayer<impl slidewin_http::Backend, impl Clock + Send + Sync + 'static>,
) -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

fn from(peer: &str) -> Request<Body> {
    let mut request = Request::get("/").body(Body::empty()).unwrap();
    request
        .extensions_mut()
        .insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
    request
}

async fn call(app: &Router, request: Request<Body>) -> Response<Body> {
    app.clone().oneshot(request).await.unwrap()
}

async fn json(response: Response<Body>) -> serde_json::Value {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).expect("a JSON body")
}

/// On tokio's clock, paused: the window moves when tokio's time is advanced, and not before.
#[tokio::test(start_paused = true)]
async fn on_tokios_paused_clock() {
    let layer = RateLimitLayer::builder(Memory::new())
        .clock(TokioClock::new())
        .limit(Limit::new(RuleSet::from(rule(
            "api",
            Kind::SlidingLog,
            "2/s",
        ))))
        .build()
        .unwrap();
    let app = app(layer);
    let client = "192.0.2.1:1000";
    assert_eq!(call(&app, from(client)).await.status(), StatusCode::OK);
    assert_eq!(call(&app, from(client)).await.status(), StatusCode::OK);
    let denied = call(&app, from(client)).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(denied.headers()["retry-after"], "1");
    tokio::time::advance(Duration::from_millis(999)).await;
    assert_eq!(
        call(&app, from(client)).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(call(&app, from(client)).await.status(), StatusCode::OK);
}

/// At the memory backend's cap of keys, a new client gets a 503 of the draft's
/// `temporary-reduced-capacity` type, while the clients being limited stay limited
/// (governor #171: a limiter keyed by IP driven out of memory).
#[tokio::test]
async fn a_new_key_at_the_cap_gets_503_and_no_limited_key_is_evicted() {
    let clock = ManualClock::new(Moment::ZERO);
    let layer = RateLimitLayer::builder(Memory::new().with_max_keys(2))
        .clock(clock.clone())
        .limit(Limit::new(RuleSet::from(rule(
            "api",
            Kind::SlidingLog,
            "1/minute",
        ))))
        .build()
        .unwrap();
    let app = app(layer.clone());
    assert_eq!(
        call(&app, from("192.0.2.1:1")).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        call(&app, from("192.0.2.2:1")).await.status(),
        StatusCode::OK
    );
    for i in 3..100 {
        let response = call(&app, from(&format!("192.0.2.{i}:1"))).await;
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            json(response).await["type"],
            slidewin_http::TEMPORARY_REDUCED_CAPACITY
        );
    }
    assert_eq!(
        call(&app, from("192.0.2.1:1")).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(layer.policy("api").unwrap().denied(clock.now()), 98);
    // A minute on, the first keys are idle and give way.
    clock.advance(Duration::from_secs(60));
    assert_eq!(
        call(&app, from("192.0.2.50:1")).await.status(),
        StatusCode::OK
    );
}

/// `tower_governor`'s "smart" extractor takes the left-most `X-Forwarded-For` address, which
/// the client writes: behind trusted proxies, the key is the right-most untrusted one, so a
/// client that writes a fresh address each time gets no fresh quota.
#[tokio::test]
async fn tower_governor_spoofed_forwarded_for_gets_no_fresh_quota() {
    let proxies = TrustedProxies::new(["10.0.0.0/8"], ForwardedHeader::XForwardedFor).unwrap();
    let layer = RateLimitLayer::builder(Memory::new())
        .limit(
            Limit::new(RuleSet::from(rule("api", Kind::SlidingLog, "3/minute")))
                .key(Key::client_ip(proxies)),
        )
        .build()
        .unwrap();
    let app = app(layer);
    let mut statuses = Vec::new();
    for i in 0..10 {
        let mut request = from("10.0.0.2:50000"); // the load balancer
        request.headers_mut().insert(
            "x-forwarded-for",
            format!("198.51.100.{i}, 203.0.113.7").parse().unwrap(),
        );
        statuses.push(call(&app, request).await.status());
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == StatusCode::OK).count(),
        3,
        "{statuses:?}"
    );
    // Another client behind the same balancer has its own quota.
    let mut other = from("10.0.0.2:50001");
    other
        .headers_mut()
        .insert("x-forwarded-for", "203.0.113.8".parse().unwrap());
    assert_eq!(call(&app, other).await.status(), StatusCode::OK);
}

/// Values the layer cannot use are refused when it is built, naming them.
#[test]
fn bad_settings_are_refused_when_the_layer_is_built() {
    let api = || RuleSet::from(rule("api", Kind::Gcra, "10/s"));
    let zero = RateLimitLayer::builder(Memory::new().with_max_keys(0))
        .limit(Limit::new(api()))
        .build()
        .unwrap_err();
    assert_eq!(
        zero,
        HttpConfigError::Limit(slidewin::ConfigError::ZeroMaxKeys)
    );
    let window = RateLimitLayer::builder(Memory::new())
        .limit(Limit::new(api()))
        .stats_window(Duration::from_secs(60), 0)
        .build()
        .unwrap_err();
    assert!(matches!(window, HttpConfigError::Limit(_)), "{window}");
    let huge = RuleSet::from(rule("huge", Kind::SlidingCounter, "1000000000000000/s"));
    let err = RateLimitLayer::builder(Memory::new())
        .limit(Limit::new(huge))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("1000000000000000"), "{err}");
    let twice = RateLimitLayer::builder(Memory::new())
        .limit(Limit::new(api()).route("/a"))
        .limit(Limit::new(
            RuleSet::new([
                rule("other", Kind::Gcra, "1/s"),
                rule("api", Kind::Gcra, "1/s"),
            ])
            .unwrap(),
        ))
        .build()
        .unwrap_err();
    assert_eq!(
        twice.to_string(),
        "two policies of the layer are named `api`; each needs a name of its own"
    );
}

/// With Redis down: a failure policy answers and the opt-in header says which way it went;
/// without one, a 503 that does not show the client where Redis is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_answers_by_the_failure_policy_and_says_so() {
    let mut server = RedisServer::start();
    let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
    let rules = || RuleSet::from(rule("api", Kind::SlidingLog, "100/minute"));
    let layer = |policy: Option<FailurePolicy>, name: &str| {
        let limiter = limiter.clone().with_prefix(name);
        let limiter = match policy {
            Some(policy) => limiter.with_failure_policy(policy),
            None => limiter,
        };
        app(RateLimitLayer::builder(Redis::new(limiter))
            .limit(Limit::new(rules()))
            .degraded_header(true)
            .build()
            .unwrap())
    };
    let (open, closed, none) = (
        layer(Some(FailurePolicy::Open), "open"),
        layer(Some(FailurePolicy::Closed), "closed"),
        layer(None, "none"),
    );
    for app in [&open, &closed, &none] {
        let response = call(app, from("192.0.2.1:1")).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert!(response.headers().get("slidewin-degraded").is_none());
    }
    server.kill();
    let response = call(&open, from("192.0.2.1:1")).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["slidewin-degraded"], "open");
    let response = call(&closed, from("192.0.2.1:1")).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["slidewin-degraded"], "closed");
    assert_eq!(response.headers()["retry-after"], "60");
    let response = call(&none, from("192.0.2.1:1")).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers().get("slidewin-degraded").is_none());
    let body = json(response).await;
    assert!(!body.to_string().contains("127.0.0.1"), "{body}");
}

/// A real server on 127.0.0.1 and a real HTTP/1.1 client: the fields cross the wire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_a_real_socket() {
    let layer = RateLimitLayer::builder(Memory::new())
        .limit(Limit::new(
            RuleSet::new([
                rule("burst", Kind::SlidingLog, "2/minute"),
                rule("daily", Kind::SlidingCounter, "100/day"),
            ])
            .unwrap(),
        ))
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        axum::serve(
            listener,
            app(layer).into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
    });
    let stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let mut answers = Vec::new();
    for _ in 0..3 {
        let request = Request::get("/")
            .header("host", address.to_string())
            .body(http_body_util::Empty::<axum::body::Bytes>::new())
            .unwrap();
        // The connection takes the next request once it has finished the last.
        sender.ready().await.unwrap();
        let response = sender.send_request(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let body = body.collect().await.unwrap().to_bytes();
        answers.push((parts, body));
    }
    let statuses: Vec<u16> = answers.iter().map(|(p, _)| p.status.as_u16()).collect();
    assert_eq!(statuses, [200, 200, 429]);
    assert_eq!(
        answers[0].0.headers["ratelimit-policy"],
        r#""burst";q=2;w=60, "daily";q=100;w=86400"#
    );
    assert_eq!(answers[0].0.headers["ratelimit"], r#""burst";r=1;t=60"#);
    assert_eq!(
        answers[2].0.headers["content-type"],
        "application/problem+json"
    );
    assert!(answers[2].0.headers.contains_key("retry-after"));
    let problem: serde_json::Value = serde_json::from_slice(&answers[2].1).unwrap();
    assert_eq!(problem["violated-policies"], serde_json::json!(["burst"]));
    server.abort();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Through the layer, each request gets what the limiter it wraps answers, directly: the
    /// same admissions, the same `RateLimit` field and `Retry-After`, for random rule sets,
    /// keys, costs and times. (Time only moves forward here: when it goes back, a key's
    /// answer depends on whether an idle sweep, which follows the map's random hash seed, has
    /// dropped it; the shared bodies test the clock going back.)
    #[test]
    fn the_layer_answers_as_the_limiter_does(
        kinds in prop::collection::vec((0..4usize, 1..6u64, 1..4u64), 1..3),
        steps in prop::collection::vec((0..3usize, 0..4u64, 0..1500u64), 1..40),
    ) {
        let kinds_of = [Kind::SlidingLog, Kind::SlidingCounter, Kind::FixedWindow, Kind::Gcra];
        let set = RuleSet::new(kinds.iter().enumerate().map(|(i, &(kind, limit, secs))| {
            Rule::new(&format!("p{i}"), kinds_of[kind], format!("{limit} per {secs}s").parse().unwrap()).unwrap()
        })).unwrap();
        let clock = ManualClock::new(Moment::from_secs(10_000));
        let layer = RateLimitLayer::builder(Memory::new())
            .clock(clock.clone())
            .limit(Limit::new(set.clone()).key(Key::header("x-key".parse().unwrap())).cost_fn(|parts| {
                parts.headers["x-cost"].to_str().unwrap().parse().unwrap()
            }))
            .build()
            .unwrap();
        let app = app(layer);
        let reference = Keyed::<String, _>::new(set.clone());
        let fields = RateLimitFields::new(&set).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        for (key, cost, ms) in steps {
            let now = clock.advance(Duration::from_millis(ms));
            let key = format!("k{key}");
            let expected = reference.check(key.as_str(), now, cost);
            let request = Request::get("/")
                .header("x-key", key.as_str())
                .header("x-cost", cost)
                .body(Body::empty())
                .unwrap();
            let response = runtime.block_on(app.clone().oneshot(request)).unwrap();
            match expected {
                Ok(decisions) => {
                    let status = if decisions.allowed() { 200 } else { 429 };
                    prop_assert_eq!(response.status().as_u16(), status);
                    prop_assert_eq!(&response.headers()["ratelimit"], &fields.rate_limit(&decisions));
                    let retry_after = slidewin_http::retry_after(&decisions.decision());
                    prop_assert_eq!(response.headers().get("retry-after"), retry_after.as_ref());
                }
                Err(_) => {
                    prop_assert_eq!(response.status().as_u16(), 429);
                    prop_assert!(response.headers().get("retry-after").is_none());
                }
            }
        }
    }
}

/// An admitted request's own `Retry-After` (a 503 of the wrapped service) is the service's:
/// the layer adds the fields and takes nothing away.
#[tokio::test]
async fn the_wrapped_services_retry_after_is_left_alone() {
    let layer = RateLimitLayer::builder(Memory::new())
        .limit(Limit::new(RuleSet::from(rule("api", Kind::Gcra, "10/s"))))
        .build()
        .unwrap();
    let app = Router::new()
        .route(
            "/",
            get(|| async {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [("retry-after", "30")],
                    "busy",
                )
            }),
        )
        .layer(layer);
    let response = call(&app, from("192.0.2.1:1")).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["retry-after"], "30");
    assert_eq!(response.headers()["ratelimit"], r#""api";r=9;t=1"#);
}

proptest! {
    /// A peer's key is its address's text, as `Display` writes it, for IPv4 and IPv6 alike.
    #[test]
    fn a_peer_key_is_the_address_text(address in any::<std::net::IpAddr>(), port in any::<u16>()) {
        let peer = SocketAddr::new(address, port);
        let mut request = Request::new(());
        request.extensions_mut().insert(peer);
        let (parts, ()) = request.into_parts();
        prop_assert_eq!(Key::peer_ip().extract(&parts), Some(address.to_string()));
    }
}

/// Issue 30: an app served without `into_make_service_with_connect_info` answered 500 to every
/// request, logged nothing, and its body did not point to the fix. Now the body says the fix
/// and one warning says it, once, however many requests fail.
#[tokio::test]
async fn issue_30_a_server_without_peer_addresses_says_the_fix_once() {
    let log = crate::support::capture_log();

    let layer = RateLimitLayer::builder(Memory::new())
        .limit(
            Limit::new(RuleSet::from(rule("per-ip", Kind::SlidingLog, "5/s"))).key(Key::peer_ip()),
        )
        .build()
        .unwrap();
    let router = app(layer);
    for _ in 0..3 {
        let no_peer = Request::get("/").body(Body::empty()).unwrap();
        let response = call(&router, no_peer).await;
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = json(response).await;
        let detail = body["detail"].as_str().unwrap();
        assert!(
            detail.contains("into_make_service_with_connect_info::<SocketAddr>()"),
            "{detail}"
        );
    }
    let text = log.text();
    assert_eq!(text.matches("WARN").count(), 1, "{text}");
    assert!(
        text.contains("into_make_service_with_connect_info"),
        "{text}"
    );

    // A client's missing header is the client's: no fix, no warning.
    let by_header = RateLimitLayer::builder(Memory::new())
        .limit(
            Limit::new(RuleSet::from(rule("per-key", Kind::SlidingLog, "5/s")))
                .key(Key::header(http::HeaderName::from_static("x-api-key"))),
        )
        .build()
        .unwrap();
    let body = json(call(&app(by_header), from("192.0.2.1:1")).await).await;
    assert_eq!(
        body["detail"],
        "the request has no key for the policy `per-key`"
    );
    let text = log.text();
    assert_eq!(text.matches("WARN").count(), 1, "{text}");
}
