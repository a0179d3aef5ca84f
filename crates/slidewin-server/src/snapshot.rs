//! What the service shows of itself: the body of `GET /api/stats` and of each server-sent
//! event the dashboard draws, and how one snapshot a tick is shared by all who look.
//!
//! A snapshot reads every rule's minute of statistics, and shows the busiest 50 rules
//! ([`Busiest`]) with the count and sum of all; [`Feed`](feed::Feed) shares one a tick among its
//! readers.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::Serialize;

pub(crate) mod feed;

/// The most rules a snapshot shows: the busiest in the last minute. Its `rules_total`,
/// `last_minute` and `last_second` count every rule.
pub(crate) const MAX_SHOWN_RULES: usize = 50;

/// Seconds in a snapshot's minute: one count of each outcome per second.
pub(crate) const SECONDS: usize = 60;

/// The service at one moment: its config, its backend, every rule's last minute summed, and
/// the busiest rules' own.
///
/// ```
/// use slidewin_server::Snapshot;
/// let empty = Snapshot::default();
/// assert!(empty.rules.is_empty());
/// assert_eq!(empty.rules_total, 0);
/// assert!(serde_json::to_string(&empty).unwrap().contains("\"rules\":[]"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Snapshot {
    /// When it was taken: Unix time in milliseconds.
    pub now_ms: u64,
    /// The config in force.
    pub config: ConfigStatus,
    /// The store the counts are in.
    pub backend: BackendStatus,
    /// How many rules the config has (each limit with a quota), shown in `rules` or not.
    pub rules_total: u64,
    /// Every rule's last minute, summed.
    pub last_minute: Totals,
    /// Every rule's last whole second (the one before the current), summed.
    pub last_second: Totals,
    /// The busiest rules' last minutes, in the config's order: the service shows at most 50,
    /// those with the most passed, denied and shadow-denied requests in the last minute (on a
    /// tie, the first in the config).
    pub rules: Vec<RuleStats>,
    /// The keys denied most in the last minute, most first (a few at most).
    pub top_denied: Vec<TopKey>,
}

/// The config in force and the last failed load.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ConfigStatus {
    /// Counts loads that took effect, from 1 (the first).
    pub version: u64,
    /// When the config in force was loaded (RFC 3339, UTC).
    pub loaded_at: String,
    /// The files it came from.
    pub files: Vec<String>,
    /// The last load that failed and left the config in force, until a load succeeds.
    pub last_error: Option<LoadError>,
    /// Loads that failed since the service started.
    pub errors_total: u64,
}

/// A failed load: when, and why (the file, line and column, and the bad value).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LoadError {
    /// When it failed (RFC 3339, UTC).
    pub at: String,
    /// What was wrong.
    pub message: String,
}

/// The store and its health.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BackendStatus {
    /// `memory`, `redis` or `redis-cluster`.
    pub kind: String,
    /// `up`, or for Redis `down` (the circuit is open) or `probing` (half-open).
    pub state: String,
    /// For Redis: `open` (admit) or `closed` (deny) while it is down.
    pub failure_policy: Option<String>,
    /// Checks the store failed since the service started.
    pub errors_total: u64,
    /// One-unit checks answered with a denial Redis gave that still held, without asking
    /// Redis (`slidewin_denied_cache_answers_total`).
    pub denied_cache_answers_total: u64,
}

/// One rule: what it allows, and what it did in each of the last 60 seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RuleStats {
    /// The domain it belongs to.
    pub domain: String,
    /// Its one name: the config's `name`, else its descriptor path without the domain (see
    /// the crate's README).
    pub name: String,
    /// Its quota, as `10 per 1s`.
    pub quota: String,
    /// `sliding_log`, `sliding_counter`, `fixed_window` or `gcra`.
    pub algorithm: String,
    /// Decides but never denies.
    pub shadow: bool,
    /// Keys it holds counts for now (memory; 0 on Redis, which keeps them).
    pub keys: u64,
    /// Requests per second over the last minute, oldest first, the current second last.
    pub per_second: PerSecond,
    /// The sums of `per_second`.
    pub last_minute: Totals,
    /// Each of its limits, in the config's order: one for a rule of one limit.
    pub limits: Vec<LimitStats>,
}

