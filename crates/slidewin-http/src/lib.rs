//! slidewin's limits over HTTP: what a service that limits requests tells its clients, and
//! whose requests they are.
//!
//! - [`RateLimitFields`]: the IETF `RateLimit-Policy` and `RateLimit` header fields
//!   (draft-ietf-httpapi-ratelimit-headers, the two-field form) of a
//!   [`RuleSet`](slidewin::limit::RuleSet) and a check's
//!   [`Decisions`](slidewin::limit::Decisions), `Retry-After`, and the legacy
//!   `X-RateLimit-*` headers, rendered with the `sfv` crate (RFC 9651).
//! - [`TrustedProxies`]: the client's address behind your proxies, read from the right of
//!   `X-Forwarded-For` or `Forwarded`, so that a client cannot give itself a fresh quota by
//!   writing its own.
//! - [`CircuitBreakerLayer`]: the core's [`CircuitBreaker`](slidewin::breaker::CircuitBreaker)
//!   in front of a service: while it fails, calls are answered at once with a `503` of the
//!   draft's `temporary-reduced-capacity` problem type and a `Retry-After` until the next
//!   probe; its state and statistics on a [`BreakerHandle`].
//! - [`ShedLayer`]: the core's [`AdaptiveLimit`](slidewin::shed::AdaptiveLimit) in front of a
//!   service: a concurrency limit that falls when responses turn slow or fail and grows while
//!   they are fast; requests above it are answered at once with a `503` of the same problem
//!   type; the limit and the requests in flight on a [`ShedHandle`].
//!
//! ```
//! use http::HeaderMap;
//! use slidewin::{Keyed, Moment};
//! use slidewin::limit::{Kind, Rule, RuleSet};
//! use slidewin_http::{ForwardedHeader, RateLimitFields, TrustedProxies};
//!
//! let rules = RuleSet::new([
//!     Rule::new("burst", Kind::SlidingLog, "10/s".parse()?)?,
//!     Rule::new("hourly", Kind::SlidingLog, "1000/hour".parse()?)?,
//! ])?;
//! let fields = RateLimitFields::new(&rules)?;
//! let limiter = Keyed::<std::net::IpAddr, _>::new(rules);
//! let proxies = TrustedProxies::new(["10.0.0.0/8"], ForwardedHeader::XForwardedFor)?;
//!
//! // A request through the load balancer at 10.0.0.2.
//! let mut request = HeaderMap::new();
//! request.insert("x-forwarded-for", "203.0.113.7".parse()?);
//! let client = proxies.client_ip("10.0.0.2:50000".parse()?, &request);
//!
//! let decisions = limiter.check(&client, Moment::from_secs(1), 1)?;
//! let mut response = HeaderMap::new();
//! fields.insert(&decisions, &mut response);
//! assert_eq!(response["ratelimit"], r#""burst";r=9;t=1"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod armed;
mod breaker;
mod client_ip;
mod clock;
mod error;
mod failures;
mod fields;
mod in_flight;
mod layer;
mod limit;
mod partition;
mod refusal;
mod reserve;
mod shed;
mod stats;

pub use breaker::{
    BreakerFuture, BreakerHandle, BreakerSnapshot, CircuitBreakerLayer, CircuitBreakerLayerBuilder,
    CircuitBreakerService,
};
// The store seam, re-exported: a layer is built over one of these backends.
pub use client_ip::{ForwardedHeader, TrustedProxies};
pub use clock::TscClock;
pub use error::HttpConfigError;
pub use fields::{
    QuotaUnit, RATELIMIT, RATELIMIT_POLICY, RateLimitFields, X_RATELIMIT_LIMIT,
    X_RATELIMIT_REMAINING, X_RATELIMIT_RESET, retry_after,
};
pub use in_flight::{InFlight, InFlightBody, InFlightLayer};
pub use layer::{
    MissingKey, RateLimit, RateLimitLayer, RateLimitLayerBuilder, ResponseFuture, SLIDEWIN_DEGRADED,
};
pub use limit::{Key, Limit};
pub use partition::PartitionKeys;
pub use refusal::{QUOTA_EXCEEDED, Refusal, TEMPORARY_REDUCED_CAPACITY, problem};
pub use reserve::{Reserve, ReserveLayer, SettleFrom, Settlement};
pub use shed::{ShedFuture, ShedHandle, ShedLayer, ShedLayerBuilder, ShedService};
#[cfg(feature = "redis")]
pub use slidewin_store::Redis;
pub use slidewin_store::{
    Backend, BackendError, BackendKind, BackendState, Checked, Memory, MemoryStore, RequestKey,
};
pub use stats::{PolicySnapshot, PolicyStats};

// The README's examples are compiled as tests too.
#[doc = include_str!("../README.md")]
#[cfg(all(doctest, feature = "axum", feature = "redis"))]
pub struct ReadmeDoctests;
