//! Group commit on a single node: checks made while others are on their way to Redis go
//! together, in order, in one script call, and every one gets its own exact answer.
//!
//! Redis is held busy with `CLIENT PAUSE ... WRITE` (scripts wait, `CLIENT UNPAUSE` does not),
//! so that which checks wait is decided by the test, not by timing: on the current-thread
//! runtime, every spawned task has made its check by the time the test task runs again.

use crate::support;

use std::collections::BTreeSet;
use std::time::Duration;

use proptest::prelude::*;
use slidewin::limit::{Gcra, Kind, Rule, RuleSet};
use slidewin::{Limiter, Moment, Quota};
use slidewin_redis::{Check, RedisDecision, RedisError, RedisLimiter, Rules};
use support::RedisServer;
use tokio::task::JoinHandle;

/// Checks go alone while fewer than this many calls are on their way (the crate's `ALONE`).
const ALONE: usize = 2;

/// A queue this long goes without waiting for a call to come back (the crate's `FULL`).
const FULL: usize = 16;

/// The most calls on their way at once, by default (the crate's `IN_FLIGHT`).
const IN_FLIGHT: usize = 8;

/// The rule `name`: `quota` under `kind`.
fn rule(name: &str, kind: Kind, quota: &str) -> Rule {
    Rule::new(name, kind, quota.parse().unwrap()).unwrap()
}

/// The rule `name`: `quota` under `kind`, alone, as a check names it.
fn rules(name: &str, kind: Kind, quota: &str) -> Rules {
    Rules::try_from(rule(name, kind, quota)).unwrap()
}

/// A limiter on a fresh server with its script loaded and the statistics zeroed.
async fn ready(server: &RedisServer) -> RedisLimiter {
    let redis = RedisLimiter::connect(&server.url()).await.unwrap();
    let warm = rules("warm", Kind::Gcra, "1/s");
    redis.check_now(&warm, "warm-up", 1).await.unwrap();
    server.cli(&["config", "resetstat"]);
    redis
}

/// Spawns `count` checks of `rules[i % rules.len()]` on `key` while Redis is paused, lets them
/// all reach the limiter, then lets Redis go on; their answers in spawn order.
async fn while_paused(
    server: &RedisServer,
    redis: &RedisLimiter,
    rules: &[Rules],
    key: &str,
    count: usize,
) -> Vec<Result<RedisDecision, RedisError>> {
    server.cli(&["client", "pause", "10000", "WRITE"]);
    let tasks: Vec<JoinHandle<_>> = (0..count)
        .map(|i| {
            let (redis, rule, key) = (
                redis.clone(),
                rules[i % rules.len()].clone(),
                key.to_string(),
            );
            tokio::spawn(async move { redis.check_now(&rule, &key, 1).await })
        })
        .collect();
    tokio::task::yield_now().await;
    server.cli(&["client", "unpause"]);
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    answers
}

/// Each admitted check's `remaining`, as a set; every answer must be an admission.
fn remaining<'a>(
    answers: impl IntoIterator<Item = &'a Result<RedisDecision, RedisError>>,
) -> BTreeSet<u64> {
    answers
        .into_iter()
        .map(|answer| answer.as_ref().unwrap())
        .inspect(|d| assert!(d.allowed()))
        .map(|d| d.remaining())
        .collect()
}

#[tokio::test]
async fn checks_that_wait_go_in_one_script_call_with_exact_answers() {
    let server = RedisServer::start();
    // Two calls at most: no call but the two alone, so the queue waits for one to come back.
    let redis = ready(&server).await.with_calls_in_flight(2).unwrap();
    let rule = rules("log", Kind::SlidingLog, "100/hour");
    let answers = while_paused(&server, &redis, &[rule], "hot", 66).await;
    // Two alone, the 64 that waited in one call.
    assert_eq!(server.script_calls(), ALONE as u64 + 1);
    // One key, 66 admissions: each saw a different count, as one by one.
    assert_eq!(remaining(&answers), (34..=99).collect());
    // The 64 went in the order they came.
    let batch: Vec<u64> = answers[ALONE..]
        .iter()
        .map(|a| a.as_ref().unwrap().remaining())
        .collect();
    assert_eq!(batch, (34..=97).rev().collect::<Vec<_>>());
}

