//! The script and the keys: loaded again after a flush, a cost no rule admits, expiries,
//! a quota lowered below a key's count, and checks pipelined.

use super::*;

#[tokio::test]
async fn the_script_is_loaded_again_after_a_flush() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let rules = one(&rule("api", Kind::Gcra, "10/s"));
    assert!(
        redis
            .check(&rules, "k", secs(1), 1)
            .await
            .unwrap()
            .allowed()
    );
    assert_eq!(server.cli(&["script", "flush"]).trim(), "OK");
    assert!(
        redis
            .check(&rules, "k", secs(1), 1)
            .await
            .unwrap()
            .allowed()
    );
    server.cli(&["script", "flush"]);
    let batch = redis
        .check_many(&[Check::new(&rules, "a", 1), Check::new(&rules, "b", 1)])
        .await;
    assert!(batch.iter().all(|d| d.as_ref().unwrap().allowed()));
}

#[tokio::test]
async fn a_cost_that_can_never_pass_is_an_error_before_redis() {
    let server = RedisServer::start();
    let redis = limiter(&server)
        .await
        .with_failure_policy(FailurePolicy::Open);
    let rules = one(&rule("api", Kind::FixedWindow, "5/s"));
    let err = redis.check_now(&rules, "k", 6).await.unwrap_err();
    assert_eq!(
        err,
        RedisError::Limit(LimitError::CostTooHigh { cost: 6, max: 5 })
    );
    assert_eq!(server.cli(&["dbsize"]).trim(), "0");
    // Under several rules, the smallest of their limits.
    let both = Rules::new(
        RuleSet::new([
            rule("api", Kind::FixedWindow, "5/s"),
            rule("burst", Kind::Gcra, "10/s burst 3"),
        ])
        .unwrap(),
    )
    .unwrap();
    let err = redis.check_now(&both, "k", 4).await.unwrap_err();
    assert_eq!(
        err,
        RedisError::Limit(LimitError::CostTooHigh { cost: 4, max: 3 })
    );
    // Nor does a batch of nothing, or of nothing that could pass, reach Redis.
    server.cli(&["config", "resetstat"]);
    assert!(redis.check_many(&[]).await.is_empty());
    let answers = redis.check_many(&[Check::new(&rules, "k", 6)]).await;
    assert!(matches!(answers[..], [Err(RedisError::Limit(_))]));
    assert!(!server.cli(&["info", "commandstats"]).contains("evalsha"));
}

#[tokio::test]
async fn idle_keys_expire_and_reset_clears() {
    let server = RedisServer::start();
    let redis = limiter(&server).await.with_prefix("app");
    // One name, four algorithms: four rules, each with its own state.
    let rules = Kind::RATES.map(|kind| one(&rule("login", kind, "2/10s")));
    for rules in &rules {
        redis.check_now(rules, "alice", 2).await.unwrap();
        assert!(
            !redis.check_now(rules, "alice", 1).await.unwrap().allowed(),
            "{rules:?}"
        );
    }
    let keys = support::all_keys(&server);
    assert_eq!(
        keys,
        [
            "{app:alice}:login:counter",
            "{app:alice}:login:fixed",
            "{app:alice}:login:gcra",
            "{app:alice}:login:stamps",
        ]
    );
    for key in &keys {
        // Long enough for the state to stop mattering (the span, or GCRA's full bucket again
        // in 10 s), and at most two idle stretches (10.001 s each) past that: expiries are set
        // a stretch ahead, not on every write.
        let ttl: i64 = server.cli(&["pttl", key]).trim().parse().unwrap();
        assert!((9_000..=30_002).contains(&ttl), "{key} expires in {ttl} ms");
    }
    for rules in &rules {
        redis.reset(rules, "alice").await.unwrap();
        assert!(
            redis.check_now(rules, "alice", 2).await.unwrap().allowed(),
            "{rules:?}"
        );
    }
    // A reset of several rules clears each of them.
    let all =
        Rules::new(RuleSet::new(Kind::RATES.map(|kind| rule(kind.name(), kind, "2/10s"))).unwrap())
            .unwrap();
    assert!(redis.check_now(&all, "bob", 2).await.unwrap().allowed());
    assert!(!redis.check_now(&all, "bob", 1).await.unwrap().allowed());
    assert_eq!(server.cli(&["keys", "{app:bob}*"]).lines().count(), 4);
    redis.reset(&all, "bob").await.unwrap();
    assert_eq!(server.cli(&["keys", "{app:bob}*"]).trim(), "");
    assert!(redis.check_now(&all, "bob", 2).await.unwrap().allowed());
}

/// Expiries are set a stretch ahead rather than on every write: whatever the stretch, after
/// every check the key outlives its state (`reset_after`), as a key given its expiry on every
/// write would, over a busy key's many checks across several stretches.
#[tokio::test]
async fn a_busy_key_always_outlives_its_state() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let rules = [
        rule("busy", Kind::SlidingLog, "10/s"),
        rule("busy", Kind::SlidingCounter, "10/s"),
        rule("busy", Kind::FixedWindow, "10/s"),
        rule("busy", Kind::Gcra, "10/s burst 5"),
    ];
    for rule in &rules {
        let checked = one(rule);
        let mut admitted = 0;
        // 7.5 s of checks every 50 ms, past several stretches of 1.001 s. The expiry counts
        // down in real time, which here passes slower than the checks' time, as it must for
        // the comparison to hold.
        for step in 0..150u64 {
            let now = Moment::from_millis(100_000 + step * 50);
            let decision = redis.check(&checked, "busy", now, 1).await.unwrap();
            if !decision.allowed() {
                continue;
            }
            admitted += 1;
            let key = format!(
                "{{slidewin:busy}}:busy:{}",
                support::kind_in_key(rule.kind())
            );
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

/// A rule's quota changed under the same name keeps the key's counts, so a quota lowered
/// below a key's count meets more than its limit: it denies, with none left. (The scripts
/// once answered such a denial as -1 - (limit - count), positive, which read as an
/// admission.)
#[tokio::test]
async fn a_quota_lowered_below_a_keys_count_denies_with_none_left() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    for kind in [Kind::SlidingLog, Kind::FixedWindow, Kind::SlidingCounter] {
        let (before, after) = (
            one(&rule("api", kind, "10/minute")),
            one(&rule("api", kind, "2/minute")),
        );
        let key = kind.name();
        for _ in 0..5 {
            assert!(
                redis
                    .check(&before, key, secs(100), 1)
                    .await
                    .unwrap()
                    .allowed()
            );
        }
        let lowered = redis.check(&after, key, secs(100), 1).await.unwrap();
        assert!(!lowered.allowed(), "{kind}: {lowered:?}");
        assert_eq!((lowered.limit(), lowered.remaining()), (2, 0), "{kind}");
        let peeked = redis.peek(&after, key, secs(100), 1).await.unwrap();
        assert!(!peeked.allowed(), "{kind}: {peeked:?}");
    }
}

#[tokio::test]
async fn check_many_answers_in_order_in_one_pipeline() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let log = one(&rule("log", Kind::SlidingLog, "1/minute"));
    let bucket = one(&rule("bucket", Kind::Gcra, "2/minute"));
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
