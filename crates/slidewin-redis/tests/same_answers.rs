//! The same test bodies against the in-memory limiters and the Redis scripts (a macro writes
//! each body twice), and a property test that drives both through random traces and compares
//! every decision, field by field.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;
use slidewin::{Decision, FixedWindow, Gcra, Limiter, Moment, SlidingCounter, SlidingLog};
use slidewin_redis::{RedisAlgorithm, RedisLimiter, Rule};
use support::RedisServer;

/// Where a decision comes from: a limiter in memory, or the scripts on Redis.
trait Backend {
    async fn check(&mut self, rule: &Rule, key: &str, now: Moment, cost: u64) -> Decision;
    async fn peek(&mut self, rule: &Rule, key: &str, now: Moment, cost: u64) -> Decision;
}

/// One in-memory limiter per rule and key.
#[derive(Default)]
struct Memory {
    limiters: HashMap<(String, String), InMemory>,
}

enum InMemory {
    Log(Limiter<SlidingLog>),
    Counter(Limiter<SlidingCounter>),
    Fixed(Limiter<FixedWindow>),
    Gcra(Limiter<Gcra>),
}

impl Memory {
    fn limiter(&mut self, rule: &Rule, key: &str) -> &mut InMemory {
        let quota = rule.quota();
        self.limiters
            .entry((format!("{:?} {quota}", rule.algorithm()), key.to_string()))
            .or_insert_with(|| match rule.algorithm() {
                RedisAlgorithm::SlidingLog => InMemory::Log(Limiter::new(quota).unwrap()),
                RedisAlgorithm::SlidingCounter => InMemory::Counter(Limiter::new(quota).unwrap()),
                RedisAlgorithm::FixedWindow => InMemory::Fixed(Limiter::new(quota).unwrap()),
                RedisAlgorithm::Gcra => InMemory::Gcra(Limiter::new(quota).unwrap()),
            })
    }
}

impl Backend for Memory {
    async fn check(&mut self, rule: &Rule, key: &str, now: Moment, cost: u64) -> Decision {
        match self.limiter(rule, key) {
            InMemory::Log(l) => l.check(now, cost),
            InMemory::Counter(l) => l.check(now, cost),
            InMemory::Fixed(l) => l.check(now, cost),
            InMemory::Gcra(l) => l.check(now, cost),
        }
        .unwrap()
    }

    async fn peek(&mut self, rule: &Rule, key: &str, now: Moment, cost: u64) -> Decision {
        match self.limiter(rule, key) {
            InMemory::Log(l) => l.peek(now, cost),
            InMemory::Counter(l) => l.peek(now, cost),
            InMemory::Fixed(l) => l.peek(now, cost),
            InMemory::Gcra(l) => l.peek(now, cost),
        }
        .unwrap()
    }
}

struct OnRedis {
    redis: RedisLimiter,
}

impl Backend for OnRedis {
    async fn check(&mut self, rule: &Rule, key: &str, now: Moment, cost: u64) -> Decision {
        self.redis
            .check_at(rule, key, now, cost)
            .await
            .unwrap()
            .decision()
    }

    async fn peek(&mut self, rule: &Rule, key: &str, now: Moment, cost: u64) -> Decision {
        self.redis
            .peek_at(rule, key, now, cost)
            .await
            .unwrap()
            .decision()
    }
}

/// Writes each body as a test against memory and as a test against a Redis of its own.
macro_rules! same_on_both {
    ($(async fn $name:ident($backend:ident) $body:block)*) => {
        mod memory {
            use super::*;
            $(#[tokio::test] async fn $name() { let mut $backend = Memory::default(); $body })*
        }
        mod redis {
            use super::*;
            $(#[tokio::test] async fn $name() {
                let server = RedisServer::start();
                let redis = RedisLimiter::connect(&server.url()).await.unwrap();
                let mut $backend = OnRedis { redis };
                $body
            })*
        }
    };
}

fn ms(n: u64) -> Moment {
    Moment::from_millis(n)
}

fn rule(algorithm: RedisAlgorithm, quota: &str) -> Rule {
    Rule::new(algorithm, quota.parse().unwrap()).unwrap()
}

