//! The circuit breaker layer on an axum `Router` (and on a `tower::service_fn` that fails),
//! under `tokio::time::pause()`: the breaker's time, the calls' times and the waits are
//! tokio's paused clock, moved by the handlers' sleeps and `tokio::time::advance`, never the
//! wall clock.

use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use slidewin::breaker::{CallStats, CircuitBreaker, CircuitBreakerBuilder, State};
use slidewin_http::{
    BreakerHandle, CircuitBreakerLayer, CircuitBreakerLayerBuilder, TEMPORARY_REDUCED_CAPACITY,
};
use slidewin_shape::TokioClock;
use tokio::time::{Instant, advance};
use tower::{Service, ServiceBuilder, ServiceExt};

/// What the handler answers, how long it takes, and how often it was called.
#[derive(Default)]
struct Backend {
    status: AtomicU16,
    delay_ms: AtomicU64,
    calls: AtomicU32,
}

impl Backend {
    fn answer(&self, status: u16, delay_ms: u64) {
        self.status.store(status, Ordering::Relaxed);
        self.delay_ms.store(delay_ms, Ordering::Relaxed);
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::Relaxed)
    }
}

/// A router behind a breaker on tokio's clock, its backend, handle and transitions.
struct Harness {
    app: Router,
    backend: Arc<Backend>,
    handle: BreakerHandle<TokioClock>,
    log: Arc<Mutex<Vec<String>>>,
}

type Builder = CircuitBreakerLayerBuilder<TokioClock>;

/// Trips on half of at least 4 calls failing; waits 10 s; 2 probes.
fn breaker() -> CircuitBreakerBuilder {
    CircuitBreaker::builder()
        .error_ratio(0.5)
        .min_calls(4)
        .wait(Duration::from_secs(10))
        .probes(2)
}

/// A layer over `breaker`, its transitions logged, set up further by `setup`.
fn layer(
    breaker: CircuitBreakerBuilder,
    setup: impl FnOnce(Builder) -> Builder,
) -> (CircuitBreakerLayer<TokioClock>, Arc<Mutex<Vec<String>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let into = Arc::clone(&log);
    let builder = CircuitBreakerLayer::builder(breaker)
        .clock(TokioClock::new())
        .on_transition(move |t| into.lock().unwrap().push(t.to_string()));
    (setup(builder).build().unwrap(), log)
}

