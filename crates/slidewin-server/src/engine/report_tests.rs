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

/// `asked` of `engine`, answered.
async fn ask(
    engine: &Engine<slidewin_store::Memory>,
    key: &str,
    hits: u64,
    negative: bool,
) -> RateLimitResponse {
    engine
        .should_rate_limit(&asked(key, hits, negative))
        .await
        .unwrap()
}

/// The question, the report of 700 tokens, then one of 500 past the minute's 1000: charged
/// all the same, as debt; the question is refused until the 700 leave, with a Retry-After
/// to then, and the day's bucket keeps all 1200.
#[tokio::test]
async fn issue_33_reports_after_the_response_are_charged_past_the_limit() {
    let (engine, clock, metrics) = engine(TOKENS);
    let question = ask(&engine, "k1", 0, false).await;
    assert_eq!(question.overall_code, Code::Ok);
    assert_eq!(question.statuses[0].limit_remaining, 999); // a unit is left after one more
    let first = ask(&engine, "k1", 700, false).await;
    assert_eq!(first.overall_code, Code::Ok);
    assert_eq!(first.statuses[0].limit_remaining, 300);
    clock.advance(std::time::Duration::from_secs(1));
    let over = ask(&engine, "k1", 500, false).await;
    assert_eq!(over.overall_code, Code::Ok); // a report is never refused
    assert_eq!(over.statuses[0].limit_remaining, 0);
    clock.advance(std::time::Duration::from_secs(9));
    let denied = ask(&engine, "k1", 0, false).await;
    assert_eq!(denied.overall_code, Code::OverLimit);
    let retry = denied
        .headers
        .iter()
        .find(|(name, _)| name == http::header::RETRY_AFTER);
    assert_eq!(retry.map(|(_, v)| v.to_str().unwrap()), Some("50"));
    // Another key is its own.
    let other = ask(&engine, "k2", 0, false).await;
    assert_eq!(other.overall_code, Code::Ok);
    // The 700 of 86,400 s leave at 86,460 s: 500 of the minute left, and the day's 1200.
    clock.advance(std::time::Duration::from_secs(50));
    let again = ask(&engine, "k1", 0, false).await;
    assert_eq!(again.overall_code, Code::Ok);
    let day = ask(&engine, "k1", 299, false).await;
    // The day's bucket binds: 1499 charged, about one refilled in the minute, 2 left.
    assert_eq!(day.statuses[0].limit_remaining, 2);
    assert_eq!(day.statuses[0].current_limit.as_ref().unwrap().name, "day");
    let text = metrics.encode();
    assert!(
        text.contains("slidewin_rate_limit_charged_total{domain=\"ai\",rule=\"api_key\"} 1499"),
        "{text}"
    );
}

/// A negative hit on such a limit, without `refunds`, gives nothing back: it is answered as
/// the question, and counted as kept.
#[tokio::test]
async fn issue_33_a_negative_report_gives_nothing_back() {
    let (engine, _clock, metrics) = engine(TOKENS);
    ask(&engine, "k1", 1000, false).await;
    let back = ask(&engine, "k1", 400, true).await;
    assert_eq!(back.overall_code, Code::OverLimit);
    assert_eq!(back.statuses[0].limit_remaining, 0);
    let text = metrics.encode();
    assert!(
        text.contains("slidewin_rate_limit_kept_total{domain=\"ai\",rule=\"api_key\"} 400"),
        "{text}"
    );
}

/// With `refunds: true` on the minute, a negative report corrects one that said too much:
/// the minute gives back its oldest units, the day's bucket (which cannot refund) keeps all.
#[tokio::test]
async fn issue_33_a_negative_report_refunds_a_log_that_refunds() {
    let refunds = TOKENS.replace(
        "quota: 1000 per minute}",
        "quota: 1000 per minute, refunds: true}",
    );
    let (engine, _clock, metrics) = engine(&refunds);
    ask(&engine, "k1", 1000, false).await;
    let back = ask(&engine, "k1", 400, true).await;
    assert_eq!(back.overall_code, Code::Ok);
    // 600 of the minute held (399 left after one more, 40%); the day's 499 (33%) binds.
    assert_eq!(back.statuses[0].limit_remaining, 499);
    assert_eq!(back.statuses[0].current_limit.as_ref().unwrap().name, "day");
    let text = metrics.encode();
    assert!(
        text.contains("slidewin_rate_limit_released_total{domain=\"ai\",rule=\"api_key\"} 400"),
        "{text}"
    );
    assert!(
        text.contains("slidewin_rate_limit_kept_total{domain=\"ai\",rule=\"api_key\"} 0"),
        "{text}"
    );
}

