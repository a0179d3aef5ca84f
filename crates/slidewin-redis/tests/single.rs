//! One Redis server of the test's own: the scripts, their keys, and the faults.

mod support;

use std::time::Duration;

use slidewin::{LimitError, Limiter, Moment, SlidingLog};
use slidewin_redis::{Check, FailurePolicy, RedisError, RedisLimiter, Rule};
use support::{RedisServer, until_available};

fn secs(s: u64) -> Moment {
    Moment::from_secs(s)
}

async fn limiter(server: &RedisServer) -> RedisLimiter {
    RedisLimiter::connect(&server.url())
        .await
        .expect("our own server")
}

#[tokio::test]
async fn seed001_the_entry_exactly_one_span_old_leaves() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let rule = Rule::sliding_log("1/10s".parse().unwrap()).unwrap();
    assert!(
        redis
            .check_at(&rule, "k", secs(5), 1)
            .await
            .unwrap()
            .allowed()
    );
    let just_before = redis
        .check_at(&rule, "k", secs(15) - Duration::from_micros(1), 1)
        .await
        .unwrap();
    assert!(!just_before.allowed());
    assert_eq!(just_before.retry_after(), Some(Duration::from_micros(1)));
    assert!(
        redis
            .check_at(&rule, "k", secs(15), 1)
            .await
            .unwrap()
            .allowed()
    );
    // Only the admitted entries are in the set: the denied request left nothing behind.
    assert_eq!(
        redis.inspect("k", Moment::ZERO, secs(100)).await.unwrap(),
        [secs(15)]
    );
}

#[tokio::test]
async fn seed001_two_requests_in_one_microsecond_both_count() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let rule = Rule::sliding_log("3/s".parse().unwrap()).unwrap();
    let now = secs(7);
    assert!(redis.check_at(&rule, "k", now, 1).await.unwrap().allowed());
    assert!(redis.check_at(&rule, "k", now, 2).await.unwrap().allowed());
    assert!(!redis.check_at(&rule, "k", now, 1).await.unwrap().allowed());
    assert_eq!(redis.inspect("k", now, now).await.unwrap(), [now, now, now]);
}

/// Members are numbered per microsecond, and the number's digit count leads it, so that the
/// members of one microsecond sort by number past 9 and 99 too: a repeated number would
/// overwrite an entry (ZADD) and let one unit too many through. Old entries go when the log's
/// time enters a new stretch of its idle time (a span and a millisecond), so the set holds no
/// entry older than a span and a stretch, and the three markers besides. The span is long
/// (100 s) because the key's expiry runs on the server's real clock: with a span of a second,
/// the log full and so unwritten for its first second of checks expired when those took more
/// than a second of real time (two `redis-cli` runs each, on a busy machine).
#[tokio::test]
async fn members_stay_unique_and_old_entries_go_once_a_stretch() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let rule = Rule::sliding_log("120 per 100s".parse().unwrap()).unwrap();
    let now = secs(1_000);
    for n in 1..=120 {
        let decision = redis.check_at(&rule, "k", now, 1).await.unwrap();
        assert!(decision.allowed(), "unit {n}");
        assert_eq!(decision.remaining(), 120 - n);
    }
    assert!(!redis.check_at(&rule, "k", now, 1).await.unwrap().allowed());
    assert_eq!(redis.inspect("k", now, now).await.unwrap().len(), 120);
    // Three spans of checks every 500 ms, costing 1 to 3: the answers are memory's.
    let mut memory = Limiter::<SlidingLog>::new(rule.quota()).unwrap();
    for _ in 0..=120 {
        memory.check(now, 1).unwrap();
    }
    let (span, stretch) = (Duration::from_secs(100), Duration::from_millis(100_001));
    for step in 1..=600u64 {
        let at = now + Duration::from_millis(500 * step);
        let cost = 1 + step % 3;
        let decision = redis.check_at(&rule, "k", at, cost).await.unwrap();
        assert_eq!(
            decision.decision(),
            memory.check(at, cost).unwrap(),
            "at {at}"
        );
        let held: usize = server
            .cli(&["zcard", "{slidewin:k}:log"])
            .trim()
            .parse()
            .unwrap();
        assert!(held <= 2 * 120 + 3, "{held} entries at {at}");
        let too_old = redis
            .inspect("k", Moment::ZERO, at - span - stretch)
            .await
            .unwrap();
        assert_eq!(too_old, [], "at {at}");
    }
}

