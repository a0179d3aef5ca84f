//! Each rule's statistics: its last minute of outcomes, second by second, and what a snapshot
//! reads of every rule (the busiest rules, the keys denied most).

use std::time::Duration;

use slidewin::Moment;
use slidewin::stats::{MetricEvent, MetricStats, WindowMetrics};

use super::check::limit_name;
use super::{ActionRt, Engine, RuleRt};
use crate::snapshot::{Busiest, LimitStats, Minute, RuleStats, SECONDS, ShownRules, Totals};
use slidewin_store::Backend;

/// A rule's last minute, per second: passed, denied, and denied in shadow mode. Each of its
/// two windows is allocated at its first event: an idle rule holds none of their 16 KB, and a
/// snapshot reads nothing of it.
pub(crate) struct RuleWindow {
    pub(super) outcomes: LazyWindow,
    pub(super) shadow: LazyWindow,
}

/// For each limit of a rule, in the rule's order, the requests it found over it in the last
/// minute (denied, or shadow-denied in a shadow rule), so that a rule of several limits shows
/// which one denies. Kept across a reload while the rule's limits keep their names. Allocated
/// at each limit's first event, as [`RuleWindow`]'s windows.
pub(crate) struct LimitWindows {
    names: Box<[String]>,
    over_limit: Box<[LazyWindow]>,
}

impl LimitWindows {
    /// The windows of limits named `names`, starting at `now`.
    pub(crate) fn new(now: Moment, names: Vec<String>) -> LimitWindows {
        LimitWindows {
            over_limit: names.iter().map(|_| LazyWindow::new(now)).collect(),
            names: names.into_boxed_slice(),
        }
    }

    /// Whether these are the windows of limits named `names`, in that order.
    pub(crate) fn are_of(&self, names: &[String]) -> bool {
        *self.names == *names
    }

    /// Counts a request that limit `limit` (its index in the rule) found over it at `now`.
    pub(super) fn over(&self, now: Moment, limit: usize) {
        if let Some(window) = self.over_limit.get(limit) {
            window.add(now, MetricEvent::Block, 1);
        }
    }

    /// Each limit's requests over it in the last minute at `now`, per second, oldest first.
    fn per_second(&self, now: Moment) -> Vec<[u64; SECONDS]> {
        self.over_limit
            .iter()
            .map(|window| window.per_second(now, MetricEvent::Block))
            .collect()
    }
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

