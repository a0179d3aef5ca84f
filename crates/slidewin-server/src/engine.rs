//! The decisions: a request's descriptors matched against the config's trees, as envoy
//! ratelimit matches them, each matched limit checked in the backend.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use slidewin::limit::Binding;
use slidewin::stats::{MetricEvent, MetricStats, WindowMetrics};
use slidewin::{Clock, Decision, Moment};
use slidewin_http::{BackendError, RATELIMIT, RATELIMIT_POLICY, RateLimitFields, RequestKey};

use crate::backend::ServiceBackend as Backend;

use crate::config::{Config, Descriptor, Enforce, Unit};
use crate::metrics::{LazyRuleMetrics, Metrics, RuleMetrics};
use crate::overrides::{Overrides, Refused};
use crate::snapshot::{Busiest, Minute, RuleStats, SECONDS, ShownRules, Totals};
use crate::top::TopKeys;

/// The bounds on one request; each one exceeded is refused with an error naming it. And what a
/// request may ask for itself: a limit override of its own, and for how long.
///
/// ```
/// use slidewin_server::{Bounds, Unit};
/// let bounds = Bounds::default();
/// assert_eq!(bounds.max_descriptors, 64);
/// assert!(bounds.request_overrides);
/// assert_eq!(bounds.max_override_unit, Unit::Day);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Descriptors in one request.
    pub max_descriptors: usize,
    /// Entries in one descriptor.
    pub max_entries: usize,
    /// Bytes in one entry's key or value.
    pub max_text_len: usize,
    /// Whether a descriptor's own `limit` (a request limit override, envoy's
    /// `RateLimitDescriptor.limit`) applies: `true` by default, as in envoy ratelimit, which
    /// always honours them. When `false`, an override is ignored (and counted): the config
    /// decides the descriptor as if it had none.
    pub request_overrides: bool,
    /// The longest unit a request limit override may have: [`Unit::Day`] by default. A longer
    /// one is refused for its descriptor (`OVER_LIMIT`, the reason as its `current_limit`'s
    /// name), since its counts would live as long as the unit.
    pub max_override_unit: Unit,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            max_descriptors: 64,
            max_entries: 16,
            max_text_len: 1024,
            request_overrides: true,
            max_override_unit: Unit::Day,
        }
    }
}

/// A request to rate limit, as envoy's `RateLimitRequest` carries it.
///
/// ```
/// use slidewin_server::{Entry, RateLimitRequest, RequestDescriptor};
/// let request = RateLimitRequest::new("api", vec![RequestDescriptor::new(vec![Entry::new("client", "ann")])]);
/// assert_eq!(request.hits_addend, 0);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RateLimitRequest {
    /// The domain whose config applies.
    pub domain: String,
    /// The descriptors, each decided on its own.
    pub descriptors: Vec<RequestDescriptor>,
    /// The hits each descriptor adds; 0, protobuf's "unset", means 1.
    pub hits_addend: u64,
}

impl RateLimitRequest {
    /// `descriptors` in `domain`, one hit each.
    #[must_use]
    pub fn new(domain: &str, descriptors: Vec<RequestDescriptor>) -> RateLimitRequest {
        RateLimitRequest {
            domain: domain.to_owned(),
            descriptors,
            hits_addend: 0,
        }
    }
}

/// One descriptor: its entries, in order, and the hits it adds if it says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestDescriptor {
    /// The entries.
    pub entries: Vec<Entry>,
    /// The hits this descriptor adds, over the request's; `Some(0)` checks without counting.
    pub hits_addend: Option<u64>,
    /// A limit the caller sets for this descriptor, over the config's (envoy's
    /// `RateLimitDescriptor.limit`): its entries are counted under it, in the request's domain.
    pub limit: Option<LimitOverride>,
}

/// A limit a request sets for one descriptor: `requests_per_unit` per `unit`, counted by a
/// sliding log up to [`MAX_LOG_LIMIT`](crate::MAX_LOG_LIMIT) and `sliding_counter` past it (0
/// denies every request, as in envoy ratelimit). Its unit is bounded by
/// [`Bounds::max_override_unit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LimitOverride {
    /// The limit.
    pub requests_per_unit: u32,
    /// Its span.
    pub unit: Unit,
}

impl RequestDescriptor {
    /// A descriptor of `entries`.
    #[must_use]
    pub fn new(entries: Vec<Entry>) -> RequestDescriptor {
        RequestDescriptor {
            entries,
            hits_addend: None,
            limit: None,
        }
    }
}

/// A key and its value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
}

impl Entry {
    /// `key` = `value`.
    #[must_use]
    pub fn new(key: &str, value: &str) -> Entry {
        Entry {
            key: key.to_owned(),
            value: value.to_owned(),
        }
    }
}

/// OK or over the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// Admitted.
    Ok,
    /// Over the limit.
    OverLimit,
}

/// The limit that decided a descriptor, as envoy reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurrentLimit {
    /// The limit's name: its config `name`, or its rule's name.
    pub name: String,
    /// Its requests per unit (the limit, for a span that is no unit).
    pub requests_per_unit: u32,
    /// The unit, where the span is exactly one.
    pub unit: Option<Unit>,
}

/// What was decided for one descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescriptorStatus {
    /// Its code.
    pub code: Code,
    /// The limit that applied (the binding one of a list); none when no limit matched.
    pub current_limit: Option<CurrentLimit>,
    /// What is left of it.
    pub limit_remaining: u32,
    /// When it is back to full.
    pub duration_until_reset: Option<Duration>,
}