/// Three requests of one microsecond, each its own call: the second and third find the log's
/// time not behind theirs (the write moved no marker) and number after the first.
#[tokio::test]
async fn seed001_requests_of_one_microsecond_in_separate_calls_all_count() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let rule = Rule::sliding_log("3/s".parse().unwrap()).unwrap();
    let now = secs(7);
    for remaining in [2, 1, 0] {
        let decision = redis.check_at(&rule, "k", now, 1).await.unwrap();
        assert!(decision.allowed());
        assert_eq!(decision.remaining(), remaining);
    }
    assert!(!redis.check_at(&rule, "k", now, 1).await.unwrap().allowed());
    assert_eq!(redis.inspect("k", now, now).await.unwrap(), [now, now, now]);
}

/// A check older than the log's newest admission counts at that admission's time (the log's
/// time never goes back), as in memory; its write, made first as if the time were its own,
/// leaves nothing at its own time.
#[tokio::test]
async fn a_check_behind_the_logs_time_counts_at_it_and_leaves_nothing_at_its_own() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let rule = Rule::sliding_log("3/10s".parse().unwrap()).unwrap();
    assert!(
        redis
            .check_at(&rule, "k", secs(20), 1)
            .await
            .unwrap()
            .allowed()
    );
    let behind = redis.check_at(&rule, "k", secs(15), 1).await.unwrap();
    assert_eq!(behind.remaining(), 1);
    assert_eq!(behind.reset_after(), Duration::from_secs(15));
    assert_eq!(
        redis.inspect("k", Moment::ZERO, secs(100)).await.unwrap(),
        [secs(20), secs(20)]
    );
}

/// Two rules of one algorithm share a key's log (a quota changed in a deployment). A check
/// of the longer rule behind the log's time moves the log's expiry (its stretch is longer)
/// while its write lands where it must not: both are told apart, the entry taken back and
/// the expiry kept.
#[tokio::test]
async fn a_longer_rules_check_behind_the_logs_time_keeps_the_longer_expiry() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let short = Rule::sliding_log("5/20s".parse().unwrap()).unwrap();
    let long = Rule::sliding_log("5/50s".parse().unwrap()).unwrap();
    let log = "{slidewin:k}:log";
    assert!(
        redis
            .check_at(&short, "k", secs(1_000), 1)
            .await
            .unwrap()
            .allowed()
    );
    let ttl = |server: &RedisServer| -> u64 { server.cli(&["pttl", log]).trim().parse().unwrap() };
    assert!(ttl(&server) <= 40_002, "{}", ttl(&server));
    let behind = redis.check_at(&long, "k", secs(999), 1).await.unwrap();
    assert_eq!(behind.remaining(), 3);
    assert_eq!(behind.reset_after(), Duration::from_secs(51));
    assert_eq!(
        redis.inspect("k", Moment::ZERO, secs(2_000)).await.unwrap(),
        [secs(1_000), secs(1_000)]
    );
    // Past the short rule's two idle times: the long rule's.
    assert!(ttl(&server) > 40_002, "{}", ttl(&server));
}

/// A log written before its markers (`~`), with members of before they were numbered
/// (`time-n`), reads on: every entry counts, and a check that reads the log's time (a cost
/// above one) finds it in the newest member.
#[tokio::test]
async fn a_log_of_the_previous_members_counts_on() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let rule = Rule::sliding_log("3/10s".parse().unwrap()).unwrap();
    let old = "{slidewin:k}:log";
    server.cli(&["zadd", old, "5000000", "5000000-1", "5000000", "5000000-2"]);
    let costly = redis.check_at(&rule, "k", secs(4), 2).await.unwrap();
    assert!(!costly.allowed());
    assert_eq!(costly.reset_after(), Duration::from_secs(11));
    let decision = redis.check_at(&rule, "k", secs(6), 1).await.unwrap();
    assert!(decision.allowed());
    assert_eq!(decision.remaining(), 0);
    assert!(
        !redis
            .check_at(&rule, "k", secs(6), 1)
            .await
            .unwrap()
            .allowed()
    );
    assert_eq!(
        redis.inspect("k", Moment::ZERO, secs(100)).await.unwrap(),
        [secs(5), secs(5), secs(6)]
    );
}