/// One limit of a rule: what it allows, and the requests it found over it in each of the last
/// 60 seconds. Where a rule has several limits, a request over two is counted by the one that
/// bound it (the one that would keep it out longest), so a rule's limits never count a request
/// twice. A rule's `denied` (or `shadow_denied`) can be more than its limits' sum: requests the
/// store refused (its key cap, its memory, a cost more than any window holds) are no limit's.
///
/// ```
/// use slidewin_server::LimitStats;
/// let hourly = LimitStats {
///     name: "hourly".into(),
///     quota: "1000 per 1h".into(),
///     over_limit: vec![0; 60],
///     ..LimitStats::default()
/// };
/// assert!(serde_json::to_string(&hourly).unwrap().contains("\"name\":\"hourly\""));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LimitStats {
    /// Its name within the rule: the rule's own when it is the rule's only limit.
    pub name: String,
    /// What it allows, as `1000 per 1h`.
    pub quota: String,
    /// `sliding_log`, `sliding_counter`, `fixed_window` or `gcra`.
    pub algorithm: String,
    /// Requests over it per second over the last minute, oldest first, the current second
    /// last: denied, or shadow-denied in a shadow rule.
    pub over_limit: Vec<u64>,
    /// The sum of `over_limit`.
    pub last_minute_over_limit: u64,
}

/// Sixty one-second counts of each outcome, oldest first. The outcomes never overlap: a
/// request shadow mode let through over its limit is shadow-denied, not passed.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PerSecond {
    /// Admitted.
    pub passed: Vec<u64>,
    /// Denied.
    pub denied: Vec<u64>,
    /// Would have been denied, in shadow mode.
    pub shadow_denied: Vec<u64>,
}

/// Counts of each outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Admitted.
    pub passed: u64,
    /// Denied.
    pub denied: u64,
    /// Would have been denied, in shadow mode.
    pub shadow_denied: u64,
}

/// A key denied often in the last minute.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TopKey {
    /// The domain of the rule that denied it.
    pub domain: String,
    /// The rule that denied it.
    pub rule: String,
    /// The limit of the rule that denied it: the rule's name when it has one limit.
    pub limit: String,
    /// The descriptor's entries, as `key=value, key=value`.
    pub key: String,
    /// Denials in the last minute (a heavy-hitters estimate: never less than the truth).
    pub denied: u64,
}

/// Anything that can say what the service is doing now: the service itself, or a test's fake.
///
/// The dashboard asks it once a second at most, however many watch, and only while someone
/// does, on one of tokio's blocking threads: a snapshot may take its time.
pub(crate) trait SnapshotSource: Send + Sync + 'static {
    /// The service now.
    fn snapshot(&self) -> Snapshot;

    /// A number that changes when a snapshot would show something new other than traffic:
    /// the service's when a config is loaded or fails to load, or its store goes down or comes
    /// back. A snapshot taken under another number is never reused, even within its second.
    /// It is asked on the async workers, before each reuse: it must be cheap. The default
    /// never changes.
    fn generation(&self) -> u64 {
        0
    }
}

// ---- The rules a snapshot shows ----

/// One rule's last minute: a count of each outcome per second, oldest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Minute {
    pub(crate) passed: [u64; SECONDS],
    pub(crate) denied: [u64; SECONDS],
    pub(crate) shadow_denied: [u64; SECONDS],
}

impl Minute {
    /// The minute's sums.
    pub(crate) fn totals(&self) -> Totals {
        let sum = |counts: &[u64; SECONDS]| counts.iter().fold(0u64, |s, &c| s.saturating_add(c));
        Totals {
            passed: sum(&self.passed),
            denied: sum(&self.denied),
            shadow_denied: sum(&self.shadow_denied),
        }
    }

    pub(crate) fn per_second(&self) -> PerSecond {
        PerSecond {
            passed: self.passed.to_vec(),
            denied: self.denied.to_vec(),
            shadow_denied: self.shadow_denied.to_vec(),
        }
    }
}

impl Totals {
    /// Every request counted: passed, denied and shadow-denied (saturating).
    fn all(&self) -> u64 {
        self.passed
            .saturating_add(self.denied)
            .saturating_add(self.shadow_denied)
    }

    /// Adds `other`'s counts (saturating: a sum of counts never wraps).
    fn add(&mut self, other: &Totals) {
        self.passed = self.passed.saturating_add(other.passed);
        self.denied = self.denied.saturating_add(other.denied);
        self.shadow_denied = self.shadow_denied.saturating_add(other.shadow_denied);
    }
}

/// What a snapshot shows of the rules: the busiest, the count of all, their summed counts.
#[derive(Debug)]
pub(crate) struct ShownRules {
    /// The busiest rules, in config order.
    pub(crate) rules: Vec<RuleStats>,
    /// Every rule offered.
    pub(crate) total: u64,
    /// Every rule's last minute, summed.
    pub(crate) last_minute: Totals,
    /// Every rule's last whole second, summed.
    pub(crate) last_second: Totals,
}

