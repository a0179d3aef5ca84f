//! A reload that changes a rule set's quotas: `Backend::carry` moves the counts into the new
//! store, and every answer afterwards is against the new quotas (limitador #522: a raised
//! limit answered against the stale one, then an integer underflow). Memory moves its keys;
//! Redis keys a rule's counts by its name and kind, so they carry themselves. Both must give
//! the same answers.

use slidewin::Moment;
use slidewin::limit::{Kind, Rule, RuleSet};
use slidewin_store::{Backend, Memory};

/// A moment well inside Redis's exact range, as Unix time.
const START: u64 = 1_700_000_000;

fn secs(n: u64) -> Moment {
    Moment::from_secs(START + n)
}

fn rule(name: &str, kind: Kind, quota: &str) -> Rule {
    Rule::new(name, kind, quota.parse().unwrap()).unwrap()
}

/// What one check answered, rule by rule: admitted, limit, remaining, retry after (ms).
type Seen = Vec<(bool, u64, u64, Option<u128>)>;

/// Checks `key` under `old` for `history`, reloads to `new` (carrying the counts), and checks
/// `after`; answers what the checks after the reload saw, and how many keys were carried.
async fn reload<B: Backend>(
    backend: &B,
    key: &str,
    old: RuleSet,
    new: RuleSet,
    history: &[(u64, u64)],
    after: &[(u64, u64)],
) -> (usize, Vec<Seen>) {
    let old = backend.store(old).unwrap();
    for &(t, cost) in history {
        backend
            .check(&old, key.into(), secs(t), cost)
            .await
            .unwrap();
    }
    let new = backend.store(new).unwrap();
    let at = history.last().map_or(secs(0), |&(t, _)| secs(t));
    let carried = backend.carry(&new, &old, at);
    let mut seen = Vec::new();
    for &(t, cost) in after {
        let checked = backend
            .check(&new, key.into(), secs(t), cost)
            .await
            .unwrap();
        seen.push(
            checked
                .decisions()
                .iter()
                .map(|d| {
                    let retry = d.retry_after().map(|w| w.as_millis());
                    (d.allowed(), d.limit(), d.remaining(), retry)
                })
                .collect(),
        );
    }
    (carried, seen)
}

fn one(kind: Kind, quota: &str) -> RuleSet {
    RuleSet::from(rule("api", kind, quota))
}

/// Five used of 5 a minute, raised to 8: three more, then a denial until the first leaves.
async fn raised_sliding_log<B: Backend>(backend: &B) -> (usize, Vec<Seen>) {
    let history: Vec<_> = (1..=5).map(|s| (s, 1)).collect();
    let after = [(6, 1), (7, 1), (8, 1), (9, 1)];
    let (old, new) = (
        one(Kind::SlidingLog, "5/minute"),
        one(Kind::SlidingLog, "8/minute"),
    );
    reload(backend, "log", old, new, &history, &after).await
}

async fn raised_sliding_counter<B: Backend>(backend: &B) -> (usize, Vec<Seen>) {
    let history = [(10, 3), (50, 3), (70, 2)];
    let after = [(75, 4), (90, 10), (100, 1), (130, 5)];
    let (old, new) = (
        one(Kind::SlidingCounter, "10/minute"),
        one(Kind::SlidingCounter, "20/minute"),
    );
    reload(backend, "counter", old, new, &history, &after).await
}

async fn raised_fixed_window<B: Backend>(backend: &B) -> (usize, Vec<Seen>) {
    // `START` is 20 s past a minute: a window of a minute starts at `START + 40`.
    let history = [(41, 4), (50, 6)];
    let after = [(55, 1), (56, 14), (57, 1), (100, 25)];
    let (old, new) = (
        one(Kind::FixedWindow, "10/minute"),
        one(Kind::FixedWindow, "25/minute"),
    );
    reload(backend, "fixed", old, new, &history, &after).await
}

/// The bucket keeps its TAT when the rate rises, on either backend.
async fn raised_gcra<B: Backend>(backend: &B) -> (usize, Vec<Seen>) {
    let history = [(1, 5)];
    let after = [(1, 0), (1, 50), (1, 1), (2, 0)];
    let (old, new) = (one(Kind::Gcra, "10/s"), one(Kind::Gcra, "100/s"));
    reload(backend, "gcra", old, new, &history, &after).await
}

