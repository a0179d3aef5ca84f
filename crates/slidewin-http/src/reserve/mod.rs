//! [`ReserveLayer`]: costs known only after the response (the tokens a model used, the bytes
//! a response held), reserved at an estimate when a request is admitted and settled at the
//! actual cost when it is known.

mod service;
mod settlement;

use std::fmt;
use std::sync::Arc;

use http::HeaderName;
use http::response::Parts;
use slidewin::limit::Kind;
use slidewin_store::Backend;

pub use service::Reserve;
pub use settlement::Settlement;

use crate::armed::Limits;
use crate::clock::TscClock;
use crate::error::HttpConfigError;
use crate::limit::Limit;

/// What a closure makes of a response's head: its actual cost, or `None`.
type ActualFn = dyn Fn(&Parts) -> Option<u64> + Send + Sync;

/// Where a [`ReserveLayer`] reads a response's actual cost.
///
/// ```
/// use slidewin_http::SettleFrom;
///
/// let from_header = SettleFrom::header(http::HeaderName::from_static("x-usage-total-tokens"));
/// // A failed upstream used nothing: its reservation is given back.
/// let from_status = SettleFrom::response(|head| (!head.status.is_success()).then_some(0));
/// let by_the_handler = SettleFrom::handler();
/// # let _ = (from_header, from_status, by_the_handler);
/// ```
#[derive(Clone)]
pub struct SettleFrom(Source);

#[derive(Clone)]
enum Source {
    Header(HeaderName),
    Response(Arc<ActualFn>),
    Handler,
}

impl SettleFrom {
    /// A response header holding the cost as a decimal number (an upstream's token count,
    /// say). A response without it, or with another value, keeps its estimate.
    #[must_use]
    pub fn header(name: HeaderName) -> SettleFrom {
        SettleFrom(Source::Header(name))
    }

    /// What `f` makes of the response's head; `None` keeps the estimate.
    #[must_use]
    pub fn response(f: impl Fn(&Parts) -> Option<u64> + Send + Sync + 'static) -> SettleFrom {
        SettleFrom(Source::Response(Arc::new(f)))
    }

    /// Nowhere in the response: the handler settles through the request's [`Settlement`]
    /// (which every source puts there).
    #[must_use]
    pub fn handler() -> SettleFrom {
        SettleFrom(Source::Handler)
    }

    /// The actual cost the response `head` gives, if any.
    fn actual(&self, head: &Parts) -> Option<u64> {
        match &self.0 {
            Source::Header(name) => head.headers.get(name)?.to_str().ok()?.parse().ok(),
            Source::Response(f) => f(head),
            Source::Handler => None,
        }
    }
}

impl fmt::Debug for SettleFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Source::Header(name) => f.debug_tuple("SettleFrom::header").field(name).finish(),
            Source::Response(_) => f.write_str("SettleFrom::response(..)"),
            Source::Handler => f.write_str("SettleFrom::handler()"),
        }
    }
}

