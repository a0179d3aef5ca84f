//! The series of a limit beyond its counters: its rules' quotas, its hits per descriptor, and
//! the keys denied most across limits.

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::labels::{DescriptorLabels, LimitLabels, TopLabels};
use super::saturating::HitCounter;
use super::{LimitShown, Metrics};

/// The series of [`Metrics`] this module keeps.
#[derive(Debug)]
pub(super) struct LimitSeries {
    descriptor_hits: Family<DescriptorLabels, HitCounter>,
    limit: Family<LimitLabels, Gauge>,
    window_seconds: Family<LimitLabels, Gauge<f64, AtomicU64>>,
    top_denied: Family<TopLabels, Gauge>,
    /// Held while the top's series are replaced, so that two scrapes do not mix theirs.
    top_lock: Mutex<()>,
}

impl LimitSeries {
    /// Each registered in `registry`, empty.
    pub(super) fn register(registry: &mut Registry) -> LimitSeries {
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
        let window_seconds = Family::<LimitLabels, Gauge<f64, AtomicU64>>::default();
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
        LimitSeries {
            descriptor_hits,
            limit,
            window_seconds,
            top_denied,
            top_lock: Mutex::new(()),
        }
    }
}

impl Metrics {
    /// Replaces the series of the keys denied most with `top` (the first is rank 1).
    pub(crate) fn set_top_denied(&self, top: &[crate::snapshot::TopKey]) {
        let _replacing = self
            .inner
            .limits
            .top_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.inner.limits.top_denied.clear();
        for (rank, key) in (1..=u8::MAX).zip(top) {
            let labels = TopLabels {
                rank,
                domain: key.domain.clone(),
                rule: key.rule.clone(),
                limit: key.limit.clone(),
                key: key.key.clone(),
            };
            let denied = i64::try_from(key.denied).unwrap_or(i64::MAX);
            self.inner
                .limits
                .top_denied
                .get_or_create(&labels)
                .set(denied);
        }
    }

    /// Sets the gauges of limit `rule`'s rules.
    pub(crate) fn set_limits(&self, domain: &str, rule: &str, limits: &[LimitShown]) {
        for shown in limits {
            let labels = LimitLabels {
                domain: domain.to_owned(),
                rule: rule.to_owned(),
                limit: shown.name.clone(),
            };
            let limit = i64::try_from(shown.limit).unwrap_or(i64::MAX);
            self.inner.limits.limit.get_or_create(&labels).set(limit);
            self.inner
                .limits
                .window_seconds
                .get_or_create(&labels)
                .set(shown.span_seconds);
        }
    }

    /// Removes the gauges of limit `rule`'s rules named `names`.
    pub(crate) fn forget_limits<'a>(
        &self,
        domain: &str,
        rule: &str,
        names: impl IntoIterator<Item = &'a str>,
    ) {
        for name in names {
            let labels = LimitLabels {
                domain: domain.to_owned(),
                rule: rule.to_owned(),
                limit: name.to_owned(),
            };
            self.inner.limits.limit.remove(&labels);
            self.inner.limits.window_seconds.remove(&labels);
        }
    }

    /// `hits` of limit `rule` for the descriptor named `descriptor`, by `result`.
    pub(crate) fn descriptor_hits(
        &self,
        domain: &str,
        rule: &str,
        descriptor: &str,
        result: &'static str,
        hits: u64,
    ) {
        let labels = DescriptorLabels {
            domain: domain.to_owned(),
            rule: rule.to_owned(),
            descriptor: descriptor.to_owned(),
            result,
        };
        self.inner
            .limits
            .descriptor_hits
            .get_or_create(&labels)
            .inc_by(hits);
    }

    /// Removes the series of limit `rule` for the descriptor named `descriptor`.
    pub(crate) fn forget_descriptor(&self, domain: &str, rule: &str, descriptor: &str) {
        for result in ["within_limit", "over_limit", "shadow_mode"] {
            self.inner.limits.descriptor_hits.remove(&DescriptorLabels {
                domain: domain.to_owned(),
                rule: rule.to_owned(),
                descriptor: descriptor.to_owned(),
                result,
            });
        }
    }
}
