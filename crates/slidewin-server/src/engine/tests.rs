//! The engine's unit tests: decisions through the engine, wildcard matching and counter keys.

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

/// An engine on one limit of 2 a minute for key `k`, answering as `answers` says.
fn answering(answers: AnswerOptions) -> Engine<slidewin_store::Memory> {
    engine_on("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {name: two, quota: 2/minute}\n")
        .with_answers(answers)
}

fn one_k() -> RateLimitRequest {
    RateLimitRequest::new(
        "d",
        vec![RequestDescriptor::new(vec![Entry::new("k", "x")])],
    )
}

fn names(response: &RateLimitResponse) -> Vec<String> {
    response
        .headers
        .iter()
        .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap()))
        .collect()
}

/// Issue 31: envoy ratelimit's `SHADOW_MODE`. Over the limit, the answer is OK, the descriptor
/// still says `OVER_LIMIT`, no `Retry-After` is sent, and the answer is counted.
#[tokio::test]
async fn issue_31_the_global_shadow_mode_answers_ok_and_counts_it() {
    let engine = answering(AnswerOptions {
        shadow_mode: true,
        ..AnswerOptions::default()
    });
    for _ in 0..2 {
        engine.should_rate_limit(&one_k()).await.unwrap();
    }
    let third = engine.should_rate_limit(&one_k()).await.unwrap();
    assert_eq!(third.overall_code, Code::Ok);
    assert_eq!(third.statuses[0].code, Code::OverLimit);
    assert!(names(&third).iter().all(|h| !h.starts_with("retry-after")));
    assert!(
        engine
            .metrics()
            .encode()
            .contains("slidewin_global_shadow_mode_total 1"),
        "{}",
        engine.metrics().encode()
    );
    // Off, the same third request is denied with its Retry-After.
    let enforcing = answering(AnswerOptions::default());
    for _ in 0..2 {
        enforcing.should_rate_limit(&one_k()).await.unwrap();
    }
    let denied = enforcing.should_rate_limit(&one_k()).await.unwrap();
    assert_eq!(denied.overall_code, Code::OverLimit);
    assert!(names(&denied).iter().any(|h| h.starts_with("retry-after")));
}

/// Issue 31: envoy ratelimit's `LIMIT_RESPONSE_HEADERS_ENABLED`, its names, and its default
/// (no headers).
#[tokio::test]
async fn issue_31_response_headers_as_envoy_ratelimit_sends_them_or_none() {
    let envoy = answering(AnswerOptions {
        headers: ResponseHeaders::Envoy {
            limit: HeaderName::from_static("x-limit"),
            remaining: HeaderName::from_static("x-left"),
            reset: HeaderName::from_static("x-reset"),
        },
        ..AnswerOptions::default()
    });
    let first = envoy.should_rate_limit(&one_k()).await.unwrap();
    assert_eq!(names(&first), ["x-limit: 2", "x-left: 1", "x-reset: 60"]);
    let none = answering(AnswerOptions {
        headers: ResponseHeaders::None,
        ..AnswerOptions::default()
    });
    for _ in 0..3 {
        assert!(
            none.should_rate_limit(&one_k())
                .await
                .unwrap()
                .headers
                .is_empty()
        );
    }
}

/// Issue 31: envoy ratelimit's `NEAR_LIMIT_RATIO`: with 0.5, the first of two is near.
#[tokio::test]
async fn issue_31_near_limit_begins_at_the_ratio() {
    let count = |permille: u16| async move {
        let engine = answering(AnswerOptions {
            near_limit_permille: permille,
            ..AnswerOptions::default()
        });
        engine.should_rate_limit(&one_k()).await.unwrap();
        engine.metrics().encode()
    };
    let near = "slidewin_rate_limit_near_limit_total{domain=\"d\",rule=\"two\"} 1";
    assert!(count(400).await.contains(near));
    // Half used is not past half; nor past 0.8.
    assert!(!count(500).await.contains(near));
    assert!(!count(800).await.contains(near));
}

/// An engine on `yaml`, memory, a clock that stays put.
fn engine_on(yaml: &str) -> Engine<slidewin_store::Memory> {
    let config = Config::parse(yaml, "t.yaml").unwrap();
    let clock = Arc::new(slidewin::time::ManualClock::new(Moment::from_secs(9)));
    Engine::new(
        slidewin_store::Memory::new(),
        config,
        clock,
        Bounds::default(),
        Metrics::new(),
    )
    .unwrap()
}