#[tokio::test]
async fn the_server_clock_is_the_default() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let rule = Rule::sliding_log("2/minute".parse().unwrap()).unwrap();
    let seconds: u64 = server
        .cli(&["time"])
        .lines()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(redis.check(&rule, "k", 1).await.unwrap().allowed());
    let held = redis.inspect("k", Moment::ZERO, Moment::MAX).await.unwrap();
    let at = held[0].since_origin().as_secs();
    assert!(
        (seconds..=seconds + 5).contains(&at),
        "{at} vs the server's {seconds}"
    );
    // In one call with a check at an explicit time, a check without one still counts at the
    // server's.
    let answers = redis
        .check_many(&[
            Check::new(&rule, "early", 1).at(secs(3)),
            Check::new(&rule, "late", 1),
        ])
        .await;
    assert!(answers.iter().all(|a| a.as_ref().unwrap().allowed()));
    let early = redis
        .inspect("early", Moment::ZERO, Moment::MAX)
        .await
        .unwrap();
    assert_eq!(early, [secs(3)]);
    let late = redis
        .inspect("late", Moment::ZERO, Moment::MAX)
        .await
        .unwrap();
    assert!(late[0].since_origin().as_secs() >= seconds, "{late:?}");
}

#[tokio::test]
async fn scripts_are_loaded_again_after_a_flush() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let rule = Rule::gcra("10/s".parse().unwrap()).unwrap();
    assert!(
        redis
            .check_at(&rule, "k", secs(1), 1)
            .await
            .unwrap()
            .allowed()
    );
    assert_eq!(server.cli(&["script", "flush"]).trim(), "OK");
    assert!(
        redis
            .check_at(&rule, "k", secs(1), 1)
            .await
            .unwrap()
            .allowed()
    );
    server.cli(&["script", "flush"]);
    let batch = redis
        .check_many(&[Check::new(&rule, "a", 1), Check::new(&rule, "b", 1)])
        .await;
    assert!(batch.iter().all(|d| d.as_ref().unwrap().allowed()));
}

#[tokio::test]
async fn a_cost_that_can_never_pass_is_an_error_before_redis() {
    let server = RedisServer::start();
    let redis = limiter(&server)
        .await
        .with_failure_policy(FailurePolicy::Open);
    let rule = Rule::fixed_window("5/s".parse().unwrap()).unwrap();
    let err = redis.check(&rule, "k", 6).await.unwrap_err();
    assert_eq!(
        err,
        RedisError::Limit(LimitError::CostTooHigh { cost: 6, max: 5 })
    );
    assert_eq!(server.cli(&["dbsize"]).trim(), "0");
    // Nor does a batch of nothing, or of nothing that could pass, reach Redis.
    server.cli(&["config", "resetstat"]);
    assert!(redis.check_many(&[]).await.is_empty());
    let answers = redis.check_many(&[Check::new(&rule, "k", 6)]).await;
    assert!(matches!(answers[..], [Err(RedisError::Limit(_))]));
    assert!(!server.cli(&["info", "commandstats"]).contains("evalsha"));
}

#[tokio::test]
async fn idle_keys_expire_and_reset_clears() {
    let server = RedisServer::start();
    let redis = limiter(&server).await.with_prefix("app");
    let rules = [
        Rule::sliding_log("2/10s".parse().unwrap()).unwrap(),
        Rule::sliding_counter("2/10s".parse().unwrap()).unwrap(),
        Rule::fixed_window("2/10s".parse().unwrap()).unwrap(),
        Rule::gcra("2/10s".parse().unwrap()).unwrap(),
    ];
    for rule in &rules {
        redis.check(rule, "alice", 2).await.unwrap();
        assert!(
            !redis.check(rule, "alice", 1).await.unwrap().allowed(),
            "{rule:?}"
        );
    }
    let keys = server.cli(&["keys", "*"]);
    assert_eq!(keys.lines().count(), 4, "{keys}"); // one key per rule
    for key in keys.lines() {
        assert!(key.starts_with("{app:alice}:"), "{key}");
        // Long enough for the state to stop mattering (the span, or GCRA's full bucket again
        // in 10 s), and at most two idle stretches (10.001 s each) past that: expiries are set
        // a stretch ahead, not on every write.
        let ttl: i64 = server.cli(&["pttl", key]).trim().parse().unwrap();
        assert!((9_000..=30_002).contains(&ttl), "{key} expires in {ttl} ms");
    }
    for rule in &rules {
        redis.reset(rule, "alice").await.unwrap();
        assert!(
            redis.check(rule, "alice", 2).await.unwrap().allowed(),
            "{rule:?}"
        );
    }
}

