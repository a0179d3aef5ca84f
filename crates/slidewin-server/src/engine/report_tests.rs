//! Issue 33, costs settled after the response in the RLS: a descriptor marked
//! `after_response` is asked with no hits before the request and told the cost after it.

use slidewin::time::ManualClock;

use super::*;

const TOKENS: &str = "domain: ai\ndescriptors:\n  - key: api_key\n    after_response: true\n    limits:\n      - {name: minute, quota: 1000 per minute}\n      - {name: day, quota: 1500 per day, algorithm: gcra}\n";

fn engine(config: &str) -> (Engine<slidewin_store::Memory>, Arc<ManualClock>, Metrics) {
    let config = Config::parse(config, "t.yaml").unwrap();
    let clock = Arc::new(ManualClock::new(Moment::from_secs(86_400)));
    let metrics = Metrics::new();
    let engine = Engine::new(
        slidewin_store::Memory::new(),
        config,
        clock.clone(),
        Bounds::default(),
        metrics.clone(),
    )
    .unwrap();
    (engine, clock, metrics)
}

/// `api_key` `key`'s descriptor with `hits` of its own (0: the question before the request).
fn asked(key: &str, hits: u64, negative: bool) -> RateLimitRequest {
    RateLimitRequest::from_json(
        format!(
            r#"{{"domain": "ai", "descriptors": [{{"entries": [{{"key": "api_key", "value": "{key}"}}], "hits_addend": {hits}, "is_negative_hits": {negative}}}]}}"#
        )
        .as_bytes(),
    )
    .unwrap()
}

/// The question, the report of 700 tokens, then one of 500 past the minute's 1000: charged
/// all the same, as debt; the question is refused until the 700 leave, with a Retry-After
/// to then, and the day's bucket keeps all 1200.
#[tokio::test]
async fn issue_33_reports_after_the_response_are_charged_past_the_limit() {
    let (engine, clock, metrics) = engine(TOKENS);
    let question = engine
        .should_rate_limit(&asked("k1", 0, false))
        .await
        .unwrap();
    assert_eq!(question.overall_code, Code::Ok);
    assert_eq!(question.statuses[0].limit_remaining, 999); // a unit is left after one more
    let first = engine
        .should_rate_limit(&asked("k1", 700, false))
        .await
        .unwrap();
    assert_eq!(first.overall_code, Code::Ok);
    assert_eq!(first.statuses[0].limit_remaining, 300);
    clock.advance(std::time::Duration::from_secs(1));
    let over = engine
        .should_rate_limit(&asked("k1", 500, false))
        .await
        .unwrap();
    assert_eq!(over.overall_code, Code::Ok); // a report is never refused
    assert_eq!(over.statuses[0].limit_remaining, 0);
    clock.advance(std::time::Duration::from_secs(9));
    let denied = engine
        .should_rate_limit(&asked("k1", 0, false))
        .await
        .unwrap();
    assert_eq!(denied.overall_code, Code::OverLimit);
    let retry = denied
        .headers
        .iter()
        .find(|(name, _)| name == http::header::RETRY_AFTER);
    assert_eq!(retry.map(|(_, v)| v.to_str().unwrap()), Some("50"));
    // Another key is its own.
    let other = engine
        .should_rate_limit(&asked("k2", 0, false))
        .await
        .unwrap();
    assert_eq!(other.overall_code, Code::Ok);
    // The 700 of 86,400 s leave at 86,460 s: 500 of the minute left, and the day's 1200.
    clock.advance(std::time::Duration::from_secs(50));
    let again = engine
        .should_rate_limit(&asked("k1", 0, false))
        .await
        .unwrap();
    assert_eq!(again.overall_code, Code::Ok);
    let day = engine
        .should_rate_limit(&asked("k1", 299, false))
        .await
        .unwrap();
    // The day's bucket binds: 1499 charged, about one refilled in the minute, 2 left.
    assert_eq!(day.statuses[0].limit_remaining, 2);
    assert_eq!(day.statuses[0].current_limit.as_ref().unwrap().name, "day");
    let text = metrics.encode();
    assert!(
        text.contains("slidewin_rate_limit_charged_total{domain=\"ai\",rule=\"api_key\"} 1499"),
        "{text}"
    );
}

/// A negative hit on such a limit gives nothing back: it is answered as the question.
#[tokio::test]
async fn issue_33_a_negative_report_gives_nothing_back() {
    let (engine, _clock, _metrics) = engine(TOKENS);
    engine
        .should_rate_limit(&asked("k1", 1000, false))
        .await
        .unwrap();
    let back = engine
        .should_rate_limit(&asked("k1", 400, true))
        .await
        .unwrap();
    assert_eq!(back.overall_code, Code::OverLimit);
    assert_eq!(back.statuses[0].limit_remaining, 0);
}

/// A plain limit, for contrast: a cost over what is left is refused and counted nowhere, so
/// a report of it would be lost. That is what `after_response` is for.
#[tokio::test]
async fn without_after_response_a_late_cost_over_the_limit_is_refused() {
    let plain = TOKENS.replace("    after_response: true\n", "");
    let (engine, _clock, _metrics) = engine(&plain);
    engine
        .should_rate_limit(&asked("k1", 700, false))
        .await
        .unwrap();
    let refused = engine
        .should_rate_limit(&asked("k1", 500, false))
        .await
        .unwrap();
    assert_eq!(refused.overall_code, Code::OverLimit);
    assert_eq!(refused.statuses[0].limit_remaining, 300);
}

#[test]
fn after_response_needs_a_limit_that_counts() {
    for (descriptor, says) in [
        (
            "rate_limit: {unlimited: true}",
            "an unlimited limit counts nothing",
        ),
        (
            "rate_limit: {unit: minute, requests_per_unit: 0}",
            "a limit of 0 counts nothing",
        ),
        (
            "rate_limit: {quota: 2 concurrent, lease: 30 seconds}",
            "a `concurrent` limit's units are given back",
        ),
        (
            "descriptors: [{key: model, rate_limit: {quota: 5/s}}]",
            "it has no limit",
        ),
    ] {
        let config = format!(
            "domain: d\ndescriptors:\n  - key: k\n    after_response: true\n    {descriptor}\n"
        );
        let err = Config::parse(&config, "t.yaml").unwrap_err().to_string();
        assert!(err.contains(says), "{descriptor}: {err}");
        assert!(err.contains("after_response"), "{err}");
    }
}
