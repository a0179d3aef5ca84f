//! Redis down: checks answer at once (by the failure policy, or with an error saying why and
//! naming the URL) instead of each waiting for it, and nothing is sent while the circuit is
//! open; a limiter made while Redis is down starts so, and goes to Redis once it comes up. The
//! probe and its backoff are tested on a fake Redis in `src/circuit.rs`; a server killed and
//! restarted in `single/faults.rs` and `cluster.rs`.

use crate::support;

use std::time::Duration;

use slidewin::Moment;
use slidewin::limit::{Kind, Rule};
use slidewin_redis::{Check, CircuitState, FailurePolicy, RedisError, RedisLimiter, Rules};
use slidewin_test_support::redis::free_port;
use support::{RedisCluster, RedisServer, at_once, until_available};

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
    assert!(!first.allowed() && first.degraded().is_some());
    for i in 0..100 {
        let decision = at_once(redis.check_now(&rule, "alice", 1))
            .unwrap_or_else(|| panic!("check {i} waited for Redis"))
            .unwrap();
        assert!(!decision.allowed(), "check {i}");
        let why = decision.degraded().expect("decided without Redis");
        assert!(why.to_string().contains(&server.url()), "{why}");
    }
}

/// Issue 33's closed policy on a calendar rule: wait until the window's end, where its
/// count starts again (14 hours from 10:00 UTC for a day), not the longest day there is
/// (25 hours); a rate beside it still waits its span, and the binding wait is the longer.
#[tokio::test]
async fn a_closed_policy_tells_a_calendar_rule_to_wait_for_its_window_end() {
    let mut server = RedisServer::start();
    let redis = RedisLimiter::connect(&server.url())
        .await
        .unwrap()
        .with_failure_policy(FailurePolicy::Closed);
    let daily = Rule::calendar("daily", "100 per calendar day".parse().unwrap()).unwrap();
    let day = Rules::try_from(daily.clone()).unwrap();
    let both = Rules::new(
        slidewin::limit::RuleSet::new([daily, rule("minute", Kind::SlidingLog, "10/minute")])
            .unwrap(),
    )
    .unwrap();
    server.kill();
    // 2026-12-04T10:00:00Z.
    let ten = Moment::from_secs(1_796_378_400);
    let hours = |h: u64| Some(Duration::from_secs(h * 3_600));
    let denied = redis.check(&day, "k", ten, 1).await.unwrap();
    assert!(denied.degraded().is_some());
    assert_eq!(denied.retry_after(), hours(14));
    let half_past = ten.checked_add(Duration::from_secs(1_800)).unwrap();
    let later = redis.check(&day, "k", half_past, 1).await.unwrap();
    assert_eq!(
        later.retry_after(),
        Some(Duration::from_secs(13 * 3_600 + 1_800))
    );
    let both = redis.check(&both, "k", ten, 1).await.unwrap();
    let waits: Vec<_> = both.decisions().iter().map(|d| d.retry_after()).collect();
    assert_eq!(waits, [hours(14), Some(Duration::from_secs(60))]);
    assert_eq!(both.retry_after(), hours(14));
    // At the server's time (unknown while it is down), this client's clock dates the window:
    // never longer than a day.
    let now = redis.check_now(&day, "k", 1).await.unwrap();
    assert!(now.retry_after().unwrap() <= hours(24).unwrap());
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
    assert_eq!(decision.degraded(), Some(&open));

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
    server.cli(&["rpush", "{slidewin:s}:log:stamps", "not a string"]);
    let log = rules("log", Kind::SlidingLog, "10/s");
    let err = redis.check_now(&log, "s", 1).await.unwrap_err();
    assert!(
        matches!(&err, RedisError::Reply { at, .. } if *at == server.url()),
        "{err}"
    );
    assert!(redis.is_available());
    assert!(redis.check_now(&rule, "fine", 1).await.unwrap().allowed());
}

/// Issue 29, finding 9: a service restarted during a Redis outage could not start, since its
/// limiter could not be made without Redis answering. Made lazily, it starts with its circuit
/// open: every check answers at once by the policy, saying why and where (the password
/// hidden); and once a Redis comes up at the URL, the probe finds it and the decisions are
/// Redis's again, exact.
#[tokio::test]
async fn a_limiter_made_while_redis_is_down_answers_by_policy_then_exactly_once_it_is_up() {
    let port = free_port();
    let url = format!("redis://127.0.0.1:{port}/");
    let redis = RedisLimiter::connect_lazily(&url)
        .await
        .expect("made without Redis")
        .with_circuit_backoff(Duration::from_millis(1), Duration::from_millis(20))
        .unwrap();
    assert_eq!(redis.circuit_state(), CircuitState::Open);
    assert!(!redis.is_available());
    let why = redis.why_unavailable().expect("why it is down");
    assert!(
        matches!(&why, RedisError::Unavailable { at, .. } if *at == url),
        "{why}"
    );
    let login = rules("login", Kind::SlidingLog, "2/minute");
    // Without a policy: the error that kept Redis away, at once.
    let err = at_once(redis.check_now(&login, "alice", 1))
        .expect("an answer at once")
        .unwrap_err();
    let said = format!("Redis at {url} is unavailable: not asked: the circuit is open since ");
    assert!(err.to_string().starts_with(&said), "{err}");
    for (policy, admitted) in [(FailurePolicy::Open, true), (FailurePolicy::Closed, false)] {
        let by_policy = redis.clone().with_failure_policy(policy);
        for _ in 0..10 {
            let decision = at_once(by_policy.check_now(&login, "alice", 1))
                .expect("an answer at once")
                .unwrap();
            assert_eq!(decision.allowed(), admitted, "{policy:?}");
            // The same fault, at the same place (its "next try in" counts down as time goes).
            let without = decision.degraded().expect("made without Redis");
            assert!(
                matches!(without, RedisError::Unavailable { at, .. } if *at == url),
                "{policy:?}: {without}"
            );
            assert!(without.to_string().starts_with(&said), "{without}");
        }
    }
    // A password is never shown.
    let secret = format!("redis://:hunter2@127.0.0.1:{}/", free_port());
    let hidden = RedisLimiter::connect_lazily(&secret).await.unwrap();
    let err = at_once(hidden.check_now(&login, "alice", 1))
        .expect("an answer at once")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("redis://:***@127.0.0.1:") && !err.contains("hunter2"),
        "{err}"
    );

    let server = RedisServer::start_on(port);
    until_available(&redis).await;
    assert_eq!(redis.why_unavailable(), None);
    let at = Moment::from_secs(100);
    let first = redis.check(&login, "alice", at, 2).await.unwrap();
    assert!(first.allowed() && first.degraded().is_none());
    assert_eq!(first.remaining(), 0);
    assert!(!redis.check(&login, "alice", at, 1).await.unwrap().allowed());
    assert!(server.script_calls() >= 2);
}