/// Expiries are set a stretch ahead rather than on every write: whatever the stretch, after
/// every check the key outlives its state (`reset_after`), as a key given its expiry on every
/// write would, over a busy key's many checks across several stretches.
#[tokio::test]
async fn a_busy_key_always_outlives_its_state() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let rules = [
        (Rule::sliding_log("10/s".parse().unwrap()).unwrap(), "log"),
        (
            Rule::sliding_counter("10/s".parse().unwrap()).unwrap(),
            "counter",
        ),
        (
            Rule::fixed_window("10/s".parse().unwrap()).unwrap(),
            "fixed",
        ),
        (Rule::gcra("10/s burst 5".parse().unwrap()).unwrap(), "gcra"),
    ];
    for (rule, suffix) in &rules {
        let mut admitted = 0;
        // 7.5 s of checks every 50 ms, past several stretches of 1.001 s. The expiry counts
        // down in real time, which here passes slower than the checks' time, as it must for
        // the comparison to hold.
        for step in 0..150u64 {
            let now = Moment::from_millis(100_000 + step * 50);
            let decision = redis.check_at(rule, "busy", now, 1).await.unwrap();
            if !decision.allowed() {
                continue;
            }
            admitted += 1;
            let key = format!("{{slidewin:busy}}:{suffix}");
            let ttl: u128 = server.cli(&["pttl", &key]).trim().parse().unwrap();
            // A few ms of real time pass between the check and the question.
            assert!(
                ttl + 20 >= decision.reset_after().as_millis(),
                "{rule:?} at {now}: the key expires in {ttl} ms, its state lasts {:?}",
                decision.reset_after()
            );
        }
        assert!(admitted > 50, "{rule:?}: {admitted}");
        server.cli(&["flushall"]);
    }
}

/// Rules of one algorithm share a key's state, so a quota lowered below a key's count meets
/// more than its limit: it denies, with none left. (The scripts once answered such a denial
/// as -1 - (limit - count), positive, which read as an admission.)
#[tokio::test]
async fn a_quota_lowered_below_a_keys_count_denies_with_none_left() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    for (name, rule) in [
        ("log", Rule::sliding_log as fn(_) -> _),
        ("fixed", Rule::fixed_window),
        ("counter", Rule::sliding_counter),
    ] {
        let (before, after) = (
            rule("10/minute".parse().unwrap()).unwrap(),
            rule("2/minute".parse().unwrap()).unwrap(),
        );
        for _ in 0..5 {
            assert!(
                redis
                    .check_at(&before, name, secs(100), 1)
                    .await
                    .unwrap()
                    .allowed()
            );
        }
        let lowered = redis.check_at(&after, name, secs(100), 1).await.unwrap();
        assert!(!lowered.allowed(), "{name}: {lowered:?}");
        assert_eq!((lowered.limit(), lowered.remaining()), (2, 0), "{name}");
        let peeked = redis.peek_at(&after, name, secs(100), 1).await.unwrap();
        assert!(!peeked.allowed(), "{name}: {peeked:?}");
    }
}

#[tokio::test]
async fn check_many_answers_in_order_in_one_pipeline() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let log = Rule::sliding_log("1/minute".parse().unwrap()).unwrap();
    let bucket = Rule::gcra("2/minute".parse().unwrap()).unwrap();
    let now = secs(100);
    let answers = redis
        .check_many(&[
            Check::new(&log, "a", 1).at(now),
            Check::new(&log, "a", 1).at(now),
            Check::new(&bucket, "a", 3).at(now),
            Check::new(&bucket, "a", 2).at(now),
            Check::new(&log, "b", 1).at(now),
        ])
        .await;
    let allowed: Vec<_> = answers
        .into_iter()
        .map(|a| a.map(|d| d.allowed()))
        .collect();
    let too_much = RedisError::Limit(LimitError::CostTooHigh { cost: 3, max: 2 });
    assert_eq!(
        allowed,
        [Ok(true), Ok(false), Err(too_much), Ok(true), Ok(true)]
    );
}