fn request_of(domain: &str, entries: &[(&str, &str)]) -> RateLimitRequest {
    RateLimitRequest::new(
        domain,
        vec![RequestDescriptor::new(
            entries.iter().map(|(k, v)| Entry::new(k, v)).collect(),
        )],
    )
}

/// Issue 31: envoy ratelimit's README, example 10: `value_to_metric` puts the request's values
/// of those levels in the series.
#[tokio::test]
async fn issue_31_value_to_metric_as_envoy_ratelimits_example_10() {
    let engine = engine_on(
        "domain: example10\ndescriptors:\n  - key: route\n    value_to_metric: true\n    descriptors:\n      - key: http_method\n        value_to_metric: true\n        descriptors:\n          - key: subject_id\n            rate_limit: {unit: minute, requests_per_unit: 60}\n",
    );
    let request = request_of(
        "example10",
        &[
            ("route", "api"),
            ("http_method", "GET"),
            ("subject_id", "123"),
        ],
    );
    engine.should_rate_limit(&request).await.unwrap();
    let text = engine.metrics().encode();
    assert!(
        text.contains(
            "slidewin_rate_limit_descriptor_hits_total{domain=\"example10\",rule=\"route.http_method.subject_id\",descriptor=\"route_api.http_method_GET.subject_id\",result=\"within_limit\"} 1"
        ),
        "{text}"
    );
}

/// Issue 31: envoy ratelimit's README, example 8: `detailed_metric` on a descriptor without a
/// value counts each value apart; a limit without either flag makes no such series.
#[tokio::test]
async fn issue_31_detailed_metric_as_envoy_ratelimits_example_8() {
    let engine = engine_on(
        "domain: example8\ndescriptors:\n  - key: key1\n    detailed_metric: true\n    rate_limit: {unit: minute, requests_per_unit: 1}\n  - key: key2\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
    );
    for value in [
        "unspecified_value",
        "unspecified_value",
        "unspecified_value2",
    ] {
        engine
            .should_rate_limit(&request_of("example8", &[("key1", value)]))
            .await
            .unwrap();
    }
    engine
        .should_rate_limit(&request_of("example8", &[("key2", "x")]))
        .await
        .unwrap();
    let text = engine.metrics().encode();
    let series = |descriptor: &str, result: &str, n: u32| {
        format!("descriptor=\"{descriptor}\",result=\"{result}\"}} {n}")
    };
    assert!(
        text.contains(&series("key1_unspecified_value", "within_limit", 1)),
        "{text}"
    );
    assert!(
        text.contains(&series("key1_unspecified_value", "over_limit", 1)),
        "{text}"
    );
    assert!(
        text.contains(&series("key1_unspecified_value2", "within_limit", 1)),
        "{text}"
    );
    assert!(!text.contains("rule=\"key2\",descriptor"), "{text}");
}

/// Issue 31: clients choose the values, so a limit makes at most `MAX_SERIES` series, the rest
/// counted as `_other`, and a reload does not make room for more.
#[tokio::test]
async fn issue_31_per_descriptor_series_are_bounded_across_reloads() {
    let yaml = "domain: d\ndescriptors:\n  - key: user\n    value_to_metric: true\n    rate_limit: {unit: minute, requests_per_unit: 5}\n";
    let engine = engine_on(yaml);
    let max = detailed::DetailedPlan::MAX_SERIES;
    for i in 0..max + 50 {
        let user = format!("u{i}");
        engine
            .should_rate_limit(&request_of("d", &[("user", &user)]))
            .await
            .unwrap();
    }
    let series = |text: &str| {
        text.matches("slidewin_rate_limit_descriptor_hits_total{")
            .count()
    };
    let text = engine.metrics().encode();
    assert_eq!(series(&text), max + 1, "{text}");
    assert!(
        text.contains("descriptor=\"_other\",result=\"within_limit\"} 50"),
        "{text}"
    );
    engine
        .reload(Config::parse(yaml, "t.yaml").unwrap())
        .unwrap();
    engine
        .should_rate_limit(&request_of("d", &[("user", "new-after-reload")]))
        .await
        .unwrap();
    assert_eq!(series(&engine.metrics().encode()), max + 1);
    // A config without the flag removes the limit's series.
    let plain = "domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 5}\n";
    engine
        .reload(Config::parse(plain, "t.yaml").unwrap())
        .unwrap();
    assert_eq!(series(&engine.metrics().encode()), 0);
}