fn summary(d: Decision) -> (bool, u64, Duration, Option<Duration>) {
    (d.allowed(), d.remaining(), d.reset_after(), d.retry_after())
}

same_on_both! {
    async fn sliding_log_holds_exactly_the_limit(b) {
        let r = rule(RedisAlgorithm::SlidingLog, "3/10s");
        for t in [0, 1_000, 2_000] {
            assert!(b.check(&r, "k", ms(10_000 + t), 1).await.allowed());
        }
        let denied = b.check(&r, "k", ms(19_000), 1).await;
        assert_eq!(summary(denied), (false, 0, Duration::from_secs(3), Some(Duration::from_secs(1))));
        assert!(b.check(&r, "k", ms(20_000), 1).await.allowed());
    }

    async fn fixed_window_lets_twice_through_at_the_boundary(b) {
        let r = rule(RedisAlgorithm::FixedWindow, "2/s");
        assert!(b.check(&r, "k", ms(1_999), 2).await.allowed());
        let denied = b.check(&r, "k", ms(1_999), 1).await;
        assert_eq!(denied.retry_after(), Some(Duration::from_millis(1)));
        assert!(b.check(&r, "k", ms(2_000), 2).await.allowed());
    }

    async fn sliding_counter_weighs_the_previous_window(b) {
        let r = rule(RedisAlgorithm::SlidingCounter, "10/minute");
        assert!(b.check(&r, "k", ms(30_000), 10).await.allowed());
        // At 1:30, half of the previous minute still weighs: 5, so 5 more fit.
        let d = b.check(&r, "k", ms(90_000), 5).await;
        assert_eq!(summary(d), (true, 0, Duration::from_secs(90), None));
        let denied = b.check(&r, "k", ms(90_000), 1).await;
        assert_eq!(denied.retry_after(), Some(Duration::from_secs(6)));
    }

    async fn gcra_admits_its_burst_then_one_per_interval(b) {
        let r = rule(RedisAlgorithm::Gcra, "10/s burst 3");
        assert!(b.check(&r, "k", ms(5_000), 3).await.allowed());
        let denied = b.check(&r, "k", ms(5_000), 1).await;
        assert_eq!(summary(denied), (false, 0, Duration::from_millis(300), Some(Duration::from_millis(100))));
        assert!(b.check(&r, "k", ms(5_100), 1).await.allowed());
    }

    async fn a_clock_going_back_denies_more(b) {
        for algorithm in [
            RedisAlgorithm::SlidingLog,
            RedisAlgorithm::SlidingCounter,
            RedisAlgorithm::FixedWindow,
            RedisAlgorithm::Gcra,
        ] {
            let r = rule(algorithm, "2/10s");
            assert!(b.check(&r, "back", ms(100_000), 2).await.allowed(), "{algorithm:?}");
            assert!(!b.check(&r, "back", ms(40_000), 1).await.allowed(), "{algorithm:?}");
            assert!(b.check(&r, "back", ms(130_000), 2).await.allowed(), "{algorithm:?}");
        }
    }

    async fn a_cost_of_zero_asks_without_consuming(b) {
        let r = rule(RedisAlgorithm::SlidingLog, "1/s");
        assert_eq!(b.check(&r, "z", ms(1_000), 0).await.remaining(), 1);
        assert!(b.check(&r, "z", ms(1_000), 1).await.allowed());
        assert_eq!(summary(b.check(&r, "z", ms(1_000), 0).await), (true, 0, Duration::from_secs(1), None));
    }
}

/// One request of a random trace.
#[derive(Clone, Debug)]
struct Step {
    /// Microseconds to move; negative moves back.
    delta: i64,
    cost: u64,
    key: u8,
}

/// Spans and limits whose Redis arithmetic is the in-memory one exactly: whole microseconds,
/// and spans that the limits divide (GCRA's interval). Spans of seconds: a key's expiry
/// (about a span) runs on the server's own clock whatever time the checks give, and a case
/// must not see its keys vanish while a busy machine runs it.
fn quotas() -> impl Strategy<Value = (u64, u64, u64)> {
    (
        prop::sample::select(vec![1u64, 2, 4, 5, 10]),
        prop::sample::select(vec![10_000_000u64, 100_000_000, 1_000_000_000]),
        1u64..=12,
    )
}