/// A tower [`Layer`](tower::Layer) for costs known only after the work: each request admitted
/// under its limit is charged an estimate (its limit's [`cost`](Limit::cost) or
/// [`cost_fn`](Limit::cost_fn), from the request's head: the `max_tokens` it asks for, say),
/// and once the response says what it really cost, the charge is settled at that, in the
/// windows the request was admitted in (the core's
/// [`Limiter::settle`](slidewin::Limiter::settle)). Used more than reserved is debt: later
/// requests wait until it leaves the window, so nothing used is lost; used less gives the
/// rest back.
///
/// The actual cost comes from the response ([`SettleFrom::header`],
/// [`SettleFrom::response`]), or from the handler, which finds a [`Settlement`] in its
/// request's extensions and settles when it knows (at the end of a stream). A response that
/// says nothing keeps its estimate, and so does one whose settle could not reach the store.
///
/// A refused request gets `429` with the `RateLimit-Policy`, `RateLimit` and `Retry-After`
/// fields, as a [`RateLimitLayer`](crate::RateLimitLayer)'s; an admitted one, the fields of
/// its reservation. Its limits hold rates only ([`Kind::Leases`] belongs in an
/// [`InFlightLayer`](crate::InFlightLayer)).
///
/// # Example
///
/// ```
/// use axum::{Router, routing::post};
/// use slidewin::limit::{Kind, Rule, RuleSet};
/// use slidewin_http::{Key, Limit, Memory, ReserveLayer, SettleFrom};
///
/// // Tokens per API key: 10,000 a minute and 100,000 a day, exact.
/// let tokens = RuleSet::new([
///     Rule::new("minute", Kind::SlidingLog, "10000/minute".parse()?)?,
///     Rule::new("day", Kind::SlidingLog, "100000/day".parse()?)?,
/// ])?;
/// let limit = Limit::new(tokens)
///     .key(Key::header(http::HeaderName::from_static("x-api-key")))
///     // The estimate: what the request may use at most.
///     .cost_fn(|parts| {
///         let asked = parts.headers.get("x-max-tokens").and_then(|v| v.to_str().ok()?.parse().ok());
///         asked.unwrap_or(1_000)
///     });
/// let settle = SettleFrom::header(http::HeaderName::from_static("x-usage-total-tokens"));
/// let layer = ReserveLayer::new(Memory::new(), [limit], settle)?;
/// let app: Router = Router::new().route("/v1/complete", post(|| async { "..." })).layer(layer);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ReserveLayer<B: Backend, C = TscClock> {
    pub(crate) shared: Arc<Shared<B, C>>,
}

/// What every service of a layer shares.
pub(crate) struct Shared<B: Backend, C> {
    pub(crate) limits: Limits<B, C>,
    pub(crate) settle_from: SettleFrom,
}

impl<B: Backend, C> Clone for ReserveLayer<B, C> {
    fn clone(&self) -> Self {
        ReserveLayer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<B: Backend, C> fmt::Debug for ReserveLayer<B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReserveLayer")
            .field("limits", &self.shared.limits.limits.len())
            .field("settle_from", &self.shared.settle_from)
            .finish_non_exhaustive()
    }
}

impl<B: Backend> ReserveLayer<B> {
    /// A layer of `limits`, tried in order (the first that selects a request decides it), on
    /// `backend`, settling what `settle_from` says; its time on a [`TscClock`].
    ///
    /// # Errors
    ///
    /// [`HttpConfigError::LeasesNotReleased`] for a limit with a [`Kind::Leases`] rule; what
    /// the backend or the fields cannot take.
    pub fn new(
        backend: B,
        limits: impl IntoIterator<Item = Limit>,
        settle_from: SettleFrom,
    ) -> Result<ReserveLayer<B>, HttpConfigError> {
        ReserveLayer::with_clock(backend, TscClock::new(), limits, settle_from)
    }
}

impl<B: Backend, C> ReserveLayer<B, C> {
    /// [`new`](ReserveLayer::new), its time on `clock` (tests: a `ManualClock`).
    ///
    /// # Errors
    ///
    /// As [`new`](ReserveLayer::new).
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin::time::ManualClock;
    /// use slidewin_http::{HttpConfigError, Limit, Memory, ReserveLayer, SettleFrom};
    ///
    /// let held = Rule::new("held", Kind::Leases, "2 per 30s".parse()?)?;
    /// let limits = [Limit::new(RuleSet::from(held))];
    /// let err = ReserveLayer::with_clock(Memory::new(), ManualClock::default(), limits, SettleFrom::handler())
    ///     .unwrap_err();
    /// assert_eq!(err, HttpConfigError::LeasesNotReleased { rule: "held".into() });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_clock(
        backend: B,
        clock: C,
        limits: impl IntoIterator<Item = Limit>,
        settle_from: SettleFrom,
    ) -> Result<ReserveLayer<B, C>, HttpConfigError> {
        let limits = Limits::new(backend, clock, limits, |rule| {
            if rule.kind() == Kind::Leases {
                Err(HttpConfigError::LeasesNotReleased {
                    rule: rule.name().to_owned(),
                })
            } else {
                Ok(())
            }
        })?;
        Ok(ReserveLayer {
            shared: Arc::new(Shared {
                limits,
                settle_from,
            }),
        })
    }
}
