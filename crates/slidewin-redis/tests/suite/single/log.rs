//! One sliding log on Redis: the span's edge, times of one microsecond, a clock behind the
//! log's, a quota changed under the same name, and the keys of earlier layouts.

use super::*;

#[tokio::test]
async fn seed001_the_entry_exactly_one_span_old_leaves() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let (rule, rules) = log("1/10s");
    assert!(
        redis
            .check(&rules, "k", secs(5), 1)
            .await
            .unwrap()
            .allowed()
    );
    let just_before = redis
        .check(&rules, "k", secs(15) - Duration::from_micros(1), 1)
        .await
        .unwrap();
    assert!(!just_before.allowed());
    assert_eq!(just_before.retry_after(), Some(Duration::from_micros(1)));
    assert!(
        redis
            .check(&rules, "k", secs(15), 1)
            .await
            .unwrap()
            .allowed()
    );
    // Only the admitted times are in the log (the one that left stays until old ones gather):
    // the denied request left nothing behind.
    assert_eq!(
        redis
            .inspect(&rule, "k", Moment::ZERO, secs(100))
            .await
            .unwrap(),
        [secs(5), secs(15)]
    );
}

#[tokio::test]
async fn seed001_two_requests_in_one_microsecond_both_count() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let (rule, rules) = log("3/s");
    let now = secs(7);
    assert!(redis.check(&rules, "k", now, 1).await.unwrap().allowed());
    assert!(redis.check(&rules, "k", now, 2).await.unwrap().allowed());
    assert!(!redis.check(&rules, "k", now, 1).await.unwrap().allowed());
    assert_eq!(
        redis.inspect(&rule, "k", now, now).await.unwrap(),
        [now, now, now]
    );
}

/// 120 times of one microsecond all count (a log appends each unit, whatever its time), and
/// old times go in bulk: once those that left the window are as many as those inside it (and
/// 32 or more), the log is written back with the live ones alone, so it never holds more than
/// twice the limit and 32 more. The span is long (100 s) because the key's expiry runs on the
/// server's real clock: with a span of a second, the log full and so unwritten for its first
/// second of checks expired when those took more than a second of real time (two `redis-cli`
/// runs each, on a busy machine).
#[tokio::test]
async fn times_of_one_microsecond_all_count_and_old_ones_go_in_bulk() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let (rule, rules) = log("120 per 100s");
    let now = secs(1_000);
    for n in 1..=120 {
        let decision = redis.check(&rules, "k", now, 1).await.unwrap();
        assert!(decision.allowed(), "unit {n}");
        assert_eq!(decision.remaining(), 120 - n);
    }
    assert!(!redis.check(&rules, "k", now, 1).await.unwrap().allowed());
    assert_eq!(
        redis.inspect(&rule, "k", now, now).await.unwrap().len(),
        120
    );
    // Three spans of checks every 500 ms, costing 1 to 3: the answers are memory's.
    let mut memory = Limiter::new(SlidingLog::new(rule.quota()).unwrap());
    for _ in 0..=120 {
        memory.check(now, 1).unwrap();
    }
    for step in 1..=600u64 {
        let at = now + Duration::from_millis(500 * step);
        let cost = 1 + step % 3;
        let decision = redis.check(&rules, "k", at, cost).await.unwrap();
        assert_eq!(
            decision.decision(),
            memory.check(at, cost).unwrap(),
            "at {at}"
        );
        let bytes: usize = server
            .cli(&["strlen", "{slidewin:k}:log:stamps"])
            .trim()
            .parse()
            .unwrap();
        // 7 bytes a time, after the deadline's 7.
        let held = bytes / 7 - 1;
        assert!(held <= 2 * 120 + 32 + 3, "{held} times at {at}");
        if step == 600 {
            // Two spans on, the first second's 120 times went long ago.
            assert!(held < 2 * 120, "{held} times at {at}");
            let too_old = redis.inspect(&rule, "k", Moment::ZERO, now).await.unwrap();
            assert_eq!(too_old, [], "at {at}");
        }
    }
}

/// Three requests of one microsecond, each its own call: the second and third find the log's
/// time not behind theirs (the write moved no marker) and number after the first.
#[tokio::test]
async fn seed001_requests_of_one_microsecond_in_separate_calls_all_count() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let (rule, rules) = log("3/s");
    let now = secs(7);
    for remaining in [2, 1, 0] {
        let decision = redis.check(&rules, "k", now, 1).await.unwrap();
        assert!(decision.allowed());
        assert_eq!(decision.remaining(), remaining);
    }
    assert!(!redis.check(&rules, "k", now, 1).await.unwrap().allowed());
    assert_eq!(
        redis.inspect(&rule, "k", now, now).await.unwrap(),
        [now, now, now]
    );
}