fn trace(span: i64, most: u64) -> impl Strategy<Value = Vec<Step>> {
    let delta = prop_oneof![
        6 => 0..span / 3 + 1,
        2 => Just(span),
        1 => Just(0),
        1 => -span..0,
        1 => (span * 10)..(span * 1_000),
    ];
    let step = (delta, 0..=most, 0..2u8).prop_map(|(delta, cost, key)| Step { delta, cost, key });
    prop::collection::vec(step, 1..40)
}

/// Redis rounds one thing to the microsecond, towards waiting longer: the sliding counter's
/// `retry_after`. Everything else must be equal.
fn same(algorithm: RedisAlgorithm, memory: Decision, redis: Decision) -> bool {
    let up_to_micro = |d: Option<Duration>| {
        d.map(|d| Duration::from_micros(u64::try_from(d.as_nanos().div_ceil(1_000)).unwrap()))
    };
    let retry = match algorithm {
        RedisAlgorithm::SlidingCounter => up_to_micro(memory.retry_after()),
        _ => memory.retry_after(),
    };
    (
        memory.allowed(),
        memory.limit(),
        memory.remaining(),
        memory.reset_after(),
        retry,
    ) == (
        redis.allowed(),
        redis.limit(),
        redis.remaining(),
        redis.reset_after(),
        redis.retry_after(),
    )
}

#[test]
fn random_traces_get_the_same_decisions_in_memory_and_on_redis() {
    let (runtime, _server, redis) = support::blocking_limiter();
    // Each case under a prefix of its own, so that cases share nothing on the server.
    let case = std::sync::atomic::AtomicU64::new(0);
    let config = ProptestConfig::with_cases(48);
    let cases = quotas().prop_flat_map(|(limit, span, burst)| {
        let steps = trace(i64::try_from(span).unwrap(), limit.max(burst));
        (Just(limit), Just(span), Just(burst), steps)
    });
    proptest!(config, |((limit, span, burst, steps) in cases)| {
        let case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let quota = slidewin::Quota::new(limit, Duration::from_micros(span)).unwrap();
        for algorithm in [
            RedisAlgorithm::SlidingLog,
            RedisAlgorithm::SlidingCounter,
            RedisAlgorithm::FixedWindow,
            RedisAlgorithm::Gcra,
        ] {
            let quota = match algorithm {
                RedisAlgorithm::Gcra => quota.with_burst(burst).unwrap(),
                _ => quota,
            };
            let rule = Rule::new(algorithm, quota).unwrap();
            let redis = redis.clone().with_prefix(&format!("case{case}"));
            let mut memory = Memory::default();
            let mut on_redis = OnRedis { redis };
            let mut now: i64 = 1 << 40;
            for step in &steps {
                now += step.delta;
                let at = Moment::from_nanos(u64::try_from(now).unwrap() * 1_000);
                let most = if algorithm == RedisAlgorithm::Gcra { burst } else { limit };
                let cost = step.cost.min(most);
                let key = if step.key == 0 { "a" } else { "b" };
                let (peeked, m, r) = runtime.block_on(async {
                    let peeked = (memory.peek(&rule, key, at, cost).await, on_redis.peek(&rule, key, at, cost).await);
                    (peeked, memory.check(&rule, key, at, cost).await, on_redis.check(&rule, key, at, cost).await)
                });
                prop_assert!(same(algorithm, peeked.0, peeked.1), "peek {algorithm:?} {quota} at {now} µs cost {cost}: memory {:?}, redis {:?}", peeked.0, peeked.1);
                prop_assert_eq!(peeked.0, m, "peek then check disagree in memory");
                prop_assert!(same(algorithm, m, r), "{algorithm:?} {quota} at {now} µs cost {cost}: memory {m:?}, redis {r:?}");
            }
        }
    });
}
