//! `GET /metrics`: Prometheus text, by prometheus-client. Per rule, envoy ratelimit's counters
//! (labelled by domain and rule, never by key: keys are unbounded, envoyproxy/ratelimit #275).

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use slidewin_store::BackendState;

mod envoy;
mod labels;
mod limits;
mod saturating;

pub(crate) use envoy::Hits;
use envoy::{EnvoyNames, EnvoyRuleLabels};
use saturating::HitCounter;

use labels::{
    DescriptorLabels, LimitLabels, ListenerLabels, ReasonLabels, ResultLabels, RuleLabels,
    StateLabels, TopLabels, UnmatchedLabels,
};

/// A rule of a limit as the gauges show it: its name, how many it admits, over what span.
pub(crate) struct LimitShown {
    pub(crate) name: String,
    pub(crate) limit: u64,
    pub(crate) span_seconds: f64,
}

/// The service's Prometheus metrics. Cloning shares them.
///
/// ```
/// use slidewin_server::Metrics;
/// let metrics = Metrics::new();
/// metrics.config_loaded(true);
/// assert!(metrics.encode().contains("slidewin_config_loads_total{result=\"success\"} 1"));
/// ```
#[derive(Clone, Debug)]
pub struct Metrics {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    registry: Registry,
    total_hits: Family<RuleLabels, HitCounter>,
    over_limit: Family<RuleLabels, HitCounter>,
    near_limit: Family<RuleLabels, HitCounter>,
    within_limit: Family<RuleLabels, HitCounter>,
    shadow_mode: Family<RuleLabels, HitCounter>,
    released: Family<RuleLabels, HitCounter>,
    kept: Family<RuleLabels, HitCounter>,
    charged: Family<RuleLabels, HitCounter>,
    config_loads: Family<ResultLabels, Counter>,
    config_version: Gauge,
    backend_state: Family<StateLabels, Gauge>,
    backend_errors: Counter,
    key_cap_refusals: Counter,
    memory_refusals: Counter,
    denials_answered: Counter,
    memory_bytes: Gauge,
    memory_max_bytes: Gauge,
    decision_seconds: Histogram,
    calls_in_flight: Gauge,
    calls_shed: Family<ListenerLabels, Counter>,
    request_overrides: Family<ResultLabels, Counter>,
    connections_cut: Family<ReasonLabels, Counter>,
    unmatched: Family<UnmatchedLabels, Counter>,
    /// `unmatched`'s one series for domains the config does not have, held so that a request
    /// to one costs no lookup by label.
    unknown_domain: Counter,
    global_shadow_mode: Counter,
    descriptor_hits: Family<DescriptorLabels, HitCounter>,
    /// envoy ratelimit's names too, when asked ([`Metrics::with_envoy_names`]).
    envoy: Option<EnvoyNames>,
    limit: Family<LimitLabels, Gauge>,
    top_denied: Family<TopLabels, Gauge>,
    /// Held while the top's series are replaced, so that two scrapes do not mix theirs.
    top_lock: std::sync::Mutex<()>,
    window_seconds: Family<LimitLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
}

/// One rule's counters, as envoy ratelimit names them; in hits (a request's `hits_addend`).
#[derive(Clone, Debug)]
pub(crate) struct RuleMetrics {
    pub(crate) total_hits: Hits,
    pub(crate) over_limit: Hits,
    pub(crate) near_limit: Hits,
    pub(crate) within_limit: Hits,
    pub(crate) shadow_mode: Hits,
    pub(crate) released: Hits,
    pub(crate) kept: Hits,
    pub(crate) charged: Hits,
}

/// A rule's counters, made at its first hit: a rule that sees none holds no series (five
/// series a rule were most of what an idle rule held), and its series appear with its first
/// hit, as envoy ratelimit's stats do.
pub(crate) struct LazyRuleMetrics {
    metrics: Metrics,
    made: std::sync::OnceLock<RuleMetrics>,
}

impl LazyRuleMetrics {
    /// Whether its series have been made (the limit has been hit).
    pub(crate) fn is_made(&self) -> bool {
        self.made.get().is_some()
    }