/// Issue 31 (limitador#447): each rule of a limit shows what it admits and over what span, so
/// that utilization can be graphed; from the limit's first hit, updated at once by a reload
/// of a limit that has been hit, removed with the limit.
#[tokio::test]
async fn issue_31_a_limits_rules_show_their_limit_and_window() {
    let yaml = |hourly: u32| {
        format!(
            "domain: d\ndescriptors:\n  - key: k\n    limits:\n      - {{name: burst, quota: 5/second}}\n      - {{name: hourly, quota: {hourly}/hour}}\n"
        )
    };
    let engine = engine_on(&yaml(100));
    let gauge = |text: &str, name: &str, limit: &str| {
        let prefix =
            format!("slidewin_rate_limit_{name}{{domain=\"d\",rule=\"k\",limit=\"{limit}\"}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(prefix.as_str()))
            .map(str::to_owned)
    };
    assert_eq!(
        gauge(&engine.metrics().encode(), "limit", "burst"),
        None,
        "no hit yet"
    );
    engine
        .should_rate_limit(&request_of("d", &[("k", "x")]))
        .await
        .unwrap();
    let text = engine.metrics().encode();
    assert_eq!(
        gauge(&text, "limit", "burst").as_deref(),
        Some("5"),
        "{text}"
    );
    assert_eq!(
        gauge(&text, "window_seconds", "burst").as_deref(),
        Some("1.0"),
        "{text}"
    );
    assert_eq!(gauge(&text, "limit", "hourly").as_deref(), Some("100"));
    assert_eq!(
        gauge(&text, "window_seconds", "hourly").as_deref(),
        Some("3600.0")
    );

    engine
        .reload(Config::parse(&yaml(200), "t.yaml").unwrap())
        .unwrap();
    assert_eq!(
        gauge(&engine.metrics().encode(), "limit", "hourly").as_deref(),
        Some("200")
    );
    engine
        .reload(
            Config::parse(
                "domain: d\ndescriptors:\n  - key: other\n    rate_limit: {quota: 1/s}\n",
                "t.yaml",
            )
            .unwrap(),
        )
        .unwrap();
    let text = engine.metrics().encode();
    assert_eq!(gauge(&text, "limit", "burst"), None, "{text}");
    assert_eq!(gauge(&text, "window_seconds", "hourly"), None, "{text}");
}

/// Issue 31: with envoy ratelimit's metric names (its Prometheus sink's default mapping), a
/// limit two levels deep is `{domain, key1, key2}` beside slidewin's `{domain, rule}`, and its
/// series go with the limit.
#[tokio::test]
async fn issue_31_envoy_metric_names_label_by_the_first_two_levels() {
    let yaml = "domain: d\ndescriptors:\n  - key: a\n    value: v1\n    descriptors:\n      - key: b\n        rate_limit: {unit: minute, requests_per_unit: 1}\n";
    let engine = Engine::new(
        slidewin_store::Memory::new(),
        Config::parse(yaml, "t.yaml").unwrap(),
        Arc::new(slidewin::time::ManualClock::new(Moment::from_secs(9))),
        Bounds::default(),
        Metrics::with_envoy_names(),
    )
    .unwrap();
    for _ in 0..2 {
        engine
            .should_rate_limit(&request_of("d", &[("a", "v1"), ("b", "x")]))
            .await
            .unwrap();
    }
    let text = engine.metrics().encode();
    let envoy = |what: &str| {
        format!("ratelimit_service_rate_limit_{what}{{domain=\"d\",key1=\"a_v1\",key2=\"b\"}} 1")
    };
    for what in ["within_limit", "over_limit"] {
        assert!(text.contains(&envoy(what)), "{what}: {text}");
    }
    assert!(text.contains(
        "ratelimit_service_rate_limit_total_hits{domain=\"d\",key1=\"a_v1\",key2=\"b\"} 2"
    ));
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    engine
        .reload(
            Config::parse(
                "domain: d\ndescriptors:\n  - key: c\n    rate_limit: {quota: 1/s}\n",
                "t.yaml",
            )
            .unwrap(),
        )
        .unwrap();
    assert!(!engine.metrics().encode().contains("key1=\"a_v1\""));
}

/// Issue 33: a limit of leases beside a rate. Envoy's `is_negative_hits` (here through
/// `/json`'s body) gives back the oldest unit held when a request ends; the rate stays spent.
#[tokio::test]
async fn issue_33_negative_hits_release_the_leases_a_request_held() {
    let config = Config::parse(
        "domain: d\ndescriptors:\n  - key: user\n    limits:\n      - {name: in_flight, quota: 2 per 30 seconds, algorithm: leases}\n      - {name: rate, quota: 100 per minute}\n",
        "t.yaml",
    )
    .unwrap();
    let clock = Arc::new(slidewin::time::ManualClock::new(Moment::from_secs(9)));
    let metrics = Metrics::new();
    let engine = Engine::new(
        slidewin_store::Memory::new(),
        config,
        clock,
        Bounds::default(),
        metrics.clone(),
    )
    .unwrap();
    let body = |negative: bool| {
        format!(
            r#"{{"domain": "d", "descriptors": [{{"entries": [{{"key": "user", "value": "ann"}}], "is_negative_hits": {negative}}}]}}"#
        )
    };
    let start = RateLimitRequest::from_json(body(false).as_bytes()).unwrap();
    let end = RateLimitRequest::from_json(body(true).as_bytes()).unwrap();
    for _ in 0..2 {
        assert_eq!(
            engine.should_rate_limit(&start).await.unwrap().overall_code,
            Code::Ok
        );
    }
    let third = engine.should_rate_limit(&start).await.unwrap();
    assert_eq!(third.overall_code, Code::OverLimit);
    // One request ends: its unit comes back, and the answer is the limit as it stands.
    let ended = engine.should_rate_limit(&end).await.unwrap();
    assert_eq!(ended.overall_code, Code::Ok);
    assert_eq!(ended.statuses[0].limit_remaining, 1);
    assert_eq!(
        engine.should_rate_limit(&start).await.unwrap().overall_code,
        Code::Ok
    );
    let text = metrics.encode();
    assert!(
        text.contains("slidewin_rate_limit_released_total{domain=\"d\",rule=\"user\"} 1"),
        "{text}"
    );
}

/// Issue 33: the draft's `pk`. With partition keys, `RateLimit` names the binding
/// descriptor's partition by a keyed digest of its counter key: one name per user, another
/// for another user, never a descriptor's value; without them, no `pk`.
#[tokio::test]
async fn issue_33_pk_names_the_binding_descriptors_partition() {
    let keys = slidewin_http::PartitionKeys::new(b"the fleet's secret, 16+ bytes").unwrap();
    let engine = answering(AnswerOptions {
        partition_keys: Some(keys.clone()),
        ..AnswerOptions::default()
    });
    let of = |value: &str| {
        RateLimitRequest::new(
            "d",
            vec![RequestDescriptor::new(vec![Entry::new("k", value)])],
        )
    };
    let field = |response: &RateLimitResponse| {
        let (_, value) = response
            .headers
            .iter()
            .find(|(n, _)| n == RATELIMIT)
            .unwrap();
        value.to_str().unwrap().to_owned()
    };
    let pk = |field: &str| field.split(";pk=").nth(1).map(str::to_owned);
    let ann = field(&engine.should_rate_limit(&of("ann")).await.unwrap());
    let again = field(&engine.should_rate_limit(&of("ann")).await.unwrap());
    let denied = engine.should_rate_limit(&of("ann")).await.unwrap();
    let bob = field(&engine.should_rate_limit(&of("bob")).await.unwrap());
    assert_eq!(denied.overall_code, Code::OverLimit);
    assert!(pk(&ann).is_some(), "{ann}");
    assert_eq!(pk(&ann), pk(&again));
    assert_eq!(pk(&ann), pk(&field(&denied)));
    assert_ne!(pk(&ann), pk(&bob));
    assert!(!ann.contains("ann"), "{ann}");
    // The digest is the partition keys' of the descriptor's counter key.
    let key = counter_key("d", "d.k", &[Entry::new("k", "ann")], &[]);
    let want = RateLimitFields::new(&slidewin::limit::RuleSet::from(
        slidewin::limit::Rule::new(
            "two",
            slidewin::limit::Kind::SlidingLog,
            "2/minute".parse().unwrap(),
        )
        .unwrap(),
    ))
    .unwrap()
    .rate_limit_keyed(
        0,
        &slidewin::Decision::allow(2, 1, std::time::Duration::from_secs(60)),
        &keys,
        RequestKey::Text(&key),
    );
    assert_eq!(pk(&ann), pk(want.to_str().unwrap()));
    let plain = answering(AnswerOptions::default());
    let plain = field(&plain.should_rate_limit(&of("ann")).await.unwrap());
    assert_eq!(pk(&plain), None, "{plain}");
}
