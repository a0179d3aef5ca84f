//! Negative or absurd units, in a config and in a request's own limit.

use super::*;

// ---- negative or absurd units ----

#[test]
fn absurd_units_in_the_config_are_errors_naming_the_place_and_the_value() {
    let head = "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n";
    let cases: &[(&str, &str)] = &[
        ("      unit: second\n      requests_per_unit: -1\n", "-1"),
        (
            "      unit: second\n      requests_per_unit: 99999999999999\n",
            "99999999999999",
        ),
        (
            "      unit: second\n      requests_per_unit: 1e400\n",
            "1e400",
        ),
        (
            "      unit: fortnight\n      requests_per_unit: 1\n",
            "fortnight",
        ),
        ("      unit: -3\n      requests_per_unit: 1\n", "-3"),
        ("      unit: 99\n      requests_per_unit: 1\n", "99"),
        ("      quota: \"0 per second\"\n", "0 per second"),
        ("      quota: \"5 per 0 seconds\"\n", "5 per 0 seconds"),
        ("      quota: \"-5 per second\"\n", "-5 per second"),
        ("      quota: \"5 per -1 seconds\"\n", "5 per -1 seconds"),
        (
            "      quota: \"5 per 99999999999999999999 years\"\n",
            "5 per 99999999999999999999 years",
        ),
        (
            "      quota: \"5 per 584942417355 years\"\n",
            "5 per 584942417355 years",
        ),
        (
            "      quota: \"5 per 18446744073709551615 seconds\"\n",
            "5 per 18446744073709551615 seconds",
        ),
        (
            "      quota: \"18446744073709551616 per second\"\n",
            "18446744073709551616 per second",
        ),
    ];
    for (body, value) in cases {
        let text = format!("{head}{body}");
        let Err(err) = Config::parse(&text, "absurd.yaml") else {
            panic!("accepted:\n{text}");
        };
        let shown = err.to_string();
        let line = err.line().unwrap_or_else(|| panic!("no line: {shown}"));
        let column = err.column().unwrap_or_else(|| panic!("no column: {shown}"));
        assert!(
            shown.starts_with(&format!("absurd.yaml:{line}:{column}: ")),
            "{shown}"
        );
        assert!(shown.contains(value), "`{value}` not in {shown}");
        // The place is the value's own line.
        let on_line = text.lines().nth(line - 1).unwrap();
        assert!(
            on_line.contains(value),
            "line {line} is {on_line:?}: {shown}"
        );
    }
}

/// The checks made after the YAML is read have their place too: every one is made as it is
/// read.
#[test]
fn every_config_error_has_its_line() {
    let cases: &[(&str, usize, &str)] = &[
        ("", 1, "domain"),
        ("domain: ''\n", 1, "empty"),
        ("descriptors: []\n", 1, "domain"),
        (
            "domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n",
            3,
            "duplicate descriptor `k_v`",
        ),
        ("domain: d\ndescriptors:\n  - key: ''\n", 3, "empty key"),
        (
            "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n        share_threshold: true\n",
            5,
            "share_threshold",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {quota: 1/s}\n    limits: [{name: a, quota: 1/s}]\n",
            4,
            "both",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    limits:\n      - {name: a, quota: 1/s}\n      - {name: a, quota: 2/s}\n",
            5,
            "named `a`",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    limits: []\n",
            4,
            "`limits` is empty",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unlimited: true\n      quota: 1/s\n",
            3,
            "unlimited",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      name: x\n      replaces: [{name: x}]\n      quota: 1/s\n",
            5,
            "replaces itself",
        ),
    ];
    for (text, line, says) in cases {
        let err = Config::parse(text, "e.yaml").expect_err(text);
        assert_eq!(err.line(), Some(*line), "{err} for {text:?}");
        assert!(err.column().is_some(), "{err}");
        assert!(err.to_string().contains(says), "`{says}` not in {err}");
    }
}

/// A config nested deep, in flow and in block style: refused with its place, no stack
/// overflow. Flow nesting past `Config::MAX_FLOW_NESTING` (128) is refused before parsing, at its
/// 129th bracket (the YAML scanner takes time quadratic in the flow depth: 31 s for 50,000
/// levels of `{a: ` in a release build); block nesting at `yaml_serde`'s recursion limit (128).
#[test]
fn a_deeply_nested_config_is_refused() {
    let flow = format!(
        "domain: d\ndescriptors: {}{}\n",
        "[{key: a, descriptors: ".repeat(50_000),
        "]}".repeat(50_000)
    );
    let mut block = String::from("domain: d\ndescriptors:\n");
    // (Block style indents each level: 1,000 levels, well past the limit of 128, keep the
    // text to a megabyte.)
    for depth in 0..1_000 {
        let indent = " ".repeat(depth * 2);
        block.push_str(&format!("{indent}- key: a\n{indent}  descriptors:\n"));
    }
    for text in [
        flow,
        block,
        "[".repeat(50_000),
        format!("{}x{}", "{a: ".repeat(50_000), "}".repeat(50_000)),
    ] {
        let err = Config::parse(&text, "deep.yaml").expect_err("too deep");
        assert!(err.line().is_some(), "{err}");
        assert!(err.to_string().starts_with("deep.yaml:"), "{err}");
    }
}

#[tokio::test]
async fn absurd_units_in_a_request_override_are_invalid_arguments() {
    let running = start(Memory::new(), CONFIG).await;
    for unit in [99, -1, i32::MIN, i32::MAX] {
        let mut r = request("api", &[("client", "o")]);
        r.descriptors[0].limit = Some(PbOverride {
            requests_per_unit: 5,
            unit,
        });
        let err = running.grpc(r).await.unwrap_err();
        assert_status(
            &err,
            tonic::Code::InvalidArgument,
            &["unit", &unit.to_string()],
        );
    }
    for (limit, names) in [
        (
            r#"{"requests_per_unit":5,"unit":"EON"}"#,
            &["unit", "EON"][..],
        ),
        (r#"{"requests_per_unit":5,"unit":99}"#, &["99"]),
        (r#"{"requests_per_unit":-1,"unit":"SECOND"}"#, &["-1"]),
        (
            r#"{"requests_per_unit":4294967296,"unit":"SECOND"}"#,
            &["4294967296"],
        ),
        (r#"{"requests_per_unit":5}"#, &["unit"]),
    ] {
        let body = format!(
            r#"{{"domain":"api","descriptors":[{{"entries":[{{"key":"client","value":"o"}}],"limit":{limit}}}]}}"#
        );
        let (status, answer) = running.json(body).await;
        assert_eq!(status, 400, "{limit}: {answer}");
        for name in names {
            assert!(answer.contains(name), "`{name}` not in {answer}");
        }
    }
    running.still_serving().await;
    running.stop().await;
}
