//! [`RateLimitLayer`]: the tower layer, its builder, and the service it wraps around yours.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use http::request::Parts;
use http::{Request, Response};
use slidewin::limit::Binding;
use slidewin::stats::MetricEvent;
use slidewin::{Clock, Decision, Moment, WindowMetrics};
use tower::{Layer, Service};

use crate::backend::{Answer, Backend, BackendError, Checked};
use crate::clock::TscClock;
use crate::error::ConfigError;
use crate::fields::{RateLimitFields, retry_after};
use crate::limit::{Extracted, Limit, RequestKey};
use crate::refusal::{Refusal, problem};
use crate::stats::PolicyStats;

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

/// A tower [`Layer`] that limits the rates of the requests to the service it wraps, with
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

impl<B: Backend> RateLimitLayer<B> {
    /// A builder over `backend`, on a [`TscClock`].
    pub fn builder(backend: B) -> RateLimitLayerBuilder<B> {
        RateLimitLayerBuilder {
            backend,
            clock: TscClock::new(),
            limits: Vec::new(),
            shadow: false,
            missing_key: MissingKey::Deny,
            legacy: false,
            degraded: false,
            on_refusal: Arc::new(problem),
            stats_span: Duration::from_secs(60),
            stats_buckets: 60,
            stats_on: true,
        }
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

impl<S, B: Backend, C> Layer<S> for RateLimitLayer<B, C> {
    type Service = RateLimit<S, B, C>;

    fn layer(&self, inner: S) -> RateLimit<S, B, C> {
        RateLimit {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// Builds a [`RateLimitLayer`].
///
/// ```
/// use std::time::Duration;
/// use slidewin::limit::{Kind, Rule, RuleSet};
/// use slidewin::time::ManualClock;
/// use slidewin_http::{Limit, Memory, MissingKey, RateLimitLayer};
///
/// let rules = RuleSet::from(Rule::new("api", Kind::SlidingLog, "100/minute".parse()?)?);
/// let layer = RateLimitLayer::builder(Memory::new().with_max_keys(100_000))
///     .clock(ManualClock::default())
///     .limit(Limit::new(rules))
///     .missing_key(MissingKey::Pass)
///     .legacy_headers(true)
///     .stats_window(Duration::from_secs(10), 10)
///     .build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RateLimitLayerBuilder<B, C = TscClock> {
    backend: B,
    clock: C,
    limits: Vec<Limit>,
    shadow: bool,
    missing_key: MissingKey,
    legacy: bool,
    degraded: bool,
    on_refusal: Arc<RefusalFn>,
    stats_span: Duration,
    stats_buckets: u32,
    stats_on: bool,
}

impl<B: fmt::Debug, C: fmt::Debug> fmt::Debug for RateLimitLayerBuilder<B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayerBuilder")
            .field("backend", &self.backend)
            .field("clock", &self.clock)
            .field("limits", &self.limits)
            .field("shadow", &self.shadow)
            .finish_non_exhaustive()
    }
}

impl<B: Backend, C: Clock + Send + Sync + 'static> RateLimitLayerBuilder<B, C> {
    /// Reads time from `clock` (a `ManualClock`, or slidewin-shape's `TokioClock` under
    /// `tokio::time::pause()`, in tests).
    pub fn clock<C2: Clock + Send + Sync + 'static>(
        self,
        clock: C2,
    ) -> RateLimitLayerBuilder<B, C2> {
        RateLimitLayerBuilder {
            backend: self.backend,
            clock,
            limits: self.limits,
            shadow: self.shadow,
            missing_key: self.missing_key,
            legacy: self.legacy,
            degraded: self.degraded,
            on_refusal: self.on_refusal,
            stats_span: self.stats_span,
            stats_buckets: self.stats_buckets,
            stats_on: self.stats_on,
        }
    }

    /// Adds a limit, after those already added: the first that selects a request decides it.
    #[must_use]
    pub fn limit(mut self, limit: Limit) -> Self {
        self.limits.push(limit);
        self
    }

