//! The reserve layer: an estimate charged when a request is admitted, settled at the cost its
//! response (or its handler) reports; the same answers in memory, on Redis and on a Redis
//! Cluster, on a `ManualClock`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Extension};
use axum::routing::post;
use http::{HeaderName, Request, Response, StatusCode};
use slidewin::Moment;
use slidewin::limit::{Kind, Rule, RuleSet};
use slidewin::time::ManualClock;
use slidewin_http::{
    Backend, HttpConfigError, Key, Limit, Memory, ReserveLayer, SettleFrom, Settlement,
};
use tower::ServiceExt;

use slidewin_redis::RedisLimiter;
use slidewin_store::Redis;
use slidewin_test_support::redis::{RedisCluster, RedisServer};

use crate::support::members;

const START: Moment = Moment::from_secs(1_700_000_000);
const USAGE: HeaderName = HeaderName::from_static("x-usage-total-tokens");

/// 1,000 tokens a minute and 5,000 a day per API key, exact; each request reserves what its
/// `x-max-tokens` asks for (300 without it).
fn limit() -> Limit {
    let tokens = RuleSet::new([
        Rule::new("minute", Kind::SlidingLog, "1000/minute".parse().unwrap()).unwrap(),
        Rule::new("day", Kind::SlidingLog, "5000/day".parse().unwrap()).unwrap(),
    ])
    .unwrap();
    Limit::new(tokens)
        .key(Key::header(HeaderName::from_static("x-api-key")))
        .cost_fn(|parts| {
            let asked = parts.headers.get("x-max-tokens");
            asked
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(300)
        })
}

/// `/used` answers with the tokens its `x-used` header says (as an upstream's count);
/// `/silent` says nothing; `/handler` settles through its `Settlement` at `x-used`.
fn app<B: Backend>(backend: B, clock: ManualClock) -> Router {
    let layer =
        ReserveLayer::with_clock(backend, clock, [limit()], SettleFrom::header(USAGE)).unwrap();
    let used = |request: &Request<Body>| -> u64 {
        let used = request.headers().get("x-used").unwrap();
        used.to_str().unwrap().parse().unwrap()
    };
    Router::new()
        .route(
            "/used",
            post(move |request: Request<Body>| async move {
                Response::builder()
                    .header(USAGE, used(&request))
                    .body(Body::from("done"))
                    .unwrap()
            }),
        )
        .route("/silent", post(|| async { "done" }))
        .route(
            "/handler",
            post(
                move |Extension(settlement): Extension<Settlement>, request: Request<Body>| {
                    let used = used(&request);
                    async move {
                        assert!(settlement.settle(used).await.unwrap());
                        format!("settled at {}", settlement.reservation().units())
                    }
                },
            ),
        )
        .layer(layer)
}

async fn call(app: &Router, path: &str, used: Option<u64>) -> Response<Body> {
    let mut request = Request::post(path).header("x-api-key", "k1");
    if let Some(used) = used {
        request = request.header("x-used", used);
    }
    let mut request = request.body(Body::empty()).unwrap();
    let peer: SocketAddr = "203.0.113.7:4000".parse().unwrap();
    request.extensions_mut().insert(ConnectInfo(peer));
    app.clone().oneshot(request).await.unwrap()
}

/// The binding policy's name and units left, from `RateLimit`.
fn left(response: &Response<Body>) -> (String, i64) {
    let field = response.headers()["ratelimit"].to_str().unwrap();
    let (name, params) = members(field).remove(0);
    (name, params[0].1)
}

async fn settles_from_the_response_and_the_handler<B: Backend>(backend: B) {
    let clock = ManualClock::new(START);
    let app = app(backend, clock.clone());
    // 300 reserved, 450 used: the next reservation of 300 finds 1000 - 450 - 300 left.
    assert_eq!(
        left(&call(&app, "/used", Some(450)).await),
        ("minute".into(), 700)
    );
    assert_eq!(
        left(&call(&app, "/silent", None).await),
        ("minute".into(), 250)
    );
    // A silent response kept its 300: 1000 - 450 - 300 - 300 = -50, so 300 more do not fit.
    clock.advance(Duration::from_secs(1));
    let refused = call(&app, "/silent", None).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    // The first request's 450 leave at 60 s: the 300 fit from then.
    assert_eq!(refused.headers()["retry-after"], "59");
    clock.advance(Duration::from_secs(59));
    // The handler settles its 300 at 10: 1000 - 10 - 300 left after the next.
    let settled = call(&app, "/handler", Some(10)).await;
    assert_eq!(settled.status(), StatusCode::OK);
    assert_eq!(
        left(&call(&app, "/silent", None).await),
        ("minute".into(), 690)
    );
}