#[tokio::test]
async fn redis_down_then_back_errors_at_once_then_recovers() {
    let mut server = RedisServer::start();
    let url = server.url();
    let redis = limiter(&server)
        .await
        .with_timeout(Duration::from_millis(300))
        .unwrap();
    let rule = Rule::sliding_log("2/minute".parse().unwrap()).unwrap();
    assert!(
        redis
            .check_at(&rule, "k", secs(1), 2)
            .await
            .unwrap()
            .allowed()
    );

    server.kill();
    let err = redis.check_at(&rule, "k", secs(2), 1).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(
        matches!(
            &err,
            RedisError::Unavailable { at, .. } | RedisError::Timeout { at, .. } if *at == url
        ),
        "{err}"
    );
    // The circuit is open: the checks after the first answer without asking, saying so.
    assert!(!redis.is_available());
    for _ in 0..3 {
        let err = redis.check_at(&rule, "k", secs(2), 1).await.unwrap_err();
        let RedisError::Unavailable { at, detail } = &err else {
            panic!("{err}");
        };
        assert_eq!(*at, url);
        assert!(
            detail.starts_with("not asked: the circuit is open since "),
            "{err}"
        );
    }
    // As do the other calls, and clones; and a policy answers them.
    let err = redis.reset(&rule, "k").await.unwrap_err();
    assert!(err.to_string().contains("not asked"), "{err}");
    let open = redis.clone().with_failure_policy(FailurePolicy::Open);
    let decision = open.check_at(&rule, "k", secs(2), 1).await.unwrap();
    assert!(decision.allowed() && decision.made_without_redis().is_some());
    let closed = redis.clone().with_failure_policy(FailurePolicy::Closed);
    let decision = closed.check_at(&rule, "k", secs(2), 1).await.unwrap();
    assert!(!decision.allowed() && decision.made_without_redis().is_some());

    // Back, and empty (it keeps nothing on disk): the probe finds it by itself.
    server.restart();
    until_available(&redis).await;
    assert!(redis.is_available());
    let first = redis.check_at(&rule, "k", secs(3), 2).await.unwrap();
    assert!(first.allowed() && first.made_without_redis().is_none());
    assert!(
        !redis
            .check_at(&rule, "k", secs(3), 1)
            .await
            .unwrap()
            .allowed()
    );
}

#[tokio::test]
async fn a_paused_server_is_a_timeout_naming_it() {
    let server = RedisServer::start();
    let redis = limiter(&server)
        .await
        .with_timeout(Duration::from_millis(100))
        .unwrap();
    let rule = Rule::gcra("10/s".parse().unwrap()).unwrap();
    assert!(redis.check(&rule, "k", 1).await.unwrap().allowed());
    server.cli(&["client", "pause", "2000", "write"]);
    let err = redis.check(&rule, "k", 1).await.unwrap_err();
    assert_eq!(
        err,
        RedisError::Timeout {
            at: server.url(),
            after: Duration::from_millis(100)
        }
    );
    assert_eq!(
        err.to_string(),
        format!(
            "Redis at redis://127.0.0.1:{}/ did not answer within 100ms",
            server.port
        )
    );
    server.cli(&["client", "unpause"]);
}

#[tokio::test]
async fn bad_setup_is_an_error_naming_the_value() {
    let err = RedisLimiter::connect("http://nowhere").await.unwrap_err();
    assert!(matches!(err, RedisError::Config { .. }), "{err}");
    assert!(err.to_string().contains("http://nowhere"), "{err}");
    // A URL is shown without its password.
    let err = RedisLimiter::connect("redis://bob:hunter2@cache:notaport/")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot set up the Redis limiter: `redis://bob:***@cache:notaport/`: Redis URL did not \
         parse - InvalidClientConfig"
    );
    let err = RedisLimiter::connect_cluster(&["redis://:hunter2@a:1/", "redis://b:x/"])
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot set up the Redis limiter: [redis://:***@a:1/, redis://b:x/]: Redis URL did not \
         parse - InvalidClientConfig"
    );
    let err = RedisLimiter::connect_cluster(&[]).await.unwrap_err();
    assert!(err.to_string().contains("got none"), "{err}");
    let server = RedisServer::start();
    let err = limiter(&server)
        .await
        .with_timeout(Duration::ZERO)
        .unwrap_err();
    assert!(err.to_string().contains("got 0ns"), "{err}");
    // Nothing listens on a port of a server that is gone: the error names it, password hidden.
    let port = server.port;
    drop(server);
    let err = RedisLimiter::connect(&format!("redis://bob:hunter2@127.0.0.1:{port}/"))
        .await
        .unwrap_err();
    let shown = format!("redis://bob:***@127.0.0.1:{port}/");
    assert!(
        matches!(
            &err,
            RedisError::Unavailable { at, .. } | RedisError::Timeout { at, .. } if *at == shown
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("Redis at {shown} is unavailable: ")),
        "{err}"
    );
}
