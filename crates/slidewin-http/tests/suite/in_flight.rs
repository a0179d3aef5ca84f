//! Issue 33: the in-flight layer. A unit is held from the check that admits a request until
//! its response body ends, is dropped, or its lease ends; on memory under tokio's paused
//! clock, and on Redis (a release that waits, made in a task when the body is dropped).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use http::{HeaderName, Request, Response, StatusCode};
use http_body::{Body, Frame};
use slidewin::limit::{Kind, Rule, RuleSet};
use slidewin_http::{InFlightBody, InFlightLayer, Key, Limit, Memory};
use slidewin_shape::TokioClock;
use tokio::sync::oneshot;
use tower::{Layer, Service, ServiceExt};

/// A body that ends when its sender is told (or dropped), or a refusal's text.
enum Gated {
    Open(oneshot::Receiver<()>),
    Text(Option<String>),
}

impl From<String> for Gated {
    fn from(text: String) -> Gated {
        Gated::Text(Some(text))
    }
}

impl Body for Gated {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match &mut *self {
            Gated::Open(gate) => Pin::new(gate).poll(cx).map(|_| None),
            Gated::Text(text) => Poll::Ready(text.take().map(|t| Ok(Frame::data(Bytes::from(t))))),
        }
    }
}

const LEASE: Duration = Duration::from_secs(30);

fn limit() -> Limit {
    let rule = Rule::new("in_flight", Kind::Leases, "2 per 30s".parse().unwrap()).unwrap();
    Limit::new(RuleSet::from(rule)).key(Key::header(HeaderName::from_static("x-user")))
}

type Answer = Pin<Box<dyn Future<Output = Result<Response<Gated>, &'static str>> + Send>>;

/// What the tests call: the layer over a service of gated bodies.
trait Svc:
    Service<Request<()>, Response = Response<InFlightBody<Gated>>, Error = &'static str>
{
}

impl<S> Svc for S where
    S: Service<Request<()>, Response = Response<InFlightBody<Gated>>, Error = &'static str>
{
}

/// The layer over a service whose responses end when their gates are told: the gates' senders
/// come out of `gates`, one a request. A request with `x-fail` fails in the service.
fn service(gates: std::sync::mpsc::Sender<oneshot::Sender<()>>) -> impl Svc {
    let layer = InFlightLayer::with_clock(Memory::new(), TokioClock::new(), [limit()]).unwrap();
    layer.layer(tower::service_fn(move |request: Request<()>| -> Answer {
        if request.headers().contains_key("x-fail") {
            return Box::pin(std::future::ready(Err("the service failed")));
        }
        if request.headers().contains_key("x-hang") {
            return Box::pin(std::future::pending());
        }
        let (tell, gate) = oneshot::channel();
        gates.send(tell).unwrap();
        Box::pin(std::future::ready(Ok(Response::new(Gated::Open(gate)))))
    }))
}

fn request(user: &str) -> Request<()> {
    Request::get("/").header("x-user", user).body(()).unwrap()
}

async fn call<S>(svc: &mut S, user: &str) -> Response<InFlightBody<Gated>>
where
    S: Service<Request<()>, Response = Response<InFlightBody<Gated>>>,
    S::Error: std::fmt::Debug,
{
    svc.ready()
        .await
        .unwrap()
        .call(request(user))
        .await
        .unwrap()
}

/// Reads `body` to its end.
async fn drain(body: InFlightBody<Gated>) {
    let mut body = std::pin::pin!(body);
    while std::future::poll_fn(|cx| body.as_mut().poll_frame(cx))
        .await
        .is_some()
    {}
}

