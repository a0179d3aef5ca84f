//! Issue 33 through the store on Redis: a reservation at the layer's time or at Redis's, its
//! settle, and what the failure policy does while Redis is away (reserves nothing; a settle
//! fails, and the reservation keeps its estimate).

#![cfg(feature = "redis")]

use std::time::Duration;

use slidewin::Moment;
use slidewin::limit::{Kind, Reservation, Rule, RuleSet};
use slidewin_redis::{FailurePolicy, RedisLimiter};
use slidewin_store::{Backend, BackendError, Redis};
use slidewin_test_support::redis::RedisServer;

fn tokens() -> RuleSet {
    RuleSet::new([
        Rule::new("minute", Kind::SlidingLog, "1000/minute".parse().unwrap()).unwrap(),
        Rule::new("day", Kind::FixedWindow, "5000/day".parse().unwrap()).unwrap(),
    ])
    .unwrap()
}

#[tokio::test]
async fn a_reservation_at_the_layers_time_settles_as_in_memory() {
    let server = RedisServer::start();
    let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
    let redis = Redis::new(limiter).with_layer_clock();
    let store = redis.store(tokens()).unwrap();
    let at = Moment::from_secs(1_000_000);
    let (checked, reserved) = redis.reserve(&store, "ann".into(), at, 400).await.unwrap();
    assert!(checked.allowed() && checked.degraded().is_none());
    assert_eq!(reserved, Some(Reservation::new(at, 400)));
    assert!(
        redis
            .settle(&store, "ann".into(), reserved.unwrap(), 1_600)
            .await
            .unwrap()
    );
    let later = redis.check(&store, "ann".into(), at, 0).await.unwrap();
    assert_eq!(later.decisions()[1].remaining(), 3_400);
    assert!(!later.allowed()); // 600 past the minute's limit: debt
}

#[tokio::test]
async fn a_reservation_at_redis_time_names_the_time_redis_counted_it_at() {
    let server = RedisServer::start();
    let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
    let redis = Redis::new(limiter);
    let store = redis.store(tokens()).unwrap();
    let (_, reserved) = redis
        .reserve(&store, "ann".into(), Moment::ZERO, 400)
        .await
        .unwrap();
    let reserved = reserved.unwrap();
    assert!(reserved.at() > Moment::from_secs(1_700_000_000)); // Unix time, from Redis
    assert!(
        redis
            .settle(&store, "ann".into(), reserved, 100)
            .await
            .unwrap()
    );
    let (_, again) = redis
        .reserve(&store, "ann".into(), Moment::ZERO, 900)
        .await
        .unwrap();
    assert!(again.is_some(), "the 300 not used came back");
}

#[tokio::test]
async fn while_redis_is_away_nothing_is_reserved_and_a_settle_fails() {
    let mut server = RedisServer::start();
    let limiter = RedisLimiter::connect(&server.url())
        .await
        .unwrap()
        .with_timeout(Duration::from_millis(500))
        .unwrap()
        .with_failure_policy(FailurePolicy::Open);
    let redis = Redis::new(limiter).with_layer_clock();
    let store = redis.store(tokens()).unwrap();
    let at = Moment::from_secs(1_000_000);
    let (_, reserved) = redis.reserve(&store, "ann".into(), at, 400).await.unwrap();
    server.kill();
    let (checked, none) = redis.reserve(&store, "ann".into(), at, 400).await.unwrap();
    assert!(checked.allowed() && checked.degraded().is_some());
    assert_eq!(none, None);
    let failed = redis
        .settle(&store, "ann".into(), reserved.unwrap(), 10)
        .await;
    assert!(
        matches!(failed, Err(BackendError::Unavailable { .. })),
        "{failed:?}"
    );
}

/// Issue 33: a cost reported after the response, with nothing reserved, is charged at Redis's
/// time where checks count at it (the time the layer passes is not Redis's: here 0), makes
/// the key, and a peek at Redis's time sees it, past the limit too.
#[tokio::test]
async fn an_unreserved_settle_charges_at_redis_time() {
    let server = RedisServer::start();
    let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
    let redis = Redis::new(limiter);
    let store = redis.store(tokens()).unwrap();
    let report = Reservation::unreserved(Moment::ZERO);
    assert!(
        redis
            .settle(&store, "ann".into(), report, 1_200)
            .await
            .unwrap()
    );
    let owed = redis
        .peek(&store, "ann".into(), Moment::ZERO, 1)
        .await
        .unwrap();
    assert!(!owed.allowed());
    assert_eq!(owed.decisions()[1].remaining(), 3_799); // the day would admit the 1
    // Nothing charged, nothing made.
    let none = Reservation::unreserved(Moment::ZERO);
    assert!(!redis.settle(&store, "bob".into(), none, 0).await.unwrap());
    assert_eq!(server.cli(&["DBSIZE"]).trim(), "2"); // ann's two rules
}

/// The same for a calendar day, whose window the client dates: from Redis's time, read first.
#[tokio::test]
async fn an_unreserved_settle_dates_a_calendar_window_by_redis_time() {
    use slidewin::limit::{CalendarQuota, CalendarUnit};
    let server = RedisServer::start();
    let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
    let redis = Redis::new(limiter);
    let day = CalendarQuota::new(1_000, CalendarUnit::Day).unwrap();
    let store = redis
        .store(RuleSet::from(Rule::calendar("day", day).unwrap()))
        .unwrap();
    let report = Reservation::unreserved(Moment::ZERO);
    assert!(
        redis
            .settle(&store, "ann".into(), report, 600)
            .await
            .unwrap()
    );
    let left = redis
        .peek(&store, "ann".into(), Moment::ZERO, 1)
        .await
        .unwrap();
    assert_eq!(left.decisions()[0].remaining(), 399);
    assert!(
        redis
            .settle(&store, "ann".into(), report, 600)
            .await
            .unwrap()
    );
    let full = redis
        .peek(&store, "ann".into(), Moment::ZERO, 1)
        .await
        .unwrap();
    assert!(!full.allowed()); // counted to the limit, as a window counts
}
