//! Each rule's statistics: its last minute of outcomes, second by second, and what a snapshot
//! reads of every rule (the busiest rules, the keys denied most).

use std::time::Duration;

use slidewin::Moment;
use slidewin::stats::{MetricEvent, MetricStats, WindowMetrics};

use super::{ActionRt, Engine, RuleRt};
use crate::snapshot::{Busiest, Minute, RuleStats, SECONDS, ShownRules, Totals};
use slidewin_store::Backend;

/// A rule's last minute, per second: passed, denied, and denied in shadow mode. Each of its
/// two windows is allocated at its first event: an idle rule holds none of their 16 KB, and a
/// snapshot reads nothing of it.
pub(crate) struct RuleWindow {
    pub(super) outcomes: LazyWindow,
    pub(super) shadow: LazyWindow,
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

impl<B: Backend> Engine<B> {
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
            .filter(|rule| matches!(rule.action, ActionRt::Rules { .. }))
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
            if let ActionRt::Rules { spec, store, .. } = &rule.action {
                let quota: Vec<String> =
                    spec.rules().iter().map(|r| r.quota().to_string()).collect();
                let algorithm: Vec<&str> = spec.rules().iter().map(|r| r.kind().name()).collect();
                stats.quota = quota.join(" and ");
                stats.algorithm = algorithm.join(", ");
                // Redis keeps its keys, uncounted here: 0, as the dashboard shows it.
                stats.keys = self.inner.backend.keys(store).unwrap_or(0);
            }
            stats
        })
    }

    /// The keys denied most in the last minute.
    #[must_use]
    pub fn top_denied(&self) -> Vec<crate::snapshot::TopKey> {
        self.inner.top.top(self.inner.clock.now(), 10)
    }
}