#[tokio::test]
async fn batch_limit_one_sends_every_check_alone() {
    let server = RedisServer::start();
    let redis = ready(&server).await.with_batch_limit(1).unwrap();
    let rule = rules("log", Kind::SlidingLog, "100/hour");
    let answers = while_paused(&server, &redis, &[rule], "hot", 66).await;
    assert_eq!(server.script_calls(), 66);
    assert_eq!(remaining(&answers), (34..=99).collect());
}

#[tokio::test]
async fn a_batch_holds_at_most_the_batch_limit() {
    let server = RedisServer::start();
    let redis = ready(&server).await.with_batch_limit(10).unwrap();
    let rule = rules("gcra", Kind::Gcra, "100/hour");
    let answers = while_paused(&server, &redis, &[rule], "hot", 66).await;
    // Two alone, then the 64 that waited ten at a time.
    assert_eq!(server.script_calls(), ALONE as u64 + 7);
    assert_eq!(remaining(&answers), (34..=99).collect());
}

/// Redis answers nothing while paused, so the full batches went without waiting for a call
/// to come back: waiting for one would have made the 103 that queued two calls (64 and 39).
#[tokio::test]
async fn a_full_batch_goes_without_waiting_for_a_call_to_come_back() {
    let server = RedisServer::start();
    let redis = ready(&server).await;
    let rule = rules("log", Kind::SlidingLog, "200/hour");
    let count = ALONE + FULL * (IN_FLIGHT - ALONE) + 7;
    let answers = while_paused(&server, &redis, &[rule], "hot", count).await;
    // Two alone, six full batches (eight calls on their way, the most), and the seven left
    // when a call came back.
    assert_eq!(server.script_calls(), IN_FLIGHT as u64 + 1);
    // One key, 105 admissions over eight calls: each saw a different count, as one by one.
    assert_eq!(remaining(&answers), (95..=199).collect());
}

/// Spawns `count` checks of `rule` on `key` by `redis`.
fn spawn_checks(
    redis: &RedisLimiter,
    rule: &Rules,
    key: &str,
    count: usize,
) -> Vec<JoinHandle<Result<RedisDecision, RedisError>>> {
    (0..count)
        .map(|_| {
            let (redis, rule, key) = (redis.clone(), rule.clone(), key.to_string());
            tokio::spawn(async move { redis.check_now(&rule, &key, 1).await })
        })
        .collect()
}

/// A limiter that waits ten seconds for Redis, and a clone sharing its queue that waits a
/// millisecond. The clone has a circuit of its own, so that its timeouts leave the patient
/// one's closed (see `outage.rs` for a timeout opening a shared circuit).
async fn patient_and_hasty(server: &RedisServer) -> (RedisLimiter, RedisLimiter) {
    let patient = ready(server)
        .await
        .with_timeout(Duration::from_secs(10))
        .unwrap();
    let hasty = patient
        .clone()
        .with_timeout(Duration::from_millis(1))
        .unwrap()
        .with_circuit_backoff(Duration::from_secs(60), Duration::from_secs(60))
        .unwrap();
    (patient, hasty)
}

