//! [`ShedHandle`]: a layer's adaptive limit seen from a dashboard.

use std::fmt;
use std::sync::Arc;

use slidewin::Clock;
use slidewin::shed::AdaptiveLimit;
use slidewin::stats::MetricEvent;

use super::Shared;
use crate::clock::TscClock;

/// A handle on a [`ShedLayer`](crate::ShedLayer)'s limit ([`handle`](crate::ShedLayer::handle)):
/// the limit now, the requests in flight, and the requests shed over the last minute. Clones
/// share the limit.
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
/// let layer = ShedLayer::builder(AdaptiveLimit::builder(Duration::from_secs(1)).initial(4)).build()?;
/// let handle = layer.handle();
/// let app = Router::new().route("/", get(|| async { StatusCode::INTERNAL_SERVER_ERROR })).layer(layer);
/// app.oneshot(Request::get("/").body(Body::empty())?).await?;
/// assert_eq!((handle.limit(), handle.in_flight(), handle.shed()), (3, 0, 0)); // 4 * 0.9
/// # Ok(()) }
/// ```
pub struct ShedHandle<C = TscClock> {
    pub(super) shared: Arc<Shared<C>>,
}

impl<C> Clone for ShedHandle<C> {
    fn clone(&self) -> Self {
        ShedHandle {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C> ShedHandle<C> {
    /// The limit's name ([`name`](crate::ShedLayerBuilder::name)).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The core's limit, for what the handle does not say (its exact estimate, its bounds).
    #[must_use]
    pub fn adaptive_limit(&self) -> &AdaptiveLimit {
        &self.shared.limit
    }

    /// The clock the layer reads.
    #[must_use]
    pub fn clock(&self) -> &C {
        &self.shared.clock
    }

    /// How many requests may be in flight now ([`AdaptiveLimit::limit`]).
    #[must_use]
    pub fn limit(&self) -> u32 {
        self.shared.limit.limit()
    }

    /// The requests admitted whose response has not come yet.
    #[must_use]
    pub fn in_flight(&self) -> u64 {
        self.shared.limit.in_flight()
    }
}

impl<C: Clock> ShedHandle<C> {
    /// The requests shed over the last minute.
    #[must_use]
    pub fn shed(&self) -> u64 {
        let now = self.shared.clock.now();
        self.shared.shed.sum(now, MetricEvent::Block)
    }
}

impl<C: Clock> fmt::Debug for ShedHandle<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedHandle")
            .field("name", &self.name())
            .field("limit", &self.limit())
            .field("in_flight", &self.in_flight())
            .field("shed", &self.shed())
            .finish_non_exhaustive()
    }
}
