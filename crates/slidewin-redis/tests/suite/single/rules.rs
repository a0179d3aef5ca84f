//! Several rules on one key: each its own state, all or nothing.

use super::*;

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
