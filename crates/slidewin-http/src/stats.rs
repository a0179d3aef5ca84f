//! [`PolicyStats`]: what each policy of a layer did over the last minute.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use slidewin::stats::MetricEvent;
use slidewin::{Clock, Moment, WindowMetrics};

use crate::error::HttpConfigError;

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
    /// The layer's clock, so that a snapshot reads the statistics at the layer's time.
    clock: Arc<dyn Clock + Send + Sync>,
    /// The limit's, shared by its policies.
    requests: Arc<WindowMetrics>,
    denials: WindowMetrics,
}

impl PolicyStats {
    pub(crate) fn new(
        name: &str,
        shadow: bool,
        clock: Arc<dyn Clock + Send + Sync>,
        requests: Arc<WindowMetrics>,
        span: Duration,
        buckets: u32,
        start: Moment,
    ) -> Result<PolicyStats, HttpConfigError> {
        Ok(PolicyStats {
            name: name.into(),
            shadow,
            clock,
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

impl PolicyStats {
    /// The counts now, on the layer's own clock: no `Clock` to import, no time to pass.
    ///
    /// ```
    /// use axum::{Router, body::Body, routing::get};
    /// use http::Request;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::{Key, Limit, Memory, RateLimitLayer};
    /// use tower::ServiceExt;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rules = RuleSet::from(Rule::new("api", Kind::SlidingLog, "2/minute".parse()?)?);
    /// let layer = RateLimitLayer::builder(Memory::new())
    ///     .limit(Limit::new(rules).key(Key::global()))
    ///     .build()?;
    /// let app = Router::new().route("/", get(|| async { "ok" })).layer(layer.clone());
    /// for _ in 0..3 {
    ///     app.clone().oneshot(Request::get("/").body(Body::empty())?).await?;
    /// }
    /// let api = layer.policy("api").unwrap().snapshot();
    /// assert_eq!((api.passed, api.denied, api.shadow_denied), (2, 1, 0));
    /// println!("{api:?}"); // the name, the time read and the counts
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn snapshot(&self) -> PolicySnapshot {
        let now = self.clock.now();
        PolicySnapshot {
            name: self.name.to_string(),
            shadow: self.shadow,
            at: now,
            passed: self.passed(now),
            denied: self.denied(now),
            shadow_denied: self.shadow_denied(now),
        }
    }
}

/// What a policy did over its window, read at one moment: [`PolicyStats::snapshot`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PolicySnapshot {
    /// The policy's name.
    pub name: String,
    /// Whether it is in shadow mode.
    pub shadow: bool,
    /// When it was read, on the layer's clock.
    pub at: Moment,
    /// Requests passed in the window.
    pub passed: u64,
    /// Requests this policy denied in the window (none in shadow mode).
    pub denied: u64,
    /// Requests it would have denied in the window, in shadow mode.
    pub shadow_denied: u64,
}

/// Prints a [`snapshot`](PolicyStats::snapshot): the counts now, not only the name.
impl fmt::Debug for PolicyStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let snapshot = self.snapshot();
        f.debug_struct("PolicyStats")
            .field("name", &snapshot.name)
            .field("shadow", &snapshot.shadow)
            .field("passed", &snapshot.passed)
            .field("denied", &snapshot.denied)
            .field("shadow_denied", &snapshot.shadow_denied)
            .finish_non_exhaustive()
    }
}
