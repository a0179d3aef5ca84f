//! One Redis server of the test's own: the script, its keys, the rules of one key, and the
//! faults.

use crate::support;

use std::time::Duration;

use slidewin::limit::{Kind, LimitError, Rule, RuleSet, SlidingLog};
use slidewin::{Keyed, Limiter, Moment};
use slidewin_redis::{Check, FailurePolicy, RedisDecision, RedisError, RedisLimiter, Rules};
use support::{RedisServer, until_available};
use tokio::time::Instant;

fn secs(s: u64) -> Moment {
    Moment::from_secs(s)
}

/// The rule `name`: `quota` under `kind`.
fn rule(name: &str, kind: Kind, quota: &str) -> Rule {
    Rule::new(name, kind, quota.parse().unwrap()).unwrap()
}

/// `rule` alone, as a check names it.
fn one(rule: &Rule) -> Rules {
    Rules::try_from(rule.clone()).unwrap()
}

/// A sliding log named `log` (its key `{slidewin:key}:log:log`): the rule, which
/// `inspect` takes, and the rules a check takes.
fn log(quota: &str) -> (Rule, Rules) {
    let rule = rule("log", Kind::SlidingLog, quota);
    let rules = one(&rule);
    (rule, rules)
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

/// The regression: two rules of one algorithm on one key once wrote one sorted set
/// (`{slidewin:alice}:log`), so each counted the other's admissions: after the hour rule's
/// admission the per-second rule had four left, and refused the fifth request of its second.
/// Now each rule keeps its own state.
#[tokio::test]
async fn two_rules_on_one_key_count_apart() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let second = rule("second", Kind::SlidingLog, "5/s");
    let hour = rule("hour", Kind::SlidingLog, "100/hour");
    let (per_second, per_hour) = (one(&second), one(&hour));
    let now = secs(1_000);
    let first = redis.check(&per_hour, "alice", now, 1).await.unwrap();
    assert_eq!((first.allowed(), first.remaining()), (true, 99));
    // Five a second, all of them: the hour's admission is not the second rule's.
    for remaining in (0..5).rev() {
        let decision = redis.check(&per_second, "alice", now, 1).await.unwrap();
        assert!(decision.allowed(), "{remaining} left");
        assert_eq!(decision.remaining(), remaining);
    }
    assert!(
        !redis
            .check(&per_second, "alice", now, 1)
            .await
            .unwrap()
            .allowed()
    );
    // Nor are the second's five the hour's.
    let again = redis.check(&per_hour, "alice", now, 1).await.unwrap();
    assert_eq!((again.allowed(), again.remaining()), (true, 98));
    let (from, to) = (Moment::ZERO, secs(2_000));
    assert_eq!(
        redis.inspect(&second, "alice", from, to).await.unwrap(),
        [now; 5]
    );
    assert_eq!(
        redis.inspect(&hour, "alice", from, to).await.unwrap(),
        [now; 2]
    );
    let keys = support::all_keys(&server);
    assert_eq!(
        keys,
        [
            "{slidewin:alice}:hour:stamps",
            "{slidewin:alice}:second:stamps"
        ]
    );
}

