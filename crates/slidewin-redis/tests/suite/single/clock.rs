//! Whose clock decides: `until_ready` waits on tokio's, and the server's is the default.

use super::*;

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
