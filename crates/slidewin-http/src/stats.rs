//! [`PolicyStats`]: what each policy of a layer did over the last minute.

use std::fmt;
use std::time::Duration;

use slidewin::stats::{MetricEvent, MetricStats};
use slidewin::{Moment, WindowMetrics};

use crate::error::ConfigError;

/// What one policy of a [`RateLimitLayer`](crate::RateLimitLayer) did, over a sliding window
/// (the last minute, in one-second buckets, by default): requests passed, denied and
/// shadow-denied, and the latency of the wrapped service. Lock-free, on a [`WindowMetrics`].
///
/// - **passed**: requests of the policy's limit that went through;
/// - **denied**: requests refused under this policy, because it had no room (or, for every
///   policy of the limit, at the key cap or with the store down);
/// - **shadow-denied**: for a policy in shadow mode, requests it would have denied; they went
///   through, so they count as passed too.
///
/// [`metrics`](PolicyStats::metrics) gives the ring itself: `Pass` and `Block` as above
/// (`Block` being shadow denials for a shadow policy), and `Success`, `Exception` (5xx) and
/// response times of the wrapped service's answers.
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
    metrics: WindowMetrics,
}

impl PolicyStats {
    pub(crate) fn new(
        name: &str,
        shadow: bool,
        span: Duration,
        buckets: u32,
        start: Moment,
    ) -> Result<PolicyStats, ConfigError> {
        Ok(PolicyStats {
            name: name.into(),
            shadow,
            metrics: WindowMetrics::new(span, buckets, start)?,
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
        self.metrics.sum(now, MetricEvent::Pass)
    }

    /// The requests this policy denied in the window at `now` (none for a shadow policy).
    #[must_use]
    pub fn denied(&self, now: Moment) -> u64 {
        if self.shadow {
            0
        } else {
            self.metrics.sum(now, MetricEvent::Block)
        }
    }

    /// The requests this policy would have denied in the window at `now`, in shadow mode
    /// (none for a policy that denies).
    #[must_use]
    pub fn shadow_denied(&self, now: Moment) -> u64 {
        if self.shadow {
            self.metrics.sum(now, MetricEvent::Block)
        } else {
            0
        }
    }

    /// Every figure of the window at `now`: counts, rates, and the wrapped service's latency.
    #[must_use]
    pub fn stats(&self, now: Moment) -> MetricStats {
        self.metrics.stats(now)
    }

    /// The ring, for per-bucket reads (a chart of the last minute, second by second).
    #[must_use]
    pub fn metrics(&self) -> &WindowMetrics {
        &self.metrics
    }

    pub(crate) fn record(&self, now: Moment, event: MetricEvent) {
        self.metrics.add(now, event, 1);
    }

    pub(crate) fn record_response(&self, now: Moment, event: MetricEvent, latency: Duration) {
        self.metrics.add(now, event, 1);
        self.metrics.add_rt(now, latency);
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
