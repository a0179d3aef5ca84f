//! Property tests: the config loader and `/json` on arbitrary input.

use super::*;

// ---- property tests: the config loader and `/json` on arbitrary input ----

fn config_cases() -> ProptestConfig {
    ProptestConfig {
        cases: 300,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(0x0405_7113),
        ..ProptestConfig::default()
    }
}

/// A scalar as envoy configs hold them, right and wrong.
fn yaml_scalar() -> impl Strategy<Value = yaml_serde::Value> {
    use yaml_serde::Value;
    prop_oneof![
        prop::sample::select(vec![
            "second",
            "minute",
            "fortnight",
            "SECOND",
            "5 per second",
            "0 per second",
            "5 per 0 seconds",
            "1/s",
            "sliding_log",
            "gcra",
            "leaky",
            "",
            "*",
            "a*b",
            "k",
            "v",
            "{x}",
            "1:k",
            "é",
            "5 per 584942417355 years",
            "true",
            "~",
        ])
        .prop_map(|s| Value::String(s.to_owned())),
        "\\PC{0,12}".prop_map(Value::String),
        prop::sample::select(vec![
            -1i64,
            0,
            1,
            5,
            i64::from(u32::MAX),
            i64::from(u32::MAX) + 1,
            i64::MAX,
            i64::MIN,
        ])
        .prop_map(|n| Value::Number(n.into())),
        any::<f64>().prop_map(|f| Value::Number(f.into())),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
    ]
}

/// envoy-config-like maps: the config's own keys and some others, any type under any key.
fn yaml_tree() -> impl Strategy<Value = yaml_serde::Value> {
    use yaml_serde::{Mapping, Value};
    let key = prop::sample::select(vec![
        "domain",
        "descriptors",
        "key",
        "value",
        "rate_limit",
        "limits",
        "unit",
        "requests_per_unit",
        "quota",
        "algorithm",
        "name",
        "replaces",
        "unlimited",
        "shadow_mode",
        "quota_mode",
        "share_threshold",
        "after_response",
        "zone",
        "anchor",
        "month_end",
        "refunds",
        "lease",
        "detailed_metric",
        "metadata",
        "rate_limt",
    ]);
    yaml_scalar().prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Sequence),
            prop::collection::vec((key.clone(), inner), 0..6).prop_map(|pairs| {
                let mut map = Mapping::new();
                for (k, v) in pairs {
                    map.insert(Value::String(k.to_owned()), v);
                }
                Value::Mapping(map)
            }),
        ]
    })
}

/// A root that is nearly a config: a domain and descriptors, their contents arbitrary.
fn near_config() -> impl Strategy<Value = yaml_serde::Value> {
    use yaml_serde::{Mapping, Value};
    (
        prop::option::of(yaml_scalar()),
        prop::collection::vec(yaml_tree(), 0..4),
    )
        .prop_map(|(domain, descriptors)| {
            let mut map = Mapping::new();
            if let Some(domain) = domain {
                map.insert(Value::String("domain".to_owned()), domain);
            }
            map.insert(
                Value::String("descriptors".to_owned()),
                Value::Sequence(descriptors),
            );
            Value::Mapping(map)
        })
}