/// Two in flight; the third is refused with the fields; the first's body ending gives its unit
/// back, and the next is admitted.
#[tokio::test(start_paused = true)]
async fn a_unit_is_held_until_the_response_body_ends() {
    let (gates, told) = std::sync::mpsc::channel();
    let mut svc = service(gates);
    let first = call(&mut svc, "ann").await;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(
        first.headers()["ratelimit-policy"],
        r#""in_flight";q=2;qu="concurrent-requests""#
    );
    assert_eq!(first.headers()["ratelimit"], r#""in_flight";r=1;t=30"#);
    let _second = call(&mut svc, "ann").await;
    let third = call(&mut svc, "ann").await;
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(third.headers()["retry-after"], "30");
    assert_eq!(
        call(&mut svc, "bob").await.status(),
        StatusCode::OK,
        "keys apart"
    );
    // The first response ends.
    told.recv().unwrap().send(()).unwrap();
    drain(first.into_body()).await;
    let fourth = call(&mut svc, "ann").await;
    assert_eq!(fourth.status(), StatusCode::OK);
    assert_eq!(
        call(&mut svc, "ann").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

/// A client gone mid-response (the body dropped), a response never awaited (the future
/// dropped before the service answered) and a service that fails each give the unit back.
#[tokio::test(start_paused = true)]
async fn a_dropped_body_a_dropped_future_and_a_failure_give_the_unit_back() {
    let (gates, _told) = std::sync::mpsc::channel();
    let mut svc = service(gates);
    let first = call(&mut svc, "ann").await;
    let second = call(&mut svc, "ann").await;
    assert_eq!(
        call(&mut svc, "ann").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    drop(first);
    let third = call(&mut svc, "ann").await;
    assert_eq!(third.status(), StatusCode::OK);
    drop((second, third));
    // A future made and dropped unpolled holds nothing; one dropped after its check, the
    // service not having answered, gives its unit back.
    drop(svc.ready().await.unwrap().call(request("ann")));
    let held = call(&mut svc, "ann").await;
    let mut hanging = Box::pin(
        svc.ready()
            .await
            .unwrap()
            .call(with(request("ann"), "x-hang")),
    );
    let polled = std::future::poll_fn(|cx| Poll::Ready(hanging.as_mut().poll(cx).is_pending()));
    assert!(polled.await, "checked, and waiting for the service");
    assert_eq!(
        call(&mut svc, "ann").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    drop(hanging);
    assert_eq!(call(&mut svc, "ann").await.status(), StatusCode::OK);
    // A service that fails gives the unit back: one held (`held`), one more fits after it.
    let failed = svc
        .ready()
        .await
        .unwrap()
        .call(with(request("ann"), "x-fail"))
        .await;
    assert_eq!(failed.unwrap_err(), "the service failed");
    let again = call(&mut svc, "ann").await;
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(
        call(&mut svc, "ann").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    drop((held, again));
}

/// `request` with the header `name`, which the service reads.
fn with(mut request: Request<()>, name: &'static str) -> Request<()> {
    let value = http::HeaderValue::from_static("1");
    request
        .headers_mut()
        .insert(HeaderName::from_static(name), value);
    request
}

/// A response that outlives its lease (its holder hung, or died without a release): its unit
/// comes back when the lease ends, exactly.
#[tokio::test(start_paused = true)]
async fn a_unit_comes_back_when_its_lease_ends_whatever_its_body() {
    let (gates, _told) = std::sync::mpsc::channel();
    let mut svc = service(gates);
    let (_a, _b) = (call(&mut svc, "ann").await, call(&mut svc, "ann").await);
    tokio::time::advance(LEASE - Duration::from_millis(1)).await;
    assert_eq!(
        call(&mut svc, "ann").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    tokio::time::advance(Duration::from_millis(1)).await;
    let after = call(&mut svc, "ann").await;
    assert_eq!(after.status(), StatusCode::OK);
}

/// On Redis a dropped body's release waits for Redis, in a task of the runtime: it lands, and
/// the unit is given again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_a_dropped_body_gives_the_unit_back_in_a_task() {
    let server = slidewin_test_support::redis::RedisServer::start();
    let redis = slidewin_redis::RedisLimiter::connect(&server.url())
        .await
        .unwrap();
    let backend = slidewin_http::Redis::new(redis);
    let layer = InFlightLayer::new(backend, [limit()]).unwrap();
    let inner = tower::service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Gated::Text(Some("ok".into()))))
    });
    let mut svc = layer.layer(inner);
    let (a, _b) = (call(&mut svc, "ann").await, call(&mut svc, "ann").await);
    assert_eq!(
        call(&mut svc, "ann").await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    drop(a);
    // The release is a task: the check after it lands is admitted (bounded, no sleep).
    let mut admitted = false;
    for _ in 0..1_000 {
        if call(&mut svc, "ann").await.status() == StatusCode::OK {
            admitted = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(admitted, "the dropped body's unit came back");
}

/// A lease in a `RateLimitLayer` would never come back: refused, pointing to this layer.
#[test]
fn a_lease_in_a_rate_limit_layer_is_refused_by_name() {
    let err = slidewin_http::RateLimitLayer::builder(Memory::new())
        .limit(limit())
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        slidewin_http::HttpConfigError::LeasesNotReleased {
            rule: "in_flight".into()
        }
    );
    assert!(err.to_string().contains("InFlightLayer"), "{err}");
}