fn harness(breaker: CircuitBreakerBuilder, setup: impl FnOnce(Builder) -> Builder) -> Harness {
    let (layer, log) = layer(breaker, setup);
    let backend = Arc::new(Backend::default());
    backend.answer(200, 20);
    let state = Arc::clone(&backend);
    let handler = move || {
        let backend = Arc::clone(&state);
        async move {
            backend.calls.fetch_add(1, Ordering::Relaxed);
            let delay = backend.delay_ms.load(Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            StatusCode::from_u16(backend.status.load(Ordering::Relaxed)).unwrap()
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
    async fn call(&self) -> Response<Body> {
        let request = Request::get("/").body(Body::empty()).unwrap();
        self.app.clone().oneshot(request).await.unwrap()
    }

    /// `n` calls that the backend answers with `status`.
    async fn calls(&self, n: usize, status: u16) {
        self.backend.answer(status, 20);
        for _ in 0..n {
            assert_eq!(self.call().await.status(), status);
        }
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

async fn json(response: Response<Body>) -> serde_json::Value {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).expect("a JSON body")
}

fn retry_after(response: &Response<Body>) -> Option<&str> {
    response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap())
}

/// A failing backend trips the breaker once the window holds `min_calls`; then every call is
/// answered at once, without the backend, by a problem+json `503` with `Retry-After`.
#[tokio::test(start_paused = true)]
async fn trips_after_min_calls_then_answers_503_at_once() {
    let h = harness(breaker(), |b| b);
    h.calls(3, 500).await;
    assert_eq!(h.handle.state(), State::Closed);
    assert_eq!(
        h.handle.stats(),
        CallStats {
            calls: 3,
            errors: 3,
            slow: 0
        }
    );
    h.calls(1, 500).await;
    assert_eq!(h.handle.state(), State::Open);
    assert_eq!(
        h.log(),
        ["closed -> open at 80ms: error ratio reached (4 calls, 4 errors, 0 slow)"]
    );

    let before = Instant::now();
    let refused = h.call().await;
    assert_eq!(Instant::now(), before, "answered at once");
    assert_eq!(h.backend.calls(), 4, "the backend is not called");
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        refused.headers()["content-type"],
        "application/problem+json"
    );
    assert_eq!(retry_after(&refused), Some("10"));
    let body = json(refused).await;
    assert_eq!(body["type"], TEMPORARY_REDUCED_CAPACITY);
    assert_eq!(
        body["type"],
        "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
    );
    assert_eq!(body["status"], 503);
    assert_eq!(body["title"], "Temporarily reduced capacity");
    assert_eq!(body["retry-after"], 10);
    assert_eq!(
        body["detail"],
        "the circuit breaker is open: the service behind it is not being called"
    );

    let snapshot = h.handle.snapshot();
    assert_eq!((snapshot.state, snapshot.refused), (State::Open, 1));
    assert_eq!(snapshot.window.errors, 4);
    assert_eq!(snapshot.last_transition.map(|t| t.to), Some(State::Open));
}

/// After the wait the probes pass; when they succeed the breaker closes.
#[tokio::test(start_paused = true)]
async fn the_probes_pass_after_the_wait_and_close_it_on_success() {
    let h = harness(breaker(), |b| b);
    h.calls(4, 500).await; // open at 80 ms, until 10.08 s
    h.backend.answer(200, 20);
    advance(Duration::from_millis(9_999)).await;
    let refused = h.call().await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(retry_after(&refused), Some("1"));
    assert_eq!(h.handle.state(), State::Open);

    advance(Duration::from_millis(1)).await;
    assert_eq!(h.handle.state(), State::HalfOpen);
    h.calls(2, 200).await;
    assert_eq!(h.backend.calls(), 6);
    assert_eq!(h.handle.state(), State::Closed);
    assert_eq!(
        h.log()[1..],
        [
            "open -> half-open at 10.08s: wait elapsed (0 calls, 0 errors, 0 slow)",
            "half-open -> closed at 10.12s: probes passed (2 calls, 0 errors, 0 slow)",
        ]
    );
    // Closed with an empty window: three new failures do not trip it.
    h.calls(3, 500).await;
    assert_eq!(h.handle.state(), State::Closed);
}

/// A failed probe opens the breaker again, for another wait.
#[tokio::test(start_paused = true)]
async fn a_failed_probe_opens_it_again() {
    let h = harness(breaker().probes(1), |b| b);
    h.calls(4, 500).await;
    advance(Duration::from_secs(10)).await;
    h.calls(1, 503).await; // the probe, at 10.08 s, fails at 10.1 s
    assert_eq!(
        h.log()[2],
        "half-open -> open at 10.1s: probes reached the error ratio (1 calls, 1 errors, 0 slow)"
    );
    let refused = h.call().await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(retry_after(&refused), Some("10"));
    assert_eq!(h.backend.calls(), 5);
}

/// A predicate on the response's head replaces the `5xx` default.
#[tokio::test(start_paused = true)]
async fn a_predicate_on_the_response_decides_what_fails() {
    let h = harness(breaker(), |b| {
        b.is_failure(|head| head.status == StatusCode::TOO_MANY_REQUESTS)
    });
    h.calls(8, 500).await;
    assert_eq!(h.handle.state(), State::Closed);
    assert_eq!(h.handle.stats().errors, 0);
    h.calls(8, 429).await; // 8 of 16 failed
    assert_eq!(h.handle.state(), State::Open);
}

/// The slow-call rule reads each call's time on the layer's clock.
#[tokio::test(start_paused = true)]
async fn slow_calls_are_timed_on_the_layers_clock() {
    let breaker = CircuitBreaker::builder()
        .slow_call_ratio(1.0, Duration::from_millis(100))
        .min_calls(2);
    let h = harness(breaker, |b| b);
    h.backend.answer(200, 150);
    h.call().await;
    h.call().await;
    assert_eq!(
        h.log(),
        ["closed -> open at 300ms: slow-call ratio reached (2 calls, 0 errors, 2 slow)"]
    );
}

/// A service that answers as `mode` says: an error (`ERR`), or a response of that status.
fn flaky(
    mode: Arc<AtomicU16>,
) -> impl Service<Request<String>, Response = Response<String>, Error = &'static str> + Clone {
    tower::service_fn(move |_: Request<String>| {
        let mode = mode.load(Ordering::Relaxed);
        async move {
            if mode == ERR {
                return Err("connection refused");
            }
            let mut response = Response::new(String::new());
            *response.status_mut() = StatusCode::from_u16(mode).unwrap();
            Ok(response)
        }
    })
}

const ERR: u16 = 0;

async fn send<S>(service: &S) -> Result<Response<String>, &'static str>
where
    S: Service<Request<String>, Response = Response<String>, Error = &'static str> + Clone,
{
    service.clone().oneshot(Request::new(String::new())).await
}

/// The wrapped service's error is a failure by default.
#[tokio::test(start_paused = true)]
async fn the_inner_services_error_is_a_failure() {
    let (layer, _) = layer(breaker(), |b| b);
    let handle = layer.handle();
    let service = ServiceBuilder::new()
        .layer(layer)
        .service(flaky(Arc::new(AtomicU16::new(ERR))));
    for _ in 0..4 {
        assert_eq!(send(&service).await.unwrap_err(), "connection refused");
    }
    assert_eq!(handle.state(), State::Open);
    let refused = send(&service).await.unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
}

/// With `count_inner_errors(false)` an error counts for nothing, and a probe that ends in one
/// is handed back: the next call is let through as a probe.
#[tokio::test(start_paused = true)]
async fn ignored_inner_errors_count_for_nothing_and_give_the_probe_back() {
    let (layer, _) = layer(breaker().probes(1), |b| b.count_inner_errors(false));
    let handle = layer.handle();
    let mode = Arc::new(AtomicU16::new(ERR));
    let service = ServiceBuilder::new()
        .layer(layer)
        .service(flaky(Arc::clone(&mode)));
    for _ in 0..10 {
        assert!(send(&service).await.is_err());
    }
    assert_eq!(handle.stats(), CallStats::default());

    mode.store(500, Ordering::Relaxed);
    for _ in 0..4 {
        assert_eq!(send(&service).await.unwrap().status(), 500);
    }
    assert_eq!(handle.state(), State::Open);
    advance(Duration::from_secs(10)).await;
    mode.store(ERR, Ordering::Relaxed);
    assert!(send(&service).await.is_err(), "the probe, ignored");
    mode.store(200, Ordering::Relaxed);
    assert_eq!(send(&service).await.unwrap().status(), StatusCode::OK);
    assert_eq!(handle.state(), State::Closed);
}

/// A probe whose response future is dropped before it completes (the client went away) is
/// handed back: the breaker does not stay half-open with its only probe lost.
#[tokio::test(start_paused = true)]
async fn a_dropped_response_future_gives_its_probe_back() {
    let h = harness(breaker().probes(1), |b| b);
    h.calls(4, 500).await;
    advance(Duration::from_secs(10)).await;
    h.backend.answer(200, 1_000);
    let request = Request::get("/").body(Body::empty()).unwrap();
    let mut probe = Box::pin(h.app.clone().oneshot(request));
    let early = tokio::time::timeout(Duration::from_millis(1), probe.as_mut()).await;
    assert!(early.is_err(), "the probe is still out");
    assert_eq!(h.backend.calls(), 5);

    // Its only probe out, a half-open breaker refuses, with a second's `Retry-After`.
    let refused = h.call().await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(retry_after(&refused), Some("1"));
    assert_eq!(json(refused).await["retry-after"], 1);
    assert_eq!(h.handle.state(), State::HalfOpen);

    drop(probe);
    h.calls(1, 200).await; // the probe handed back, and taken again
    assert_eq!(h.handle.state(), State::Closed);
    assert_eq!(h.backend.calls(), 6);
}

/// `Retry-After` is the time until the next probe in whole seconds, rounded up, exact at each
/// second and a millisecond either side.
#[tokio::test(start_paused = true)]
async fn retry_after_rounds_up_to_whole_seconds() {
    let breaker = CircuitBreaker::builder()
        .error_count(1)
        .min_calls(1)
        .wait(Duration::from_millis(2_500));
    let h = harness(breaker, |b| b);
    h.backend.answer(500, 0);
    h.call().await; // open at 0 ms, until 2.5 s
    let mut seen = Vec::new();
    for step in [0, 500, 1, 998, 1, 999] {
        advance(Duration::from_millis(step)).await;
        let refused = h.call().await;
        seen.push(retry_after(&refused).unwrap().to_string());
    }
    // 2.5 s, 2 s, 1.999 s, 1.001 s, 1 s, 1 ms left.
    assert_eq!(seen, ["3", "2", "2", "2", "1", "1"]);
    advance(Duration::from_millis(1)).await;
    h.calls(1, 200).await; // the probe
}

/// Forced open, every call is refused without `Retry-After` (no time is known); disabled,
/// every call passes, uncounted; a reset closes it.
#[tokio::test(start_paused = true)]
async fn forced_open_has_no_retry_after_and_disabled_lets_everything_through() {
    let h = harness(breaker(), |b| b);
    h.handle.force_open();
    let refused = h.call().await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(retry_after(&refused), None);
    let body = json(refused).await;
    assert!(body.get("retry-after").is_none(), "{body}");
    assert_eq!(
        body["detail"],
        "the circuit breaker is forced-open: the service behind it is not being called"
    );
    assert_eq!(h.backend.calls(), 0);

    h.handle.disable();
    h.calls(10, 500).await;
    assert_eq!(h.handle.state(), State::Disabled);
    h.handle.reset();
    assert_eq!(h.handle.stats(), CallStats::default());
    assert_eq!(
        h.log(),
        [
            "closed -> forced-open at 0ns: forced open (0 calls, 0 errors, 0 slow)",
            "forced-open -> disabled at 0ns: disabled (0 calls, 0 errors, 0 slow)",
            "disabled -> closed at 200ms: reset (0 calls, 0 errors, 0 slow)",
        ]
    );
}

/// Each transition is a `tracing` event at info level, naming the breaker.
#[tokio::test(start_paused = true)]
async fn each_transition_is_logged_at_info() {
    let log = crate::support::capture_log();

    let h = harness(breaker(), |b| b.name("payments"));
    h.calls(4, 500).await;
    let text = log.text();
    assert_eq!(text.matches(" INFO ").count(), 1, "{text}");
    assert!(
        text.contains("circuit breaker `payments`: closed -> open at 80ms"),
        "{text}"
    );
    assert!(text.contains("breaker=\"payments\""), "{text}");
}
