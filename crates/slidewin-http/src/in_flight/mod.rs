//! [`InFlightLayer`]: concurrency limits ([`Leases`](slidewin::limit::Leases)) held for as long
//! as a response is, from the check that admits a request until its response body ends or is
//! dropped.

mod body;
mod service;

use std::fmt;
use std::sync::Arc;

use slidewin::limit::Kind;
use slidewin_store::Backend;

pub use body::InFlightBody;
pub use service::InFlight;

use crate::armed::Limits;
use crate::clock::TscClock;
use crate::error::HttpConfigError;
use crate::limit::Limit;

/// A tower [`Layer`](tower::Layer) that holds each request under a concurrency limit while it
/// is in flight: at most N per key, each unit taken by the check that admits the request and
/// given back when its response body ends, when the body or the response future is dropped
/// (the client went away), or, if none of that ever happens (a process killed mid-request, a
/// release lost on the way to Redis), when its lease ends. So no request holds a unit longer
/// than its lease, and nothing leaks.
///
/// Its limits hold [`Kind::Leases`] rules only; put rates in a
/// [`RateLimitLayer`](crate::RateLimitLayer) outside it. A refused request gets `429` with the
/// `RateLimit-Policy` (`qu="concurrent-requests"`), `RateLimit` and `Retry-After` fields (the
/// wait until the oldest lease ends if none is released first); an admitted one, the fields on
/// its response. Its response body is [`InFlightBody`], which axum takes as any body.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use axum::{Router, routing::get};
/// use slidewin::limit::{Kind, Rule, RuleSet};
/// use slidewin_http::{InFlightLayer, Key, Limit, Memory};
///
/// let in_flight = Rule::new("in_flight", Kind::Leases, "2 per 30s".parse()?)?;
/// let layer = InFlightLayer::new(
///     Memory::new(),
///     [Limit::new(RuleSet::from(in_flight)).key(Key::header(http::HeaderName::from_static("x-api-key")))],
/// )?;
/// let app: Router = Router::new().route("/", get(|| async { "ok" })).layer(layer);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct InFlightLayer<B: Backend, C = TscClock> {
    pub(crate) shared: Arc<Shared<B, C>>,
}

impl<B: Backend, C> Clone for InFlightLayer<B, C> {
    fn clone(&self) -> Self {
        InFlightLayer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<B: Backend, C> fmt::Debug for InFlightLayer<B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InFlightLayer")
            .field("limits", &self.shared.limits.len())
            .finish_non_exhaustive()
    }
}

/// What every service of a layer shares.
pub(crate) type Shared<B, C> = Limits<B, C>;

impl<B: Backend> InFlightLayer<B> {
    /// A layer of `limits`, tried in order (the first that selects a request holds it), on
    /// `backend`, its time on a [`TscClock`].
    ///
    /// # Errors
    ///
    /// [`HttpConfigError::NotLeases`] for a limit with another kind of rule; what the backend
    /// or the fields cannot take.
    pub fn new(
        backend: B,
        limits: impl IntoIterator<Item = Limit>,
    ) -> Result<InFlightLayer<B>, HttpConfigError> {
        InFlightLayer::with_clock(backend, TscClock::new(), limits)
    }
}

impl<B: Backend, C> InFlightLayer<B, C> {
    /// [`new`](InFlightLayer::new), its time on `clock` (tests: one on tokio's paused time).
    ///
    /// # Errors
    ///
    /// As [`new`](InFlightLayer::new).
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin::time::ManualClock;
    /// use slidewin_http::{HttpConfigError, InFlightLayer, Limit, Memory};
    ///
    /// let rate = Rule::new("rate", Kind::SlidingLog, "5/s".parse()?)?;
    /// let err = InFlightLayer::with_clock(Memory::new(), ManualClock::default(), [Limit::new(RuleSet::from(rate))])
    ///     .unwrap_err();
    /// assert_eq!(err, HttpConfigError::NotLeases { rule: "rate".into() });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_clock(
        backend: B,
        clock: C,
        limits: impl IntoIterator<Item = Limit>,
    ) -> Result<InFlightLayer<B, C>, HttpConfigError> {
        let limits = Limits::new(backend, clock, limits, |rule| {
            if rule.kind() == Kind::Leases {
                Ok(())
            } else {
                Err(HttpConfigError::NotLeases {
                    rule: rule.name().to_owned(),
                })
            }
        })?;
        Ok(InFlightLayer {
            shared: Arc::new(limits),
        })
    }
}
