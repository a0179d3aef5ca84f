//! [`CircuitBreakerLayer`]: the core's [`CircuitBreaker`] in front of a service. The layer and
//! the state its services share are here; the builder, the service and the handle are in the
//! submodules.

mod builder;
mod handle;
mod service;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use http::Response;
use http::header::{HeaderValue, RETRY_AFTER};
use slidewin::breaker::{CircuitBreaker, Rejected, State, Transition};
use slidewin::stats::MetricEvent;
use slidewin::{Clock, Moment, WindowMetrics};

use crate::clock::TscClock;
use crate::failures::Failures;
use crate::fields::whole_seconds;
use crate::refusal::Refusal;

pub use self::builder::CircuitBreakerLayerBuilder;
pub use self::handle::{BreakerHandle, BreakerSnapshot};
pub use self::service::{BreakerFuture, CircuitBreakerService};

/// What a half-open breaker with every probe out tells a client to wait: the probes decide
/// within about one response time, after which the breaker is closed or open with a known
/// wait, so the smallest whole second.
const HALF_OPEN_RETRY: Duration = Duration::from_secs(1);

type RefusalFn = dyn Fn(&Refusal<'_>) -> Response<String> + Send + Sync;
type TransitionFn = dyn Fn(&Transition) + Send + Sync;

/// A tower [`Layer`](tower::Layer) that stops calling the service it wraps while that service
/// fails, on a [`CircuitBreaker`] of the core (see [`slidewin::breaker`] for its states and
/// rules). For axum and tonic: requests and responses are `http`'s, their bodies generic.
///
/// - **Clones share one breaker**: axum's clones per route and per connection count together.
///   For a breaker per route, build a layer per route.
/// - **What fails** is a `5xx` by default, or what [`is_failure`] says of the response's head;
///   and the wrapped service's error, unless [`count_inner_errors(false)`] ignores it. Each
///   call's time, from the call to its response, is read on the layer's clock (a
///   [`TscClock`]; slidewin-shape's `TokioClock` in tests under `tokio::time::pause()`), for
///   the slow-call rule.
/// - **Refusals** are answered at once, without calling the wrapped service: a `503` with an
///   `application/problem+json` body of the `RateLimit` draft's `temporary-reduced-capacity`
///   type ([`Refusal::CircuitOpen`]; [`on_refusal`] replaces the body) and `Retry-After` in
///   whole seconds, rounded up:
///   - **open**: until the breaker lets the next probe through;
///   - **half-open with every probe out**: `1`, as the probes out decide within about one
///     response time, after which the breaker is closed, or open with a known wait;
///   - **forced open**: none, since no time is known: an operator reopens it.
/// - **Probes** of a half-open breaker pass through; one whose response future is dropped
///   before it completes (a cancelled request) is handed back, so no probe is lost.
/// - **Transitions** are logged by `tracing` at info level, and given to an
///   [`on_transition`] hook.
/// - **Statistics** for a dashboard, and the operators' controls, on a [`BreakerHandle`].
///
/// [`is_failure`]: CircuitBreakerLayerBuilder::is_failure
/// [`count_inner_errors(false)`]: CircuitBreakerLayerBuilder::count_inner_errors
/// [`on_refusal`]: CircuitBreakerLayerBuilder::on_refusal
/// [`on_transition`]: CircuitBreakerLayerBuilder::on_transition
///
/// The wrapped service's response body must be `From<String>` (axum's `Body`, `String`,
/// `Full<Bytes>`) for the refusals' bodies.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use axum::{Router, body::Body, http::StatusCode, routing::get};
/// use http::Request;
/// use slidewin::breaker::{CircuitBreaker, State};
/// use slidewin_http::CircuitBreakerLayer;
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let layer = CircuitBreakerLayer::builder(
///     CircuitBreaker::builder().error_ratio(0.5).min_calls(2).wait(Duration::from_secs(30)),
/// )
/// .build()?;
/// let handle = layer.handle();
/// let app = Router::new()
///     .route("/", get(|| async { StatusCode::BAD_GATEWAY }))
///     .layer(layer);
///
/// let call = || app.clone().oneshot(Request::get("/").body(Body::empty()).unwrap());
/// assert_eq!(call().await?.status(), StatusCode::BAD_GATEWAY);
/// assert_eq!(call().await?.status(), StatusCode::BAD_GATEWAY); // 2 of 2 failed: open
/// let refused = call().await?;
/// assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
/// assert_eq!(refused.headers()["content-type"], "application/problem+json");
/// assert_eq!(refused.headers()["retry-after"], "30");
/// assert_eq!(handle.state(), State::Open);
/// # Ok(()) }
/// ```
pub struct CircuitBreakerLayer<C = TscClock> {
    shared: Arc<Shared<C>>,
}

impl<C> Clone for CircuitBreakerLayer<C> {
    fn clone(&self) -> Self {
        CircuitBreakerLayer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C> std::fmt::Debug for CircuitBreakerLayer<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CircuitBreakerLayer")
            .field("name", &self.shared.name)
            .field("breaker", &self.shared.breaker)
            .finish_non_exhaustive()
    }
}

impl<C> CircuitBreakerLayer<C> {
    /// A handle on the layer's breaker, for a dashboard and for operators: its state,
    /// statistics and last transition, and `force_open`, `disable` and `reset`.
    ///
    /// ```
    /// use slidewin::breaker::{CircuitBreaker, State};
    /// use slidewin_http::CircuitBreakerLayer;
    ///
    /// let layer = CircuitBreakerLayer::builder(CircuitBreaker::builder().error_ratio(0.5))
    ///     .name("payments")
    ///     .build()?;
    /// let handle = layer.handle();
    /// assert_eq!((handle.name(), handle.state()), ("payments", State::Closed));
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    #[must_use]
    pub fn handle(&self) -> BreakerHandle<C> {
        BreakerHandle {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// What a layer's services and handles share.
struct Shared<C> {
    name: Box<str>,
    breaker: CircuitBreaker,
    clock: C,
    failures: Failures,
    on_transition: Option<Box<TransitionFn>>,
    on_refusal: Arc<RefusalFn>,
    /// The calls refused, over the last minute (`Block`).
    refused: WindowMetrics,
    /// Written at transitions only, which are rare: a lock costs the hot path nothing.
    last: Mutex<Option<Transition>>,
}

impl<C: Clock> Shared<C> {
    /// A transition: remembered, logged, and given to the hook.
    fn report(&self, transition: &Transition) {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(*transition);
        let stats = transition.stats;
        tracing::info!(
            breaker = &*self.name,
            from = %transition.from,
            to = %transition.to,
            cause = %transition.cause,
            calls = stats.calls,
            errors = stats.errors,
            slow = stats.slow,
            "circuit breaker `{}`: {transition}",
            self.name,
        );
        if let Some(hook) = &self.on_transition {
            hook(transition);
        }
    }

    /// The answer to a call the breaker did not let through.
    fn refuse(&self, now: Moment, rejected: Rejected) -> Response<String> {
        self.refused.add(now, MetricEvent::Block, 1);
        let retry_after = match rejected.state {
            State::HalfOpen => Some(HALF_OPEN_RETRY),
            _ => rejected.retry_after,
        };
        let refusal = Refusal::CircuitOpen {
            state: rejected.state,
            retry_after,
        };
        let mut response = (self.on_refusal)(&refusal);
        if let Some(wait) = retry_after {
            let seconds = HeaderValue::from(whole_seconds(wait));
            response.headers_mut().insert(RETRY_AFTER, seconds);
        }
        response
    }
}
