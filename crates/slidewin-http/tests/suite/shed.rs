//! The load-shedding layer on an axum `Router` (and on a `tower::service_fn` that fails),
//! under `tokio::time::pause()`: the requests' times are tokio's paused clock, moved by the
//! handlers' sleeps, never the wall clock.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use slidewin::shed::{AdaptiveLimit, AdaptiveLimitBuilder};
use slidewin_http::{ShedHandle, ShedLayer, TEMPORARY_REDUCED_CAPACITY};
use slidewin_shape::TokioClock;
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt};

/// How long the handler takes, and how often it was called.
#[derive(Default)]
struct Backend {
    delay_ms: AtomicU64,
    calls: AtomicU32,
}

struct Harness {
    app: Router,
    backend: Arc<Backend>,
    handle: ShedHandle<TokioClock>,
    log: Arc<Mutex<Vec<String>>>,
}

/// Slow above 100 ms, from 1 to 100, starting at `initial`.
fn limit(initial: u32) -> AdaptiveLimitBuilder {
    AdaptiveLimit::builder(Duration::from_millis(100))
        .max(100)
        .initial(initial)
}

/// A router behind a shed layer on tokio's clock, its changes logged; the handler answers
/// `200` after the backend's delay.
fn harness(limit: AdaptiveLimitBuilder) -> Harness {
    let log = Arc::new(Mutex::new(Vec::new()));
    let into = Arc::clone(&log);
    let layer = ShedLayer::builder(limit)
        .clock(TokioClock::new())
        .on_change(move |c| into.lock().unwrap().push(c.to_string()))
        .build()
        .unwrap();
    let backend = Arc::new(Backend::default());
    let state = Arc::clone(&backend);
    let handler = move || {
        let backend = Arc::clone(&state);
        async move {
            backend.calls.fetch_add(1, Ordering::Relaxed);
            let delay = backend.delay_ms.load(Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            StatusCode::OK
        }
    };
    Harness {
        handle: layer.handle(),
        app: Router::new().route("/", get(handler)).layer(layer),
        backend,
        log,
    }
}

impl Harness {
    fn request(&self) -> impl Future<Output = Response<Body>> + Send + 'static {
        let app = self.app.clone();
        async move {
            app.oneshot(Request::get("/").body(Body::empty()).unwrap())
                .await
                .unwrap()
        }
    }

    /// `n` requests at once, each taking `delay_ms`; their statuses.
    async fn round(&self, n: u32, delay_ms: u64) -> Vec<StatusCode> {
        self.backend.delay_ms.store(delay_ms, Ordering::Relaxed);
        let tasks: Vec<_> = (0..n).map(|_| tokio::spawn(self.request())).collect();
        let mut statuses = Vec::new();
        for task in tasks {
            statuses.push(task.await.unwrap().status());
        }
        statuses
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

/// Full rounds of fast requests raise the limit by about one a round.
#[tokio::test(start_paused = true)]
async fn the_limit_grows_under_fast_successful_calls() {
    let h = harness(limit(4));
    for _ in 0..10 {
        let n = h.handle.limit();
        assert!(h.round(n, 10).await.iter().all(|s| *s == StatusCode::OK));
    }
    // Round 1: 4 + 1/4 + ... = 4.71 (the last of a round, alone, is not the limit in use).
    assert_eq!(h.log()[0], "limit 4 -> 5 at 20ms: a fast call");
    assert_eq!(h.handle.limit(), 9);
    assert_eq!(h.handle.in_flight(), 0);
}

/// Slow requests cut the limit, once per cooldown (the threshold, 100 ms, by default).
#[tokio::test(start_paused = true)]
async fn the_limit_shrinks_under_slow_calls() {
    let h = harness(limit(10));
    for _ in 0..3 {
        assert_eq!(h.round(4, 150).await, [StatusCode::OK; 4]);
    }
    // One cut a round: the other three of a round end within its cooldown.
    assert_eq!(
        h.log(),
        [
            "limit 10 -> 9 at 150ms: a slow call",
            "limit 9 -> 8 at 300ms: a slow call",
            "limit 8 -> 7 at 450ms: a slow call",
        ]
    );
    assert_eq!(h.handle.limit(), 7);
}

/// At the limit a request is answered at once with a problem+json `503` and no `Retry-After`,
/// without calling the backend.
#[tokio::test(start_paused = true)]
async fn sheds_at_the_limit_with_503_at_once() {
    let h = harness(limit(2));
    h.backend.delay_ms.store(1_000, Ordering::Relaxed);
    let busy: Vec<_> = (0..2).map(|_| tokio::spawn(h.request())).collect();
    tokio::task::yield_now().await; // both are in the handler
    assert_eq!(
        (
            h.handle.in_flight(),
            h.backend.calls.load(Ordering::Relaxed)
        ),
        (2, 2)
    );

    let before = Instant::now();
    let shed = h.request().await;
    assert_eq!(Instant::now(), before, "answered at once");
    assert_eq!(
        h.backend.calls.load(Ordering::Relaxed),
        2,
        "the backend is not called"
    );
    assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(shed.headers()["content-type"], "application/problem+json");
    assert!(shed.headers().get("retry-after").is_none());
    let bytes = shed.into_body().collect().await.unwrap().to_bytes();
    let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(body["type"], TEMPORARY_REDUCED_CAPACITY);
    assert_eq!(body["status"], 503);
    assert_eq!(
        body["detail"],
        "load shed: 2 requests in flight, at the adaptive limit of 2"
    );
    assert!(body.get("retry-after").is_none());
    assert_eq!(h.handle.shed(), 1);

    for task in busy {
        assert_eq!(task.await.unwrap().status(), StatusCode::OK);
    }
    assert_eq!(h.round(1, 0).await, [StatusCode::OK]);
}

/// A response future dropped before it completes frees its place at once, and counts as a
/// failure.
#[tokio::test(start_paused = true)]
async fn a_dropped_future_frees_its_place() {
    let h = harness(limit(1).min(1));
    h.backend.delay_ms.store(1_000, Ordering::Relaxed);
    let mut pending = Box::pin(h.request());
    let early = tokio::time::timeout(Duration::from_millis(1), pending.as_mut()).await;
    assert!(early.is_err(), "still in flight");
    assert_eq!(h.handle.in_flight(), 1);
    assert_eq!(h.request().await.status(), StatusCode::SERVICE_UNAVAILABLE);

    drop(pending);
    assert_eq!(h.handle.in_flight(), 0);
    assert_eq!(h.handle.adaptive_limit().estimate(), 1.0); // a failure: cut, down to min 1
    assert_eq!(h.round(1, 0).await, [StatusCode::OK]);
}

/// The wrapped service's error is a failure by default; with `count_inner_errors(false)`, a
/// fast one is a fast call.
#[tokio::test(start_paused = true)]
async fn the_inner_services_error_is_a_failure_unless_told_otherwise() {
    for (count, estimate) in [(true, 9.0), (false, 10.0)] {
        let layer = ShedLayer::builder(limit(10))
            .clock(TokioClock::new())
            .count_inner_errors(count)
            .build()
            .unwrap();
        let handle = layer.handle();
        let service = ServiceBuilder::new()
            .layer(layer)
            .service(tower::service_fn(|_: Request<String>| async {
                Err::<Response<String>, _>("connection refused")
            }));
        let sent = service.oneshot(Request::new(String::new())).await;
        assert_eq!(sent.unwrap_err(), "connection refused");
        // Alone in flight, a fast call does not raise a limit of 10: it stays.
        assert_eq!(
            handle.adaptive_limit().estimate(),
            estimate,
            "count: {count}"
        );
    }
}