/// Picks the busiest of the rules offered to it by their sums, in one pass and in bounded
/// memory: a heap of at most `at_most`, whose top is the least busy kept. Only the rules left
/// at the end are described (their names, and the minute each second).
pub(crate) struct Busiest {
    at_most: usize,
    offered: usize,
    last_minute: Totals,
    last_second: Totals,
    kept: BinaryHeap<Reverse<Ranked>>,
}

/// A rule kept, ranked by its minute's requests, then by its place in the config (the first
/// ranks higher).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Ranked {
    requests: u64,
    place: Reverse<usize>,
}

impl Busiest {
    /// Keeps at most `at_most` rules (`usize::MAX`: all of them).
    pub(crate) fn new(at_most: usize) -> Busiest {
        Busiest {
            at_most,
            offered: 0,
            last_minute: Totals::default(),
            last_second: Totals::default(),
            kept: BinaryHeap::with_capacity(at_most.min(MAX_SHOWN_RULES) + 1),
        }
    }

    /// Counts the next rule in config order, whose last minute summed to `last_minute` and
    /// whose last whole second to `last_second`, and keeps it if it is among the busiest so far.
    pub(crate) fn offer(&mut self, last_minute: &Totals, last_second: &Totals) {
        let ranked = Ranked {
            requests: last_minute.all(),
            place: Reverse(self.offered),
        };
        self.offered += 1;
        self.last_minute.add(last_minute);
        self.last_second.add(last_second);
        if self.kept.len() < self.at_most {
            self.kept.push(Reverse(ranked));
        } else if self
            .kept
            .peek()
            .is_some_and(|Reverse(least)| ranked > *least)
        {
            self.kept.pop();
            self.kept.push(Reverse(ranked));
        }
    }

    /// The rules kept, in config order, each described by `describe` (given its place among
    /// the rules offered), and the count and sums of all.
    pub(crate) fn finish(self, describe: impl FnMut(usize) -> RuleStats) -> ShownRules {
        let mut places: Vec<usize> = self
            .kept
            .into_iter()
            .map(|Reverse(ranked)| ranked.place.0)
            .collect();
        places.sort_unstable();
        ShownRules {
            rules: places.into_iter().map(describe).collect(),
            total: u64::try_from(self.offered).unwrap_or(u64::MAX),
            last_minute: self.last_minute,
            last_second: self.last_second,
        }
    }
}