/// A check older than the log's newest admission counts at that admission's time (the log's
/// time never goes back), as in memory; its write, made first as if the time were its own,
/// leaves nothing at its own time.
#[tokio::test]
async fn a_check_behind_the_logs_time_counts_at_it_and_leaves_nothing_at_its_own() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let (rule, rules) = log("3/10s");
    assert!(
        redis
            .check(&rules, "k", secs(20), 1)
            .await
            .unwrap()
            .allowed()
    );
    let behind = redis.check(&rules, "k", secs(15), 1).await.unwrap();
    assert_eq!(behind.remaining(), 1);
    assert_eq!(behind.reset_after(), Duration::from_secs(15));
    assert_eq!(
        redis
            .inspect(&rule, "k", Moment::ZERO, secs(100))
            .await
            .unwrap(),
        [secs(20), secs(20)]
    );
}

/// A rule's quota changed under the same name (a deployment, with the old one still running)
/// shares the key's log. A check of the longer quota behind the log's time moves the log's
/// expiry (its stretch is longer) while its write lands where it must not: both are told
/// apart, the entry taken back and the expiry kept.
#[tokio::test]
async fn a_longer_quotas_check_behind_the_logs_time_keeps_the_longer_expiry() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let short = rule("login", Kind::SlidingLog, "5/20s");
    let long = rule("login", Kind::SlidingLog, "5/50s");
    let log = "{slidewin:k}:login:stamps";
    assert!(
        redis
            .check(&one(&short), "k", secs(1_000), 1)
            .await
            .unwrap()
            .allowed()
    );
    let ttl = |server: &RedisServer| -> u64 { server.cli(&["pttl", log]).trim().parse().unwrap() };
    assert!(ttl(&server) <= 40_002, "{}", ttl(&server));
    let behind = redis.check(&one(&long), "k", secs(999), 1).await.unwrap();
    assert_eq!(behind.remaining(), 3);
    assert_eq!(behind.reset_after(), Duration::from_secs(51));
    assert_eq!(
        redis
            .inspect(&long, "k", Moment::ZERO, secs(2_000))
            .await
            .unwrap(),
        [secs(1_000), secs(1_000)]
    );
    // Past the short quota's two idle times: the long one's.
    assert!(ttl(&server) > 40_002, "{}", ttl(&server));
}

/// The keys of earlier layouts are not read: before rules had names (`{prefix:key}:log`,
/// members `time-n`), and the sorted sets of named rules (`{prefix:key}:name:log`, before
/// the times were packed into a string under `:name:stamps`). After the upgrade each key
/// starts afresh, and the old keys are left alone until they expire.
#[tokio::test]
async fn a_log_under_a_previous_key_layout_is_not_read() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let (rule, rules) = log("3/10s");
    let (old, sorted) = ("{slidewin:k}:log", "{slidewin:k}:log:log");
    server.cli(&["zadd", old, "5000000", "5000000-1", "5000000", "5000000-2"]);
    server.cli(&["pexpire", old, "600000"]);
    server.cli(&[
        "zadd",
        sorted,
        "5000000",
        "a05000000",
        "-9000000000000000",
        "~",
    ]);
    server.cli(&["pexpire", sorted, "600000"]);
    for remaining in [2, 1, 0] {
        let decision = redis.check(&rules, "k", secs(6), 1).await.unwrap();
        assert!(decision.allowed());
        assert_eq!(decision.remaining(), remaining);
    }
    assert!(
        !redis
            .check(&rules, "k", secs(6), 1)
            .await
            .unwrap()
            .allowed()
    );
    assert_eq!(
        redis
            .inspect(&rule, "k", Moment::ZERO, secs(100))
            .await
            .unwrap(),
        [secs(6), secs(6), secs(6)]
    );
    // The old keys as they were: their entries, their expiries.
    for key in [old, sorted] {
        assert_eq!(server.cli(&["zcard", key]).trim(), "2");
        let ttl: i64 = server.cli(&["pttl", key]).trim().parse().unwrap();
        assert!((0..=600_000).contains(&ttl), "{ttl}");
    }
}