/// A call that comes back while more than two are on their way leaves a short queue to
/// fill: sent then, it would be a call for a few checks.
#[tokio::test]
async fn a_short_queue_waits_while_more_than_two_calls_are_on_their_way() {
    let server = RedisServer::start();
    // Its call comes back first, when its caller gives up.
    let (patient, hasty) = patient_and_hasty(&server).await;
    let rule = rules("log", Kind::SlidingLog, "100/hour");
    server.cli(&["client", "pause", "10000", "WRITE"]);
    // Two alone (the hasty one first), a full batch: three calls on their way; five wait.
    let gives_up = spawn_checks(&hasty, &rule, "hot", 1);
    let mut tasks = spawn_checks(&patient, &rule, "hot", 1 + FULL + 5);
    tokio::task::yield_now().await;
    for task in gives_up {
        let err = task.await.unwrap().unwrap_err();
        assert_eq!(
            err,
            RedisError::Timeout {
                at: server.url(),
                after: Duration::from_millis(1)
            }
        );
    }
    // The five waited on: eleven more make a full batch with them, which goes at once.
    tasks.extend(spawn_checks(&patient, &rule, "hot", FULL - 5));
    tokio::task::yield_now().await;
    server.cli(&["client", "unpause"]);
    for task in tasks {
        assert!(task.await.unwrap().unwrap().allowed());
    }
    // Two alone and two full batches. Had the five gone when the hasty call came back, the
    // eleven would have gone in a fifth call.
    assert_eq!(server.script_calls(), 4);
}

#[tokio::test]
async fn fewer_calls_in_flight_make_fewer_and_bigger_batches() {
    let server = RedisServer::start();
    let rule = rules("log", Kind::SlidingLog, "100/hour");
    // Four calls: two alone, two full batches, and the 32 left in one call.
    let redis = ready(&server).await.with_calls_in_flight(4).unwrap();
    let answers = while_paused(&server, &redis, std::slice::from_ref(&rule), "four", 66).await;
    assert_eq!(server.script_calls(), 2 + 2 + 1);
    assert_eq!(remaining(&answers), (34..=99).collect());
    // One call: one alone, then the 65 that waited in two (the batch limit is 64).
    let redis = redis.with_calls_in_flight(1).unwrap();
    server.cli(&["config", "resetstat"]);
    let answers = while_paused(&server, &redis, std::slice::from_ref(&rule), "one", 66).await;
    assert_eq!(server.script_calls(), 1 + 2);
    assert_eq!(remaining(&answers), (34..=99).collect());
    // The two settings keep each other: one alone, then the 65 ten at a time (with the
    // default's eight calls: two alone, and 64 ten at a time).
    let redis = redis.with_batch_limit(10).unwrap();
    server.cli(&["config", "resetstat"]);
    let answers = while_paused(&server, &redis, &[rule], "ten", 66).await;
    assert_eq!(server.script_calls(), 1 + 7);
    assert_eq!(remaining(&answers), (34..=99).collect());
}

/// One script runs every algorithm: the checks that waited go in one call whatever their
/// rules' algorithms (there was a call per algorithm when each had a script of its own).
#[tokio::test]
async fn a_batch_of_two_algorithms_is_one_call() {
    let server = RedisServer::start();
    // Two calls at most: the queue goes as one batch when one comes back.
    let redis = ready(&server).await.with_calls_in_flight(2).unwrap();
    let log = rules("log", Kind::SlidingLog, "100/hour");
    let gcra = rules("gcra", Kind::Gcra, "100/hour");
    let answers = while_paused(&server, &redis, &[log, gcra], "hot", 66).await;
    assert_eq!(server.script_calls(), ALONE as u64 + 1);
    let of = |parity| remaining(answers.iter().skip(parity).step_by(2));
    // 33 checks of each rule, on Redis keys of their own.
    assert_eq!(of(0), (67..=99).collect());
    assert_eq!(of(1), (67..=99).collect());
}