/// Issue 33's negative corrections on a rate (no `after_response`): Envoy charged an estimate
/// before the request and sends the difference back with `is_negative_hits` after it. A log
/// with `refunds: true` gives back its oldest units; one without keeps them (spent is spent),
/// counted as kept; more than is held gives back what is.
#[tokio::test]
async fn issue_33_negative_hits_refund_only_a_log_that_refunds() {
    let config = "domain: ai\ndescriptors:\n  - key: api_key\n    limits:\n      - {name: minute, quota: 1000 per minute, refunds: true}\n      - {name: day, quota: 5000 per day}\n";
    let (engine, clock, metrics) = engine(config);
    let estimate = ask(&engine, "k1", 800, false).await;
    assert_eq!(estimate.statuses[0].limit_remaining, 200);
    clock.advance(std::time::Duration::from_secs(5));
    // The request used 300: 500 come back to the minute; the day keeps all 800.
    let back = ask(&engine, "k1", 500, true).await;
    assert_eq!(back.overall_code, Code::Ok);
    assert_eq!(back.statuses[0].limit_remaining, 700);
    let next = ask(&engine, "k1", 700, false).await;
    assert_eq!(next.overall_code, Code::Ok, "the refund made room");
    // Another key's refund reaches nothing of k1's.
    ask(&engine, "k2", 1000, true).await;
    let k1 = ask(&engine, "k1", 1, false).await;
    assert_eq!(k1.overall_code, Code::OverLimit);
    // More than is held: what is held comes back, no more (the day's 3,500 of 5,000 bind).
    let all = ask(&engine, "k1", u64::from(u32::MAX), true).await;
    assert_eq!(all.statuses[0].limit_remaining, 3_500);
    let full = ask(&engine, "k1", 1000, false).await;
    assert_eq!(full.overall_code, Code::Ok, "the whole minute came back");
    let text = metrics.encode();
    assert!(
        text.contains("slidewin_rate_limit_released_total{domain=\"ai\",rule=\"api_key\"} 1500"),
        "{text}"
    );
    // Without refunds, the same correction gives nothing back, and is counted as kept.
    let (engine, _clock, metrics) = self::engine(&config.replace(", refunds: true", ""));
    ask(&engine, "k1", 800, false).await;
    let kept = ask(&engine, "k1", 500, true).await;
    assert_eq!(kept.statuses[0].limit_remaining, 200);
    let text = metrics.encode();
    assert!(
        text.contains("slidewin_rate_limit_kept_total{domain=\"ai\",rule=\"api_key\"} 500"),
        "{text}"
    );
}

/// A plain limit, for contrast: a cost over what is left is refused and counted nowhere, so
/// a report of it would be lost. That is what `after_response` is for.
#[tokio::test]
async fn without_after_response_a_late_cost_over_the_limit_is_refused() {
    let plain = TOKENS.replace("    after_response: true\n", "");
    let (engine, _clock, _metrics) = engine(&plain);
    ask(&engine, "k1", 700, false).await;
    let refused = ask(&engine, "k1", 500, false).await;
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

/// Found reviewing the metrics for hostile hits: a descriptor's own `hits_addend` is a
/// client's `u64`, and two of `u64::MAX` wrapped a rule's hit counters back to small numbers
/// (a Prometheus counter that goes down reads as a restart). They stop at `u64::MAX` now.
#[tokio::test]
async fn huge_hits_never_wrap_a_hit_counter() {
    let (engine, _clock, metrics) = engine(TOKENS);
    for _ in 0..2 {
        ask(&engine, "k1", u64::MAX, false).await;
        ask(&engine, "k1", u64::MAX, true).await;
    }
    let text = metrics.encode();
    for counter in ["total_hits", "charged", "kept"] {
        let series = format!(
            "slidewin_rate_limit_{counter}_total{{domain=\"ai\",rule=\"api_key\"}} {}",
            u64::MAX
        );
        assert!(text.contains(&series), "{series}\n{text}");
    }
}
