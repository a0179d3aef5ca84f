//! The limiters at their edges, and regression tests named after the peers' bugs: every body
//! runs against memory (a [`Keyed`] limiter of a [`RuleSet`]), a Redis of its own and a Redis
//! Cluster, through one macro, and must give the same answers on all three.
//!
//! The edges that only memory reaches (the end of the 584-year timeline, limits of
//! `u64::MAX`) are in slidewin's `tests/limit_extremes.rs`; Redis's own (the last time it
//! counts exactly, its keys) in `single/`.

use crate::support;

use std::collections::HashMap;
use std::time::Duration;

use slidewin::limit::{Decisions, Kind, LimitError, Reservation, Rule, RuleSet};
use slidewin::{Keyed, Moment};
use slidewin_redis::{RedisError, RedisLimiter, Rules};
use support::{RedisCluster, RedisServer};

/// Where the decisions come from.
trait Backend {
    async fn check(
        &mut self,
        rules: &Rules,
        key: &str,
        now: Moment,
        cost: u64,
    ) -> Result<Decisions, LimitError>;
    async fn peek(
        &mut self,
        rules: &Rules,
        key: &str,
        now: Moment,
        cost: u64,
    ) -> Result<Decisions, LimitError>;
    async fn reset(&mut self, rules: &Rules, key: &str);
    async fn release(&mut self, rules: &Rules, key: &str, now: Moment, units: u64) -> u64;
    async fn reserve(
        &mut self,
        rules: &Rules,
        key: &str,
        now: Moment,
        estimate: u64,
    ) -> (Decisions, Option<Reservation>);
    async fn settle(
        &mut self,
        rules: &Rules,
        key: &str,
        reserved: Reservation,
        actual: u64,
    ) -> bool;
}

/// A [`Keyed`] limiter per rule set, as a service holds them.
#[derive(Default)]
struct Memory {
    limiters: HashMap<String, Keyed<String, RuleSet>>,
}

impl Memory {
    fn limiter(&mut self, rules: &Rules) -> &Keyed<String, RuleSet> {
        let set = rules.rule_set();
        self.limiters
            .entry(format!("{set:?}"))
            .or_insert_with(|| Keyed::new(set.clone()))
    }
}

impl Backend for Memory {
    async fn check(
        &mut self,
        rules: &Rules,
        key: &str,
        now: Moment,
        cost: u64,
    ) -> Result<Decisions, LimitError> {
        self.limiter(rules).check(key, now, cost)
    }

    async fn peek(
        &mut self,
        rules: &Rules,
        key: &str,
        now: Moment,
        cost: u64,
    ) -> Result<Decisions, LimitError> {
        self.limiter(rules).peek(key, now, cost)
    }

    async fn reset(&mut self, rules: &Rules, key: &str) {
        self.limiter(rules).reset(key);
    }

    async fn release(&mut self, rules: &Rules, key: &str, now: Moment, units: u64) -> u64 {
        self.limiter(rules).release(key, now, units)
    }

    async fn reserve(
        &mut self,
        rules: &Rules,
        key: &str,
        now: Moment,
        estimate: u64,
    ) -> (Decisions, Option<Reservation>) {
        self.limiter(rules).reserve(key, now, estimate).unwrap()
    }

    async fn settle(
        &mut self,
        rules: &Rules,
        key: &str,
        reserved: Reservation,
        actual: u64,
    ) -> bool {
        self.limiter(rules).settle(key, reserved, actual)
    }
}

/// A limiter on a single Redis or a cluster (kept alive by the test), under a prefix of the
/// test's own.
struct OnRedis<S> {
    redis: RedisLimiter,
    _servers: S,
}

fn answer(
    result: Result<slidewin_redis::RedisDecision, RedisError>,
) -> Result<Decisions, LimitError> {
    match result {
        Ok(decision) => Ok(decision.decisions().clone()),
        Err(RedisError::Limit(err)) => Err(err),
        Err(err) => panic!("Redis could not answer: {err}"),
    }
}

impl<S> Backend for OnRedis<S> {
    async fn check(
        &mut self,
        rules: &Rules,
        key: &str,
        now: Moment,
        cost: u64,
    ) -> Result<Decisions, LimitError> {
        answer(self.redis.check(rules, key, now, cost).await)
    }

    async fn peek(
        &mut self,
        rules: &Rules,
        key: &str,
        now: Moment,
        cost: u64,
    ) -> Result<Decisions, LimitError> {
        answer(self.redis.peek(rules, key, now, cost).await)
    }

