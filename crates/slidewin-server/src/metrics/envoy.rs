//! envoy ratelimit's metric names, beside slidewin's, for the dashboards and alerts written for
//! it: the names its Prometheus sink's default mapping gives (`ratelimit_service_rate_limit_*`
//! with `domain`, `key1` and `key2`, and the config loads).
//!
//! Its names carry no `_total`, which the exposition format adds to every counter, so they
//! are gauges that only grow: `rate()` and `increase()` read them as they read envoy ratelimit's.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::saturating::{HitCounter, HitGauge};

/// A limit as envoy ratelimit's mapping labels it: its domain and the first two parts of its
/// descriptor path (`key1` is `key_value` or `key`; `key2` is empty for a limit one level deep).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct EnvoyRuleLabels {
    domain: String,
    key1: String,
    key2: String,
}

impl EnvoyRuleLabels {
    /// The labels of the limit at `path` (`domain.key_value.key`).
    pub(super) fn of(domain: &str, path: &str) -> EnvoyRuleLabels {
        let mut parts = path
            .strip_prefix(domain)
            .and_then(|rest| rest.strip_prefix('.'))
            .unwrap_or(path)
            .split('.');
        EnvoyRuleLabels {
            domain: domain.to_owned(),
            key1: parts.next().unwrap_or_default().to_owned(),
            key2: parts.next().unwrap_or_default().to_owned(),
        }
    }
}

/// The families under envoy ratelimit's names, in a registry of their own (no `slidewin_`).
#[derive(Debug)]
pub(super) struct EnvoyNames {
    pub(super) registry: Registry,
    /// `total_hits`, `over_limit`, `near_limit`, `within_limit`, `shadow_mode`, in that order.
    pub(super) hits: [Family<EnvoyRuleLabels, HitGauge>; 5],
    pub(super) load_success: Gauge,
    pub(super) load_error: Gauge,
}

impl EnvoyNames {
    pub(super) fn new() -> EnvoyNames {
        let mut registry = Registry::default();
        let hits: [Family<EnvoyRuleLabels, HitGauge>; 5] = Default::default();
        for (family, what) in hits.iter().zip([
            "total_hits",
            "over_limit",
            "near_limit",
            "within_limit",
            "shadow_mode",
        ]) {
            registry.register(
                format!("ratelimit_service_rate_limit_{what}"),
                format!("slidewin_rate_limit_{what}_total under envoy ratelimit's name"),
                family.clone(),
            );
        }
        let (load_success, load_error) = (Gauge::default(), Gauge::default());
        registry.register(
            "ratelimit_service_config_load_success",
            "Config loads that took effect, under envoy ratelimit's name",
            load_success.clone(),
        );
        registry.register(
            "ratelimit_service_config_load_error",
            "Config loads refused, under envoy ratelimit's name",
            load_error.clone(),
        );
        EnvoyNames {
            registry,
            hits,
            load_success,
            load_error,
        }
    }
}

/// A limit's count of one kind of hit: slidewin's counter, and envoy ratelimit's series when
/// the service shows its names too.
#[derive(Clone, Debug)]
pub(crate) struct Hits {
    ours: HitCounter,
    envoy: Option<HitGauge>,
}

impl Hits {
    pub(super) fn new(ours: HitCounter, envoy: Option<HitGauge>) -> Hits {
        Hits { ours, envoy }
    }

    /// Counts `hits`.
    #[inline]
    pub(crate) fn inc_by(&self, hits: u64) {
        self.ours.inc_by(hits);
        if let Some(envoy) = &self.envoy {
            envoy.inc_by(i64::try_from(hits).unwrap_or(i64::MAX));
        }
    }
}
