//! The series of a limit beyond its counters: its rules' quotas, its hits per descriptor, and
//! the keys denied most across limits.

use super::labels::{DescriptorLabels, LimitLabels, TopLabels};
use super::{LimitShown, Metrics};

impl Metrics {
    /// Replaces the series of the keys denied most with `top` (the first is rank 1).
    pub(crate) fn set_top_denied(&self, top: &[crate::snapshot::TopKey]) {
        let _replacing = self
            .inner
            .top_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.inner.top_denied.clear();
        for (rank, key) in (1..=u8::MAX).zip(top) {
            let labels = TopLabels {
                rank,
                domain: key.domain.clone(),
                rule: key.rule.clone(),
                limit: key.limit.clone(),
                key: key.key.clone(),
            };
            let denied = i64::try_from(key.denied).unwrap_or(i64::MAX);
            self.inner.top_denied.get_or_create(&labels).set(denied);
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
            self.inner.limit.get_or_create(&labels).set(limit);
            self.inner
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
            self.inner.limit.remove(&labels);
            self.inner.window_seconds.remove(&labels);
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
            .descriptor_hits
            .get_or_create(&labels)
            .inc_by(hits);
    }

    /// Removes the series of limit `rule` for the descriptor named `descriptor`.
    pub(crate) fn forget_descriptor(&self, domain: &str, rule: &str, descriptor: &str) {
        for result in ["within_limit", "over_limit", "shadow_mode"] {
            self.inner.descriptor_hits.remove(&DescriptorLabels {
                domain: domain.to_owned(),
                rule: rule.to_owned(),
                descriptor: descriptor.to_owned(),
                result,
            });
        }
    }
}