    async fn reset(&mut self, rules: &Rules, key: &str) {
        self.redis.reset(rules, key).await.expect("a reset");
    }

    async fn release(&mut self, rules: &Rules, key: &str, now: Moment, units: u64) -> u64 {
        self.redis
            .release(rules, key, now, units)
            .await
            .expect("a release")
    }

    async fn reserve(
        &mut self,
        rules: &Rules,
        key: &str,
        now: Moment,
        estimate: u64,
    ) -> (Decisions, Option<Reservation>) {
        let (decision, reserved) = self.redis.reserve(rules, key, now, estimate).await.unwrap();
        (decision.decisions().clone(), reserved)
    }

    async fn settle(
        &mut self,
        rules: &Rules,
        key: &str,
        reserved: Reservation,
        actual: u64,
    ) -> bool {
        self.redis
            .settle(rules, key, reserved, actual)
            .await
            .expect("a settle")
    }
}

/// Writes each body as a test against memory, a Redis of its own and a shared Redis Cluster.
macro_rules! on_every_backend {
    ($($(#[doc = $doc:literal])* async fn $name:ident($b:ident) $body:block)*) => {
        mod memory {
            use super::*;
            $($(#[doc = $doc])* #[tokio::test] async fn $name() {
                let mut $b = Memory::default();
                $body
            })*
        }
        mod redis {
            use super::*;
            $($(#[doc = $doc])* #[tokio::test] async fn $name() {
                let server = RedisServer::start();
                let redis = RedisLimiter::connect(&server.url()).await.unwrap();
                let mut $b = OnRedis { redis, _servers: server };
                $body
            })*
        }
        mod cluster {
            use super::*;
            $($(#[doc = $doc])* #[tokio::test] async fn $name() {
                let cluster = RedisCluster::shared();
                let urls = cluster.urls();
                let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
                let redis = RedisLimiter::connect_cluster(&urls)
                    .await
                    .unwrap()
                    .with_prefix(stringify!($name));
                let mut $b = OnRedis { redis, _servers: cluster };
                $body
            })*
        }
    };
}

fn ms(n: u64) -> Moment {
    Moment::from_millis(n)
}

fn secs(n: u64) -> Moment {
    Moment::from_secs(n)
}

/// The rule `name`, alone.
fn rule(name: &str, kind: Kind, quota: &str) -> Rules {
    Rules::try_from(Rule::new(name, kind, quota.parse().unwrap()).unwrap()).unwrap()
}

/// Several rules, all or nothing: `(name, kind, quota)` each.
fn set(rules: &[(&str, Kind, &str)]) -> Rules {
    let rules = rules
        .iter()
        .map(|&(name, kind, quota)| Rule::new(name, kind, quota.parse().unwrap()).unwrap());
    Rules::new(RuleSet::new(rules).unwrap()).unwrap()
}

/// The four algorithms on one quota (GCRA's burst is the limit), each under its kind's name.
fn each_kind(quota: &str) -> [Rules; 4] {
    Kind::RATES.map(|kind| rule(kind.name(), kind, quota))
}

fn summary(d: &Decisions) -> (bool, u64, Duration, Option<Duration>) {
    (d.allowed(), d.remaining(), d.reset_after(), d.retry_after())
}

/// How many of `attempts` unit requests are admitted.
async fn admitted(b: &mut impl Backend, rules: &Rules, key: &str, attempts: &[Moment]) -> usize {
    let mut admitted = 0;
    for &t in attempts {
        if b.check(rules, key, t, 1).await.unwrap().allowed() {
            admitted += 1;
        }
    }
    admitted
}

on_every_backend! {
    /// governor #16 and #39: with `10/s`, users saw about 15 per second get through in the
    /// first seconds, because a token bucket admits its burst and then refills. Ours: the
    /// exact log admits exactly 10 in every window of a second; the GCRA admits what its docs
    /// say, at most `burst + limit - 1`, and with `burst` 1 at most the limit.
    async fn governor_16_39_the_first_second_admits_what_the_docs_say(b) {
        // A client asking every 10 ms for a second.
        let attempts: Vec<Moment> = (0..100).map(|i| ms(1_000 + i * 10)).collect();
        let log = rule("log", Kind::SlidingLog, "10/s");
        assert_eq!(admitted(&mut b, &log, "k", &attempts).await, 10);
        let bucket = rule("bucket", Kind::Gcra, "10/s");
        assert_eq!(admitted(&mut b, &bucket, "k", &attempts).await, 19);
        let smooth = rule("smooth", Kind::Gcra, "10/s burst 1");
        assert_eq!(admitted(&mut b, &smooth, "k", &attempts).await, 10);
    }

    /// governor #107 and #249: the tolerance was one interval too long, so after a full burst
    /// and a wait, one cell more than the burst got through. Ours holds exactly `burst` at
    /// once after any wait, and exactly one more per interval.
    async fn governor_107_249_a_full_bucket_holds_exactly_the_burst(b) {
        let r = rule("g", Kind::Gcra, "1200/minute burst 5"); // 50 ms each
        assert!(b.check(&r, "k", ms(1_000), 5).await.unwrap().allowed());
        // Two intervals later: exactly two cells, not three.
        assert_eq!(admitted(&mut b, &r, "k", &[ms(1_100); 3]).await, 2);
        // Long after: exactly the burst, whether asked one by one or at once.
        assert_eq!(admitted(&mut b, &r, "k", &[secs(10); 7]).await, 5);
        assert!(b.check(&r, "k", secs(20), 5).await.unwrap().allowed());
        assert_eq!(
            b.check(&r, "k", secs(30), 6).await,
            Err(LimitError::CostTooHigh { cost: 6, max: 5 })
        );
    }

    /// Python `limits` #276: `clear()` on a limit did nothing, so a user reset to full quota
    /// stayed limited. A reset here gives the full quota back, to that key alone, under every
    /// rule.
    async fn python_limits_276_reset_really_clears(b) {
        let now = secs(1);
        for r in each_kind("2/minute") {
            b.check(&r, "ann", now, 2).await.unwrap();
            b.check(&r, "bob", now, 2).await.unwrap();
            b.reset(&r, "ann").await;
            assert!(b.check(&r, "ann", now, 2).await.unwrap().allowed(), "{r:?}");
            assert!(!b.check(&r, "bob", now, 1).await.unwrap().allowed(), "{r:?}");
        }
        let both = set(&[("a", Kind::SlidingLog, "2/minute"), ("b", Kind::Gcra, "2/minute")]);
        assert!(b.check(&both, "ann", now, 2).await.unwrap().allowed());
        b.reset(&both, "ann").await;
        assert!(b.check(&both, "ann", now, 2).await.unwrap().allowed());
    }

    /// The window is `(now - span, now]`: an admission exactly one span old has left, one a
    /// microsecond younger has not.
    async fn sliding_log_the_admission_exactly_one_span_old_has_left(b) {
        let r = rule("log", Kind::SlidingLog, "1/10s");
        assert!(b.check(&r, "k", secs(5), 1).await.unwrap().allowed());
        let denied = b.check(&r, "k", secs(15) - Duration::from_micros(1), 1).await.unwrap();
        assert_eq!(denied.retry_after(), Some(Duration::from_micros(1)));
        assert!(b.check(&r, "k", secs(15), 1).await.unwrap().allowed());
    }

    async fn sliding_log_holds_exactly_the_limit(b) {
        let r = rule("log", Kind::SlidingLog, "3/10s");
        for t in [0, 1_000, 2_000] {
            assert!(b.check(&r, "k", ms(10_000 + t), 1).await.unwrap().allowed());
        }
        let denied = b.check(&r, "k", ms(19_000), 1).await.unwrap();
        assert_eq!(
            summary(&denied),
            (false, 0, Duration::from_secs(3), Some(Duration::from_secs(1)))
        );
        assert!(b.check(&r, "k", ms(20_000), 1).await.unwrap().allowed());
    }

    /// Costs of several units: the admission that must leave for a cost to fit is the one
    /// whose units take the count past the excess, not the `n`-th from the end.
    async fn sliding_log_retry_after_counts_units_not_stamps(b) {
        let r = rule("log", Kind::SlidingLog, "10/10s");
        assert!(b.check(&r, "k", secs(1), 4).await.unwrap().allowed());
        assert!(b.check(&r, "k", secs(2), 1).await.unwrap().allowed());
        assert!(b.check(&r, "k", secs(3), 5).await.unwrap().allowed());
        let one = b.peek(&r, "k", secs(4), 1).await.unwrap();
        assert_eq!(one.retry_after(), Some(Duration::from_secs(7)));
        let five = b.peek(&r, "k", secs(4), 5).await.unwrap();
        assert_eq!(five.retry_after(), Some(Duration::from_secs(8)));
        let six = b.peek(&r, "k", secs(4), 6).await.unwrap();
        assert_eq!(six.retry_after(), Some(Duration::from_secs(9)));
        assert_eq!(six.remaining(), 0);
        assert!(b.check(&r, "k", secs(11), 4).await.unwrap().allowed());
        assert!(!b.check(&r, "k", secs(11), 1).await.unwrap().allowed());
    }

    async fn every_algorithm_on_an_empty_limiter(b) {
        for r in each_kind("4/s") {
            let fresh = b.peek(&r, "empty", secs(3), 0).await.unwrap();
            assert_eq!(summary(&fresh), (true, 4, Duration::ZERO, None), "{r:?}");
            assert_eq!(fresh.limit(), 4);
        }
    }

    async fn one_admission_and_what_each_algorithm_answers(b) {
        let now = secs(4);
        let [log, counter, fixed, gcra] = each_kind("2/10s");
        let after_one = |d: Decisions| (d.allowed(), d.remaining(), d.reset_after());
        let secs = Duration::from_secs;
        assert_eq!(after_one(b.check(&log, "k", now, 1).await.unwrap()), (true, 1, secs(10)));
        assert_eq!(after_one(b.check(&fixed, "k", now, 1).await.unwrap()), (true, 1, secs(6)));
        assert_eq!(after_one(b.check(&counter, "k", now, 1).await.unwrap()), (true, 1, secs(16)));
        assert_eq!(after_one(b.check(&gcra, "k", now, 1).await.unwrap()), (true, 1, secs(5)));
    }

    /// The fixed window's documented weakness, and the exact log's answer to it.
    async fn fixed_window_boundary_lets_twice_the_limit_through(b) {
        let fixed = rule("fixed", Kind::FixedWindow, "100/minute");
        assert!(b.check(&fixed, "k", ms(59_999), 100).await.unwrap().allowed());
        let denied = b.check(&fixed, "k", ms(59_999), 1).await.unwrap();
        assert_eq!(denied.retry_after(), Some(Duration::from_millis(1)));
        assert!(b.check(&fixed, "k", ms(60_000), 100).await.unwrap().allowed());
        let exact = rule("exact", Kind::SlidingLog, "100/minute");
        assert!(b.check(&exact, "k", ms(59_999), 100).await.unwrap().allowed());
        assert!(!b.check(&exact, "k", ms(60_000), 1).await.unwrap().allowed());
    }

    async fn sliding_counter_weighs_the_previous_window(b) {
        let r = rule("counter", Kind::SlidingCounter, "10/minute");
        assert!(b.check(&r, "k", ms(30_000), 10).await.unwrap().allowed());
        // At 1:30, half of the previous minute still weighs: 5, so 5 more fit.
        let d = b.check(&r, "k", ms(90_000), 5).await.unwrap();
        assert_eq!(summary(&d), (true, 0, Duration::from_secs(90), None));
        let denied = b.check(&r, "k", ms(90_000), 1).await.unwrap();
        assert_eq!(denied.retry_after(), Some(Duration::from_secs(6)));
    }

    async fn gcra_admits_its_burst_then_one_per_interval(b) {
        let r = rule("gcra", Kind::Gcra, "10/s burst 3");
        assert!(b.check(&r, "k", ms(5_000), 3).await.unwrap().allowed());
        let denied = b.check(&r, "k", ms(5_000), 1).await.unwrap();
        assert_eq!(
            summary(&denied),
            (false, 0, Duration::from_millis(300), Some(Duration::from_millis(100)))
        );
        assert!(b.check(&r, "k", ms(5_100), 1).await.unwrap().allowed());
    }

    async fn a_clock_going_back_can_only_deny_more(b) {
        for r in each_kind("2/10s") {
            assert!(b.check(&r, "back", secs(100), 2).await.unwrap().allowed(), "{r:?}");
            // Back a minute, and back to long before: the window is still full.
            assert!(!b.check(&r, "back", secs(40), 1).await.unwrap().allowed(), "{r:?}");
            assert!(!b.check(&r, "back", secs(1), 1).await.unwrap().allowed(), "{r:?}");
            // Time moves on from the newest admission.
            assert!(b.check(&r, "back", secs(130), 2).await.unwrap().allowed(), "{r:?}");
        }
    }

    /// From the start of the timeline to the last time Redis counts exactly.
    async fn huge_jumps_in_time(b) {
        let near_the_end = RedisLimiter::MAX_TIME - Duration::from_secs(10);
        for r in each_kind("3/s") {
            assert!(b.check(&r, "jump", Moment::ZERO, 3).await.unwrap().allowed(), "{r:?}");
            for at in [secs(2_000_000_000), near_the_end] {
                assert!(b.check(&r, "jump", at, 3).await.unwrap().allowed(), "{r:?} {at}");
                assert!(!b.check(&r, "jump", at, 1).await.unwrap().allowed(), "{r:?} {at}");
            }
        }
    }

    async fn a_cost_of_zero_asks_without_consuming(b) {
        let r = rule("log", Kind::SlidingLog, "1/s");
        assert_eq!(b.check(&r, "z", ms(1_000), 0).await.unwrap().remaining(), 1);
        assert!(b.check(&r, "z", ms(1_000), 1).await.unwrap().allowed());
        let zero = b.check(&r, "z", ms(1_000), 0).await.unwrap();
        assert_eq!(summary(&zero), (true, 0, Duration::from_secs(1), None));
    }

    /// A cost above what a rule ever admits at once is an error, never a denial to wait out,
    /// up to `u64::MAX`; for several rules, the smallest of their most.
    async fn a_cost_no_rule_can_admit_is_an_error(b) {
        for r in each_kind("5/s") {
            for cost in [6, u64::MAX] {
                assert_eq!(
                    b.check(&r, "k", secs(1), cost).await,
                    Err(LimitError::CostTooHigh { cost, max: 5 }),
                    "{r:?}"
                );
            }
        }
        let both = set(&[("wide", Kind::SlidingLog, "100/minute"), ("narrow", Kind::Gcra, "10/s burst 3")]);
        assert_eq!(
            b.check(&both, "k", secs(1), 4).await,
            Err(LimitError::CostTooHigh { cost: 4, max: 3 })
        );
    }

    /// A login allowed 5 a minute AND 20 an hour: admitted only while both admit, and the
    /// answer names the binding rule.
    async fn several_rules_admit_only_while_every_one_does(b) {
        let login = set(&[("minute", Kind::SlidingLog, "5/minute"), ("hour", Kind::SlidingLog, "20/hour")]);
        for minute in 0..4 {
            for _ in 0..5 {
                let d = b.check(&login, "mallory", secs(minute * 60), 1).await.unwrap();
                assert!(d.allowed(), "minute {minute}");
            }
            let sixth = b.check(&login, "mallory", secs(minute * 60 + 1), 1).await.unwrap();
            assert!(!sixth.allowed());
            // Both deny after twenty: the binding rule is the one that waits longer.
            let binding = if minute < 3 { 0 } else { 1 };
            assert_eq!(sixth.binding(), binding, "minute {minute}");
        }
        // Twenty in four minutes: the hour rule binds now, whatever the minute rule says.
        let denied = b.check(&login, "mallory", secs(300), 1).await.unwrap();
        assert!(!denied.allowed());
        assert_eq!(denied.binding(), 1);
        assert!(denied[0].allowed(), "the minute rule alone would admit");
        assert_eq!(denied.retry_after(), Some(Duration::from_secs(3_300)));
    }

    /// A denial consumes from none of the rules: the rules that would have admitted keep
    /// their room.
    async fn a_denial_under_several_rules_consumes_from_none(b) {
        let both = set(&[("wide", Kind::SlidingCounter, "10/s"), ("narrow", Kind::FixedWindow, "2/s")]);
        assert!(b.check(&both, "k", secs(1), 2).await.unwrap().allowed());
        for _ in 0..5 {
            let denied = b.check(&both, "k", secs(1), 1).await.unwrap();
            assert!(!denied.allowed());
            assert_eq!(denied.binding(), 1);
            assert_eq!(denied[0].remaining(), 7, "the wide rule still has 8 left");
        }
        // The narrow window rolls: the wide rule counts only the two admitted.
        let later = b.check(&both, "k", secs(2), 2).await.unwrap();
        assert!(later.allowed());
        assert_eq!(later[0].remaining(), 6);
    }

    /// Two sets sharing a key each keep their own state, whatever their algorithms.
    async fn rules_of_one_key_keep_their_own_state(b) {
        let per_second = rule("second", Kind::SlidingLog, "5/s");
        let per_hour = rule("hour", Kind::SlidingLog, "100/hour");
        for _ in 0..5 {
            assert!(b.check(&per_second, "k", secs(1), 1).await.unwrap().allowed());
        }
        let hour = b.check(&per_hour, "k", secs(1), 1).await.unwrap();
        assert_eq!(hour.remaining(), 99, "the hour rule counts only its own");
        assert!(!b.check(&per_second, "k", secs(1), 1).await.unwrap().allowed());
    }
}

/// Calendar quotas at their edges (issue 33), on every backend too.
mod calendar;
/// Leases, refunds and settles (issue 33), on every backend too.
mod give_back;