#[tokio::test]
async fn one_call_of_two_rules_and_peeks_answers_each_by_its_own_rule() {
    // A batch sends each distinct rule once and each check an index into them (negative for
    // a peek): every answer must be its own rule's, as the in-memory limiters give it.
    let server = RedisServer::start();
    let redis = ready(&server).await.with_calls_in_flight(2).unwrap();
    let wide = rule("wide", Kind::Gcra, "100/hour");
    let narrow = rule("narrow", Kind::Gcra, "10/hour burst 4");
    let (wide_rules, narrow_rules) = (
        Rules::try_from(wide.clone()).unwrap(),
        Rules::try_from(narrow.clone()).unwrap(),
    );
    let now = Moment::from_secs(1_000);
    let plan: Vec<(&Rules, &str, bool)> = (0..60)
        .map(|i| match i % 3 {
            0 => (&wide_rules, "w", false),
            1 => (&narrow_rules, "n", false),
            _ => (&wide_rules, "w", true),
        })
        .collect();
    server.cli(&["client", "pause", "10000", "WRITE"]);
    let tasks: Vec<JoinHandle<_>> = plan
        .iter()
        .map(|&(rule, key, peek)| {
            let (redis, rule, key) = (redis.clone(), rule.clone(), key.to_string());
            tokio::spawn(async move {
                if peek {
                    redis.peek(&rule, &key, now, 1).await
                } else {
                    redis.check(&rule, &key, now, 1).await
                }
            })
        })
        .collect();
    tokio::task::yield_now().await;
    server.cli(&["client", "unpause"]);
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap().unwrap().decision());
    }
    assert_eq!(server.script_calls(), ALONE as u64 + 1);

    let mut in_memory_wide = Limiter::new(Gcra::new(wide.quota()).unwrap());
    let mut in_memory_narrow = Limiter::new(Gcra::new(narrow.quota()).unwrap());
    for (i, (&(_, key, peek), answer)) in plan.iter().zip(&answers).enumerate() {
        let limiter = if key == "w" {
            &mut in_memory_wide
        } else {
            &mut in_memory_narrow
        };
        let expected = if peek {
            limiter.peek(now, 1)
        } else {
            limiter.check(now, 1)
        };
        assert_eq!(
            *answer,
            expected.unwrap(),
            "check {i} ({key}, peek: {peek})"
        );
    }
    // The narrow rule ran out within the batch; the wide one did not.
    assert!(answers.iter().skip(1).step_by(3).any(|d| !d.allowed()));
    assert!(answers.iter().step_by(3).all(|d| d.allowed()));
}

#[tokio::test]
async fn a_check_whose_caller_gave_up_is_never_sent() {
    let server = RedisServer::start();
    // Its check waits behind the patient ones.
    let (patient, hasty) = patient_and_hasty(&server).await;
    let log = rule("log", Kind::SlidingLog, "100/hour");
    let rule = Rules::try_from(log.clone()).unwrap();
    server.cli(&["client", "pause", "10000", "WRITE"]);
    let in_flight = spawn_checks(&patient, &rule, "hot", ALONE);
    tokio::task::yield_now().await;
    let gave_up = hasty.check_now(&rule, "hot", 1).await.unwrap_err();
    assert_eq!(
        gave_up,
        RedisError::Timeout {
            at: server.url(),
            after: Duration::from_millis(1)
        }
    );
    // A full batch behind it goes at once, without the check whose caller gave up.
    let full = spawn_checks(&patient, &rule, "hot", FULL);
    tokio::task::yield_now().await;
    server.cli(&["client", "unpause"]);
    for task in in_flight.into_iter().chain(full) {
        assert!(task.await.unwrap().unwrap().allowed());
    }
    assert_eq!(server.script_calls(), ALONE as u64 + 1);
    let held = patient
        .inspect(&log, "hot", Moment::ZERO, Moment::MAX)
        .await
        .unwrap();
    assert_eq!(held.len(), ALONE + FULL);
}