/// The answer to a [`RateLimitRequest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateLimitResponse {
    /// Over the limit when any descriptor is (quota mode aside).
    pub overall_code: Code,
    /// One per descriptor, in order.
    pub statuses: Vec<DescriptorStatus>,
    /// `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers), and
    /// `Retry-After` when over the limit.
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// A request refused before any check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// The domain is empty.
    EmptyDomain,
    /// No descriptor.
    NoDescriptors,
    /// More descriptors than [`Bounds::max_descriptors`].
    TooManyDescriptors {
        /// How many came.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// A descriptor with no entry.
    EmptyDescriptor {
        /// Its index.
        descriptor: usize,
    },
    /// More entries than [`Bounds::max_entries`].
    TooManyEntries {
        /// The descriptor's index.
        descriptor: usize,
        /// How many came.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// A key or value longer than [`Bounds::max_text_len`].
    TextTooLong {
        /// The descriptor's index.
        descriptor: usize,
        /// `key` or `value`.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// A domain longer than [`Bounds::max_text_len`].
    DomainTooLong {
        /// Its length in bytes.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// The store could not answer, and no failure policy answered for it.
    Unavailable {
        /// What failed.
        detail: String,
    },
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::EmptyDomain => f.write_str("rate limit domain must not be empty"),
            RequestError::NoDescriptors => {
                f.write_str("rate limit descriptor list must not be empty")
            }
            RequestError::TooManyDescriptors { count, max } => write!(
                f,
                "{count} descriptors in one request: at most {max} (max_descriptors)"
            ),
            RequestError::EmptyDescriptor { descriptor } => {
                write!(f, "descriptor {descriptor} has no entries")
            }
            RequestError::TooManyEntries {
                descriptor,
                count,
                max,
            } => write!(
                f,
                "descriptor {descriptor} has {count} entries: at most {max} (max_entries)"
            ),
            RequestError::TextTooLong {
                descriptor,
                what,
                len,
                max,
            } => write!(
                f,
                "descriptor {descriptor} has a {what} of {len} bytes: at most {max} (max_text_len)"
            ),
            RequestError::DomainTooLong { len, max } => {
                write!(f, "the domain is {len} bytes: at most {max} (max_text_len)")
            }
            RequestError::Unavailable { detail } => {
                write!(f, "the rate limit store could not answer: {detail}")
            }
        }
    }
}

impl std::error::Error for RequestError {}

impl RequestError {
    /// A mistake of the caller's (an `INVALID_ARGUMENT` or 400), not of the service.
    #[must_use]
    pub fn is_invalid_argument(&self) -> bool {
        !matches!(self, RequestError::Unavailable { .. })
    }
}

/// A limit in force: its counts, its fields and its statistics. Kept across a reload while its
/// domain, path and rules stay the same.
pub(crate) struct RuleRt<B: Backend> {
    pub(crate) domain: String,
    pub(crate) path: String,
    /// Its one name, everywhere it is shown (see [`crate::config::Limit::name`]).
    pub(crate) shown: String,
    pub(crate) name: Option<String>,
    pub(crate) replaces: Vec<String>,
    pub(crate) shadow: bool,
    pub(crate) quota_mode: bool,
    pub(crate) enforce: EnforceRt<B>,
    pub(crate) stats: Arc<RuleWindow>,
    pub(crate) metrics: LazyRuleMetrics,
}

pub(crate) enum EnforceRt<B: Backend> {
    Unlimited,
    Blocked {
        unit: Unit,
    },
    Rules {
        spec: slidewin::limit::RuleSet,
        units: Vec<Option<Unit>>,
        store: Arc<B::Store>,
        fields: RateLimitFields,
    },
}

/// A rule's last minute, per second: passed, denied, and denied in shadow mode. Each of its
/// two windows is allocated at its first event: an idle rule holds none of their 16 KB, and a
/// snapshot reads nothing of it.
pub(crate) struct RuleWindow {
    outcomes: LazyWindow,
    shadow: LazyWindow,
}

/// A minute of one-second buckets, allocated at its first event.
pub(crate) struct LazyWindow {
    start: Moment,
    metrics: std::sync::OnceLock<WindowMetrics>,
}

impl LazyWindow {
    fn new(start: Moment) -> LazyWindow {
        LazyWindow {
            start,
            metrics: std::sync::OnceLock::new(),
        }
    }

    /// Counts `n` `event`s at `t`, as [`WindowMetrics::add`] does.
    pub(crate) fn add(&self, t: Moment, event: MetricEvent, n: u64) {
        self.metrics
            .get_or_init(|| {
                WindowMetrics::new(Duration::from_secs(60), 60, self.start)
                    .unwrap_or_else(|_| unreachable!("a minute of 60 buckets is valid"))
            })
            .add(t, event, n);
    }

    fn sum(&self, now: Moment, event: MetricEvent) -> u64 {
        self.metrics.get().map_or(0, |m| m.sum(now, event))
    }

    fn previous_bucket(&self, now: Moment) -> Option<MetricStats> {
        self.metrics.get()?.previous_bucket(now)
    }

    fn buckets(&self, now: Moment) -> Vec<MetricStats> {
        self.metrics.get().map_or_else(Vec::new, |m| m.buckets(now))
    }
}

impl RuleWindow {
    pub(crate) fn new(now: Moment) -> RuleWindow {
        RuleWindow {
            outcomes: LazyWindow::new(now),
            shadow: LazyWindow::new(now),
        }
    }

    /// The sums of the last minute at `now`, and of the last whole second (the one before
    /// `now`'s): what ranks a rule among the busiest, and what the summary of all rules shows.
    /// Reads one counter of each bucket, with no allocation: a snapshot reads every rule's.
    fn sums(&self, now: Moment) -> (Totals, Totals) {
        let last_minute = Totals {
            passed: self.outcomes.sum(now, MetricEvent::Pass),
            denied: self.outcomes.sum(now, MetricEvent::Block),
            shadow_denied: self.shadow.sum(now, MetricEvent::Block),
        };
        let outcomes = self.outcomes.previous_bucket(now);
        let count =
            |bucket: &Option<MetricStats>, event| bucket.as_ref().map_or(0, |b| b.count(event));
        let last_second = Totals {
            passed: count(&outcomes, MetricEvent::Pass),
            denied: count(&outcomes, MetricEvent::Block),
            shadow_denied: count(&self.shadow.previous_bucket(now), MetricEvent::Block),
        };
        (last_minute, last_second)
    }

    /// The last minute at `now`, each second's counts, oldest first (the current second
    /// last): passed and denied from `outcomes`, shadow-denied from `shadow`.
    fn minute(&self, now: Moment) -> Minute {
        let this_second = now.as_nanos() / 1_000_000_000;
        let second = |bucket: &MetricStats| {
            let age = this_second.checked_sub(bucket.start().as_nanos() / 1_000_000_000)?;
            let age = usize::try_from(age).ok().filter(|age| *age < SECONDS)?;
            Some(SECONDS - 1 - age)
        };
        let mut minute = Minute::ZERO;
        for bucket in self.outcomes.buckets(now) {
            if let Some(i) = second(&bucket) {
                minute.passed[i] = minute.passed[i].saturating_add(bucket.count(MetricEvent::Pass));
                minute.denied[i] =
                    minute.denied[i].saturating_add(bucket.count(MetricEvent::Block));
            }
        }
        for bucket in self.shadow.buckets(now) {
            if let Some(i) = second(&bucket) {
                minute.shadow_denied[i] =
                    minute.shadow_denied[i].saturating_add(bucket.count(MetricEvent::Block));
            }
        }
        minute
    }
}

/// A domain's tree of descriptors, ready for matching.
struct Node<B: Backend> {
    children: HashMap<String, Node<B>>,
    /// `key_pattern` of children whose value has a `*`, in config order.
    wildcards: Vec<(String, Vec<String>)>,
    rule: Option<Arc<RuleRt<B>>>,
    /// For a `share_threshold` node: the value every match counts as.
    shared_value: Option<String>,
}

impl<B: Backend> Node<B> {
    fn empty() -> Node<B> {
        Node {
            children: HashMap::new(),
            wildcards: Vec::new(),
            rule: None,
            shared_value: None,
        }
    }
}

/// A config in force.
pub(crate) struct Loaded<B: Backend> {
    pub(crate) config: Config,
    pub(crate) version: u64,
    pub(crate) loaded_at: jiff::Timestamp,
    domains: HashMap<String, Node<B>>,
    /// Every limit, in config order.
    pub(crate) rules: Vec<Arc<RuleRt<B>>>,
}

/// The decision engine: a config, a backend, statistics. Cloning shares it.
pub struct Engine<B: Backend> {
    inner: Arc<Inner<B>>,
}

impl<B: Backend> Clone for Engine<B> {
    fn clone(&self) -> Engine<B> {
        Engine {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Inner<B: Backend> {
    backend: B,
    clock: Arc<dyn Clock + Send + Sync>,
    bounds: Bounds,
    loaded: RwLock<Arc<Loaded<B>>>,
    metrics: Metrics,
    top: TopKeys,
    /// The limits requests set, one store per domain, limit and unit, bounded.
    overrides: Overrides<B>,
}

impl<B: Backend> Engine<B> {
    /// An engine deciding by `config` in `backend`, on `clock`.
    ///
    /// # Errors
    ///
    /// A rule the backend cannot hold.
    pub fn new(
        backend: B,
        config: Config,
        clock: Arc<dyn Clock + Send + Sync>,
        bounds: Bounds,
        metrics: Metrics,
    ) -> Result<Engine<B>, String> {
        let now = clock.now();
        let loaded = build(&backend, config, None, 1, now, &metrics)?;
        Ok(Engine {
            inner: Arc::new(Inner {
                backend,
                clock,
                bounds,
                loaded: RwLock::new(Arc::new(loaded)),
                metrics,
                top: TopKeys::new(),
                overrides: Overrides::new(),
            }),
        })
    }

    /// Puts `config` in force. Limits kept (same domain and path) keep their counts and
    /// statistics; with new quotas, the backend carries what it can; limits gone free theirs.
    ///
    /// # Errors
    ///
    /// A rule the backend cannot hold; the config in force stays.
    pub fn reload(&self, config: Config) -> Result<u64, String> {
        let now = self.inner.clock.now();
        let old = self.loaded();
        let loaded = build(
            &self.inner.backend,
            config,
            Some(&old),
            old.version + 1,
            now,
            &self.inner.metrics,
        )?;
        let version = loaded.version;
        *self
            .inner
            .loaded
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(loaded);
        Ok(version)
    }

    pub(crate) fn loaded(&self) -> Arc<Loaded<B>> {
        Arc::clone(
            &self
                .inner
                .loaded
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// The config in force, its version (1 for the first) and when it was loaded.
    #[must_use]
    pub fn config(&self) -> (Config, u64, jiff::Timestamp) {
        let loaded = self.loaded();
        (loaded.config.clone(), loaded.version, loaded.loaded_at)
    }

    /// The metrics the engine counts into.
    #[must_use]
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The backend.
    #[must_use]
    pub fn backend(&self) -> &B {
        &self.inner.backend
    }

    /// Each rule's last minute, in config order.
    #[must_use]
    pub fn rule_stats(&self) -> Vec<RuleStats> {
        self.busiest_rules(usize::MAX).rules
    }

    /// The `at_most` rules busiest in the last minute (most passed, denied and shadow-denied
    /// requests; on a tie, the first in the config), in config order, with the count and the
    /// sums of every rule: what a snapshot shows. Every rule's sums are read (one counter a
    /// bucket); only the rules shown have their minute read second by second, are named, and
    /// have their keys counted (which takes the locks of their stores' shards).
    pub(crate) fn busiest_rules(&self, at_most: usize) -> ShownRules {
        let now = self.inner.clock.now();
        let loaded = self.loaded();
        let rules: Vec<&RuleRt<B>> = loaded
            .rules
            .iter()
            .map(AsRef::as_ref)
            .filter(|rule| matches!(rule.enforce, EnforceRt::Rules { .. }))
            .collect();
        let mut busiest = Busiest::new(at_most);
        for rule in &rules {
            let (last_minute, last_second) = rule.stats.sums(now);
            busiest.offer(&last_minute, &last_second);
        }
        busiest.finish(|index| {
            let rule = rules[index];
            let minute = rule.stats.minute(now);
            let mut stats = RuleStats {
                domain: rule.domain.clone(),
                name: rule.display_name().to_owned(),
                shadow: rule.shadow,
                per_second: minute.per_second(),
                last_minute: minute.totals(),
                ..RuleStats::default()
            };
            if let EnforceRt::Rules { spec, store, .. } = &rule.enforce {
                let quota: Vec<String> =
                    spec.rules().iter().map(|r| r.quota().to_string()).collect();
                let algorithm: Vec<&str> = spec.rules().iter().map(|r| r.kind().name()).collect();
                stats.quota = quota.join(" and ");
                stats.algorithm = algorithm.join(", ");
                stats.keys = self.inner.backend.keys(store);
            }
            stats
        })
    }

    /// The keys denied most in the last minute.
    #[must_use]
    pub fn top_denied(&self) -> Vec<crate::snapshot::TopKey> {
        self.inner.top.top(self.inner.clock.now(), 10)
    }

    /// Decides `request`.
    ///
    /// # Errors
    ///
    /// A request out of [`Bounds`], or a store that failed with no failure policy to answer.
    pub async fn should_rate_limit(
        &self,
        request: &RateLimitRequest,
    ) -> Result<RateLimitResponse, RequestError> {
        self.validate(request)?;
        let started = std::time::Instant::now();
        let loaded = self.loaded();
        let now = self.inner.clock.now();
        let request_hits = if request.hits_addend == 0 {
            1
        } else {
            request.hits_addend
        };
        let Some(root) = loaded.domains.get(&request.domain) else {
            // An unknown domain has no limits: every descriptor is OK, as in envoy ratelimit.
            return Ok(RateLimitResponse {
                overall_code: Code::Ok,
                statuses: request.descriptors.iter().map(|_| no_limit()).collect(),
                headers: Vec::new(),
            });
        };
        let mut matched: Vec<Option<Matched<B>>> = Vec::with_capacity(request.descriptors.len());
        // Descriptors whose own limit was refused: by index, why, and what they asked.
        let mut refused: Vec<(usize, Refused, LimitOverride)> = Vec::new();
        for (i, descriptor) in request.descriptors.iter().enumerate() {
            let found = match descriptor.limit {
                Some(limit) if self.inner.bounds.request_overrides => {
                    match self.override_rule(&request.domain, limit, now) {
                        Ok(rule) => Some((rule, Vec::new())),
                        Err(why) => {
                            refused.push((i, why, limit));
                            None
                        }
                    }
                }
                Some(_) => {
                    self.inner.metrics.request_override("ignored");
                    find(root, &descriptor.entries)
                }
                None => find(root, &descriptor.entries),
            };
            matched.push(found);
        }
        replace(&mut matched);

        let mut statuses = Vec::with_capacity(request.descriptors.len());
        // The descriptor whose limit binds the `RateLimit` field: its index, its binding rule's
        // index in the set, and that rule's decision.
        let mut binding = Binding::new();
        let mut policies: Vec<HeaderValue> = Vec::new();
        let mut degraded = false;
        let mut failed_rate = 0;
        let (mut quota_total, mut quota_failed) = (0, 0);
        for (i, (descriptor, slot)) in request.descriptors.iter().zip(&matched).enumerate() {
            if let Some((_, why, limit)) = refused.iter().find(|(at, _, _)| *at == i) {
                failed_rate += 1;
                statuses.push(refused_status(why, *limit));
                continue;
            }
            let Some((rule, shared)) = slot else {
                statuses.push(no_limit());
                continue;
            };
            let hits = descriptor.hits_addend.unwrap_or(request_hits);
            let (status, decided, without_store) = self
                .check(
                    rule,
                    &request.domain,
                    &descriptor.entries,
                    shared,
                    hits,
                    now,
                )
                .await?;
            degraded |= without_store;
            if let EnforceRt::Rules { fields, .. } = &rule.enforce {
                policies.push(fields.policy().clone());
            }
            if status.code == Code::OverLimit {
                if rule.quota_mode {
                    quota_failed += 1;
                } else {
                    failed_rate += 1;
                }
            }
            if rule.quota_mode {
                quota_total += 1;
            }
            if let Some((rule_at, decision)) = decided {
                if rule.shadow {
                    binding.offer_shadow(decision, (i, rule_at));
                } else {
                    binding.offer(decision, (i, rule_at));
                }
            }
            statuses.push(status);
        }
        let over = failed_rate > 0 || (quota_total > 0 && quota_total == quota_failed);
        let mut headers = Vec::new();
        if !policies.is_empty()
            && let Some(policy) = join_fields(&policies)
        {
            headers.push((RATELIMIT_POLICY, policy));
        }
        if let Some((decision, (i, rule_at))) = binding.get()
            && let Some((rule, _)) = &matched[*i]
            && let EnforceRt::Rules { fields, .. } = &rule.enforce
        {
            headers.push((RATELIMIT, fields.rate_limit_at(*rule_at, decision)));
            if over && let Some(retry) = slidewin_http::retry_after(decision) {
                headers.push((http::header::RETRY_AFTER, retry));
            }
        }
        if degraded && let Some(way) = self.inner.backend.failure_policy() {
            headers.push((
                slidewin_http::SLIDEWIN_DEGRADED,
                HeaderValue::from_static(way),
            ));
        }
        self.inner.metrics.observe_decision(started.elapsed());
        Ok(RateLimitResponse {
            overall_code: if over { Code::OverLimit } else { Code::Ok },
            statuses,
            headers,
        })
    }

    /// The store for a limit a request set, made on first use, or why it is refused.
    fn override_rule(
        &self,
        domain: &str,
        limit: LimitOverride,
        now: Moment,
    ) -> Result<Arc<RuleRt<B>>, Refused> {
        let inner = &self.inner;
        let found = inner.overrides.rule(
            &inner.backend,
            &inner.metrics,
            &inner.bounds,
            (domain, limit),
            now,
        );
        inner.metrics.request_override(match &found {
            Ok(_) => "applied",
            Err(_) => "refused",
        });
        if let Err(why) = &found {
            tracing::debug!(domain, %why, "a request's limit override was refused");
        }
        found
    }

    fn validate(&self, request: &RateLimitRequest) -> Result<(), RequestError> {
        let bounds = &self.inner.bounds;
        if request.domain.is_empty() {
            return Err(RequestError::EmptyDomain);
        }
        if request.descriptors.is_empty() {
            return Err(RequestError::NoDescriptors);
        }
        if request.descriptors.len() > bounds.max_descriptors {
            return Err(RequestError::TooManyDescriptors {
                count: request.descriptors.len(),
                max: bounds.max_descriptors,
            });
        }
        if request.domain.len() > bounds.max_text_len {
            return Err(RequestError::DomainTooLong {
                len: request.domain.len(),
                max: bounds.max_text_len,
            });
        }
        for (i, descriptor) in request.descriptors.iter().enumerate() {
            if descriptor.entries.is_empty() {
                return Err(RequestError::EmptyDescriptor { descriptor: i });
            }
            if descriptor.entries.len() > bounds.max_entries {
                return Err(RequestError::TooManyEntries {
                    descriptor: i,
                    count: descriptor.entries.len(),
                    max: bounds.max_entries,
                });
            }
            for entry in &descriptor.entries {
                for (what, text) in [("key", &entry.key), ("value", &entry.value)] {
                    if text.len() > bounds.max_text_len {
                        return Err(RequestError::TextTooLong {
                            descriptor: i,
                            what,
                            len: text.len(),
                            max: bounds.max_text_len,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    async fn check(
        &self,
        rule: &RuleRt<B>,
        domain: &str,
        entries: &[Entry],
        shared: &[(usize, String)],
        hits: u64,
        now: Moment,
    ) -> Result<(DescriptorStatus, Option<(usize, Decision)>, bool), RequestError> {
        let metrics = rule.metrics();
        match &rule.enforce {
            EnforceRt::Unlimited => Ok((
                DescriptorStatus {
                    code: Code::Ok,
                    current_limit: None,
                    limit_remaining: u32::MAX,
                    duration_until_reset: None,
                },
                None,
                false,
            )),
            EnforceRt::Blocked { unit } => {
                metrics.total_hits.inc_by(hits);
                let code = self.over(rule, hits, now, entries);
                Ok((
                    DescriptorStatus {
                        code,
                        current_limit: Some(CurrentLimit {
                            name: rule.display_name().to_owned(),
                            requests_per_unit: 0,
                            unit: Some(*unit),
                        }),
                        limit_remaining: 0,
                        duration_until_reset: Some(unit.span()),
                    },
                    None,
                    false,
                ))
            }
            EnforceRt::Rules {
                spec, units, store, ..
            } => {
                let key = counter_key(domain, &rule.path, entries, shared);
                metrics.total_hits.inc_by(hits);
                let key = RequestKey::Text(&key);
                let checked = match self.inner.backend.check_at_once(store, key, now, hits) {
                    Some(answer) => answer,
                    None => self.inner.backend.check(store, key, now, hits).await,
                };
                let checked = match checked {
                    Ok(checked) => checked,
                    Err(
                        refused @ (BackendError::CostTooHigh { .. }
                        | BackendError::KeysFull { .. }
                        | BackendError::MemoryFull { .. }),
                    ) => {
                        // More hits than the limit ever admits, or no room for the key: over
                        // the limit, with nothing counted. At the key cap or the memory budget
                        // a new key is refused, so no limited key is pushed out.
                        match refused {
                            BackendError::KeysFull { .. } => self.inner.metrics.key_cap_refusal(),
                            BackendError::MemoryFull { .. } => self.inner.metrics.memory_refusal(),
                            _ => {}
                        }
                        let code = self.over(rule, hits, now, entries);
                        return Ok((
                            DescriptorStatus {
                                code,
                                current_limit: Some(current_limit(rule, spec, units, 0)),
                                limit_remaining: 0,
                                duration_until_reset: None,
                            },
                            None,
                            false,
                        ));
                    }
                    Err(other) => {
                        self.inner.metrics.backend_error();
                        return Err(RequestError::Unavailable {
                            detail: other.to_string(),
                        });
                    }
                };
                let without_store = checked.without_store().is_some();
                if without_store {
                    self.inner.metrics.backend_error();
                }
                let binding = checked.binding();
                let decision = checked.decision();
                let code = if decision.allowed() {
                    rule.stats.outcomes.add(now, MetricEvent::Pass, 1);
                    metrics.within_limit.inc_by(hits);
                    let limit = decision.limit();
                    let used = limit.saturating_sub(decision.remaining());
                    // envoy ratelimit's near limit: past 80% of the limit after this request.
                    if used.saturating_mul(5) > limit.saturating_mul(4) {
                        metrics.near_limit.inc_by(hits);
                    }
                    Code::Ok
                } else {
                    self.over(rule, hits, now, entries)
                };
                let remaining = u32::try_from(decision.remaining()).unwrap_or(u32::MAX);
                Ok((
                    DescriptorStatus {
                        code,
                        current_limit: Some(current_limit(rule, spec, units, binding)),
                        limit_remaining: remaining,
                        duration_until_reset: Some(decision.reset_after()),
                    },
                    Some((binding, decision)),
                    without_store,
                ))
            }
        }
    }

    /// Counts an over-limit descriptor and answers its code: OK in shadow mode.
    fn over(&self, rule: &RuleRt<B>, hits: u64, now: Moment, entries: &[Entry]) -> Code {
        rule.metrics().over_limit.inc_by(hits);
        if rule.shadow {
            rule.metrics().shadow_mode.inc_by(hits);
            // Counted as shadow-denied only: the three outcomes never overlap.
            rule.stats.shadow.add(now, MetricEvent::Block, 1);
            Code::Ok
        } else {
            rule.stats.outcomes.add(now, MetricEvent::Block, 1);
            self.inner
                .top
                .deny(now, &rule.domain, rule.display_name(), entries);
            Code::OverLimit
        }
    }
}

impl<B: Backend> RuleRt<B> {
    /// Its counters, made at its first hit.
    #[inline]
    pub(crate) fn metrics(&self) -> &RuleMetrics {
        self.metrics.get(&self.domain, &self.shown)
    }

    /// Its one name (see [`crate::config::Limit::name`]).
    pub(crate) fn display_name(&self) -> &str {
        &self.shown
    }
}

/// A descriptor's limit, and the patterns `share_threshold` nodes count its entries under
/// (by entry index).
type Matched<B> = (Arc<RuleRt<B>>, Vec<(usize, String)>);

/// A descriptor no limit matched: OK, as envoy ratelimit answers.
fn no_limit() -> DescriptorStatus {
    DescriptorStatus {
        code: Code::Ok,
        current_limit: None,
        limit_remaining: 0,
        duration_until_reset: None,
    }
}

/// `replaces`: a named limit is dropped when another matched limit replaces it.
fn replace<B: Backend>(matched: &mut [Option<Matched<B>>]) {
    let replaced: Vec<String> = matched
        .iter()
        .flatten()
        .flat_map(|(rule, _)| rule.replaces.iter().cloned())
        .collect();
    if replaced.is_empty() {
        return;
    }
    for slot in matched {
        // An unlimited limit is never replaced: envoy ratelimit sets it aside first.
        if slot
            .as_ref()
            .filter(|(rule, _)| !matches!(rule.enforce, EnforceRt::Unlimited))
            .and_then(|(rule, _)| rule.name.as_ref())
            .is_some_and(|name| replaced.contains(name))
        {
            *slot = None;
        }
    }
}

/// A descriptor whose own limit was refused: over the limit (a limit is never switched off by
/// asking for one that cannot be had), the reason as its limit's name (envoy's
/// `RateLimit.name`: "a name or description of this limit").
fn refused_status(why: &Refused, limit: LimitOverride) -> DescriptorStatus {
    DescriptorStatus {
        code: Code::OverLimit,
        current_limit: Some(CurrentLimit {
            name: why.to_string(),
            requests_per_unit: limit.requests_per_unit,
            unit: Some(limit.unit),
        }),
        limit_remaining: 0,
        duration_until_reset: None,
    }
}

fn current_limit<B: Backend>(
    rule: &RuleRt<B>,
    spec: &slidewin::limit::RuleSet,
    units: &[Option<Unit>],
    binding: usize,
) -> CurrentLimit {
    let index = binding.min(spec.rules().len() - 1);
    let one = &spec.rules()[index];
    CurrentLimit {
        name: if spec.rules().len() == 1 {
            rule.display_name().to_owned()
        } else {
            one.name().to_owned()
        },
        requests_per_unit: u32::try_from(one.quota().limit()).unwrap_or(u32::MAX),
        unit: units.get(index).copied().flatten(),
    }
}

/// Several policies' `RateLimit-Policy` members, as one field.
fn join_fields(values: &[HeaderValue]) -> Option<HeaderValue> {
    let mut joined = Vec::new();
    for value in values {
        if !joined.is_empty() {
            joined.extend_from_slice(b", ");
        }
        joined.extend_from_slice(value.as_bytes());
    }
    HeaderValue::from_bytes(&joined).ok()
}

/// The key a descriptor counts under: the SHA-256 of the domain, the limit's path and each
/// entry, each prefixed by its length (so that no crafted value can spell another limit's or
/// entry's key), in hex. So a key is 64 bytes in memory and in Redis whatever the descriptor
/// (16 entries of 1 KB made a 35 KB Redis key), and two descriptors share a count only if they
/// are the same: finding two that are not takes a SHA-256 collision. The readable form is in
/// the dashboard's top keys and the logs, never in the store.
pub(crate) fn counter_key(
    domain: &str,
    path: &str,
    entries: &[Entry],
    shared: &[(usize, String)],
) -> String {
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    let mut push = |text: &str| {
        digest.update(&(text.len() as u64).to_be_bytes());
        digest.update(text.as_bytes());
    };
    push(domain);
    push(path);
    for (i, entry) in entries.iter().enumerate() {
        push(&entry.key);
        match shared.iter().find(|(at, _)| *at == i) {
            Some((_, pattern)) => push(pattern),
            None => push(&entry.value),
        }
    }
    let mut key = String::with_capacity(64);
    for byte in digest.finish().as_ref() {
        use std::fmt::Write;
        let _ = write!(key, "{byte:02x}");
    }
    key
}

/// The limit for `entries` under `root`, as envoy ratelimit finds it: each entry in turn
/// matches a child by `key_value`, else by a wildcard value, else by `key` alone; the limit is
/// the one of the node the last entry reaches. Also, for each entry that reached a
/// `share_threshold` node, the pattern it counts under instead of its value.
fn find<B: Backend>(root: &Node<B>, entries: &[Entry]) -> Option<Matched<B>> {
    let mut node = root;
    let mut shared = Vec::new();
    let mut composite = String::new();
    for (i, entry) in entries.iter().enumerate() {
        composite.clear();
        composite.push_str(&entry.key);
        composite.push('_');
        composite.push_str(&entry.value);
        let next = node.children.get(&composite).or_else(|| {
            node.wildcards
                .iter()
                .find(|(_, parts)| wildcard_match(parts, &composite))
                .and_then(|(pattern, _)| node.children.get(pattern))
                .or_else(|| node.children.get(&entry.key))
        })?;
        if let Some(pattern) = &next.shared_value {
            shared.push((i, pattern.clone()));
        }
        if i == entries.len() - 1 {
            return next.rule.as_ref().map(|rule| (Arc::clone(rule), shared));
        }
        if next.children.is_empty() {
            return None;
        }
        node = next;
    }
    None
}

/// A value against a pattern split at its `*`s: each `*` stands for any text.
fn wildcard_match(parts: &[String], value: &str) -> bool {
    let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
        return false;
    };
    if parts.len() == 1 {
        return first == value;
    }
    let fixed: usize = parts.iter().map(String::len).sum();
    if value.len() < fixed || !value.starts_with(first.as_str()) || !value.ends_with(last.as_str())
    {
        return false;
    }
    let mut rest = &value[first.len()..value.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part.as_str()) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

fn build<B: Backend>(
    backend: &B,
    config: Config,
    old: Option<&Loaded<B>>,
    version: u64,
    now: Moment,
    metrics: &Metrics,
) -> Result<Loaded<B>, String> {
    let mut kept: HashMap<(&str, &str), &Arc<RuleRt<B>>> = HashMap::new();
    if let Some(old) = old {
        for rule in &old.rules {
            kept.insert((rule.domain.as_str(), rule.path.as_str()), rule);
        }
    }
    let mut rules = Vec::new();
    let mut domains = HashMap::new();
    for domain in config.domains() {
        let mut root = Node::empty();
        build_level(
            backend,
            domain.name(),
            domain.descriptors(),
            &mut root,
            &kept,
            &mut rules,
            now,
            metrics,
        )?;
        domains.insert(domain.name().to_owned(), root);
    }
    if let Some(old) = old {
        // Limits gone: their metric series go too (their counts went with the old config).
        for rule in &old.rules {
            if !rules
                .iter()
                .any(|r: &Arc<RuleRt<B>>| r.domain == rule.domain && r.shown == rule.shown)
            {
                metrics.forget_rule(&rule.domain, &rule.shown);
            }
        }
    }
    Ok(Loaded {
        config,
        version,
        loaded_at: jiff::Timestamp::now(),
        domains,
        rules,
    })
}

#[allow(clippy::too_many_arguments)]
fn build_level<B: Backend>(
    backend: &B,
    domain: &str,
    descriptors: &[Descriptor],
    parent: &mut Node<B>,
    kept: &HashMap<(&str, &str), &Arc<RuleRt<B>>>,
    rules: &mut Vec<Arc<RuleRt<B>>>,
    now: Moment,
    metrics: &Metrics,
) -> Result<(), String> {
    for descriptor in descriptors {
        let mut node = Node::empty();
        let composite = match descriptor.value() {
            Some(value) => format!("{}_{value}", descriptor.key()),
            None => descriptor.key().to_owned(),
        };
        if descriptor.share_threshold() {
            node.shared_value = descriptor.value().map(str::to_owned);
        }
        if let Some(limit) = descriptor.limit() {
            let old = kept.get(&(domain, descriptor.path())).copied();
            let enforce = match limit.enforce() {
                Enforce::Unlimited => EnforceRt::Unlimited,
                Enforce::Blocked { unit } => EnforceRt::Blocked { unit: *unit },
                Enforce::Rules { rules: spec, units } => {
                    let same = old.and_then(|old| match &old.enforce {
                        EnforceRt::Rules {
                            spec: old_spec,
                            store,
                            ..
                        } if same_rules(old_spec, spec) => Some(Arc::clone(store)),
                        _ => None,
                    });
                    let store = match same {
                        Some(store) => store,
                        None => {
                            let store = backend
                                .store(spec.clone())
                                .map_err(|e| format!("{}: {e}", descriptor.path()))?;
                            if let Some(EnforceRt::Rules {
                                store: old_store, ..
                            }) = old.map(|o| &o.enforce)
                            {
                                backend.carry_counts(&store, old_store, now);
                            }
                            Arc::new(store)
                        }
                    };
                    let fields = RateLimitFields::new(spec)
                        .map_err(|e| format!("{}: {e}", descriptor.path()))?;
                    EnforceRt::Rules {
                        spec: spec.clone(),
                        units: units.clone(),
                        store,
                        fields,
                    }
                }
            };
            let rule = Arc::new(RuleRt {
                domain: domain.to_owned(),
                path: descriptor.path().to_owned(),
                shown: limit.name().to_owned(),
                name: limit.written_name().map(str::to_owned),
                replaces: limit.replaces().to_vec(),
                shadow: descriptor.shadow(),
                quota_mode: descriptor.quota_mode(),
                enforce,
                stats: old.map_or_else(|| Arc::new(RuleWindow::new(now)), |o| Arc::clone(&o.stats)),
                metrics: metrics.lazy_rule(),
            });
            rules.push(Arc::clone(&rule));
            node.rule = Some(rule);
        }
        build_level(
            backend,
            domain,
            descriptor.descriptors(),
            &mut node,
            kept,
            rules,
            now,
            metrics,
        )?;
        if descriptor.value().is_some_and(|v| v.contains('*')) {
            let parts = composite.split('*').map(str::to_owned).collect();
            parent.wildcards.push((composite.clone(), parts));
        }
        parent.children.insert(composite, node);
    }
    Ok(())
}

/// The same rules: names, kinds and quotas, in order.
fn same_rules(a: &slidewin::limit::RuleSet, b: &slidewin::limit::RuleSet) -> bool {
    a.rules().len() == b.rules().len()
        && a.rules()
            .iter()
            .zip(b.rules())
            .all(|(x, y)| x.name() == y.name() && x.kind() == y.kind() && x.quota() == y.quota())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_OVERRIDES;

    fn parts(pattern: &str) -> Vec<String> {
        pattern.split('*').map(str::to_owned).collect()
    }

    #[tokio::test]
    async fn an_enforced_limit_binds_before_a_shadow_one() {
        let config = Config::parse(
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {name: enforced, quota: 5/s}\n  - key: b\n    shadow_mode: true\n    rate_limit: {name: watched, quota: 1/s}\n",
            "t.yaml",
        )
        .unwrap();
        let clock = Arc::new(slidewin::time::ManualClock::new(Moment::from_secs(9)));
        let engine = Engine::new(
            slidewin_http::Memory::new(),
            config,
            clock,
            Bounds::default(),
            Metrics::new(),
        )
        .unwrap();
        let request = RateLimitRequest::new(
            "d",
            vec![
                RequestDescriptor::new(vec![Entry::new("a", "x")]),
                RequestDescriptor::new(vec![Entry::new("b", "x")]),
            ],
        );
        engine.should_rate_limit(&request).await.unwrap();
        let second = engine.should_rate_limit(&request).await.unwrap();
        assert_eq!(second.overall_code, Code::Ok);
        assert_eq!(
            second.statuses[1].code,
            Code::Ok,
            "shadow mode never denies"
        );
        let field = |name: &str| {
            second
                .headers
                .iter()
                .find(|(n, _)| n.as_str() == name)
                .map(|(_, v)| v.to_str().unwrap().to_owned())
        };
        assert_eq!(field("ratelimit").as_deref(), Some("\"enforced\";r=3;t=1"));
        assert_eq!(field("retry-after"), None);
    }

    /// Issue 29: after 256 distinct overrides, a request carrying a new one was refused whole,
    /// its other descriptors included. Now its descriptor alone is over the limit, saying why.
    #[tokio::test]
    async fn hostile_29_an_override_past_the_table_is_refused_for_its_descriptor_only() {
        let config = Config::parse(
            "domain: d\ndescriptors:\n  - key: plain\n    rate_limit: {quota: 5/minute}\n",
            "t.yaml",
        )
        .unwrap();
        let engine = Engine::new(
            slidewin_http::Memory::new(),
            config,
            Arc::new(slidewin::time::ManualClock::new(Moment::from_secs(1))),
            Bounds::default(),
            Metrics::new(),
        )
        .unwrap();
        let with_override = |rpu: u32| {
            let mut descriptor = RequestDescriptor::new(vec![Entry::new("k", "v")]);
            descriptor.limit = Some(LimitOverride {
                requests_per_unit: rpu,
                unit: Unit::Minute,
            });
            descriptor
        };
        for rpu in 1..=u32::try_from(MAX_OVERRIDES).unwrap() {
            let request = RateLimitRequest::new("d", vec![with_override(rpu)]);
            engine.should_rate_limit(&request).await.unwrap();
        }
        // Every store holds a live key: one more is refused, for its descriptor alone.
        let plain = RequestDescriptor::new(vec![Entry::new("plain", "ann")]);
        let request = RateLimitRequest::new("d", vec![plain, with_override(100_000)]);
        let answer = engine.should_rate_limit(&request).await.unwrap();
        assert_eq!(answer.overall_code, Code::OverLimit);
        assert_eq!(answer.statuses[0].code, Code::Ok);
        assert_eq!(
            answer.statuses[0].limit_remaining, 4,
            "the other one counted"
        );
        let refused = &answer.statuses[1];
        assert_eq!(refused.code, Code::OverLimit);
        let name = &refused.current_limit.as_ref().unwrap().name;
        assert!(name.contains("MAX_OVERRIDES"), "{name}");
        let metrics = engine.metrics().encode();
        assert!(
            metrics.contains("slidewin_request_overrides_total{result=\"refused\"} 1"),
            "{metrics}"
        );
    }

    #[tokio::test]
    async fn overrides_turned_off_are_ignored_and_counted() {
        let config = Config::parse(
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {quota: 1/minute}\n",
            "t.yaml",
        )
        .unwrap();
        let bounds = Bounds {
            request_overrides: false,
            ..Bounds::default()
        };
        let clock = Arc::new(slidewin::time::ManualClock::new(Moment::from_secs(1)));
        let engine = Engine::new(
            slidewin_http::Memory::new(),
            config,
            clock,
            bounds,
            Metrics::new(),
        )
        .unwrap();
        let mut descriptor = RequestDescriptor::new(vec![Entry::new("k", "v")]);
        descriptor.limit = Some(LimitOverride {
            requests_per_unit: 1_000,
            unit: Unit::Second,
        });
        let request = RateLimitRequest::new("d", vec![descriptor]);
        // The config's 1 per minute decides, not the 1,000 per second asked for.
        let first = engine.should_rate_limit(&request).await.unwrap();
        assert_eq!(first.overall_code, Code::Ok);
        let second = engine.should_rate_limit(&request).await.unwrap();
        assert_eq!(second.overall_code, Code::OverLimit);
        let metrics = engine.metrics().encode();
        assert!(
            metrics.contains("slidewin_request_overrides_total{result=\"ignored\"} 2"),
            "{metrics}"
        );
    }

    #[test]
    fn wildcards_match_as_envoy_ratelimit_does() {
        assert!(wildcard_match(&parts("path_/foo*"), "path_/foo/bar"));
        assert!(wildcard_match(&parts("path_/foo*"), "path_/foo"));
        assert!(!wildcard_match(&parts("path_/foo*"), "path_/fo"));
        assert!(wildcard_match(&parts("path_a*b*c"), "path_aXXbYYc"));
        assert!(!wildcard_match(&parts("path_a*b*c"), "path_acb"));
        assert!(!wildcard_match(&parts("path_ab*ba"), "path_aba"));
        assert!(wildcard_match(&parts("path_x"), "path_x"));
    }

    /// Issue 29: 16 entries of 1 KB each made a 35 KB counter key (a Redis key that filled a
    /// 16 MB Redis in 474 requests).
    #[test]
    fn hostile_29_counter_keys_have_a_bounded_length() {
        let huge = "x".repeat(1024);
        let entries: Vec<Entry> = (0..16).map(|_| Entry::new(&huge, &huge)).collect();
        let key = counter_key(&huge, &huge, &entries, &[]);
        assert_eq!(key.len(), 64);
        assert!(key.bytes().all(|b| b.is_ascii_hexdigit()), "{key}");
        assert_eq!(counter_key("", "", &[], &[]).len(), 64);
    }

    #[test]
    fn counter_keys_cannot_be_forged_by_values() {
        let a = counter_key("d", "d.k", &[Entry::new("k", "a1:b")], &[]);
        let b = counter_key(
            "d",
            "d.k",
            &[Entry::new("k", "a"), Entry::new("b", "")],
            &[],
        );
        assert_ne!(a, b);
        let pattern = [(0, "a*".to_owned())];
        let shared = counter_key("d", "d.k_a*", &[Entry::new("k", "abc")], &pattern);
        assert_eq!(
            shared,
            counter_key("d", "d.k_a*", &[Entry::new("k", "axy")], &pattern)
        );
    }
}