/// Any text through the loader: an answer, never a panic; an error names the file, and the
/// line wherever the text is YAML at all.
fn loads_or_says_where(text: &str) -> Result<(), TestCaseError> {
    let Err(err) = Config::parse(text, "p.yaml") else {
        return Ok(());
    };
    prop_assert_eq!(err.file(), "p.yaml");
    let shown = err.to_string();
    prop_assert!(shown.starts_with("p.yaml"), "{}", shown);
    prop_assert!(!err.message().is_empty(), "{}", shown);
    if yaml_serde::from_str::<yaml_serde::Value>(text).is_ok() {
        prop_assert!(err.line().is_some(), "no line: {} for {:?}", shown, text);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config_cases())]

    #[test]
    fn arbitrary_text_is_loaded_or_refused_with_its_place(text in "\\PC{0,300}") {
        loads_or_says_where(&text)?;
    }

    #[test]
    fn yaml_like_text_is_loaded_or_refused_with_its_place(
        text in "[a-z_:{}\\[\\],\\-\\n #'\"0-9.*/]{0,300}",
    ) {
        loads_or_says_where(&text)?;
    }

    #[test]
    fn structured_wrong_configs_are_refused_with_their_place(tree in near_config()) {
        let text = yaml_serde::to_string(&tree).expect("a value prints");
        loads_or_says_where(&text)?;
    }

    #[test]
    fn mutated_configs_are_refused_with_their_place(
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<char>()), 1..6),
    ) {
        let mut text: Vec<char> = CONFIG.chars().collect();
        for (at, how, c) in edits {
            let i = at.index(text.len() + 1);
            match how {
                0 if i < text.len() => {
                    text.remove(i);
                }
                1 if i < text.len() => text[i] = c,
                _ => text.insert(i.min(text.len()), c),
            }
        }
        let text: String = text.into_iter().collect();
        loads_or_says_where(&text)?;
    }
}

/// `/json` without sockets: the router of a service on memory.
fn json_router() -> axum::Router {
    service_of(Memory::new(), CONFIG, Bounds::default())
        .0
        .router(true)
}

/// `body` to `/json`: 200, 429 or 400 only, and a 400 says what was wrong.
fn answers_or_says_why(router: &axum::Router, body: Vec<u8>) -> Result<(), TestCaseError> {
    use tower::ServiceExt;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let request = http::Request::builder()
        .method("POST")
        .uri("/json")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body.clone()))
        .unwrap();
    let (status, answer) = runtime.block_on(async {
        let response = router.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, body)
    });
    let answer = String::from_utf8_lossy(&answer).into_owned();
    prop_assert!(
        matches!(status, 200 | 429 | 400),
        "{} {} for {}",
        status,
        answer,
        String::from_utf8_lossy(&body)
    );
    let parsed: serde_json::Value = serde_json::from_str(&answer).expect("a JSON answer");
    if status == 400 {
        let why = parsed["error"].as_str().unwrap_or_default();
        prop_assert!(why.len() > 10, "{}", answer);
    } else {
        prop_assert!(parsed["overallCode"].is_string(), "{}", answer);
    }
    Ok(())
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let key = prop::sample::select(vec![
        "domain",
        "descriptors",
        "entries",
        "key",
        "value",
        "hits_addend",
        "hitsAddend",
        "limit",
        "requests_per_unit",
        "requestsPerUnit",
        "unit",
        "x",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(vec![
            "api",
            "client",
            "both",
            "",
            "SECOND",
            "EON",
            "18446744073709551615",
            "-1",
            "{}",
        ])
        .prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 5, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..5).prop_map(|pairs| Value::Object(
                pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
            )),
        ]
    })
}

proptest! {
    #![proptest_config(config_cases())]

    #[test]
    fn arbitrary_json_is_answered_or_refused_with_a_reason(value in json_value()) {
        let router = json_router();
        answers_or_says_why(&router, serde_json::to_vec(&value).unwrap())?;
    }

    #[test]
    fn mutated_requests_are_answered_or_refused_with_a_reason(
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<u8>()), 1..6),
    ) {
        let router = json_router();
        let mut body = br#"{"domain":"api","hits_addend":"2","descriptors":[{"entries":[{"key":"both","value":"v"}],"hitsAddend":1},{"entries":[{"key":"client","value":"w"}],"limit":{"requests_per_unit":5,"unit":"SECOND"}}]}"#.to_vec();
        for (at, how, byte) in edits {
            let i = at.index(body.len() + 1);
            match how {
                0 if i < body.len() => {
                    body.remove(i);
                }
                1 if i < body.len() => body[i] = byte,
                _ => body.insert(i.min(body.len()), byte),
            }
        }
        answers_or_says_why(&router, body)?;
    }
}