#[tokio::test]
async fn check_many_sends_one_call_per_batch_limit() {
    let server = RedisServer::start();
    let redis = ready(&server).await;
    let rule = rules("log", Kind::SlidingLog, "100/hour");
    let now = Moment::from_secs(1_000);
    let checks: Vec<Check<'_>> = (0..150)
        .map(|_| Check::new(&rule, "many", 1).at(now))
        .collect();
    let answers = redis.check_many(&checks).await;
    // 150 checks of one rule: 64 + 64 + 22.
    assert_eq!(server.script_calls(), 3);
    let remaining: Vec<u64> = answers
        .iter()
        .map(|a| a.as_ref().unwrap().remaining())
        .collect();
    let expected: Vec<u64> = (0..100).rev().chain(std::iter::repeat_n(0, 50)).collect();
    assert_eq!(remaining, expected);
    let admitted = answers
        .iter()
        .filter(|a| a.as_ref().unwrap().allowed())
        .count();
    assert_eq!(admitted, 100);
}

#[tokio::test]
async fn a_zero_batch_limit_is_an_error_naming_it() {
    let server = RedisServer::start();
    let redis = RedisLimiter::connect(&server.url()).await.unwrap();
    let err = redis.with_batch_limit(0).unwrap_err();
    assert!(matches!(err, RedisError::Config { .. }));
    assert!(err.to_string().contains("got 0"), "{err}");
}

#[tokio::test]
async fn zero_calls_in_flight_is_an_error_naming_it() {
    let server = RedisServer::start();
    let redis = RedisLimiter::connect(&server.url()).await.unwrap();
    let err = redis.with_calls_in_flight(0).unwrap_err();
    assert!(matches!(err, RedisError::Config { .. }));
    assert!(err.to_string().contains("calls in flight"), "{err}");
    assert!(err.to_string().contains("got 0"), "{err}");
}

#[tokio::test]
async fn a_key_named_many_times_in_a_batch_is_read_once_and_written_once() {
    // A hot key: every check of it after the first takes the state the one before left, and
    // the last writes what they all left (the sliding log appends each admitted unit).
    let server = RedisServer::start();
    let redis = ready(&server).await;
    let now = Moment::from_secs(1_000);
    let commands = [
        ("getrange", "append", 10),
        ("hmget", "hset", 2),
        ("hmget", "hset", 2),
        ("get", "set", 2),
    ];
    for (algorithm, (read, write, writes)) in Kind::RATES.into_iter().zip(commands) {
        let rule = rules("limit", algorithm, "5/hour");
        // Two keys, interleaved: the client puts each key's checks one after the other.
        let checks: Vec<Check<'_>> = (0..16)
            .map(|i| Check::new(&rule, ["hot", "warm"][i % 2], 1).at(now))
            .collect();
        server.cli(&["config", "resetstat"]);
        let answers = redis.check_many(&checks).await;
        assert_eq!(server.calls(read), 2, "{algorithm:?}");
        assert_eq!(server.calls(write), writes, "{algorithm:?}");
        // Written with an expiry.
        for key in ["hot", "warm"] {
            let redis_key = format!(
                "{{slidewin:{key}}}:limit:{}",
                support::kind_in_key(algorithm)
            );
            let ttl: i64 = server.cli(&["pttl", &redis_key]).trim().parse().unwrap();
            assert!(ttl > 0, "{algorithm:?} {redis_key}: pttl {ttl}");
        }
        let remaining: Vec<u64> = answers
            .iter()
            .step_by(2)
            .map(|a| a.as_ref().unwrap().remaining())
            .collect();
        assert_eq!(remaining, [4, 3, 2, 1, 0, 0, 0, 0], "{algorithm:?}");
        let admitted = answers.iter().filter(|a| a.as_ref().unwrap().allowed());
        assert_eq!(admitted.count(), 10, "{algorithm:?}");
    }
}