    /// Puts every policy in shadow mode: the layer decides, counts and sends the fields, but
    /// lets every request through.
    #[must_use]
    pub fn shadow(mut self, shadow: bool) -> Self {
        self.shadow = shadow;
        self
    }

    /// What a selected request without a key gets ([`MissingKey::Deny`] by default), unless
    /// its limit says otherwise ([`Limit::missing_key`]).
    #[must_use]
    pub fn missing_key(mut self, missing_key: MissingKey) -> Self {
        self.missing_key = missing_key;
        self
    }

    /// Also sends the legacy `X-RateLimit-Limit`, `-Remaining` and `-Reset` of the binding
    /// policy, for clients that read only those.
    #[must_use]
    pub fn legacy_headers(mut self, legacy: bool) -> Self {
        self.legacy = legacy;
        self
    }

    /// Sends [`Slidewin-Degraded`](SLIDEWIN_DEGRADED) on the responses that a backend's
    /// failure policy decided (Redis down), saying which way it went.
    #[must_use]
    pub fn degraded_header(mut self, degraded: bool) -> Self {
        self.degraded = degraded;
        self
    }

    /// Answers refusals with `handler` instead of the `application/problem+json` bodies of
    /// [`problem`](crate::problem). The layer adds the rate-limit fields to its response.
    ///
    /// ```
    /// use http::{Response, StatusCode};
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::{Limit, Memory, RateLimitLayer, Refusal};
    ///
    /// let rules = RuleSet::from(Rule::new("api", Kind::Gcra, "10/s".parse()?)?);
    /// let layer = RateLimitLayer::builder(Memory::new())
    ///     .limit(Limit::new(rules))
    ///     .on_refusal(|refusal: &Refusal<'_>| {
    ///         let mut response = Response::new(format!("slow down: {refusal}"));
    ///         *response.status_mut() = refusal.status();
    ///         response
    ///     })
    ///     .build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn on_refusal(
        mut self,
        handler: impl Fn(&Refusal<'_>) -> Response<String> + Send + Sync + 'static,
    ) -> Self {
        self.on_refusal = Arc::new(handler);
        self
    }

    /// Keeps no statistics (they are kept by default): for a service that reads none, a clock
    /// read and a few atomic adds less per request. [`PolicyStats`] then read zeros.
    #[must_use]
    pub fn stats(mut self, on: bool) -> Self {
        self.stats_on = on;
        self
    }

    /// Keeps the statistics over the last `span`, in `buckets` buckets (the last minute, in
    /// seconds, by default).
    #[must_use]
    pub fn stats_window(mut self, span: Duration, buckets: u32) -> Self {
        self.stats_span = span;
        self.stats_buckets = buckets;
        self
    }