/// One `Rules` of three rules of three algorithms on one key: admitted only when every rule
/// admits, and a denial, by any of them, consumes from none. Every answer, rule by rule, is
/// that of the same rule set in memory.
#[tokio::test]
async fn a_denial_under_several_rules_consumes_from_none() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let minute = rule("minute", Kind::SlidingLog, "3/minute");
    let set = RuleSet::new([
        minute.clone(),
        rule("hour", Kind::FixedWindow, "5/hour"),
        rule("burst", Kind::Gcra, "1/s burst 2"),
    ])
    .unwrap();
    let rules = Rules::new(set.clone()).unwrap();
    let memory = Keyed::<String, _>::new(set);
    // At the start of an hour, so that the fixed window's hour starts with the test.
    let start = secs(3_600 * 1_000);
    // (seconds in, admitted, the binding rule)
    let plan = [
        (0, true, None),
        (0, true, None),
        (0, false, Some(2)), // the burst is spent; the minute and the hour have room
        (1, true, None),
        (2, false, Some(0)), // three in the minute; the burst has room again
        (60, true, None),    // the two at 0 s have left the minute
        (61, true, None),
        (62, false, Some(1)), // five in the hour; the minute and the burst have room
        (120, false, Some(1)),
        (3_600, true, None), // a new hour
    ];
    let mut admitted_at = Vec::new();
    for (i, &(at, admitted, binding)) in plan.iter().enumerate() {
        let now = start + Duration::from_secs(at);
        let decision = redis.check(&rules, "alice", now, 1).await.unwrap();
        let expected = memory.check("alice", now, 1).unwrap();
        assert_eq!(decision.decisions(), &expected, "step {i}, at {at} s");
        assert_eq!(decision.allowed(), admitted, "step {i}");
        if admitted {
            admitted_at.push(at);
            continue;
        }
        let rule = binding.expect("a denial has a binding rule");
        assert_eq!(decision.decisions().binding(), rule, "step {i}");
        // The other rules would have admitted it, and it consumed from none of them: the
        // minute's log holds only the admissions at its time, the hour's window only the
        // hour's admissions.
        for (j, each) in decision.decisions().iter().enumerate() {
            assert_eq!(each.allowed(), j != rule, "step {i}, rule {j}");
        }
        let held = redis.inspect(&minute, "alice", now, now).await.unwrap();
        let same_time = admitted_at.iter().filter(|&&t| t == at).count();
        assert_eq!(held.len(), same_time, "step {i}");
        let in_hour = server.cli(&["hget", "{slidewin:alice}:hour:fixed", "c"]);
        assert_eq!(in_hour.trim(), admitted_at.len().to_string(), "step {i}");
    }
    assert_eq!(admitted_at, [0, 0, 1, 60, 61, 3_600]);
}

/// Keeps tokio's paused clock still while it lives: a blocking task that is running inhibits
/// the clock's auto-advance (tokio's documented way). Auto-advance jumps a paused clock to the
/// next timer whenever the runtime waits, for Redis's answers too, and would time them out.
struct ClockHeld {
    _release: std::sync::mpsc::Sender<()>,
}

fn hold_clock() -> ClockHeld {
    let (release, held) = std::sync::mpsc::channel::<()>();
    // Ends when `release` is dropped.
    drop(tokio::task::spawn_blocking(move || held.recv()));
    ClockHeld { _release: release }
}

/// Lets a task of `until_ready` take Redis's answer to the check it has sent (or will send
/// once run): yielding runs it up to its call, then a peek on the same connection comes back
/// after that call's answer (one connection answers in order), and yielding again lets the
/// task take it, up to its sleep. The peek's answer.
async fn settle(redis: &RedisLimiter, rules: &Rules, key: &str) -> RedisDecision {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let peek = redis.peek_now(rules, key, 1).await.unwrap();
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    peek
}

/// `until_ready` decides on Redis's clock and waits on tokio's: it returns an admission at
/// once; after a denial it sleeps the denial's `retry_after` on tokio's clock, asking nothing
/// meanwhile, then asks again, and sleeps again while Redis denies. Tokio's clock is paused
/// and moved by hand, so every wait is exact; Redis's moves by milliseconds meanwhile, far
/// within the hour the rule holds.
#[tokio::test]
async fn until_ready_waits_each_denials_retry_after_on_tokios_clock() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let rules = one(&rule("hourly", Kind::SlidingLog, "1/hour"));
    tokio::time::pause();
    let _held = hold_clock();
    let start = Instant::now();
    // Room: the admission, at once.
    let first = redis.until_ready(&rules, "k", 1).await.unwrap();
    assert!(first.allowed());
    assert_eq!(start.elapsed(), Duration::ZERO);
    // A cost no rule could ever admit is an error at once, not a wait.
    assert!(matches!(
        redis.until_ready(&rules, "k", 2).await,
        Err(RedisError::Limit(LimitError::CostTooHigh {
            cost: 2,
            max: 1
        }))
    ));

    server.cli(&["config", "resetstat"]);
    let waiting = tokio::spawn({
        let (redis, rules) = (redis.clone(), rules.clone());
        async move {
            let decision = redis.until_ready(&rules, "k", 1).await;
            (decision, Instant::now())
        }
    });
    // Denied: asleep for the denial's wait, about an hour (the peek's, a moment later, is at
    // most as long).
    let wait = settle(&redis, &rules, "k")
        .await
        .retry_after()
        .expect("full for an hour");
    assert!(wait > Duration::from_secs(3_500), "{wait:?}");
    assert_eq!(server.script_calls(), 2, "its check and the peek");
    // All but a millisecond of it: still asleep, asking nothing.
    let mut advanced = wait - Duration::from_millis(1);
    tokio::time::advance(advanced).await;
    settle(&redis, &rules, "k").await;
    assert_eq!(server.script_calls(), 3, "the peek alone");
    assert!(!waiting.is_finished());
    // Past it: it asks again, Redis (whose clock has not moved an hour) denies again, and it
    // sleeps again.
    tokio::time::advance(Duration::from_secs(3_600)).await;
    advanced += Duration::from_secs(3_600);
    settle(&redis, &rules, "k").await;
    assert_eq!(server.script_calls(), 5, "its second check and the peek");
    assert!(!waiting.is_finished());
    // Room again: once this sleep is over, it is admitted.
    redis.reset(&rules, "k").await.unwrap();
    tokio::time::advance(Duration::from_secs(3_600)).await;
    advanced += Duration::from_secs(3_600);
    let (decision, at) = waiting.await.unwrap();
    let decision = decision.unwrap();
    assert!(decision.allowed());
    assert_eq!(decision.remaining(), 0);
    assert_eq!(at - start, advanced);
    assert_eq!(server.script_calls(), 6);
}

