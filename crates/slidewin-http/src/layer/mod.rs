//! [`RateLimitLayer`]: the tower layer, its builder, and the service it wraps around yours.
//! The layer and the state its services share are here; the builder, the decisions and the
//! service are in the submodules.

mod builder;
mod decision;
mod service;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use http::Response;
use http::header::HeaderName;
use slidewin::WindowMetrics;

use crate::clock::TscClock;
use crate::fields::RateLimitFields;
use crate::limit::Limit;
use crate::refusal::Refusal;
use crate::stats::PolicyStats;
use slidewin_store::Backend;

pub use self::builder::RateLimitLayerBuilder;
pub use self::service::{RateLimit, ResponseFuture};

/// `Slidewin-Degraded`: on a response decided without the store, which way the failure policy
/// went (`open` or `closed`). Sent only when the layer is built with
/// [`degraded_header`](RateLimitLayerBuilder::degraded_header).
pub const SLIDEWIN_DEGRADED: HeaderName = HeaderName::from_static("slidewin-degraded");

type RefusalFn = dyn Fn(&Refusal<'_>) -> Response<String> + Send + Sync;

/// What a request that a limit selects, but whose key cannot be found, gets.
///
/// ```
/// assert_eq!(slidewin_http::MissingKey::default(), slidewin_http::MissingKey::Deny);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MissingKey {
    /// A `500 Internal Server Error`: a limit was meant to hold and cannot (a server set up
    /// without the peer's address, say). Nothing passes unchecked.
    #[default]
    Deny,
    /// Passes, unlimited and without fields.
    Pass,
}