async fn raised_rule_set<B: Backend>(backend: &B) -> (usize, Vec<Seen>) {
    let old = RuleSet::new([
        rule("minute", Kind::SlidingLog, "5/minute"),
        rule("hour", Kind::FixedWindow, "20/hour"),
    ])
    .unwrap();
    // Reordered, one raised, one new: rules carry by name.
    let new = RuleSet::new([
        rule("day", Kind::SlidingCounter, "100/day"),
        rule("hour", Kind::FixedWindow, "20/hour"),
        rule("minute", Kind::SlidingLog, "8/minute"),
    ])
    .unwrap();
    let history: Vec<_> = (1..=5).map(|s| (s, 1)).collect();
    let after = [(6, 2), (7, 1), (8, 1)];
    reload(backend, "set", old, new, &history, &after).await
}

/// Lowered below the count held: denied, nothing remaining, and no underflow anywhere.
async fn lowered<B: Backend>(backend: &B) -> Vec<(usize, Vec<Seen>)> {
    let history: Vec<_> = (1..=8).map(|s| (s, 1)).collect();
    let after = [(10, 1), (10, 3), (66, 1), (66, 1), (67, 1)];
    let mut all = Vec::new();
    for (kind, key) in [
        (Kind::SlidingLog, "low-log"),
        (Kind::SlidingCounter, "low-counter"),
        (Kind::FixedWindow, "low-fixed"),
    ] {
        let (old, new) = (one(kind, "10/minute"), one(kind, "3/minute"));
        all.push(reload(backend, key, old, new, &history, &after).await);
    }
    all
}

fn allowed(limit: u64, remaining: u64) -> (bool, u64, u64, Option<u128>) {
    (true, limit, remaining, None)
}

fn denied(limit: u64, remaining: u64, retry_ms: u128) -> (bool, u64, u64, Option<u128>) {
    (false, limit, remaining, Some(retry_ms))
}

#[tokio::test]
async fn raising_a_limit_keeps_counts_limitador_522_in_memory() {
    let memory = Memory::new();
    let (carried, seen) = raised_sliding_log(&memory).await;
    assert_eq!(carried, 1);
    assert_eq!(
        seen,
        [
            vec![allowed(8, 2)],
            vec![allowed(8, 1)],
            vec![allowed(8, 0)],
            vec![denied(8, 0, 52_000)], // the admission at 1 s leaves at 61 s
        ]
    );
    let (_, seen) = raised_fixed_window(&memory).await;
    assert_eq!(
        seen,
        [
            vec![allowed(25, 14)],
            vec![allowed(25, 0)],
            vec![denied(25, 0, 43_000)], // the window ends at 100 s
            vec![allowed(25, 0)],
        ]
    );
    let (_, seen) = raised_gcra(&memory).await;
    assert_eq!(
        seen,
        [
            vec![allowed(100, 50)], // 500 ms owed, at the new rate
            vec![allowed(100, 0)],
            vec![denied(100, 0, 10)],
            vec![allowed(100, 100)],
        ]
    );
    let (carried, seen) = raised_rule_set(&memory).await;
    assert_eq!(carried, 1);
    assert_eq!(
        seen,
        [
            vec![allowed(100, 98), allowed(20, 13), allowed(8, 1)],
            vec![allowed(100, 97), allowed(20, 12), allowed(8, 0)],
            // The minute denies; the others answer as they would have admitted.
            vec![allowed(100, 96), allowed(20, 11), denied(8, 0, 53_000)],
        ]
    );
    let (carried, seen) = raised_sliding_counter(&memory).await;
    assert_eq!(carried, 1);
    assert!(seen.iter().all(|each| each[0].1 == 20));
}

#[tokio::test]
async fn lowering_a_limit_below_the_count_denies_with_nothing_remaining_in_memory() {
    let memory = Memory::new();
    let seen = lowered(&memory).await;
    // The log: the sixth oldest of eight (at 6 s) leaves at 66 s; all eight at 68 s.
    assert_eq!(
        seen[0],
        (
            1,
            vec![
                vec![denied(3, 0, 56_000)],
                vec![denied(3, 0, 58_000)],
                vec![allowed(3, 0)],
                vec![denied(3, 0, 1_000)],
                vec![allowed(3, 0)],
            ]
        )
    );
    for (carried, seen) in &seen[1..] {
        assert_eq!(*carried, 1);
        assert!(!seen[0][0].0 && seen[0][0].2 == 0, "{seen:?}");
        assert!(!seen[1][0].0 && seen[1][0].2 == 0, "{seen:?}");
    }
}

