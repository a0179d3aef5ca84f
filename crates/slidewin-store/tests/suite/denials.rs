//! Issue 32: the denials Redis gave, answered again until they end, against Redis alone: the
//! same answers for any sequence of checks, as far as any answer shows them; and a flood on
//! one denied key costs Redis one call per wait.

#![cfg(feature = "redis")]

use std::time::Duration;

use proptest::prelude::*;
use slidewin::Moment;
use slidewin::limit::{Kind, Rule, RuleSet};
use slidewin_redis::RedisLimiter;
use slidewin_store::{Backend, Checked, Redis, RequestKey};
use slidewin_test_support::redis::RedisServer;

/// A burst of 3 a second (an exact log) under 10 in 10 seconds (GCRA): one request, two rules.
fn set() -> RuleSet {
    RuleSet::new([
        Rule::new("burst", Kind::SlidingLog, "3/s".parse().unwrap()).unwrap(),
        Rule::new("slow", Kind::Gcra, "10/10s".parse().unwrap()).unwrap(),
    ])
    .unwrap()
}

/// What the engine does: the answer at once when there is one, else Redis's.
async fn check(
    backend: &Redis,
    store: &<Redis as Backend>::Store,
    at: Moment,
    cost: u64,
) -> Checked {
    let key = RequestKey::Text("ann");
    match backend.check_at_once(store, key, at, cost) {
        Some(answer) => answer.unwrap(),
        None => backend.check(store, key, at, cost).await.unwrap(),
    }
}

/// What an answer shows: whether it admits, which rule binds, each rule's decision; of a
/// rule that admitted in a denied answer, only that (no answer to a denied request shows its
/// remaining, which grows as its entries leave).
fn shown(checked: &Checked) -> (bool, usize, Vec<String>) {
    let each = checked
        .decisions()
        .iter()
        .map(|d| {
            if d.allowed() && !checked.allowed() {
                "admits".to_owned()
            } else {
                format!("{d:?}")
            }
        })
        .collect();
    (checked.allowed(), checked.binding(), each)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// The cache's answers are Redis's: each step advances the clock (by any number of
    /// nanoseconds: Redis's are whole microseconds) and checks 1 or 2 units,
    /// on a backend that keeps denials and on one that asks Redis every time, each under a
    /// prefix of its own on one server.
    #[test]
    fn issue_32_kept_denials_answer_as_redis_alone_does(
        steps in prop::collection::vec((0_u64..700_000_000, prop::sample::select(vec![1_u64, 1, 1, 2])), 1..60)
    ) {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let server = RedisServer::start();
        runtime.block_on(async {
            let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
            let kept = Redis::new(limiter.clone().with_prefix("kept")).with_layer_clock();
            let alone = Redis::new(limiter.with_prefix("alone"))
                .with_layer_clock()
                .with_denial_cache(0);
            let (kept_store, alone_store) = (kept.store(set()).unwrap(), alone.store(set()).unwrap());
            let mut at = Moment::from_secs(1_000_000);
            for (i, (nanos, cost)) in steps.iter().enumerate() {
                at = at.checked_add(Duration::from_nanos(*nanos)).unwrap();
                let ours = check(&kept, &kept_store, at, *cost).await;
                let redis = check(&alone, &alone_store, at, *cost).await;
                assert_eq!(shown(&ours), shown(&redis), "step {i}");
            }
            assert_eq!(alone.denials_answered(), 0);
        });
    }
}

/// A flood on one denied key: after Redis's denial, every check until the wait ends is
/// answered without a call to Redis; the first after it asks Redis again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_32_a_flood_on_a_denied_key_costs_redis_one_call_per_wait() {
    let server = RedisServer::start();
    let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
    let redis = Redis::new(limiter).with_layer_clock();
    let store = redis.store(set()).unwrap();
    let start = Moment::from_secs(2_000_000);
    for _ in 0..3 {
        assert!(check(&redis, &store, start, 1).await.allowed());
    }
    server.cli(&["config", "resetstat"]);
    let denied = check(&redis, &store, start, 1).await;
    let wait = denied.decision().retry_after().expect("denied");
    assert_eq!(
        wait,
        Duration::from_secs(1),
        "the burst's first admission leaves in a second"
    );
    for i in 0..1_000_u64 {
        let at = start
            .checked_add(wait * u32::try_from(i).unwrap() / 1_000)
            .unwrap();
        assert!(!check(&redis, &store, at, 1).await.allowed());
    }
    assert_eq!(
        server.script_calls(),
        1,
        "one call to Redis for 1,001 checks"
    );
    assert_eq!(redis.denials_answered(), 1_000);
    // The wait over, Redis decides again: the burst's first admission has left.
    let after = start.checked_add(wait).unwrap();
    assert!(check(&redis, &store, after, 1).await.allowed());
    assert_eq!(server.script_calls(), 2);
}

/// Issue 33: a lease's denial is not kept, nor a refunding log's, since a release (on this
/// instance or another) can end it before its wait: after the release the next check asks
/// Redis and is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_33_a_leases_denial_is_not_kept_a_release_ends_it() {
    let server = RedisServer::start();
    let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
    let redis = Redis::new(limiter).with_layer_clock();
    let in_flight = Rule::new("in_flight", Kind::Leases, "1 per 30s".parse().unwrap()).unwrap();
    let log = Rule::new("tokens", Kind::SlidingLog, "1 per 30s".parse().unwrap()).unwrap();
    for rule in [in_flight, log.with_refunds().unwrap()] {
        let store = redis.store(RuleSet::from(rule)).unwrap();
        let at = Moment::from_secs(2_000_000);
        assert!(check(&redis, &store, at, 1).await.allowed());
        assert!(!check(&redis, &store, at, 1).await.allowed());
        let key = RequestKey::Text("ann");
        assert!(redis.check_at_once(&store, key, at, 1).is_none());
        assert_eq!(redis.release(&store, key, at, 1).await.unwrap(), 1);
        assert!(check(&redis, &store, at, 1).await.allowed());
    }
    assert_eq!(redis.denials_answered(), 0);
}

/// A review of issue 33 on issue 32's cache: a settle that gives units back makes a kept
/// denial wrong (counts went down), so it forgets it, and the next check asks Redis and is
/// admitted; a settle up keeps it (counts only grew).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settle_down_forgets_the_denial_kept_for_its_key() {
    let server = RedisServer::start();
    let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
    let redis = Redis::new(limiter).with_layer_clock();
    let store = redis.store(set()).unwrap();
    let at = Moment::from_secs(3_000_000);
    let key = RequestKey::Text("ann");
    let (_, reserved) = redis.reserve(&store, key, at, 3).await.unwrap();
    let reserved = reserved.unwrap();
    assert!(!check(&redis, &store, at, 1).await.allowed());
    assert!(redis.check_at_once(&store, key, at, 1).is_some()); // kept
    assert!(redis.settle(&store, key, reserved, 5).await.unwrap());
    assert!(redis.check_at_once(&store, key, at, 1).is_some()); // up: still holds
    assert!(
        redis
            .settle(&store, key, reserved.settled(5), 1)
            .await
            .unwrap()
    );
    assert!(redis.check_at_once(&store, key, at, 1).is_none());
    assert!(check(&redis, &store, at, 1).await.allowed());
}
