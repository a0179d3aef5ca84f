//! Redis down: checks answer at once (by the failure policy, or with an error saying why and
//! naming the URL) instead of each waiting for it, and nothing is sent while the circuit is
//! open. The probe and its backoff are tested on a fake Redis in `src/circuit.rs`; a server
//! killed and restarted in `single.rs` and `cluster.rs`.

mod support;

use std::time::Duration;

use slidewin_redis::{Check, CircuitState, FailurePolicy, RedisError, RedisLimiter, Rule};
use support::{RedisServer, at_once};

/// Issue 17: with Redis killed, every check took about a second (the connection's reconnect
/// attempts, cut by the timeout), "connection refused" or not, so a service stalled a second
/// per request. Now the first failure opens the circuit and every check after it answers on
/// its first poll, without waiting for anything.
#[tokio::test]
async fn an_outage_answers_the_failure_policy_without_waiting_a_second() {
    let mut server = RedisServer::start();
    let redis = RedisLimiter::connect(&server.url())
        .await
        .unwrap()
        .with_failure_policy(FailurePolicy::Closed);
    let rule = Rule::sliding_log("3/minute".parse().unwrap()).unwrap();
    assert!(redis.check(&rule, "alice", 1).await.unwrap().allowed());

    server.kill();
    let first = redis.check(&rule, "alice", 1).await.unwrap();
    assert!(!first.allowed() && first.made_without_redis().is_some());
    for i in 0..100 {
        let decision = at_once(redis.check(&rule, "alice", 1))
            .unwrap_or_else(|| panic!("check {i} waited for Redis"))
            .unwrap();
        assert!(!decision.allowed(), "check {i}");
        let why = decision
            .made_without_redis()
            .expect("decided without Redis");
        assert!(why.to_string().contains(&server.url()), "{why}");
    }
}

/// A timeout opens the circuit shared by the limiter's clones; from then on no check reaches
/// Redis (it counts what it ran once unpaused), and each says exactly why and when the next
/// try is. The clock is tokio's, paused once the server is: it moves only when the runtime has
/// nothing else to do.
#[tokio::test]
async fn while_the_circuit_is_open_nothing_reaches_redis_and_each_check_says_why() {
    let server = RedisServer::start();
    let url = server.url();
    let patient = RedisLimiter::connect(&url)
        .await
        .unwrap()
        .with_timeout(Duration::from_secs(60))
        .unwrap();
    let hasty = patient
        .clone()
        .with_timeout(Duration::from_millis(100))
        .unwrap();
    let rule = Rule::gcra("10/s".parse().unwrap()).unwrap();
    assert!(patient.check(&rule, "k", 1).await.unwrap().allowed());
    server.cli(&["config", "resetstat"]);
    server.cli(&["client", "pause", "60000", "write"]);
    tokio::time::pause();

    let err = hasty.check(&rule, "k", 1).await.unwrap_err();
    assert_eq!(
        err,
        RedisError::Timeout {
            at: url.clone(),
            after: Duration::from_millis(100)
        }
    );
    assert_eq!(patient.circuit_state(), CircuitState::Open);
    assert!(!patient.is_available());
    let open = RedisError::Unavailable {
        at: url.clone(),
        detail: "not asked: the circuit is open since no answer within 100ms; next try in 50ms"
            .to_string(),
    };
    assert_eq!(
        open.to_string(),
        format!(
            "Redis at {url} is unavailable: not asked: the circuit is open since no answer \
             within 100ms; next try in 50ms"
        )
    );
    for _ in 0..100 {
        let answer = at_once(patient.check(&rule, "k", 1)).expect("an answer at once");
        assert_eq!(answer.unwrap_err(), open);
    }
    let answers = at_once(patient.check_many(&[
        Check::new(&rule, "k", 1),
        Check::new(&rule, "other", 1),
        Check::new(&rule, "k", 11),
    ]))
    .expect("answers at once");
    assert_eq!(answers[0], Err(open.clone()));
    assert_eq!(answers[1], Err(open.clone()));
    // A cost no Redis could admit is still said to be one.
    assert!(matches!(answers[2], Err(RedisError::Limit(_))));
    let err = at_once(patient.peek(&rule, "k", 1))
        .expect("at once")
        .unwrap_err();
    assert_eq!(err, open);
    let err = at_once(patient.inspect("k", slidewin::Moment::ZERO, slidewin::Moment::MAX))
        .expect("at once")
        .unwrap_err();
    assert_eq!(err, open);
    // With a policy, the policy's decision, saying why.
    let closed = patient.clone().with_failure_policy(FailurePolicy::Closed);
    let decision = at_once(closed.check(&rule, "k", 1))
        .expect("at once")
        .unwrap();
    assert!(!decision.allowed());
    assert_eq!(decision.made_without_redis(), Some(&open));

    server.cli(&["client", "unpause"]);
    // Only the check that timed out was ever sent.
    assert_eq!(server.script_calls(), 1);
    assert_eq!(server.calls("zrangebyscore"), 0);
}

/// A script error is Redis's answer, not an outage: the circuit stays closed.
#[tokio::test]
async fn a_reply_error_leaves_the_circuit_closed() {
    let server = RedisServer::start();
    let redis = RedisLimiter::connect(&server.url()).await.unwrap();
    let rule = Rule::gcra("10/s".parse().unwrap()).unwrap();
    // A key of another type: the script's command on it fails.
    server.cli(&["set", "{slidewin:s}:log", "not a set"]);
    let log = Rule::sliding_log("10/s".parse().unwrap()).unwrap();
    let err = redis.check(&log, "s", 1).await.unwrap_err();
    assert!(
        matches!(&err, RedisError::Reply { at, .. } if *at == server.url()),
        "{err}"
    );
    assert!(redis.is_available());
    assert!(redis.check(&rule, "fine", 1).await.unwrap().allowed());
}