    /// The layer.
    ///
    /// # Errors
    ///
    /// [`ConfigError::DuplicatePolicy`] for two policies of one name in the layer;
    /// [`ConfigError::NotRepresentable`] for a limit too large for the fields;
    /// [`ConfigError::Limit`] for a statistics window or key cap the core refuses;
    /// [`ConfigError::Backend`] for rules the backend cannot hold.
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::{ConfigError, Limit, Memory, RateLimitLayer};
    ///
    /// let api = RuleSet::from(Rule::new("api", Kind::Gcra, "10/s".parse()?)?);
    /// let err = RateLimitLayer::builder(Memory::new())
    ///     .limit(Limit::new(api.clone()).route("/a"))
    ///     .limit(Limit::new(api).route("/b"))
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err, ConfigError::DuplicatePolicy { name: "api".into() });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn build(self) -> Result<RateLimitLayer<B, C>, ConfigError> {
        // Shared with each policy's statistics, which read it for their snapshots.
        let clock = Arc::new(self.clock);
        let start = clock.now();
        let mut stats = Vec::new();
        let mut limits = Vec::with_capacity(self.limits.len());
        for limit in self.limits {
            let rules = limit.rules().rules();
            for rule in rules {
                if stats.iter().any(|s: &PolicyStats| s.name() == rule.name()) {
                    return Err(ConfigError::DuplicatePolicy {
                        name: rule.name().to_string(),
                    });
                }
            }
            let shadow: Vec<bool> = limit
                .shadow_flags()
                .iter()
                .map(|&s| s || self.shadow)
                .collect();
            let fields = RateLimitFields::new(limit.rules())?;
            let first_stat = stats.len();
            let requests = Arc::new(WindowMetrics::new(
                self.stats_span,
                self.stats_buckets,
                start,
            )?);
            for (rule, &shadow) in rules.iter().zip(&shadow) {
                stats.push(PolicyStats::new(
                    rule.name(),
                    shadow,
                    Arc::clone(&clock) as Arc<dyn Clock + Send + Sync>,
                    Arc::clone(&requests),
                    self.stats_span,
                    self.stats_buckets,
                    start,
                )?);
            }
            let part = |want: bool| -> Result<Option<Part<B::Store>>, ConfigError> {
                let picked: Vec<usize> = (0..rules.len()).filter(|&i| shadow[i] == want).collect();
                if picked.is_empty() {
                    return Ok(None);
                }
                let set = slidewin::limit::RuleSet::new(picked.iter().map(|&i| rules[i].clone()))?;
                Ok(Some(Part {
                    store: self.backend.store(set)?,
                    rules: picked.into_boxed_slice(),
                }))
            };
            let enforced = part(false)?;
            let shadowed = part(true)?;
            limits.push(Armed {
                enforced,
                shadowed,
                fields,
                first_stat,
                requests,
                limit,
            });
        }
        Ok(RateLimitLayer {
            shared: Arc::new(Shared {
                backend: self.backend,
                clock,
                limits: limits.into_boxed_slice(),
                stats: stats.into_boxed_slice(),
                missing_key: self.missing_key,
                legacy: self.legacy,
                degraded: self.degraded,
                on_refusal: self.on_refusal,
                stats_on: self.stats_on,
                warned_fix: AtomicBool::new(false),
            }),
        })
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

/// What the checks of a request came to.
struct Outcome {
    /// The enforced policies' decisions, in the order of their part's rules.
    enforced: Option<Answer>,
    /// The shadow policies', when they were checked.
    shadowed: Option<Answer>,
    /// Whether the request goes through.
    admitted: bool,
    refusal: Option<Refused>,
    without_store: Option<String>,
}

enum Refused {
    Quota,
    CostTooHigh { cost: u64, max: u64 },
    KeysFull { cap: usize },
    Unavailable(String),
}

impl Outcome {
    fn new() -> Outcome {
        Outcome {
            enforced: None,
            shadowed: None,
            admitted: true,
            refusal: None,
            without_store: None,
        }
    }

    /// Records the enforced policies' answer.
    fn enforced(&mut self, result: Result<Checked, BackendError>) {
        match result {
            Ok(checked) => {
                let (answer, without) = checked.into_parts();
                self.admitted = answer.decision().allowed();
                if !self.admitted {
                    self.refusal = Some(match &without {
                        Some(why) => Refused::Unavailable(why.clone()),
                        None => Refused::Quota,
                    });
                }
                self.without_store = without;
                self.enforced = Some(answer);
            }
            Err(err) => {
                self.admitted = false;
                self.refusal = Some(match err {
                    BackendError::CostTooHigh { cost, max } => Refused::CostTooHigh { cost, max },
                    BackendError::KeysFull { cap } => Refused::KeysFull { cap },
                    // The memory budget spent: the layer's store cannot take the request now.
                    full @ BackendError::MemoryFull { .. } => {
                        Refused::Unavailable(full.to_string())
                    }
                    BackendError::Unavailable { detail } => Refused::Unavailable(detail),
                });
            }
        }
    }

    /// Records the shadow policies' answer. One that could never admit the cost, or has no
    /// room for the key, would have refused: counted as such. One whose store is down decides
    /// nothing.
    fn shadowed<S>(
        &mut self,
        armed: &Armed<S>,
        stats: Option<&[PolicyStats]>,
        now: Moment,
        result: Result<Checked, BackendError>,
    ) {
        match result {
            Ok(checked) => {
                let (answer, without) = checked.into_parts();
                self.without_store = self.without_store.take().or(without);
                self.shadowed = Some(answer);
            }
            Err(
                BackendError::CostTooHigh { .. }
                | BackendError::KeysFull { .. }
                | BackendError::MemoryFull { .. },
            ) => {
                if let (Some(part), Some(stats)) = (&armed.shadowed, stats) {
                    for &i in &part.rules {
                        stats[armed.first_stat + i].deny(now);
                    }
                }
            }
            Err(_) => {}
        }
    }

    /// Each decision made, with its rule's index in the limit.
    fn each<'a, S>(&'a self, armed: &'a Armed<S>) -> impl Iterator<Item = (usize, Decision)> + 'a {
        let part = |part: &'a Option<Part<S>>, answer: &'a Option<Answer>| {
            part.iter().zip(answer).flat_map(|(part, answer)| {
                part.rules
                    .iter()
                    .copied()
                    .zip(answer.as_slice().iter().copied())
            })
        };
        part(&armed.enforced, &self.enforced).chain(part(&armed.shadowed, &self.shadowed))
    }

    /// Whether the policy at `rule` denied (or would have).
    fn denied_by<S>(&self, armed: &Armed<S>, rule: usize) -> bool {
        self.each(armed).any(|(r, d)| r == rule && !d.allowed())
    }

    /// The binding decision among those made, with its rule's index in the limit: the core's
    /// [`Binding`], so the service names the same rule for the same decisions.
    fn binding<S>(&self, armed: &Armed<S>) -> Option<(usize, Decision)> {
        let of = |part: &Option<Part<S>>, answer: &Option<Answer>| {
            let (part, answer) = (part.as_ref()?, answer.as_ref()?);
            Some((part.rules[answer.binding()], answer.decision()))
        };
        let mut binding = Binding::new();
        if let Some((rule, decision)) = of(&armed.enforced, &self.enforced) {
            binding.offer(decision, rule);
        }
        if let Some((rule, decision)) = of(&armed.shadowed, &self.shadowed) {
            binding.offer_shadow(decision, rule);
        }
        binding
            .into_inner()
            .map(|(decision, rule)| (rule, decision))
    }
}

/// What to do with a request, before any store is asked.
enum Plan<'p> {
    /// No limit selects it, or its key is missing and may pass.
    Pass,
    /// Its key is missing.
    Refuse(Response<String>),
    /// Check `key` under the limit at `limit`.
    Check {
        limit: usize,
        key: Extracted<'p>,
        cost: u64,
        now: Moment,
    },
}