    /// Its counters, `domain`, `name` and `path` naming them if they are made now, and its
    /// gauges set then from `limits`.
    #[inline]
    pub(crate) fn get(
        &self,
        (domain, name, path): (&str, &str, &str),
        limits: impl FnOnce() -> Vec<LimitShown>,
    ) -> &RuleMetrics {
        self.made.get_or_init(|| {
            self.metrics.set_limits(domain, name, &limits());
            self.metrics.rule(domain, name, path)
        })
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric, registered, at zero.
    #[must_use]
    pub fn new() -> Metrics {
        Metrics::make(None)
    }

    /// As [`Metrics::new`], and the limits' hits and the config loads under envoy ratelimit's
    /// names too (its Prometheus sink's default mapping: `ratelimit_service_rate_limit_*` with
    /// `domain`, `key1` and `key2`), for the dashboards and alerts written for it.
    ///
    /// ```
    /// use slidewin_server::Metrics;
    /// let metrics = Metrics::with_envoy_names();
    /// metrics.config_loaded(true);
    /// let text = metrics.encode();
    /// assert!(text.contains("ratelimit_service_config_load_success 1"));
    /// assert!(text.contains("slidewin_config_loads_total{result=\"success\"} 1"));
    /// assert!(text.ends_with("# EOF\n"));
    /// ```
    #[must_use]
    pub fn with_envoy_names() -> Metrics {
        Metrics::make(Some(EnvoyNames::new()))
    }

    fn make(envoy: Option<EnvoyNames>) -> Metrics {
        let mut registry = Registry::with_prefix("slidewin");
        let family = Family::<RuleLabels, HitCounter>::default;
        let (total_hits, over_limit, near_limit, within_limit, shadow_mode, released) =
            (family(), family(), family(), family(), family(), family());
        let (kept, charged) = (family(), family());
        registry.register(
            "rate_limit_total_hits",
            "Hits checked against a rule",
            total_hits.clone(),
        );
        registry.register(
            "rate_limit_over_limit",
            "Hits over a rule's limit (shadow mode's included)",
            over_limit.clone(),
        );
        registry.register(
            "rate_limit_near_limit",
            "Hits admitted past 80% of a rule's limit",
            near_limit.clone(),
        );
        registry.register(
            "rate_limit_within_limit",
            "Hits admitted by a rule",
            within_limit.clone(),
        );
        registry.register(
            "rate_limit_shadow_mode",
            "Hits over a rule's limit that shadow mode admitted",
            shadow_mode.clone(),
        );
        registry.register(
            "rate_limit_released",
            "Units a rule gave back on negative hits (is_negative_hits): its leases, when the \
             requests holding them ended, and its logs that refund (`refunds: true`)",
            released.clone(),
        );
        registry.register(
            "rate_limit_kept",
            "Negative hits (is_negative_hits) sent to a rule that gives nothing back: it has \
             neither leases nor `refunds: true`, so what it counted stays spent",
            kept.clone(),
        );
        registry.register(
            "rate_limit_charged",
            "Units charged to a rule after the response (`after_response: true`), past its \
             limit too",
            charged.clone(),
        );
        let config_loads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "config_loads",
            "Config loads, by result (an error keeps the config in force)",
            config_loads.clone(),
        );
        let config_version = Gauge::default();
        registry.register(
            "config_version",
            "The version of the config in force",
            config_version.clone(),
        );
        let backend_state = Family::<StateLabels, Gauge>::default();
        registry.register(
            "backend_state",
            "1 for the backend's state: up, down (Redis circuit open) or probing (half-open)",
            backend_state.clone(),
        );
        let backend_errors = Counter::default();
        registry.register(
            "backend_errors",
            "Checks the backend failed (answered by the failure policy, or an error)",
            backend_errors.clone(),
        );
        let key_cap_refusals = Counter::default();
        registry.register(
            "key_cap_refusals",
            "New keys refused because a rule held its cap of keys",
            key_cap_refusals.clone(),
        );
        let memory_refusals = Counter::default();
        registry.register(
            "memory_refusals",
            "New keys, or admissions that would grow a sliding log, refused because the memory \
             backend's budget (--max-memory) was spent",
            memory_refusals.clone(),
        );
        let denials_answered = Counter::default();
        registry.register(
            "denied_cache_answers",
            "One-unit checks answered with a denial Redis gave that still held, without asking \
             Redis",
            denials_answered.clone(),
        );
        let memory_bytes = Gauge::default();
        registry.register(
            "memory_bytes",
            "Bytes the memory backend's keys hold, on its budget",
            memory_bytes.clone(),
        );
        let memory_max_bytes = Gauge::default();
        registry.register(
            "memory_max_bytes",
            "The memory backend's budget (--max-memory), in bytes",
            memory_max_bytes.clone(),
        );
        let decision_seconds = Histogram::new(exponential_buckets(1e-6, 2.0, 24));
        registry.register(
            "decision_seconds",
            "Time to decide one request",
            decision_seconds.clone(),
        );
        let calls_in_flight = Gauge::default();
        registry.register(
            "calls_in_flight",
            "Calls (gRPC, and POST /json) in flight across every connection",
            calls_in_flight.clone(),
        );
        let calls_shed = Family::<ListenerLabels, Counter>::default();
        registry.register(
            "calls_shed",
            "Calls refused at once because max_calls_in_flight were in flight, by listener",
            calls_shed.clone(),
        );
        let request_overrides = Family::<ResultLabels, Counter>::default();
        registry.register(
            "request_overrides",
            "Descriptors that set their own limit, by result: applied, refused (out of the \
             operator's bounds: OVER_LIMIT) or ignored (--request-overrides off)",
            request_overrides.clone(),
        );
        let connections_cut = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "connections_cut",
            "Connections closed with calls unfinished: an answer not taken within the request \
             timeout (unread_answer), or still open when the stop's drain was over (drain_over)",
            connections_cut.clone(),
        );
        let unmatched = Family::<UnmatchedLabels, Counter>::default();
        registry.register(
            "descriptors_unmatched",
            "Descriptors that matched no rule, and so were answered OK without a limit: in a \
             domain of the config (reason no_rule, by domain: a typo in the config or the \
             client), or in a domain the config does not have (unknown_domain)",
            unmatched.clone(),
        );
        let unknown_domain = unmatched
            .get_or_create(&UnmatchedLabels {
                domain: String::new(),
                reason: "unknown_domain",
            })
            .clone();
        let global_shadow_mode = Counter::default();
        registry.register(
            "global_shadow_mode",
            "Requests over a limit answered OK because the global shadow mode is on",
            global_shadow_mode.clone(),
        );
        let descriptor_hits = Family::<DescriptorLabels, HitCounter>::default();
        registry.register(
            "rate_limit_descriptor_hits",
            "A limit's hits per descriptor, by result (within_limit, over_limit, shadow_mode), \
             where its config asks with detailed_metric or value_to_metric; at most 100 \
             descriptors a limit, the others as descriptor=\"_other\"",
            descriptor_hits.clone(),
        );
        let limit = Family::<LimitLabels, Gauge>::default();
        registry.register(
            "rate_limit_limit",
            "What each rule of a limit admits in its window (0 for a blocked limit), from the \
             limit's first hit; with slidewin_rate_limit_window_seconds, the rate that \
             utilization is measured against",
            limit.clone(),
        );
        let window_seconds =
            Family::<LimitLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register(
            "rate_limit_window_seconds",
            "The span of each rule of a limit, in seconds, from the limit's first hit",
            window_seconds.clone(),
        );
        let top_denied = Family::<TopLabels, Gauge>::default();
        registry.register(
            "top_denied_keys",
            "The keys denied most in the last minute (at most 10 series, rank 1 the most), \
             their denials estimated never below the truth: who was limited, and by which \
             limit, without a label per key",
            top_denied.clone(),
        );
        Metrics {
            inner: Arc::new(Inner {
                registry,
                total_hits,
                over_limit,
                near_limit,
                within_limit,
                shadow_mode,
                released,
                kept,
                charged,
                config_loads,
                config_version,
                backend_state,
                backend_errors,
                key_cap_refusals,
                memory_refusals,
                denials_answered,
                memory_bytes,
                memory_max_bytes,
                decision_seconds,
                calls_in_flight,
                calls_shed,
                request_overrides,
                connections_cut,
                unmatched,
                unknown_domain,
                global_shadow_mode,
                descriptor_hits,
                envoy,
                limit,
                top_denied,
                top_lock: std::sync::Mutex::new(()),
                window_seconds,
            }),
        }
    }

    /// A rule's counters, made at its first hit.
    pub(crate) fn lazy_rule(&self) -> LazyRuleMetrics {
        LazyRuleMetrics {
            metrics: self.clone(),
            made: std::sync::OnceLock::new(),
        }
    }

    pub(crate) fn rule(&self, domain: &str, name: &str, path: &str) -> RuleMetrics {
        let labels = RuleLabels {
            domain: domain.to_owned(),
            rule: name.to_owned(),
        };
        let envoy_labels = EnvoyRuleLabels::of(domain, path);
        let envoy = |i: usize| {
            self.inner
                .envoy
                .as_ref()
                .map(|names| names.hits[i].get_or_create_owned(&envoy_labels))
        };
        let inner = &self.inner;
        RuleMetrics {
            total_hits: Hits::new(inner.total_hits.get_or_create_owned(&labels), envoy(0)),
            over_limit: Hits::new(inner.over_limit.get_or_create_owned(&labels), envoy(1)),
            near_limit: Hits::new(inner.near_limit.get_or_create_owned(&labels), envoy(2)),
            within_limit: Hits::new(inner.within_limit.get_or_create_owned(&labels), envoy(3)),
            shadow_mode: Hits::new(inner.shadow_mode.get_or_create_owned(&labels), envoy(4)),
            released: Hits::new(inner.released.get_or_create_owned(&labels), None),
            kept: Hits::new(inner.kept.get_or_create_owned(&labels), None),
            charged: Hits::new(inner.charged.get_or_create_owned(&labels), None),
        }
    }

    pub(crate) fn forget_rule(&self, domain: &str, name: &str, path: &str) {
        if let Some(names) = &self.inner.envoy {
            let labels = EnvoyRuleLabels::of(domain, path);
            for family in &names.hits {
                family.remove(&labels);
            }
        }
        let labels = RuleLabels {
            domain: domain.to_owned(),
            rule: name.to_owned(),
        };
        for family in [
            &self.inner.total_hits,
            &self.inner.over_limit,
            &self.inner.near_limit,
            &self.inner.within_limit,
            &self.inner.shadow_mode,
            &self.inner.released,
            &self.inner.kept,
            &self.inner.charged,
        ] {
            family.remove(&labels);
        }
    }

    /// Counts a config load, `true` when it took effect.
    pub fn config_loaded(&self, ok: bool) {
        let result = if ok { "success" } else { "error" };
        if let Some(names) = &self.inner.envoy {
            if ok {
                &names.load_success
            } else {
                &names.load_error
            }
            .inc();
        }
        self.inner
            .config_loads
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    pub(crate) fn set_config_version(&self, version: u64) {
        self.inner
            .config_version
            .set(i64::try_from(version).unwrap_or(i64::MAX));
    }

    pub(crate) fn set_backend_state(&self, state: BackendState) {
        for known in [BackendState::Up, BackendState::Down, BackendState::Probing] {
            let value = i64::from(known == state);
            let known = known.as_str();
            self.inner
                .backend_state
                .get_or_create(&StateLabels { state: known })
                .set(value);
        }
    }

    /// `n` descriptors of `domain`, a domain of the config, that matched no rule.
    pub(crate) fn no_rule(&self, domain: &str, n: u64) {
        let labels = UnmatchedLabels {
            domain: domain.to_owned(),
            reason: "no_rule",
        };
        self.inner.unmatched.get_or_create(&labels).inc_by(n);
    }

    /// `n` descriptors of a domain the config does not have.
    pub(crate) fn unknown_domain(&self, n: u64) {
        self.inner.unknown_domain.inc_by(n);
    }

    /// A request over a limit answered OK by the global shadow mode.
    pub(crate) fn global_shadow_mode(&self) {
        self.inner.global_shadow_mode.inc();
    }

    pub(crate) fn backend_error(&self) {
        self.inner.backend_errors.inc();
    }

    pub(crate) fn backend_errors(&self) -> u64 {
        self.inner.backend_errors.get()
    }

    pub(crate) fn key_cap_refusal(&self) {
        self.inner.key_cap_refusals.inc();
    }

    pub(crate) fn memory_refusal(&self) {
        self.inner.memory_refusals.inc();
    }

    /// The backend's count of checks answered from the denials it kept, as it stands now.
    pub(crate) fn set_denials_answered(&self, total: u64) {
        self.inner
            .denials_answered
            .inner()
            .fetch_max(total, std::sync::atomic::Ordering::Relaxed);
    }

    /// The memory backend's budget: what its keys hold now, of `max` bytes.
    pub(crate) fn set_memory(&self, used: usize, max: usize) {
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.inner.memory_bytes.set(gauge(used));
        self.inner.memory_max_bytes.set(gauge(max));
    }

    /// The gauge of calls in flight, which the cap on them counts in.
    pub(crate) fn calls_in_flight(&self) -> Gauge {
        self.inner.calls_in_flight.clone()
    }

    /// The counter of calls shed on `listener` (`grpc` or `http`).
    pub(crate) fn calls_shed(&self, listener: &'static str) -> Counter {
        self.inner
            .calls_shed
            .get_or_create_owned(&ListenerLabels { listener })
    }

    /// Counts a descriptor's limit override by its `result`.
    pub(crate) fn request_override(&self, result: &'static str) {
        self.inner
            .request_overrides
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    /// The counter of connections cut for `reason`.
    pub(crate) fn connections_cut(&self, reason: &'static str) -> Counter {
        self.inner
            .connections_cut
            .get_or_create_owned(&ReasonLabels { reason })
    }

    pub(crate) fn observe_decision(&self, took: Duration) {
        self.inner.decision_seconds.observe(took.as_secs_f64());
    }

    /// The Prometheus text exposition.
    #[must_use]
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        use prometheus_client::encoding::text::{encode, encode_eof, encode_registry};
        let _ = match &self.inner.envoy {
            None => encode(&mut text, &self.inner.registry),
            Some(names) => encode_registry(&mut text, &self.inner.registry)
                .and_then(|()| encode_registry(&mut text, &names.registry))
                .and_then(|()| encode_eof(&mut text)),
        };
        text
    }
}