/// One rule and two hold different shapes in memory: nothing carries between them, and the
/// old store is left for the caller to drop.
#[tokio::test]
async fn memory_carries_nothing_between_shapes() {
    let memory = Memory::new();
    let one_rule = memory.store(one(Kind::SlidingLog, "5/minute")).unwrap();
    memory
        .check(&one_rule, "ann".into(), secs(1), 3)
        .await
        .unwrap();
    let two = RuleSet::new([
        rule("api", Kind::SlidingLog, "5/minute"),
        rule("hour", Kind::Gcra, "100/hour"),
    ])
    .unwrap();
    let two = memory.store(two).unwrap();
    assert_eq!(memory.carry(&two, &one_rule, secs(1)), 0);
    assert_eq!(one_rule.len(), 1);
    let gcra = memory.store(one(Kind::Gcra, "5/minute")).unwrap();
    assert_eq!(gcra.carry_from(&one_rule, secs(1)), 0);
    // The same shape carries, and empties the old store.
    let raised = memory.store(one(Kind::SlidingLog, "6/minute")).unwrap();
    assert_eq!(raised.carry_from(&one_rule, secs(1)), 1);
    assert!(one_rule.is_empty());
    let checked = memory
        .check(&raised, "ann".into(), secs(2), 1)
        .await
        .unwrap();
    assert_eq!(checked.decision().remaining(), 2);
}

/// A capped memory backend carries up to its cap.
#[tokio::test]
async fn memory_carries_up_to_its_cap() {
    let (uncapped, capped) = (Memory::new(), Memory::new().with_max_keys(16));
    let old = uncapped.store(one(Kind::Gcra, "1/s")).unwrap();
    for key in 0..40 {
        let key = format!("k{key}");
        let checked = uncapped
            .check(&old, key.as_str().into(), secs(1), 1)
            .await
            .unwrap();
        assert!(checked.allowed());
    }
    let new = capped.store(one(Kind::Gcra, "2/s")).unwrap();
    assert_eq!(capped.carry(&new, &old, secs(1)), 16);
    assert_eq!(new.len(), 16);
    assert!(old.is_empty());
}

#[cfg(feature = "redis")]
mod redis {
    use slidewin_redis::RedisLimiter;
    use slidewin_store::Redis;
    use slidewin_test_support::redis::RedisServer;

    use super::*;

    async fn backends(server: &RedisServer, prefix: &str) -> (Memory, Redis) {
        let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
        let redis = Redis::new(limiter.with_prefix(prefix)).with_layer_clock();
        (Memory::new(), redis)
    }

    /// Redis carries nothing itself (its counts are keyed by rule name and kind), and answers
    /// as memory, which moved its keys, does.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn raising_a_limit_keeps_counts_limitador_522_on_redis_as_in_memory() {
        let server = RedisServer::start();
        let (memory, redis) = backends(&server, "raised").await;
        let (carried, in_redis) = raised_sliding_log(&redis).await;
        assert_eq!(carried, 0);
        assert_eq!(in_redis, raised_sliding_log(&memory).await.1);
        assert_eq!(
            raised_sliding_counter(&redis).await.1,
            raised_sliding_counter(&memory).await.1
        );
        assert_eq!(
            raised_fixed_window(&redis).await.1,
            raised_fixed_window(&memory).await.1
        );
        assert_eq!(raised_gcra(&redis).await.1, raised_gcra(&memory).await.1);
        assert_eq!(
            raised_rule_set(&redis).await.1,
            raised_rule_set(&memory).await.1
        );
    }

    /// Below the count held, for a cost of 1 and more: the same denials, nothing remaining,
    /// the same waits.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lowering_a_limit_below_the_count_answers_on_redis_as_in_memory() {
        let server = RedisServer::start();
        let (memory, redis) = backends(&server, "lowered").await;
        let in_redis = lowered(&redis).await;
        let in_memory = lowered(&memory).await;
        for ((_, redis), (_, memory)) in in_redis.iter().zip(&in_memory) {
            assert_eq!(redis, memory);
        }
    }

    /// A token bucket whose rate fell: Redis keeps the TAT, so it owes the same time, fewer
    /// units; memory converts the units owed. Memory never admits more.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lowered_rate_is_stricter_in_memory_than_on_redis() {
        let server = RedisServer::start();
        let (memory, redis) = backends(&server, "gcra").await;
        let history = [(1, 50)]; // 50 of 100/s: 500 ms owed
        let after = [(1, 0)];
        let (old, new) = (|| one(Kind::Gcra, "100/s"), || one(Kind::Gcra, "10/s"));
        let (_, in_redis) = reload(&redis, "k", old(), new(), &history, &after).await;
        let (_, in_memory) = reload(&memory, "k", old(), new(), &history, &after).await;
        assert_eq!(in_redis, [vec![allowed(10, 5)]]); // 500 ms of 100 ms units
        assert_eq!(in_memory, [vec![allowed(10, 0)]]); // 50 units: an empty bucket
    }
}