    /// The count of `event` in each second of the last minute at `now`, oldest first (the
    /// current second last).
    fn per_second(&self, now: Moment, event: MetricEvent) -> [u64; SECONDS] {
        let mut seconds = [0; SECONDS];
        let Some(metrics) = self.metrics.get() else {
            return seconds;
        };
        let this_second = now.as_nanos() / 1_000_000_000;
        for bucket in metrics.buckets(now) {
            let age = this_second.checked_sub(bucket.start().as_nanos() / 1_000_000_000);
            let Some(age) = age.and_then(|age| usize::try_from(age).ok()) else {
                continue;
            };
            if let Some(i) = (SECONDS - 1).checked_sub(age) {
                seconds[i] = seconds[i].saturating_add(bucket.count(event));
            }
        }
        seconds
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
        Minute {
            passed: self.outcomes.per_second(now, MetricEvent::Pass),
            denied: self.outcomes.per_second(now, MetricEvent::Block),
            shadow_denied: self.shadow.per_second(now, MetricEvent::Block),
        }
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
            let over_limit = rule.limit_stats.per_second(now);
            let mut stats = RuleStats {
                domain: rule.domain.clone(),
                name: rule.display_name().to_owned(),
                shadow: rule.shadow,
                per_second: minute.per_second(),
                last_minute: minute.totals(),
                ..RuleStats::default()
            };
            if let ActionRt::Rules { spec, store, .. } = &rule.action {
                let quota: Vec<String> = spec.rules().iter().map(|r| r.quota_text()).collect();
                let algorithm: Vec<&str> = spec.rules().iter().map(|r| r.kind().name()).collect();
                stats.quota = quota.join(" and ");
                stats.algorithm = algorithm.join(", ");
                stats.limits = spec
                    .rules()
                    .iter()
                    .zip(over_limit)
                    .map(|(one, over)| LimitStats {
                        name: limit_name(rule, spec, one).to_owned(),
                        quota: one.quota_text(),
                        algorithm: one.kind().name().to_owned(),
                        last_minute_over_limit: over.iter().fold(0u64, |s, &c| s.saturating_add(c)),
                        over_limit: over.to_vec(),
                    })
                    .collect();
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use slidewin::Moment;
    use slidewin::time::ManualClock;

    use crate::snapshot::RuleStats;
    use crate::{Bounds, Config, Engine, Entry, Metrics, RateLimitRequest, RequestDescriptor};

    const TWO_LIMITS: &str = "domain: api\ndescriptors:\n  - key: client\n    limits:\n      \
        - name: burst\n        quota: 3 per second\n      - name: hourly\n        quota: 5 per hour\n";

    fn check_n(engine: &Engine<slidewin_store::Memory>, n: usize) -> impl Future<Output = ()> {
        let request = RateLimitRequest::new(
            "api",
            vec![RequestDescriptor::new(vec![Entry::new("client", "c1")])],
        );
        async move {
            for _ in 0..n {
                engine.should_rate_limit(&request).await.expect("decided");
            }
        }
    }

    fn over_by_limit(rule: &RuleStats) -> Vec<(&str, u64)> {
        rule.limits
            .iter()
            .map(|l| (l.name.as_str(), l.last_minute_over_limit))
            .collect()
    }

    /// Issue 31: as a new user saw it, one could not tell that `hourly`, not `burst`, was
    /// denying a client.
    #[tokio::test]
    async fn issue_31_a_rule_of_two_limits_says_which_one_denied() {
        let clock = Arc::new(ManualClock::new(Moment::from_secs(1_000)));
        let engine = Engine::new(
            slidewin_store::Memory::new(),
            Config::parse(TWO_LIMITS, "t.yaml").expect("valid"),
            clock.clone(),
            Bounds::default(),
            Metrics::new(),
        )
        .expect("memory holds the rules");
        // Three pass and the fourth is over `burst`; two seconds on, two pass and the next two
        // are over `hourly` (its five are taken), though `burst` has room.
        check_n(&engine, 4).await;
        clock.advance(Duration::from_secs(2));
        check_n(&engine, 4).await;
        let rules = engine.rule_stats();
        let rule = &rules[0];
        assert_eq!(over_by_limit(rule), [("burst", 1), ("hourly", 2)]);
        assert_eq!(rule.last_minute.denied, 3);
        assert_eq!(rule.limits[0].quota, "3 per 1s");
        assert_eq!(
            rule.limits[1].over_limit[super::SECONDS - 1],
            2,
            "this second"
        );
        assert_eq!(
            rule.limits[0].over_limit[super::SECONDS - 3],
            1,
            "two seconds ago"
        );
        let top: Vec<(String, u64)> = engine
            .top_denied()
            .into_iter()
            .map(|key| (key.limit, key.denied))
            .collect();
        assert_eq!(top, [("hourly".to_owned(), 2), ("burst".to_owned(), 1)]);

        // A reload that changes a quota keeps what each limit counted; one that renames a
        // limit starts its limits' minute afresh (a count under another name would mislead).
        let raised = TWO_LIMITS.replace("5 per hour", "50 per hour");
        engine
            .reload(Config::parse(&raised, "t.yaml").expect("valid"))
            .expect("reloaded");
        assert_eq!(
            over_by_limit(&engine.rule_stats()[0]),
            [("burst", 1), ("hourly", 2)]
        );
        let renamed = raised.replace("name: hourly", "name: per_hour");
        engine
            .reload(Config::parse(&renamed, "t.yaml").expect("valid"))
            .expect("reloaded");
        let rules = engine.rule_stats();
        assert_eq!(over_by_limit(&rules[0]), [("burst", 0), ("per_hour", 0)]);
        assert_eq!(
            rules[0].last_minute.denied, 3,
            "the rule's own minute is kept"
        );
    }

    #[tokio::test]
    async fn a_rule_of_one_limit_shows_it_under_the_rules_name() {
        let yaml = "domain: api\ndescriptors:\n  - key: client\n    rate_limit:\n      \
            name: per_client\n      quota: 1 per minute\n";
        let clock = Arc::new(ManualClock::new(Moment::from_secs(1_000)));
        let engine = Engine::new(
            slidewin_store::Memory::new(),
            Config::parse(yaml, "t.yaml").expect("valid"),
            clock,
            Bounds::default(),
            Metrics::new(),
        )
        .expect("memory holds the rules");
        check_n(&engine, 2).await;
        let rules = engine.rule_stats();
        assert_eq!(over_by_limit(&rules[0]), [("per_client", 1)]);
        assert_eq!(engine.top_denied()[0].limit, "per_client");
    }
}