/// A tower [`Layer`](tower::Layer) that limits the rates of the requests to the service it wraps, with
/// exact windows, and tells clients where they stand in the IETF `RateLimit-Policy` and
/// `RateLimit` header fields.
///
/// - **Clones share the limits**: the layer holds its counts behind an `Arc`, so the clones
///   that axum makes per route and per connection count together (unlike tower's own
///   `RateLimitLayer`, tower #764 and axum #2634).
/// - **Limits** ([`Limit`]): named policies for the requests some conditions select (route,
///   method, a predicate), counted per [`Key`](crate::Key) (global, peer IP, the client's IP
///   behind trusted proxies, a header, a closure), at a cost per request. The first limit that
///   selects a request decides it; all its policies admit it or it is refused, and a refused
///   request is counted against none.
/// - **Backends** ([`Backend`]): [`Memory`](crate::Memory), or Redis with the `redis`
///   feature, through one trait.
/// - **Fields**: `RateLimit-Policy` on every response of a limited request, allowed or not;
///   `RateLimit` (the binding policy: the one that denied, or the one closest to its limit,
///   shadow policies included) on every response a policy decided; on a refusal,
///   `Retry-After` in whole seconds rounded up; optionally the legacy `X-RateLimit-*`.
///   Refusals no policy decided (a cost no policy could ever admit, the key cap, a missing
///   key, the store down without a failure policy) carry `RateLimit-Policy` alone.
/// - **Policy names** are unique in a layer: they name the policies in the fields, the
///   statistics and, on Redis, the keys.
/// - **Refusals** are `application/problem+json` (RFC 9457): a `429` of the draft's
///   `quota-exceeded` type naming the violated policies; see [`Refusal`] for the others. A
///   handler can replace the body ([`on_refusal`](RateLimitLayerBuilder::on_refusal)).
/// - **Shadow mode**, per policy ([`Limit::shadow`]) or for the whole layer
///   ([`shadow`](RateLimitLayerBuilder::shadow)): decide, send the fields, never deny, count.
/// - **Statistics** per policy ([`PolicyStats`]): passed, denied, shadow-denied, and the
///   latency of the wrapped service, over a sliding window.
///
/// The wrapped service's response body must be `From<String>` (axum's `Body`, `String`,
/// `Full<Bytes>`) for the refusals' bodies.
///
/// # Example
///
/// ```
/// use axum::{Router, body::Body, routing::get};
/// use http::{Request, StatusCode};
/// use slidewin::limit::{Kind, Rule, RuleSet};
/// use slidewin_http::{Key, Limit, Memory, RateLimitLayer};
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rules = RuleSet::new([
///     Rule::new("burst", Kind::SlidingLog, "2/s".parse()?)?,
///     Rule::new("hourly", Kind::SlidingLog, "1000/hour".parse()?)?,
/// ])?;
/// let layer = RateLimitLayer::builder(Memory::new())
///     .limit(Limit::new(rules).key(Key::global()))
///     .build()?;
/// let app = Router::new().route("/", get(|| async { "hello" })).layer(layer);
///
/// let call = || app.clone().oneshot(Request::get("/").body(Body::empty()).unwrap());
/// let first = call().await?;
/// assert_eq!(first.status(), StatusCode::OK);
/// assert_eq!(first.headers()["ratelimit-policy"], r#""burst";q=2;w=1, "hourly";q=1000;w=3600"#);
/// assert_eq!(first.headers()["ratelimit"], r#""burst";r=1;t=1"#);
/// call().await?;
/// let third = call().await?;
/// assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
/// assert_eq!(third.headers()["retry-after"], "1");
/// assert_eq!(third.headers()["content-type"], "application/problem+json");
/// # Ok(()) }
/// ```
pub struct RateLimitLayer<B: Backend, C = TscClock> {
    shared: Arc<Shared<B, C>>,
}

impl<B: Backend, C> Clone for RateLimitLayer<B, C> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<B: Backend + fmt::Debug, C: fmt::Debug> fmt::Debug for RateLimitLayer<B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("backend", &self.shared.backend)
            .field("clock", &self.shared.clock)
            .field(
                "limits",
                &self
                    .shared
                    .limits
                    .iter()
                    .map(|a| &a.limit)
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl<B: Backend, C> RateLimitLayer<B, C> {
    /// Every policy's statistics, limit by limit, each limit's in the order of its rules.
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::{Limit, Memory, RateLimitLayer};
    ///
    /// let rules = RuleSet::from(Rule::new("api", Kind::Gcra, "10/s".parse()?)?);
    /// let layer = RateLimitLayer::builder(Memory::new()).limit(Limit::new(rules)).build()?;
    /// assert_eq!(layer.stats()[0].name(), "api");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn stats(&self) -> &[PolicyStats] {
        &self.shared.stats
    }

    /// The statistics of the policy `name`.
    #[must_use]
    pub fn policy(&self, name: &str) -> Option<&PolicyStats> {
        self.shared.stats.iter().find(|s| s.name() == name)
    }

    /// The backend.
    #[must_use]
    pub fn backend(&self) -> &B {
        &self.shared.backend
    }

    /// The clock the layer reads, to read the statistics at its time.
    ///
    /// ```
    /// use slidewin::Clock;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::{Limit, Memory, RateLimitLayer};
    ///
    /// let rules = RuleSet::from(Rule::new("api", Kind::Gcra, "10/s".parse()?)?);
    /// let layer = RateLimitLayer::builder(Memory::new()).limit(Limit::new(rules)).build()?;
    /// let now = layer.clock().now();
    /// assert_eq!(layer.stats()[0].passed(now), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn clock(&self) -> &C {
        &self.shared.clock
    }
}

struct Shared<B: Backend, C> {
    backend: B,
    clock: Arc<C>,
    limits: Box<[Armed<B::Store>]>,
    stats: Box<[PolicyStats]>,
    missing_key: MissingKey,
    legacy: bool,
    degraded: bool,
    on_refusal: Arc<RefusalFn>,
    stats_on: bool,
    /// Whether the server's missing-key fix was logged: it is, once.
    warned_fix: AtomicBool,
}

/// A limit with its stores.
struct Armed<S> {
    limit: Limit,
    /// The policies that deny, in one store, checked first.
    enforced: Option<Part<S>>,
    /// The shadow policies, in a store of their own, checked when the enforced ones admit, so
    /// that their denials never hold back the others' counts.
    shadowed: Option<Part<S>>,
    fields: RateLimitFields,
    /// Where the limit's policies' statistics begin in the layer's.
    first_stat: usize,
    /// The requests the limit let through, for all its policies' statistics.
    requests: Arc<WindowMetrics>,
}

/// Some of a limit's policies, in a store.
struct Part<S> {
    store: S,
    /// Which of the limit's rules, by index.
    rules: Box<[usize]>,
}