/// A limiter made lazily while Redis answers is connected as `connect`'s is; Redis's own
/// refusal (a password it does not take) and a URL that is not one are still errors, the
/// latter saying which URL it may mean.
#[tokio::test]
async fn made_lazily_with_redis_up_it_is_up_and_a_bad_setup_is_still_an_error() {
    let server = RedisServer::start();
    let redis = RedisLimiter::connect_lazily(&server.url()).await.unwrap();
    assert_eq!(redis.circuit_state(), CircuitState::Closed);
    let api = rules("api", Kind::Gcra, "10/s");
    let decision = redis.check_now(&api, "k", 1).await.unwrap();
    assert!(decision.allowed() && decision.degraded().is_none());

    let wrong = format!("redis://:hunter2@127.0.0.1:{}/", server.port);
    let err = RedisLimiter::connect_lazily(&wrong).await.unwrap_err();
    assert!(!err.is_transient(), "{err}");
    let said = err.to_string();
    assert!(
        said.contains(":***@") && !said.contains("hunter2"),
        "{said}"
    );

    for bare in ["127.0.0.1:6379", "cache:6379", "user:hunter2@cache:6379"] {
        let err = RedisLimiter::connect_lazily(bare).await.unwrap_err();
        assert!(matches!(err, RedisError::Config { .. }), "{err}");
        let shown = bare.replace("hunter2", "***");
        assert!(
            err.to_string()
                .contains(&format!("did you mean redis://{shown}?")),
            "{err}"
        );
        assert!(!err.to_string().contains("hunter2"), "{err}");
        let err = RedisLimiter::connect(bare).await.unwrap_err();
        assert!(err.to_string().contains("did you mean redis://"), "{err}");
        let err = RedisLimiter::connect_cluster_lazily(&[bare])
            .await
            .unwrap_err();
        assert!(err.to_string().contains("did you mean redis://"), "{err}");
    }
    let err = RedisLimiter::connect_lazily("redis://127.0.0.1:99999/")
        .await
        .unwrap_err();
    assert!(matches!(err, RedisError::Config { .. }), "{err}");
}

/// Issue 29, finding 9, on a cluster: made while no node it is given answers, the limiter
/// starts with its circuit open and answers by its policy at once; once the cluster is up
/// (its first node where the limiter looks), the probe finds it, the slots are read, and the
/// decisions are the cluster's, exact, on every node.
#[tokio::test]
async fn a_cluster_limiter_made_while_the_cluster_is_down_is_exact_once_it_is_up() {
    let seed = free_port();
    let url = format!("redis://127.0.0.1:{seed}/");
    let redis = RedisLimiter::connect_cluster_lazily(&[url.as_str()])
        .await
        .expect("made without the cluster")
        .with_failure_policy(FailurePolicy::Closed)
        .with_circuit_backoff(Duration::from_millis(1), Duration::from_millis(20))
        .unwrap();
    assert_eq!(redis.circuit_state(), CircuitState::Open);
    let api = rules("api", Kind::FixedWindow, "3/minute");
    let decision = at_once(redis.check_now(&api, "k", 1))
        .expect("an answer at once")
        .unwrap();
    assert!(!decision.allowed());
    let why = decision.degraded().expect("decided without Redis");
    assert!(why.to_string().contains(&url), "{why}");

    let cluster = RedisCluster::start_at(seed);
    until_available(&redis).await;
    let mut nodes_used = [false; 3];
    let at = Moment::from_secs(100);
    for user in 0..12 {
        let key = format!("user-{user}");
        nodes_used[cluster.node_of(&format!("{{slidewin:{key}}}"))] = true;
        for left in [2, 1, 0] {
            let decision = redis.check(&api, &key, at, 1).await.unwrap();
            assert_eq!(decision.degraded(), None, "{key}");
            assert_eq!(decision.remaining(), left, "{key}");
        }
        assert!(!redis.check(&api, &key, at, 1).await.unwrap().allowed());
    }
    assert_eq!(nodes_used, [true; 3]);
}