#[tokio::test]
async fn the_server_clock_is_the_default() {
    let server = RedisServer::start();
    let redis = limiter(&server).await;
    let (rule, rules) = log("2/minute");
    let seconds: u64 = server
        .cli(&["time"])
        .lines()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(redis.check_now(&rules, "k", 1).await.unwrap().allowed());
    let held = redis
        .inspect(&rule, "k", Moment::ZERO, Moment::MAX)
        .await
        .unwrap();
    let at = held[0].since_origin().as_secs();
    assert!(
        (seconds..=seconds + 5).contains(&at),
        "{at} vs the server's {seconds}"
    );
    // In one call with a check at an explicit time, a check without one still counts at the
    // server's.
    let answers = redis
        .check_many(&[
            Check::new(&rules, "early", 1).at(secs(3)),
            Check::new(&rules, "late", 1),
        ])
        .await;
    assert!(answers.iter().all(|a| a.as_ref().unwrap().allowed()));
    let early = redis
        .inspect(&rule, "early", Moment::ZERO, Moment::MAX)
        .await
        .unwrap();
    assert_eq!(early, [secs(3)]);
    let late = redis
        .inspect(&rule, "late", Moment::ZERO, Moment::MAX)
        .await
        .unwrap();
    assert!(late[0].since_origin().as_secs() >= seconds, "{late:?}");
}

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

#[tokio::test]
async fn redis_down_then_back_errors_at_once_then_recovers() {
    let mut server = RedisServer::start();
    let url = server.url();
    let redis = limiter(&server)
        .await
        .with_timeout(Duration::from_millis(300))
        .unwrap();
    let (_, rules) = log("2/minute");
    assert!(
        redis
            .check(&rules, "k", secs(1), 2)
            .await
            .unwrap()
            .allowed()
    );

    server.kill();
    let err = redis.check(&rules, "k", secs(2), 1).await.unwrap_err();
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
        let err = redis.check(&rules, "k", secs(2), 1).await.unwrap_err();
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
    let err = redis.reset(&rules, "k").await.unwrap_err();
    assert!(err.to_string().contains("not asked"), "{err}");
    let open = redis.clone().with_failure_policy(FailurePolicy::Open);
    let decision = open.check(&rules, "k", secs(2), 1).await.unwrap();
    assert!(decision.allowed() && decision.degraded().is_some());
    let closed = redis.clone().with_failure_policy(FailurePolicy::Closed);
    let decision = closed.check(&rules, "k", secs(2), 1).await.unwrap();
    assert!(!decision.allowed() && decision.degraded().is_some());

    // Back, and empty (it keeps nothing on disk): the probe finds it by itself.
    server.restart();
    until_available(&redis).await;
    assert!(redis.is_available());
    let first = redis.check(&rules, "k", secs(3), 2).await.unwrap();
    assert!(first.allowed() && first.degraded().is_none());
    assert!(
        !redis
            .check(&rules, "k", secs(3), 1)
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
    let rules = one(&rule("api", Kind::Gcra, "10/s"));
    assert!(redis.check_now(&rules, "k", 1).await.unwrap().allowed());
    server.cli(&["client", "pause", "2000", "write"]);
    let err = redis.check_now(&rules, "k", 1).await.unwrap_err();
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
    // The node that is not a URL is named, alone.
    assert_eq!(
        err.to_string(),
        "cannot set up the Redis limiter: `redis://b:x/`: Redis URL did not parse - \
         InvalidClientConfig"
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
