//! Issue 31: Redis Sentinel (envoy ratelimit's `REDIS_TYPE=SENTINEL`), with a primary and a
//! replica: checks go to the primary the sentinel names, with the primary's password, and
//! after a failover to the new one, where the counts are the old primary's (replicated).

use crate::support::until_available;

use slidewin::Moment;
use slidewin::limit::{Kind, Rule};
use slidewin_redis::{CircuitState, FailurePolicy, RedisLimiter, Rules};
use slidewin_test_support::sentinel::{MASTER, SentinelSet};

const PASSWORD: &str = "primary-pw";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_31_checks_follow_the_primary_through_a_sentinel_failover() {
    let set = SentinelSet::start(Some(PASSWORD));
    let redis = RedisLimiter::connect_sentinel_lazily(MASTER, &[&set.url()], Some(PASSWORD))
        .await
        .unwrap()
        .with_failure_policy(FailurePolicy::Closed);
    assert_eq!(redis.circuit_state(), CircuitState::Closed);
    let rule =
        Rules::try_from(Rule::new("api", Kind::SlidingLog, "2/minute".parse().unwrap()).unwrap())
            .unwrap();
    let now = Moment::from_secs(1_000_000);
    let first = redis.check(&rule, "ann", now, 1).await.unwrap();
    assert!(first.allowed() && first.degraded().is_none());
    // The admission is on the replica before the failover.
    let keys = |server: &slidewin_test_support::redis::RedisServer| {
        server.cli(&["--no-auth-warning", "-a", PASSWORD, "dbsize"])
    };
    assert!((0..100_000).any(|_| keys(&set.replica).trim() != "0"));

    set.failover(Some(PASSWORD));
    assert_eq!(set.primary_port(), set.replica.port);
    // The calls between the failover and the limiter's next question to the sentinel fail
    // as Redis being away does (answered by the failure policy); then the new primary answers.
    let mut second = None;
    for _ in 0..1_000 {
        let answer = redis.check(&rule, "ann", now, 1).await.unwrap();
        if answer.degraded().is_none() {
            second = Some(answer);
            break;
        }
        until_available(&redis).await;
    }
    let second = second.expect("the new primary answers");
    assert!(second.allowed(), "the second of two");
    let third = redis.check(&rule, "ann", now, 1).await.unwrap();
    assert!(third.degraded().is_none());
    assert!(
        !third.allowed(),
        "the old primary's admission counts on the new one"
    );
}

/// A wrong password for the primary stops the connection, naming the sentinel's master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_31_a_wrong_primary_password_through_sentinel_is_refused() {
    let set = SentinelSet::start(Some(PASSWORD));
    let error = RedisLimiter::connect_sentinel_lazily(MASTER, &[&set.url()], Some("wrong"))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("sentinel master mymaster"), "{error}");
}