/// The checks' verdict: a refusal to send, or what to do with the wrapped service's answer.
enum Verdict {
    Refused(Response<String>),
    Admitted(After),
}

/// What [`Shared::decide_at_once`] came to.
enum AtOnce {
    /// The backend waits: nothing was checked.
    Waits,
    /// The outcome holds the checks.
    Decided,
    /// A limit without shadow policies admitted, with this binding decision; no outcome was
    /// built.
    Admitted(Option<(usize, Decision)>),
}

/// What an admitted request's response gets.
struct After {
    limit: usize,
    /// When the wrapped service was called.
    start: Moment,
    /// The binding decision, with its rule's index in the limit.
    binding: Option<(usize, Decision)>,
    degraded: bool,
}

impl<B: Backend, C: Clock> Shared<B, C> {
    /// The policies' statistics, when they are kept.
    fn kept_stats(&self) -> Option<&[PolicyStats]> {
        self.stats_on.then_some(&*self.stats)
    }

    fn plan<'p>(&self, parts: &'p Parts) -> Plan<'p> {
        let Some(limit) = self.limits.iter().position(|a| a.limit.selects(parts)) else {
            return Plan::Pass;
        };
        let armed = &self.limits[limit];
        let Some(key) = armed.limit.key_of(parts) else {
            return match armed.limit.missing_key_choice().unwrap_or(self.missing_key) {
                MissingKey::Pass => Plan::Pass,
                MissingKey::Deny => {
                    let names = armed.limit.rules().rules();
                    let policies = names.iter().map(|r| r.name()).collect();
                    let fix = armed.limit.missing_key_fix(parts);
                    if let Some(fix) = fix
                        && !self.warned_fix.swap(true, Ordering::Relaxed)
                    {
                        // Once: every request of a misconfigured server would repeat it.
                        tracing::warn!("a rate limit answers 500 to every request: {fix}");
                    }
                    let refusal = Refusal::MissingKey { policies, fix };
                    let mut response = (self.on_refusal)(&refusal);
                    self.insert_fields(armed, None, None, response.headers_mut());
                    Plan::Refuse(response)
                }
            };
        };
        Plan::Check {
            limit,
            cost: armed.limit.cost_of(parts),
            key,
            now: self.clock.now(),
        }
    }

    /// The checks into `out`, when the backend answers them at once. (Written in place: an
    /// outcome is a few hundred bytes.) A limit with no shadow policy whose store admits
    /// builds no outcome: its binding decision is all the response needs.
    fn decide_at_once(
        &self,
        armed: &Armed<B::Store>,
        key: RequestKey<'_>,
        now: Moment,
        cost: u64,
        out: &mut Outcome,
    ) -> AtOnce {
        let mut checked = false;
        if let Some(part) = &armed.enforced {
            let Some(result) = self.backend.check_at_once(&part.store, key, now, cost) else {
                return AtOnce::Waits;
            };
            if armed.shadowed.is_none()
                && let Ok(answer) = &result
                && answer.allowed()
                && answer.without_store().is_none()
            {
                return AtOnce::Admitted(Some((part.rules[answer.binding()], answer.decision())));
            }
            out.enforced(result);
            checked = true;
        }
        if out.admitted
            && let Some(part) = &armed.shadowed
        {
            match self.backend.check_at_once(&part.store, key, now, cost) {
                Some(result) => out.shadowed(armed, self.kept_stats(), now, result),
                None if !checked => return AtOnce::Waits,
                // A backend answers at once always or never; were it not to, the shadow
                // policies decide nothing rather than have the enforced ones charged twice.
                None => {}
            }
        }
        AtOnce::Decided
    }

    /// An admitted request: counted as passed, and what its response will get.
    fn admitted(
        &self,
        limit: usize,
        now: Moment,
        binding: Option<(usize, Decision)>,
        degraded: bool,
    ) -> After {
        if self.stats_on {
            self.limits[limit].requests.add(now, MetricEvent::Pass, 1);
        }
        After {
            limit,
            start: now,
            binding,
            degraded,
        }
    }

    /// The checks: the limit's enforced policies, then (when they admit) its shadow ones.
    async fn decide(
        &self,
        armed: &Armed<B::Store>,
        key: RequestKey<'_>,
        now: Moment,
        cost: u64,
    ) -> Outcome {
        let mut out = Outcome::new();
        if let Some(part) = &armed.enforced {
            out.enforced(self.backend.check(&part.store, key, now, cost).await);
        }
        if out.admitted
            && let Some(part) = &armed.shadowed
        {
            let result = self.backend.check(&part.store, key, now, cost).await;
            out.shadowed(armed, self.kept_stats(), now, result);
        }
        out
    }

    /// The statistics of the checks, and the refusal or what the response will get.
    fn conclude(&self, limit: usize, now: Moment, outcome: &Outcome) -> Verdict {
        let armed = &self.limits[limit];
        let names = armed.limit.rules().rules();
        let stats = &self.stats[armed.first_stat..armed.first_stat + names.len()];
        let binding = outcome.binding(armed);
        let degraded = self.degraded && outcome.without_store.is_some();
        if outcome.admitted {
            if self.stats_on && armed.shadowed.is_some() {
                for (i, stat) in stats.iter().enumerate() {
                    if outcome.denied_by(armed, i) {
                        stat.deny(now); // a shadow policy's would-be denial
                    }
                }
            }
            return Verdict::Admitted(self.admitted(limit, now, binding, degraded));
        }
        let refused = outcome.refusal.as_ref().unwrap_or(&Refused::Quota);
        let mut violated: Vec<&str> = Vec::new();
        for (i, stat) in stats.iter().enumerate() {
            let by_it = match refused {
                Refused::Quota => outcome.denied_by(armed, i),
                Refused::CostTooHigh { cost, .. } => {
                    !stat.is_shadow() && names[i].max_cost() < *cost
                }
                Refused::KeysFull { .. } | Refused::Unavailable(_) => !stat.is_shadow(),
            };
            if by_it {
                if self.stats_on {
                    stat.deny(now);
                }
                violated.push(names[i].name());
            }
        }
        let wait = binding.and_then(|(_, d)| d.retry_after());
        let refusal = match refused {
            Refused::Quota => Refusal::QuotaExceeded {
                policies: violated,
                retry_after: wait,
            },
            Refused::CostTooHigh { cost, max } => Refusal::CostTooHigh {
                policies: violated,
                cost: *cost,
                max: *max,
            },
            Refused::KeysFull { cap } => Refusal::KeysFull { cap: *cap },
            Refused::Unavailable(detail) => Refusal::Unavailable {
                detail,
                retry_after: wait,
            },
        };
        let mut response = (self.on_refusal)(&refusal);
        let headers = response.headers_mut();
        self.insert_fields(armed, binding, degraded.then_some("closed"), headers);
        if let Some(wait) = binding.and_then(|(_, decision)| retry_after(&decision)) {
            headers.insert(RETRY_AFTER, wait);
        }
        Verdict::Refused(response)
    }

    /// The wrapped service's answer: timed, counted, and given the fields.
    fn finish<T>(&self, after: &After, response: &mut Response<T>) {
        let armed = &self.limits[after.limit];
        if self.stats_on {
            let done = self.clock.now();
            let event = if response.status().is_server_error() {
                MetricEvent::Exception
            } else {
                MetricEvent::Success
            };
            armed.requests.add(done, event, 1);
            armed
                .requests
                .add_rt(done, done.saturating_duration_since(after.start));
        }
        let degraded = after.degraded.then_some("open");
        self.insert_fields(armed, after.binding, degraded, response.headers_mut());
    }

    /// A limited request's fields: `RateLimit-Policy`; the binding decision's `RateLimit`
    /// (and the legacy headers, when asked for); `Slidewin-Degraded` with the way a failure
    /// policy went.
    fn insert_fields(
        &self,
        armed: &Armed<B::Store>,
        binding: Option<(usize, Decision)>,
        degraded: Option<&'static str>,
        headers: &mut HeaderMap,
    ) {
        headers.insert(
            crate::fields::RATELIMIT_POLICY,
            armed.fields.policy().clone(),
        );
        if let Some((rule, decision)) = binding {
            headers.insert(
                crate::fields::RATELIMIT,
                armed.fields.rate_limit_at(rule, &decision),
            );
            if self.legacy {
                RateLimitFields::insert_legacy_one(&decision, headers);
            }
        }
        if let Some(way) = degraded {
            headers.insert(SLIDEWIN_DEGRADED, HeaderValue::from_static(way));
        }
    }
}

