//! Calendar quotas in the service: the config's forms and errors, and decisions on the
//! calendar's windows in a zone, with their real reset in the fields.

use std::time::Duration;

use slidewin::time::ManualClock;

use super::*;
use crate::config::Action;

fn at(text: &str) -> Moment {
    Moment::try_from(text.parse::<jiff::Timestamp>().unwrap()).unwrap()
}

fn limit(fields: &str) -> String {
    format!("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {{{fields}}}\n")
}

fn load(fields: &str) -> Config {
    Config::parse(&limit(fields), "t.yaml").unwrap()
}

fn refused(fields: &str) -> String {
    Config::parse(&limit(fields), "t.yaml")
        .unwrap_err()
        .to_string()
}

fn rules(config: &Config) -> (slidewin::limit::RuleSet, Vec<Option<Unit>>) {
    match config.domains()[0].descriptors()[0]
        .limit()
        .unwrap()
        .action()
    {
        Action::Rules { rules, units } => (rules.clone(), units.clone()),
        _ => panic!("a limit of rules"),
    }
}

#[test]
fn a_calendar_quota_takes_a_zone_and_an_anchor() {
    let config = load(
        "name: monthly, quota: 10000 per calendar month, zone: Europe/Paris, anchor: 2026-01-15",
    );
    let (set, units) = rules(&config);
    let rule = &set.rules()[0];
    assert_eq!(rule.kind(), slidewin::limit::Kind::Calendar);
    assert_eq!(units, [Some(Unit::Month)]);
    assert_eq!(
        rule.quota_text(),
        "10000 per calendar month from 2026-01-15T00:00:00 in Europe/Paris"
    );
    let (set, units) = rules(&load("quota: 7 per calendar week from sunday"));
    assert_eq!(
        set.rules()[0].quota_text(),
        "7 per calendar week from sunday"
    );
    assert_eq!(units, [Some(Unit::Week)]);
    let day = load("quota: 5 per calendar day, anchor: '2026-01-01T06:00', algorithm: calendar");
    assert_eq!(
        rules(&day).0.rules()[0].quota_text(),
        "5 per calendar day from 2026-01-01T06:00:00"
    );
}

/// A cycle from the 31st: April has none, so its window starts on the 30th (`clamp`, the
/// default) or on May 1 (`strict`).
#[test]
fn month_end_says_where_a_missing_anchor_day_starts_the_window() {
    let window = |fields: &str| {
        let (set, _) = rules(&load(fields));
        let quota = set.rules()[0].calendar_quota().unwrap().clone();
        let april = quota.window(at("2026-04-30T12:00:00Z"));
        (april.start(), april.end())
    };
    let cycle = "quota: 5 per calendar month, anchor: 2026-01-31";
    assert_eq!(
        window(cycle),
        (at("2026-04-30T00:00:00Z"), at("2026-05-31T00:00:00Z"))
    );
    assert_eq!(window(&format!("{cycle}, month_end: clamp")), window(cycle));
    // Strict: March's window runs to May 1, which holds April 30.
    assert_eq!(
        window(&format!("{cycle}, month_end: Strict")),
        (at("2026-03-31T00:00:00Z"), at("2026-05-01T00:00:00Z"))
    );
}