async fn over_use_is_debt_that_later_requests_wait_out<B: Backend>(backend: B) {
    let clock = ManualClock::new(START);
    let app = app(backend, clock.clone());
    // 300 reserved, 1,600 used: 600 over the minute's 1,000.
    assert_eq!(
        call(&app, "/used", Some(1_600)).await.status(),
        StatusCode::OK
    );
    clock.advance(Duration::from_secs(30));
    let refused = call(&app, "/silent", None).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "30");
    // Once it leaves, the day still counts it: 5000 - 1600 - 300.
    clock.advance(Duration::from_secs(30));
    let admitted = call(&app, "/silent", None).await;
    assert_eq!(admitted.status(), StatusCode::OK);
    // The day binds: 3,100 of 5,000 left is less than the minute's 700 of 1,000.
    assert_eq!(left(&admitted), ("day".into(), 3_100));
}

macro_rules! on_every_backend {
    ($($name:ident),*) => {
        mod memory {
            $(#[tokio::test]
            async fn $name() {
                super::$name(slidewin_http::Memory::new()).await;
            })*
        }
        mod redis {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let server = RedisServer::start();
                let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
                super::$name(Redis::new(limiter).with_layer_clock()).await;
            })*
        }
        mod cluster {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let cluster: Arc<RedisCluster> = RedisCluster::shared();
                let urls = cluster.urls();
                let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
                let limiter = RedisLimiter::connect_cluster(&urls)
                    .await
                    .unwrap()
                    .with_prefix(concat!("reserve-", stringify!($name)));
                super::$name(Redis::new(limiter).with_layer_clock()).await;
            })*
        }
    };
}

on_every_backend!(
    settles_from_the_response_and_the_handler,
    over_use_is_debt_that_later_requests_wait_out
);

#[test]
fn a_lease_is_refused_by_name() {
    let held = Rule::new("held", Kind::Leases, "2 per 30s".parse().unwrap()).unwrap();
    let err = ReserveLayer::new(
        Memory::new(),
        [Limit::new(RuleSet::from(held))],
        SettleFrom::handler(),
    )
    .unwrap_err();
    assert_eq!(
        err,
        HttpConfigError::LeasesNotReleased {
            rule: "held".into()
        }
    );
}

/// A closure on the response's head: a failed upstream used nothing, so its reservation is
/// given back; a header that is no number keeps the estimate.
#[tokio::test]
async fn a_closure_settles_a_failure_at_nothing_and_garbage_keeps_the_estimate() {
    let settle = SettleFrom::response(|head| (!head.status.is_success()).then_some(0));
    let layer = ReserveLayer::with_clock(Memory::new(), ManualClock::new(START), [limit()], settle)
        .unwrap();
    let app = Router::new()
        .route(
            "/fails",
            post(|| async { (StatusCode::BAD_GATEWAY, "upstream down") }),
        )
        .route("/silent", post(|| async { "done" }))
        .layer(layer);
    assert_eq!(
        call(&app, "/fails", None).await.status(),
        StatusCode::BAD_GATEWAY
    );
    // The failure's 300 came back: the next 300 leave 700.
    assert_eq!(
        left(&call(&app, "/silent", None).await),
        ("minute".into(), 700)
    );

    let garbage = SettleFrom::header(USAGE);
    let layer =
        ReserveLayer::with_clock(Memory::new(), ManualClock::new(START), [limit()], garbage)
            .unwrap();
    let app = Router::new()
        .route("/garbage", post(|| async { ([(USAGE, "lots")], "done") }))
        .layer(layer);
    assert_eq!(
        left(&call(&app, "/garbage", None).await),
        ("minute".into(), 700)
    );
    assert_eq!(
        left(&call(&app, "/garbage", None).await),
        ("minute".into(), 400)
    );
}