/// The service [`RateLimitLayer`] wraps around yours.
pub struct RateLimit<S, B: Backend, C = TscClock> {
    inner: S,
    shared: Arc<Shared<B, C>>,
}

impl<S: Clone, B: Backend, C> Clone for RateLimit<S, B, C> {
    fn clone(&self) -> Self {
        RateLimit {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: fmt::Debug, B: Backend, C> fmt::Debug for RateLimit<S, B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

type Boxed<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

pin_project_lite::pin_project! {
    /// The future of a [`RateLimit`] service's response. With a backend that answers at once
    /// (memory) it is the wrapped service's own future, unboxed; otherwise a boxed one that
    /// waits for the store first.
    pub struct ResponseFuture<F, B: Backend, C, T, E> {
        #[pin]
        state: State<F, B, C, T, E>,
    }
}

pin_project_lite::pin_project! {
    #[project = StateProj]
    enum State<F, B: Backend, C, T, E> {
        Ready { response: Option<Response<T>> },
        Inner { #[pin] future: F, after: Option<(Arc<Shared<B, C>>, After)> },
        Waiting { future: Boxed<Response<T>, E> },
    }
}

impl<F, B, C, T, E> Future for ResponseFuture<F, B, C, T, E>
where
    F: Future<Output = Result<Response<T>, E>>,
    B: Backend,
    C: Clock,
{
    type Output = Result<Response<T>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Ready { response } => match response.take() {
                Some(response) => Poll::Ready(Ok(response)),
                None => panic!("a RateLimit response future polled after it completed"),
            },
            StateProj::Inner { future, after } => {
                let mut response = std::task::ready!(future.poll(cx))?;
                if let Some((shared, after)) = after.take() {
                    shared.finish(&after, &mut response);
                }
                Poll::Ready(Ok(response))
            }
            StateProj::Waiting { future } => future.as_mut().poll(cx),
        }
    }
}

impl<F, B: Backend, C, T, E> fmt::Debug for ResponseFuture<F, B, C, T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<S, B, C, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, B, C>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send,
    B: Backend,
    C: Clock + Send + Sync + 'static,
    ReqBody: Send + 'static,
    ResBody: From<String> + Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, B, C, ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The clone is not ready; the service that was polled ready serves this request.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let (parts, body) = request.into_parts();
        let state = match self.shared.plan(&parts) {
            Plan::Pass => State::Inner {
                future: inner.call(Request::from_parts(parts, body)),
                after: None,
            },
            Plan::Refuse(response) => State::Ready {
                response: Some(response.map(ResBody::from)),
            },
            Plan::Check {
                limit,
                key,
                cost,
                now,
            } => {
                let armed = &self.shared.limits[limit];
                let mut outcome = Outcome::new();
                match self
                    .shared
                    .decide_at_once(armed, key.key(), now, cost, &mut outcome)
                {
                    AtOnce::Admitted(binding) => State::Inner {
                        future: inner.call(Request::from_parts(parts, body)),
                        after: Some((
                            Arc::clone(&self.shared),
                            self.shared.admitted(limit, now, binding, false),
                        )),
                    },
                    AtOnce::Decided => match self.shared.conclude(limit, now, &outcome) {
                        Verdict::Refused(response) => State::Ready {
                            response: Some(response.map(ResBody::from)),
                        },
                        Verdict::Admitted(after) => State::Inner {
                            future: inner.call(Request::from_parts(parts, body)),
                            after: Some((Arc::clone(&self.shared), after)),
                        },
                    },
                    AtOnce::Waits => {
                        let key = key.into_owned();
                        let shared = Arc::clone(&self.shared);
                        State::Waiting {
                            future: Box::pin(async move {
                                let armed = &shared.limits[limit];
                                let outcome = shared.decide(armed, key.key(), now, cost).await;
                                match shared.conclude(limit, now, &outcome) {
                                    Verdict::Refused(response) => Ok(response.map(ResBody::from)),
                                    Verdict::Admitted(mut after) => {
                                        // The wrapped service's own time, not the store's.
                                        if shared.stats_on {
                                            after.start = shared.clock.now();
                                        }
                                        let request = Request::from_parts(parts, body);
                                        let mut response = inner.call(request).await?;
                                        shared.finish(&after, &mut response);
                                        Ok(response)
                                    }
                                }
                            }),
                        }
                    }
                }
            }
        };
        ResponseFuture { state }
    }
}
