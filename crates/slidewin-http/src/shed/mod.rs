//! [`ShedLayer`]: the core's [`AdaptiveLimit`] in front of a service, shedding the requests
//! above a concurrency limit that follows the service's latency. The layer and the state its
//! services share are here; the builder, the service and the handle are in the submodules.

mod builder;
mod handle;
mod service;

use std::sync::Arc;

use http::Response;
use slidewin::shed::{AdaptiveLimit, Change, Shed};
use slidewin::stats::MetricEvent;
use slidewin::{Moment, WindowMetrics};

use crate::clock::TscClock;
use crate::failures::Failures;
use crate::refusal::Refusal;

pub use self::builder::ShedLayerBuilder;
pub use self::handle::ShedHandle;
pub use self::service::{ShedFuture, ShedService};

type RefusalFn = dyn Fn(&Refusal<'_>) -> Response<String> + Send + Sync;
type ChangeFn = dyn Fn(&Change) + Send + Sync;

/// A tower [`Layer`](tower::Layer) that sheds load: it admits requests while fewer than an
/// adaptive limit are in flight, and answers the rest at once, on an [`AdaptiveLimit`] of
/// the core (see [`slidewin::shed`] for its AIMD rules). For axum and tonic: requests and
/// responses are `http`'s, their bodies generic.
///
/// - **Clones share one limit**: axum's clones per route and per connection count together.
/// - **The limit moves** with each response: a slow one (its time, from the call to the
///   response, on the layer's clock, above the limit's `slower_than`) or a failed one cuts it,
///   at most once per cooldown; a fast one, while the limit is in use, raises it by `1/L`.
/// - **What fails** is a `5xx` by default, or what [`is_failure`] says of the response's head;
///   and the wrapped service's error, unless [`count_inner_errors(false)`] makes it a plain
///   outcome, judged by its time only. A response future dropped before it completes (the
///   client went away, a timeout outside this layer) is a failure: it frees its place at once.
/// - **Refusals** are answered at once, without calling the wrapped service: a `503` with an
///   `application/problem+json` body of the `RateLimit` draft's `temporary-reduced-capacity`
///   type ([`Refusal::Shed`]; [`on_refusal`] replaces the body), and no `Retry-After`: a place
///   comes free within about one response time, sooner than the one-second granularity of
///   the header, and a client told to wait a second would leave the service idle. Envoy's
///   adaptive concurrency filter answers the same way.
/// - **Changes** of the whole limit are logged by `tracing` at debug level, and given to an
///   [`on_change`] hook.
/// - **The limit, the requests in flight and the requests shed** over the last minute, on a
///   [`ShedHandle`].
///
/// The time is the layer's clock's: a [`TscClock`] by default, slidewin-shape's `TokioClock`
/// in tests under `tokio::time::pause()`. The response body must be `From<String>` (axum's
/// `Body`, `String`, `Full<Bytes>`) for the refusals' bodies. The request's place is held until
/// the response's head, not its body's end: a streamed body is not counted.
///
/// [`is_failure`]: ShedLayerBuilder::is_failure
/// [`count_inner_errors(false)`]: ShedLayerBuilder::count_inner_errors
/// [`on_refusal`]: ShedLayerBuilder::on_refusal
/// [`on_change`]: ShedLayerBuilder::on_change
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use axum::{Router, body::Body, http::StatusCode, routing::get};
/// use http::Request;
/// use slidewin::shed::AdaptiveLimit;
/// use slidewin_http::ShedLayer;
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let layer = ShedLayer::builder(AdaptiveLimit::builder(Duration::from_millis(250)).initial(8))
///     .name("search")
///     .build()?;
/// let handle = layer.handle();
/// let app = Router::new().route("/", get(|| async { "found" })).layer(layer);
///
/// let response = app.oneshot(Request::get("/").body(Body::empty())?).await?;
/// assert_eq!(response.status(), StatusCode::OK);
/// assert_eq!((handle.limit(), handle.in_flight()), (8, 0)); // one call at a time: no growth
/// # Ok(()) }
/// ```
pub struct ShedLayer<C = TscClock> {
    shared: Arc<Shared<C>>,
}

impl<C> Clone for ShedLayer<C> {
    fn clone(&self) -> Self {
        ShedLayer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C> std::fmt::Debug for ShedLayer<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShedLayer")
            .field("name", &self.shared.name)
            .field("limit", &self.shared.limit)
            .finish_non_exhaustive()
    }
}

impl<C> ShedLayer<C> {
    /// A handle on the layer's limit, for a dashboard: the limit, the requests in flight and
    /// those shed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::shed::AdaptiveLimit;
    /// use slidewin_http::ShedLayer;
    /// let layer = ShedLayer::builder(AdaptiveLimit::builder(Duration::from_secs(1)).initial(5)).build()?;
    /// let handle = layer.handle();
    /// assert_eq!((handle.name(), handle.limit(), handle.in_flight()), ("shed", 5, 0));
    /// # Ok::<(), slidewin::shed::ShedConfigError>(())
    /// ```
    #[must_use]
    pub fn handle(&self) -> ShedHandle<C> {
        ShedHandle {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// What a layer's services and handles share.
struct Shared<C> {
    name: Box<str>,
    limit: AdaptiveLimit,
    clock: C,
    failures: Failures,
    on_change: Option<Box<ChangeFn>>,
    on_refusal: Arc<RefusalFn>,
    /// The requests shed, over the last minute (`Block`).
    shed: WindowMetrics,
}

/// A share of the layer's state that gives its limit: what a request's token holds, so that
/// the token lives in the response future, and a dropped future reports its call.
struct Holder<C>(Arc<Shared<C>>);

impl<C> AsRef<AdaptiveLimit> for Holder<C> {
    fn as_ref(&self) -> &AdaptiveLimit {
        &self.0.limit
    }
}

impl<C> Shared<C> {
    /// A change of the whole limit: logged, and given to the hook.
    fn report(&self, change: &Change) {
        tracing::debug!(
            shed = &*self.name,
            from = change.from,
            to = change.to,
            cause = %change.cause,
            "adaptive limit `{}`: {change}",
            self.name,
        );
        if let Some(hook) = &self.on_change {
            hook(change);
        }
    }

    /// The answer to a request over the limit.
    fn refuse(&self, now: Moment, shed: Shed) -> Response<String> {
        self.shed.add(now, MetricEvent::Block, 1);
        (self.on_refusal)(&Refusal::Shed {
            limit: shed.limit,
            in_flight: shed.in_flight,
        })
    }
}
