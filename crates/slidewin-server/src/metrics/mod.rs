//! `GET /metrics`: Prometheus text, by prometheus-client. Per rule, envoy ratelimit's counters
//! (labelled by domain and rule, never by key: keys are unbounded, envoyproxy/ratelimit #275).

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

mod backend;
mod envoy;
mod labels;
mod limits;
mod rules;
mod saturating;

use backend::BackendSeries;
use envoy::EnvoyNames;
use limits::LimitSeries;
use rules::RuleFamilies;
pub(crate) use rules::{LazyRuleMetrics, RuleMetrics};

use labels::{ListenerLabels, ReasonLabels, ResultLabels, UnmatchedLabels};

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
    rules: RuleFamilies,
    config_loads: Family<ResultLabels, Counter>,
    config_version: Gauge,
    backend: BackendSeries,
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
    /// envoy ratelimit's names too, when asked ([`Metrics::with_envoy_names`]).
    envoy: Option<EnvoyNames>,
    limits: LimitSeries,
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
        let rules = RuleFamilies::register(&mut registry);
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
        let backend = BackendSeries::register(&mut registry);
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
        let limits = LimitSeries::register(&mut registry);
        Metrics {
            inner: Arc::new(Inner {
                registry,
                rules,
                config_loads,
                config_version,
                backend,
                decision_seconds,
                calls_in_flight,
                calls_shed,
                request_overrides,
                connections_cut,
                unmatched,
                unknown_domain,
                global_shadow_mode,
                limits,
                envoy,
            }),
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