#[tokio::test]
async fn a_sliding_logs_admission_is_one_read_and_one_append() {
    // One unit admitted: a read of the log's last times (its deadline with them, while the log
    // is short), then an append; the expiry only when the deadline moves (a new key, a new
    // stretch). A peek reads alone, and a log of more times in its window than a read takes
    // (128) is bisected in place.
    let server = RedisServer::start();
    let redis = ready(&server).await;
    let rule = rules("log", Kind::SlidingLog, "500/hour");
    let calls = |server: &RedisServer| {
        ["getrange", "append", "pexpire", "setrange", "strlen"].map(|command| server.calls(command))
    };
    for (n, at) in [1_000, 1_001].into_iter().enumerate() {
        let decision = redis
            .check(&rule, "fresh", Moment::from_secs(at), 1)
            .await
            .unwrap();
        assert_eq!(decision.remaining(), 499 - n as u64);
        let n = n as u64 + 1;
        assert_eq!(calls(&server), [n, n, 1, 0, 0]);
    }
    let peek = redis
        .peek(&rule, "other", Moment::from_secs(1_000), 1)
        .await
        .unwrap();
    assert_eq!(peek.remaining(), 499);
    assert_eq!(calls(&server), [3, 2, 1, 0, 0]);
    // 200 times in the window: a read of the last 128, then a bisection of the older ones (at
    // most 8 steps over 500 slots), and the deadline read for the write.
    let many = redis
        .check(&rule, "fresh", Moment::from_secs(1_002), 198)
        .await
        .unwrap();
    assert_eq!(many.remaining(), 300);
    server.cli(&["config", "resetstat"]);
    let next = redis
        .check(&rule, "fresh", Moment::from_secs(1_003), 1)
        .await
        .unwrap();
    assert_eq!(next.remaining(), 299);
    let [getrange, append, pexpire, setrange, strlen] = calls(&server);
    assert_eq!([append, pexpire, setrange, strlen], [1, 0, 0, 1]);
    assert!((3..=1 + 8 + 1).contains(&getrange), "{getrange}");
}

#[tokio::test]
async fn waiting_checks_and_peeks_of_one_key_answer_as_when_sent_one_by_one() {
    // Queued checks and peeks of a key go in one call, each after the first taking the state
    // the one before left (a peek leaves it as it was): the answers must be those of the same
    // checks sent one by one, each reading everything.
    let server = RedisServer::start();
    let redis = ready(&server).await;
    let now = Moment::from_secs(1_000);
    for algorithm in Kind::RATES {
        let rule = rules("hot", algorithm, "6/minute");
        // (cost, peek): costs 0 to 2, every third a peek.
        let plan: Vec<(u64, bool)> = (0..24u64).map(|i| (i % 3, i % 3 == 1)).collect();
        let batched = redis
            .clone()
            .with_prefix("batched")
            .with_calls_in_flight(2)
            .unwrap();
        server.cli(&["client", "pause", "10000", "WRITE"]);
        let tasks: Vec<JoinHandle<_>> = plan
            .iter()
            .map(|&(cost, peek)| {
                let (redis, rule) = (batched.clone(), rule.clone());
                tokio::spawn(async move {
                    if peek {
                        redis.peek(&rule, "hot", now, cost).await
                    } else {
                        redis.check(&rule, "hot", now, cost).await
                    }
                })
            })
            .collect();
        tokio::task::yield_now().await;
        server.cli(&["config", "resetstat"]);
        server.cli(&["client", "unpause"]);
        let mut together = Vec::new();
        for task in tasks {
            together.push(task.await.unwrap().unwrap().decision());
        }
        // The first checks went alone; the rest in one call.
        assert_eq!(server.script_calls(), ALONE as u64 + 1, "{algorithm:?}");
        let alone = redis.clone().with_prefix("alone");
        for (i, &(cost, peek)) in plan.iter().enumerate() {
            let expected = if peek {
                alone.peek(&rule, "hot", now, cost).await
            } else {
                alone.check(&rule, "hot", now, cost).await
            };
            assert_eq!(
                together[i],
                expected.unwrap().decision(),
                "{algorithm:?} check {i} (cost {cost}, peek: {peek})"
            );
        }
        assert!(together.iter().any(|d| !d.allowed()), "{algorithm:?}");
    }
}

/// The calls a batch makes, by hand, and batches against one check at a time.
mod model;
