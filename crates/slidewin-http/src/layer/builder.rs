//! [`RateLimitLayerBuilder`]: a layer's limits and options, checked and armed into stores by
//! [`build`](RateLimitLayerBuilder::build).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use http::Response;
use slidewin::limit::Kind;
use slidewin::{Clock, WindowMetrics};

use super::{Armed, MissingKey, Part, RateLimitLayer, RefusalFn, Shared};
use crate::clock::TscClock;
use crate::error::HttpConfigError;
use crate::fields::RateLimitFields;
use crate::limit::Limit;
use crate::refusal::{Refusal, problem};
use crate::stats::PolicyStats;
use slidewin_store::Backend;

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

    /// Sends [`Slidewin-Degraded`](super::SLIDEWIN_DEGRADED) on the responses that a backend's
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
    /// [`HttpConfigError::DuplicatePolicy`] for two policies of one name in the layer;
    /// [`HttpConfigError::NotRepresentable`] for a limit too large for the fields;
    /// [`HttpConfigError::Limit`] for a statistics window, a key cap or rules the core or the
    /// backend refuses.
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::{HttpConfigError, Limit, Memory, RateLimitLayer};
    ///
    /// let api = RuleSet::from(Rule::new("api", Kind::Gcra, "10/s".parse()?)?);
    /// let err = RateLimitLayer::builder(Memory::new())
    ///     .limit(Limit::new(api.clone()).route("/a"))
    ///     .limit(Limit::new(api).route("/b"))
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err, HttpConfigError::DuplicatePolicy { name: "api".into() });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn build(self) -> Result<RateLimitLayer<B, C>, HttpConfigError> {
        // Shared with each policy's statistics, which read it for their snapshots.
        let clock = Arc::new(self.clock);
        let start = clock.now();
        let mut stats = Vec::new();
        let mut limits = Vec::with_capacity(self.limits.len());
        for limit in self.limits {
            let rules = limit.rules().rules();
            for rule in rules {
                if rule.kind() == Kind::Leases {
                    return Err(HttpConfigError::LeasesNotReleased {
                        rule: rule.name().to_string(),
                    });
                }
                if stats.iter().any(|s: &PolicyStats| s.name() == rule.name()) {
                    return Err(HttpConfigError::DuplicatePolicy {
                        name: rule.name().to_string(),
                    });
                }
            }
            let shadow: Vec<bool> = limit
                .shadow_flags()
                .iter()
                .map(|&s| s || self.shadow)
                .collect();
            let fields = RateLimitFields::with_unit(limit.rules(), limit.unit())?;
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
            let part = |want: bool| -> Result<Option<Part<B::Store>>, HttpConfigError> {
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
