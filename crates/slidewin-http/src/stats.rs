//! [`PolicyStats`]: what each policy of a layer did over the last minute.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use slidewin::stats::MetricEvent;
use slidewin::{Moment, WindowMetrics};

use crate::error::ConfigError;

/// What one policy of a [`RateLimitLayer`](crate::RateLimitLayer) did, over a sliding window
/// (the last minute, in one-second buckets, by default): requests passed, denied and
/// shadow-denied, and the latency of the wrapped service. Lock-free, on [`WindowMetrics`].
///
/// - **passed**: requests of the policy's limit that went through;
/// - **denied**: requests refused under this policy, because it had no room (or, for every
///   policy of the limit, at the key cap or with the store down);
/// - **shadow-denied**: for a policy in shadow mode, requests it would have denied; they went
///   through, so they count as passed too.
///
/// The policies of one limit see the same requests through, so they share one ring for them
/// ([`requests`](PolicyStats::requests): `Pass` for each request let through, then `Success`
/// or `Exception` (a 5xx) with the response time when the wrapped service answers); each
/// policy has a ring of its own for its denials ([`denials`](PolicyStats::denials): `Block`).
///
/// ```
/// use axum::{Router, body::Body, routing::get};
/// use http::Request;
/// use slidewin::{Clock, Moment};
/// use slidewin::limit::{Kind, Rule, RuleSet};
/// use slidewin::time::ManualClock;
/// use slidewin_http::{Key, Limit, Memory, RateLimitLayer};
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rules = RuleSet::from(Rule::new("api", Kind::SlidingLog, "2/minute".parse()?)?);
/// let clock = ManualClock::new(Moment::ZERO);
/// let layer = RateLimitLayer::builder(Memory::new())
///     .clock(clock.clone())
///     .limit(Limit::new(rules).key(Key::global()))
///     .build()?;
/// let app = Router::new().route("/", get(|| async { "ok" })).layer(layer.clone());
/// for _ in 0..3 {
///     app.clone().oneshot(Request::get("/").body(Body::empty())?).await?;
/// }
/// let api = layer.policy("api").unwrap();
/// assert_eq!((api.passed(clock.now()), api.denied(clock.now())), (2, 1));
/// # Ok(()) }
/// ```
pub struct PolicyStats {
    name: Box<str>,
    shadow: bool,
    /// The limit's, shared by its policies.
    requests: Arc<WindowMetrics>,
    denials: WindowMetrics,
}

impl PolicyStats {
    pub(crate) fn new(
        name: &str,
        shadow: bool,
        requests: Arc<WindowMetrics>,
        span: Duration,
        buckets: u32,
        start: Moment,
    ) -> Result<PolicyStats, ConfigError> {
        Ok(PolicyStats {
            name: name.into(),
            shadow,
            requests,
            denials: WindowMetrics::new(span, buckets, start)?,
        })
    }

    /// The policy's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the policy is in shadow mode.
    #[must_use]
    pub fn is_shadow(&self) -> bool {
        self.shadow
    }

    /// The requests passed in the window at `now`.
    #[must_use]
    pub fn passed(&self, now: Moment) -> u64 {
        self.requests.sum(now, MetricEvent::Pass)
    }

    /// The requests this policy denied in the window at `now` (none for a shadow policy).
    #[must_use]
    pub fn denied(&self, now: Moment) -> u64 {
        if self.shadow {
            0
        } else {
            self.denials.sum(now, MetricEvent::Block)
        }
    }

    /// The requests this policy would have denied in the window at `now`, in shadow mode
    /// (none for a policy that denies).
    #[must_use]
    pub fn shadow_denied(&self, now: Moment) -> u64 {
        if self.shadow {
            self.denials.sum(now, MetricEvent::Block)
        } else {
            0
        }
    }

    /// The ring of the requests let through, shared by the policies of one limit: `Pass`,
    /// then `Success` or `Exception` (a 5xx) and the response time of the wrapped service.
    /// Per-bucket reads draw a chart of the last minute, second by second.
    #[must_use]
    pub fn requests(&self) -> &WindowMetrics {
        &self.requests
    }

    /// The ring of this policy's denials (`Block`): would-be denials for a shadow policy.
    #[must_use]
    pub fn denials(&self) -> &WindowMetrics {
        &self.denials
    }

    pub(crate) fn deny(&self, now: Moment) {
        self.denials.add(now, MetricEvent::Block, 1);
    }
}

impl fmt::Debug for PolicyStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyStats")
            .field("name", &self.name)
            .field("shadow", &self.shadow)
            .finish_non_exhaustive()
    }
}