#[test]
fn calendar_errors_name_the_field_and_the_value() {
    for (fields, says) in [
        (
            "quota: 5 per calendar month, zone: Mars/Olympus",
            "unknown time zone `Mars/Olympus`",
        ),
        (
            "quota: 5 per calendar month, anchor: the 15th",
            "invalid anchor `the 15th`",
        ),
        (
            "quota: 5 per calendar fortnight",
            "expected day, week, month or year",
        ),
        (
            "quota: 5/minute, zone: Europe/Paris",
            "`zone`, `anchor` and `month_end` go with a calendar quota",
        ),
        (
            "quota: 5/minute, anchor: 2026-01-15",
            "`zone`, `anchor` and `month_end` go with a calendar quota",
        ),
        (
            "quota: 5 per calendar day, anchor: 2026-01-15",
            "a calendar day starts at midnight",
        ),
        (
            "quota: 5 per calendar week, month_end: strict",
            "`month_end` goes with a calendar month or year",
        ),
        (
            "quota: 5 per calendar month, month_end: round",
            "invalid month_end `round`",
        ),
        (
            "quota: 5/minute, month_end: clamp",
            "`month_end` go with a calendar quota",
        ),
        (
            "quota: 5 per calendar week from sunday, anchor: 2026-01-15",
            "not both",
        ),
        (
            "quota: 5 per calendar month, algorithm: gcra",
            "counted by `calendar` alone",
        ),
        (
            "quota: 5/minute, algorithm: calendar",
            "`calendar` counts a calendar quota",
        ),
        ("quota: 5 per calendar month, unit: day", "not both"),
        (
            "quota: 5 per calendar month, lease: 30s",
            "a `lease` goes with",
        ),
    ] {
        let err = refused(fields);
        assert!(err.contains(says), "{fields}: {err}");
    }
    let long = "x".repeat(65);
    assert!(refused(&format!("quota: 5 per calendar day, zone: {long}")).contains("64 bytes"));
}

/// An engine on `backend` and `config`, on a clock at `now` (Unix time, as the service's
/// clock reads).
fn engine<B: Backend>(backend: B, config: Config, now: Moment) -> (Engine<B>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(now));
    let engine = Engine::new(
        backend,
        config,
        clock.clone(),
        Bounds::default(),
        Metrics::new(),
    )
    .unwrap();
    (engine, clock)
}

fn field(answer: &RateLimitResponse, name: &str) -> Option<String> {
    answer
        .headers
        .iter()
        .find(|(n, _)| n.as_str() == name)
        .map(|(_, v)| v.to_str().unwrap().to_owned())
}

/// 2 a calendar month in Paris, on `backend`: December starts at 23:00 UTC, and a denial
/// an hour before says so in every field.
async fn a_month_in_paris<B: Backend>(backend: B) {
    let config = load("name: monthly, quota: 2 per calendar month, zone: Europe/Paris");
    let (engine, clock) = engine(backend, config, at("2026-11-30T22:00:00Z"));
    let request = RateLimitRequest::new(
        "d",
        vec![RequestDescriptor::new(vec![Entry::new("k", "v")])],
    );
    for _ in 0..2 {
        let answer = engine.should_rate_limit(&request).await.unwrap();
        assert_eq!(answer.overall_code, Code::Ok);
    }
    let denied = engine.should_rate_limit(&request).await.unwrap();
    assert_eq!(denied.overall_code, Code::OverLimit);
    // December starts at 23:00 UTC, in an hour: the real reset, in every field.
    let status = &denied.statuses[0];
    assert_eq!(status.duration_until_reset, Some(Duration::from_secs(3600)));
    assert_eq!(
        status.current_limit.as_ref().unwrap().unit,
        Some(Unit::Month)
    );
    assert_eq!(
        field(&denied, "ratelimit").as_deref(),
        Some("\"monthly\";r=0;t=3600")
    );
    assert_eq!(field(&denied, "retry-after").as_deref(), Some("3600"));
    // A calendar month has no one length: the policy names no `w`.
    assert_eq!(
        field(&denied, "ratelimit-policy").as_deref(),
        Some("\"monthly\";q=2")
    );
    clock.set(at("2026-11-30T23:00:00Z"));
    let december = engine.should_rate_limit(&request).await.unwrap();
    assert_eq!(december.overall_code, Code::Ok);
    assert_eq!(december.statuses[0].limit_remaining, 1);
}

#[tokio::test]
async fn a_month_in_paris_resets_at_midnight_there() {
    a_month_in_paris(slidewin_store::Memory::new()).await;
}

/// Issue 33: the same month on the Redis backend (at the service's clock, as the layer's
/// clock option runs it): the config loads, and Redis answers as memory does.
#[tokio::test]
async fn a_month_in_paris_resets_at_midnight_there_on_redis() {
    let server = slidewin_test_support::redis::RedisServer::start();
    let limiter = slidewin_redis::RedisLimiter::connect(&server.url())
        .await
        .unwrap();
    a_month_in_paris(slidewin_store::Redis::new(limiter).with_layer_clock()).await;
}
