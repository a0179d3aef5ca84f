//! A calendar check at Redis's time whose window this client dated wrong (its clock and
//! Redis's on either side of a boundary): refused by the script, then asked once more in the
//! window of Redis's time. The client's clock is set here by dating the call by hand.

use slidewin::limit::Rule;
use slidewin_test_support::redis::RedisServer;

use super::RedisLimiter;
use crate::batch::alone;
use crate::error::RedisError;
use crate::rules::{Call, Rules};

fn daily() -> Rules {
    let quota = "2 per calendar day".parse().unwrap();
    Rules::try_from(Rule::calendar("daily", quota).unwrap()).unwrap()
}

/// 2001-01-01T00:00:00Z, in microseconds: a day Redis's clock is not in.
const LONG_AGO: u64 = 978_307_200_000_000;

#[tokio::test]
async fn a_window_dated_wrong_is_refused_then_asked_in_redis_time() {
    let server = RedisServer::start();
    let redis = RedisLimiter::connect(&server.url()).await.unwrap();
    let rules = daily();
    let wrong = || {
        let mut call = Call::new(&rules, "slidewin", "k", None, 1, true);
        assert!(call.dated_by_a_clock());
        call.redate(&rules, LONG_AGO);
        call
    };
    // Alone, the script refuses it and counts nothing.
    let err = alone(redis.connection.clone(), &wrong(), redis.timeout)
        .await
        .unwrap_err();
    let RedisError::ClockSkew {
        redis: at, client, ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(client.as_nanos(), LONG_AGO * 1_000);
    assert!(at.as_nanos() > 1_700_000_000 * 1_000_000_000, "{err}");
    assert!(err.to_string().contains("2001-01-01T00:00:00Z"), "{err}");
    assert!(!err.is_transient());
    assert_eq!(
        server
            .cli(&["EXISTS", "{slidewin:k}:daily:calendar"])
            .trim(),
        "0"
    );
    // Through the limiter, it is asked once more in Redis's window, and counts there.
    let decisions = redis.send(&rules, "k", wrong()).await.unwrap();
    assert_eq!(decisions.remaining(), 1);
    let decisions = redis.send(&rules, "k", wrong()).await.unwrap();
    assert_eq!(decisions.remaining(), 0);
    // A check at an explicit time is never dated by a clock.
    let explicit = Call::new(&rules, "slidewin", "k", Some(LONG_AGO), 1, true);
    assert!(!explicit.dated_by_a_clock());
}
