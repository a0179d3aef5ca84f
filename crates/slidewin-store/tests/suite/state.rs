//! What a backend says of itself: its kind, whether it answers, its policy, what it holds.

use slidewin::Moment;
use slidewin::limit::{Kind, Rule, RuleSet};
use slidewin_store::{Backend, BackendKind, BackendState, Memory};

fn api(quota: &str) -> RuleSet {
    RuleSet::from(Rule::new("api", Kind::SlidingLog, quota.parse().unwrap()).unwrap())
}

/// Memory is always up, has no failure policy to name, counts its keys, and lets a store go
/// once its keys are idle.
#[tokio::test]
async fn memory_is_up_and_counts_its_keys() {
    let memory = Memory::new().with_max_memory(1 << 20);
    assert_eq!(memory.kind(), BackendKind::Memory);
    assert_eq!(memory.state(), BackendState::Up);
    let store = memory.store(api("2/s")).unwrap();
    assert_eq!(memory.keys(&store), Some(0));
    assert!(!memory.holds_keys(&store, Moment::ZERO));
    memory
        .check(&store, "ann".into(), Moment::ZERO, 1)
        .await
        .unwrap();
    assert_eq!(memory.keys(&store), Some(1));
    let (used, max) = memory.memory().unwrap();
    assert!(used > 0 && max == 1 << 20);
    // Live at 999 ms; idle (back at its full quota) at 1 s, and dropped by the question.
    assert!(memory.holds_keys(&store, Moment::from_millis(999)));
    assert!(!memory.holds_keys(&store, Moment::from_secs(1)));
    assert_eq!(memory.keys(&store), Some(0));
    assert_eq!(Memory::new().memory(), None);
}

#[cfg(feature = "redis")]
mod redis {
    use slidewin_redis::{FailurePolicy, RedisLimiter};
    use slidewin_store::Redis;
    use slidewin_test_support::redis::RedisServer;

    use super::*;

    /// A Redis that answers is up; its stores hold nothing (the counts are in Redis), and it
    /// names no key count.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_that_answers_is_up() {
        let server = RedisServer::start();
        let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
        let redis = Redis::new(limiter.with_prefix("state"));
        assert_eq!(redis.kind(), BackendKind::Redis);
        assert_eq!(redis.state(), BackendState::Up);
        assert_eq!(redis.failure_policy(), None);
        let store = redis.store(api("2/s")).unwrap();
        assert!(
            redis
                .check(&store, "ann".into(), Moment::ZERO, 1)
                .await
                .unwrap()
                .allowed()
        );
        assert_eq!(redis.keys(&store), None);
        assert!(!redis.holds_keys(&store, Moment::ZERO));
        assert_eq!(redis.memory(), None);
    }

    /// A Redis that cannot be reached is down from the start, and says which policy answers.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_that_cannot_be_reached_is_down_with_its_policy() {
        let limiter = RedisLimiter::connect_lazily("redis://127.0.0.1:1/")
            .await
            .unwrap()
            .with_failure_policy(FailurePolicy::Closed);
        let redis = Redis::new(limiter);
        assert_eq!(redis.state(), BackendState::Down);
        assert_eq!(redis.failure_policy(), Some(FailurePolicy::Closed));
        let store = redis.store(api("2/s")).unwrap();
        let checked = redis
            .check(&store, "ann".into(), Moment::ZERO, 1)
            .await
            .unwrap();
        assert!(!checked.allowed() && checked.degraded().is_some());

        let cluster = RedisLimiter::connect_cluster_lazily(&["redis://127.0.0.1:1/"])
            .await
            .unwrap();
        assert_eq!(Redis::new(cluster).kind(), BackendKind::RedisCluster);
    }

    /// Issue 31: envoy ratelimit's `CACHE_KEY_PREFIX`. Services on one Redis under different
    /// key prefixes share no counts; under the same one, they share them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn issue_31_key_prefixes_keep_services_apart() {
        let server = RedisServer::start();
        let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
        let one = Redis::new(limiter.clone()).with_key_prefix("team_a");
        let same = Redis::new(limiter.clone()).with_key_prefix("team_a");
        let other = Redis::new(limiter).with_key_prefix("team_b");
        let now = Moment::from_secs(1_000);
        let allowed = |redis: &Redis| {
            let store = redis.store(api("1/minute")).unwrap();
            let redis = redis.clone();
            async move {
                redis
                    .check(&store, "ann".into(), now, 1)
                    .await
                    .unwrap()
                    .allowed()
            }
        };
        assert!(allowed(&one).await);
        assert!(!allowed(&same).await, "the same prefix shares the count");
        assert!(allowed(&other).await, "another prefix counts apart");
    }
}
