//! The engine's unit tests: decisions through the engine, wildcard matching and counter keys.

use super::check::counter_key;
use super::matching::wildcard_match;
use super::*;

fn parts(pattern: &str) -> Vec<String> {
    pattern.split('*').map(str::to_owned).collect()
}

#[tokio::test]
async fn an_enforced_limit_binds_before_a_shadow_one() {
    let config = Config::parse(
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {name: enforced, quota: 5/s}\n  - key: b\n    shadow_mode: true\n    rate_limit: {name: watched, quota: 1/s}\n",
        "t.yaml",
    )
    .unwrap();
    let clock = Arc::new(slidewin::time::ManualClock::new(Moment::from_secs(9)));
    let engine = Engine::new(
        slidewin_store::Memory::new(),
        config,
        clock,
        Bounds::default(),
        Metrics::new(),
    )
    .unwrap();
    let request = RateLimitRequest::new(
        "d",
        vec![
            RequestDescriptor::new(vec![Entry::new("a", "x")]),
            RequestDescriptor::new(vec![Entry::new("b", "x")]),
        ],
    );
    engine.should_rate_limit(&request).await.unwrap();
    let second = engine.should_rate_limit(&request).await.unwrap();
    assert_eq!(second.overall_code, Code::Ok);
    assert_eq!(
        second.statuses[1].code,
        Code::Ok,
        "shadow mode never denies"
    );
    let field = |name: &str| {
        second
            .headers
            .iter()
            .find(|(n, _)| n.as_str() == name)
            .map(|(_, v)| v.to_str().unwrap().to_owned())
    };
    assert_eq!(field("ratelimit").as_deref(), Some("\"enforced\";r=3;t=1"));
    assert_eq!(field("retry-after"), None);
}

/// Issue 29: after 256 distinct overrides, a request carrying a new one was refused whole,
/// its other descriptors included. Now its descriptor alone is over the limit, saying why.
#[tokio::test]
async fn hostile_29_an_override_past_the_table_is_refused_for_its_descriptor_only() {
    let config = Config::parse(
        "domain: d\ndescriptors:\n  - key: plain\n    rate_limit: {quota: 5/minute}\n",
        "t.yaml",
    )
    .unwrap();
    let engine = Engine::new(
        slidewin_store::Memory::new(),
        config,
        Arc::new(slidewin::time::ManualClock::new(Moment::from_secs(1))),
        Bounds::default(),
        Metrics::new(),
    )
    .unwrap();
    let with_override = |rpu: u32| {
        let mut descriptor = RequestDescriptor::new(vec![Entry::new("k", "v")]);
        descriptor.limit = Some(LimitOverride {
            requests_per_unit: rpu,
            unit: Unit::Minute,
        });
        descriptor
    };
    for rpu in 1..=u32::try_from(Bounds::MAX_OVERRIDES).unwrap() {
        let request = RateLimitRequest::new("d", vec![with_override(rpu)]);
        engine.should_rate_limit(&request).await.unwrap();
    }
    // Every store holds a live key: one more is refused, for its descriptor alone.
    let plain = RequestDescriptor::new(vec![Entry::new("plain", "ann")]);
    let request = RateLimitRequest::new("d", vec![plain, with_override(100_000)]);
    let answer = engine.should_rate_limit(&request).await.unwrap();
    assert_eq!(answer.overall_code, Code::OverLimit);
    assert_eq!(answer.statuses[0].code, Code::Ok);
    assert_eq!(
        answer.statuses[0].limit_remaining, 4,
        "the other one counted"
    );
    let refused = &answer.statuses[1];
    assert_eq!(refused.code, Code::OverLimit);
    let name = &refused.current_limit.as_ref().unwrap().name;
    assert!(name.contains("Bounds::MAX_OVERRIDES"), "{name}");
    let metrics = engine.metrics().encode();
    assert!(
        metrics.contains("slidewin_request_overrides_total{result=\"refused\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn overrides_turned_off_are_ignored_and_counted() {
    let config = Config::parse(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {quota: 1/minute}\n",
        "t.yaml",
    )
    .unwrap();
    let bounds = Bounds {
        request_overrides: false,
        ..Bounds::default()
    };
    let clock = Arc::new(slidewin::time::ManualClock::new(Moment::from_secs(1)));
    let engine = Engine::new(
        slidewin_store::Memory::new(),
        config,
        clock,
        bounds,
        Metrics::new(),
    )
    .unwrap();
    let mut descriptor = RequestDescriptor::new(vec![Entry::new("k", "v")]);
    descriptor.limit = Some(LimitOverride {
        requests_per_unit: 1_000,
        unit: Unit::Second,
    });
    let request = RateLimitRequest::new("d", vec![descriptor]);
    // The config's 1 per minute decides, not the 1,000 per second asked for.
    let first = engine.should_rate_limit(&request).await.unwrap();
    assert_eq!(first.overall_code, Code::Ok);
    let second = engine.should_rate_limit(&request).await.unwrap();
    assert_eq!(second.overall_code, Code::OverLimit);
    let metrics = engine.metrics().encode();
    assert!(
        metrics.contains("slidewin_request_overrides_total{result=\"ignored\"} 2"),
        "{metrics}"
    );
}

#[test]
fn wildcards_match_as_envoy_ratelimit_does() {
    assert!(wildcard_match(&parts("path_/foo*"), "path_/foo/bar"));
    assert!(wildcard_match(&parts("path_/foo*"), "path_/foo"));
    assert!(!wildcard_match(&parts("path_/foo*"), "path_/fo"));
    assert!(wildcard_match(&parts("path_a*b*c"), "path_aXXbYYc"));
    assert!(!wildcard_match(&parts("path_a*b*c"), "path_acb"));
    assert!(!wildcard_match(&parts("path_ab*ba"), "path_aba"));
    assert!(wildcard_match(&parts("path_x"), "path_x"));
}

/// Issue 29: 16 entries of 1 KB each made a 35 KB counter key (a Redis key that filled a
/// 16 MB Redis in 474 requests).
#[test]
fn hostile_29_counter_keys_have_a_bounded_length() {
    let huge = "x".repeat(1024);
    let entries: Vec<Entry> = (0..16).map(|_| Entry::new(&huge, &huge)).collect();
    let key = counter_key(&huge, &huge, &entries, &[]);
    assert_eq!(key.len(), 64);
    assert!(key.bytes().all(|b| b.is_ascii_hexdigit()), "{key}");
    assert_eq!(counter_key("", "", &[], &[]).len(), 64);
}

#[test]
fn counter_keys_cannot_be_forged_by_values() {
    let a = counter_key("d", "d.k", &[Entry::new("k", "a1:b")], &[]);
    let b = counter_key(
        "d",
        "d.k",
        &[Entry::new("k", "a"), Entry::new("b", "")],
        &[],
    );
    assert_ne!(a, b);
    let pattern = [(0, "a*".to_owned())];
    let shared = counter_key("d", "d.k_a*", &[Entry::new("k", "abc")], &pattern);
    assert_eq!(
        shared,
        counter_key("d", "d.k_a*", &[Entry::new("k", "axy")], &pattern)
    );
}
