//! Redis down: checks answer at once (by the failure policy, or with an error saying why and
//! naming the URL) instead of each waiting for it, and nothing is sent while the circuit is
//! open. The probe and its backoff are tested on a fake Redis in `src/circuit.rs`; a server
//! killed and restarted in `single.rs` and `cluster.rs`.

mod support;

use std::time::Duration;

use slidewin::Moment;
use slidewin::limit::{Kind, Rule};
use slidewin_redis::{Check, CircuitState, FailurePolicy, RedisError, RedisLimiter, Rules};
use support::{RedisServer, at_once};

/// The rule `name`: `quota` under `kind`.
fn rule(name: &str, kind: Kind, quota: &str) -> Rule {
    Rule::new(name, kind, quota.parse().unwrap()).unwrap()
}

/// The rule `name`: `quota` under `kind`, alone, as a check names it.
fn rules(name: &str, kind: Kind, quota: &str) -> Rules {
    Rules::try_from(rule(name, kind, quota)).unwrap()
}

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
    let rule = rules("login", Kind::SlidingLog, "3/minute");
    assert!(redis.check_now(&rule, "alice", 1).await.unwrap().allowed());

    server.kill();
    let first = redis.check_now(&rule, "alice", 1).await.unwrap();
    assert!(!first.allowed() && first.made_without_redis().is_some());
    for i in 0..100 {
        let decision = at_once(redis.check_now(&rule, "alice", 1))
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
    let log = rule("log", Kind::SlidingLog, "10/s");
    let rule = rules("api", Kind::Gcra, "10/s");
    assert!(patient.check_now(&rule, "k", 1).await.unwrap().allowed());
    server.cli(&["config", "resetstat"]);
    server.cli(&["client", "pause", "60000", "write"]);
    tokio::time::pause();

    let err = hasty.check_now(&rule, "k", 1).await.unwrap_err();
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
        let answer = at_once(patient.check_now(&rule, "k", 1)).expect("an answer at once");
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
    let err = at_once(patient.peek_now(&rule, "k", 1))
        .expect("at once")
        .unwrap_err();
    assert_eq!(err, open);
    let err = at_once(patient.peek(&rule, "k", Moment::from_secs(5), 1))
        .expect("at once")
        .unwrap_err();
    assert_eq!(err, open);
    let err = at_once(patient.until_ready(&rule, "k", 1))
        .expect("at once")
        .unwrap_err();
    assert_eq!(err, open);
    let err = at_once(patient.inspect(&log, "k", Moment::ZERO, Moment::MAX))
        .expect("at once")
        .unwrap_err();
    assert_eq!(err, open);
    // With a policy, the policy's decision, saying why.
    let closed = patient.clone().with_failure_policy(FailurePolicy::Closed);
    let decision = at_once(closed.check_now(&rule, "k", 1))
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
    let rule = rules("api", Kind::Gcra, "10/s");
    // A key of another type: the script's command on it fails.
    server.cli(&["set", "{slidewin:s}:log:log", "not a set"]);
    let log = rules("log", Kind::SlidingLog, "10/s");
    let err = redis.check_now(&log, "s", 1).await.unwrap_err();
    assert!(
        matches!(&err, RedisError::Reply { at, .. } if *at == server.url()),
        "{err}"
    );
    assert!(redis.is_available());
    assert!(redis.check_now(&rule, "fine", 1).await.unwrap().allowed());
}