impl Snapshot {
    /// Puts `shown` in: the busiest rules, the count of all and their sums.
    pub(crate) fn show(&mut self, shown: ShownRules) {
        self.rules_total = shown.total;
        self.last_minute = shown.last_minute;
        self.last_second = shown.last_second;
        self.rules = shown.rules;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use slidewin::Moment;
    use slidewin::time::ManualClock;

    use super::*;
    use crate::{
        Bounds, Config, Endpoints, Engine, Entry, Metrics, RateLimitRequest, RequestDescriptor,
    };

    fn named(name: &str) -> RuleStats {
        RuleStats {
            name: name.into(),
            ..RuleStats::default()
        }
    }

    fn names(shown: &ShownRules) -> Vec<&str> {
        shown.rules.iter().map(|rule| rule.name.as_str()).collect()
    }

    /// Offers rules `(name, passed, denied)` in the last minute (one of each in the last
    /// second) to a `Busiest` of `at_most`; what it shows, and the names it asked for.
    fn pick(at_most: usize, rules: &[(&str, u64, u64)]) -> (ShownRules, Vec<String>) {
        let mut busiest = Busiest::new(at_most);
        for (_, passed, denied) in rules {
            let minute = Totals {
                passed: *passed,
                denied: *denied,
                shadow_denied: 0,
            };
            let second = Totals {
                passed: 1,
                denied: 1,
                shadow_denied: 1,
            };
            busiest.offer(&minute, &second);
        }
        let mut described = Vec::new();
        let shown = busiest.finish(|index| {
            described.push(rules[index].0.to_owned());
            named(rules[index].0)
        });
        (shown, described)
    }

    #[test]
    fn the_busiest_are_kept_in_config_order_and_a_tie_goes_to_the_first() {
        let rules = [
            ("a", 0, 0),
            ("b", 4, 1),
            ("c", 0, 0),
            ("d", 0, 9),
            ("e", 5, 0),
            ("f", 1, 0),
            ("g", 3, 2),
        ];
        let (shown, described) = pick(3, &rules);
        // b, e and g have 5 each: b and e come first in the config.
        assert_eq!(names(&shown), ["b", "d", "e"]);
        // Only the rules shown are described.
        assert_eq!(described, ["b", "d", "e"]);
        assert_eq!(shown.total, 7);
        let all = shown.last_minute;
        assert_eq!((all.passed, all.denied, all.shadow_denied), (13, 12, 0));
        let second = shown.last_second;
        assert_eq!(
            (second.passed, second.denied, second.shadow_denied),
            (7, 7, 7)
        );
    }

    #[test]
    fn with_no_traffic_the_first_rules_are_shown() {
        let (shown, _) = pick(2, &[("a", 0, 0), ("b", 0, 0), ("c", 0, 0), ("d", 0, 0)]);
        assert_eq!(names(&shown), ["a", "b"]);
    }

    #[test]
    fn a_bound_of_zero_shows_none_and_counts_all() {
        let (shown, described) = pick(0, &[("a", u64::MAX, 0), ("b", 1, 0)]);
        assert!(shown.rules.is_empty() && described.is_empty());
        assert_eq!(shown.total, 2);
        assert_eq!(shown.last_minute.passed, u64::MAX, "saturated, not wrapped");
    }

    #[test]
    fn every_rule_is_kept_without_a_bound() {
        let (shown, _) = pick(usize::MAX, &[("a", 0, 0), ("b", 2, 0), ("c", 1, 0)]);
        assert_eq!(names(&shown), ["a", "b", "c"]);
    }

    /// Issue 29: a snapshot of 4,000 rules was 1.1 MB, built per reader.
    #[tokio::test]
    async fn hostile_29_a_snapshot_shows_the_50_busiest_rules_and_the_totals_of_all() {
        let mut yaml = String::from("domain: api\ndescriptors:\n");
        yaml.push_str("  - key: r0\n    shadow_mode: true\n    rate_limit: {unit: minute, requests_per_unit: 1}\n");
        for i in 1..120 {
            yaml.push_str(&format!(
                "  - key: r{i}\n    rate_limit: {{unit: minute, requests_per_unit: 2}}\n"
            ));
        }
        let config = Config::parse(&yaml, "many.yaml").expect("a valid config");
        let clock = Arc::new(ManualClock::new(Moment::from_secs(1_000)));
        let engine = Engine::new(
            slidewin_store::Memory::new(),
            config,
            clock.clone(),
            Bounds::default(),
            Metrics::new(),
        )
        .expect("memory holds the rules");
        for (rule, checks) in [("r0", 2), ("r7", 1), ("r119", 3)] {
            let request = RateLimitRequest::new(
                "api",
                vec![RequestDescriptor::new(vec![Entry::new(rule, "x")])],
            );
            for _ in 0..checks {
                engine.should_rate_limit(&request).await.expect("decided");
            }
        }
        // A second on, the checks are in the last whole second.
        clock.advance(std::time::Duration::from_secs(1));
        let service = Endpoints::new(engine, vec![]);
        let snapshot = service.snapshot();
        assert_eq!(snapshot.rules_total, 120);
        assert_eq!(snapshot.rules.len(), MAX_SHOWN_RULES);
        // The three with traffic, r119 the last in the config among them, and the first idle
        // ones: all in config order.
        let shown: Vec<&str> = snapshot.rules.iter().map(|r| r.name.as_str()).collect();
        let expected: Vec<String> = (0..49).chain([119]).map(|i| format!("r{i}")).collect();
        assert_eq!(shown, expected);
        let r119 = snapshot.rules.last().expect("shown");
        assert_eq!((r119.last_minute.passed, r119.last_minute.denied), (2, 1));
        // The totals are every rule's: r0 passed 1 and shadow-denied 1, r7 passed 1.
        let all = Totals {
            passed: 4,
            denied: 1,
            shadow_denied: 1,
        };
        assert_eq!(snapshot.last_minute, all);
        assert_eq!(snapshot.last_second, all);
        assert_eq!(r119.per_second.passed[SECONDS - 2], 2);
        assert_eq!(r119.per_second.denied[SECONDS - 2], 1);
        assert_eq!(r119.per_second.denied.iter().sum::<u64>(), 1);
        // The engine still tells every rule's, for a caller that wants them all.
        assert_eq!(service.engine().rule_stats().len(), 120);
        let json = serde_json::to_string(&snapshot).expect("JSON");
        assert!(json.contains("\"rules_total\":120,"), "{json}");
    }
}
