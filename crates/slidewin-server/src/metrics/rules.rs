//! A rule's counters, envoy ratelimit's: a family each, labelled by domain and rule (never by
//! key), a rule's series made at its first hit.

use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::envoy::{EnvoyRuleLabels, Hits};
use super::labels::RuleLabels;
use super::saturating::HitCounter;
use super::{LimitShown, Metrics};

/// The name and help of each of [`RuleMetrics`]' families, in its order.
const FAMILIES: [(&str, &str); 8] = [
    ("rate_limit_total_hits", "Hits checked against a rule"),
    (
        "rate_limit_over_limit",
        "Hits over a rule's limit (shadow mode's included)",
    ),
    (
        "rate_limit_near_limit",
        "Hits admitted past 80% of a rule's limit",
    ),
    ("rate_limit_within_limit", "Hits admitted by a rule"),
    (
        "rate_limit_shadow_mode",
        "Hits over a rule's limit that shadow mode admitted",
    ),
    (
        "rate_limit_released",
        "Units a rule gave back on negative hits (is_negative_hits): its leases, when the \
         requests holding them ended, and its logs that refund (`refunds: true`)",
    ),
    (
        "rate_limit_kept",
        "Negative hits (is_negative_hits) sent to a rule that gives nothing back: it has \
         neither leases nor `refunds: true`, so what it counted stays spent",
    ),
    (
        "rate_limit_charged",
        "Units charged to a rule after the response (`after_response: true`), past its \
         limit too",
    ),
];

/// The rules' families, one for each of [`RuleMetrics`]' counters, in its order.
#[derive(Debug)]
pub(super) struct RuleFamilies(pub(super) [Family<RuleLabels, HitCounter>; 8]);

impl RuleFamilies {
    /// Each family registered in `registry`, empty.
    pub(super) fn register(registry: &mut Registry) -> RuleFamilies {
        RuleFamilies(FAMILIES.map(|(name, help)| {
            let family = Family::default();
            registry.register(name, help, family.clone());
            family
        }))
    }
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

impl Metrics {
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
        let [
            total_hits,
            over_limit,
            near_limit,
            within_limit,
            shadow_mode,
            released,
            kept,
            charged,
        ] = &self.inner.rules.0;
        RuleMetrics {
            total_hits: Hits::new(total_hits.get_or_create_owned(&labels), envoy(0)),
            over_limit: Hits::new(over_limit.get_or_create_owned(&labels), envoy(1)),
            near_limit: Hits::new(near_limit.get_or_create_owned(&labels), envoy(2)),
            within_limit: Hits::new(within_limit.get_or_create_owned(&labels), envoy(3)),
            shadow_mode: Hits::new(shadow_mode.get_or_create_owned(&labels), envoy(4)),
            released: Hits::new(released.get_or_create_owned(&labels), None),
            kept: Hits::new(kept.get_or_create_owned(&labels), None),
            charged: Hits::new(charged.get_or_create_owned(&labels), None),
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
        for family in &self.inner.rules.0 {
            family.remove(&labels);
        }
    }
}
