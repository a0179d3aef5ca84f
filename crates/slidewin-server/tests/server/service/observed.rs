//! What the service shows of itself: one name per rule in the fields, JSON, metrics and
//! stats; descriptors that match no rule; the keys denied most.

use super::*;

/// Issue 30: the README's `/search` rule was `example.path__search` in the `RateLimit` fields,
/// `path_/search` in `currentLimit.name` and on the dashboard, and `example.path_/search` in
/// the metrics. Each limit now has one name, the same in every place.
#[tokio::test]
async fn issue_30_one_name_per_rule_in_fields_json_metrics_and_stats() {
    let yaml = "\
domain: example
descriptors:
  - key: path
    value: /search
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: user
    rate_limit: {name: search, quota: 5/minute}
";
    let running = start(Memory::new(), yaml, true).await;
    for (key, value, name) in [
        ("path", "/search", "path__search"),
        ("user", "ann", "search"),
    ] {
        let request = format!(
            r#"{{"domain":"example","descriptors":[{{"entries":[{{"key":"{key}","value":"{value}"}}]}}]}}"#
        );
        let (status, headers, body) = running.http("POST", "/json", request).await;
        assert_eq!(status, 200, "{body}");
        let quoted = format!("\"{name}\";");
        for field in ["ratelimit-policy", "ratelimit"] {
            let value = headers[field].to_str().unwrap();
            assert!(value.starts_with(&quoted), "{field}: {value}");
        }
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["statuses"][0]["currentLimit"]["name"], name);
    }
    let (_, _, metrics) = running.http("GET", "/metrics", "").await;
    for name in ["path__search", "search"] {
        let series =
            format!(r#"slidewin_rate_limit_total_hits_total{{domain="example",rule="{name}"}} 1"#);
        assert!(metrics.contains(&series), "{metrics}");
    }
    let (_, _, stats) = running.http("GET", "/api/stats", "").await;
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    let names: Vec<&str> = stats["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| rule["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["path__search", "search"]);
    running.stop().await;
}

/// Issue 31: a descriptor that matches no rule is answered OK, as envoy ratelimit answers it,
/// and counted, so that a typo in the config or the client shows: by domain when the config
/// has the domain, and without the domain's text (which clients choose) when it does not.
/// The unknown domains' series is there before the first (its counter is held, not looked up).
#[tokio::test]
async fn issue_31_descriptors_that_match_no_rule_are_counted() {
    let running = start(Memory::new(), CONFIG, true).await;
    // Shown from the start, at 0, so that a rate over it has a first point.
    let (_, _, metrics) = running.http("GET", "/metrics", "").await;
    assert!(
        metrics.contains(
            r#"slidewin_descriptors_unmatched_total{domain="",reason="unknown_domain"} 0"#
        ),
        "{metrics}"
    );
    for (domain, key) in [("api", "clinet"), ("api", "client"), ("apii", "client")] {
        let body = format!(
            r#"{{"domain":"{domain}","descriptors":[{{"entries":[{{"key":"{key}","value":"v"}}]}},{{"entries":[{{"key":"nope","value":"v"}}]}}]}}"#
        );
        let (status, _, answer) = running.http("POST", "/json", body).await;
        assert_eq!(status, 200, "{answer}");
    }
    let (_, _, metrics) = running.http("GET", "/metrics", "").await;
    // In `api`: `clinet` once and `nope` twice; both of `apii`'s.
    assert!(
        metrics
            .contains(r#"slidewin_descriptors_unmatched_total{domain="api",reason="no_rule"} 3"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            r#"slidewin_descriptors_unmatched_total{domain="",reason="unknown_domain"} 2"#
        ),
        "{metrics}"
    );
    assert!(
        !metrics.contains("apii"),
        "a client's domain is never a label"
    );
    running.stop().await;
}

/// Issue 31 (envoyproxy/ratelimit#286): "who was limited" is answered on `/metrics` by the
/// keys denied most, ranked, in a fixed number of series, without a label per key otherwise.
#[tokio::test]
async fn issue_31_the_keys_denied_most_are_ranked_series() {
    let running = start(Memory::new(), CONFIG, true).await;
    // ann: 3 admitted, then 4 denied; bo: 3 admitted, then 1 denied.
    for (value, times) in [("ann", 7), ("bo", 4)] {
        for _ in 0..times {
            running
                .http("POST", "/json", json_request("client", value))
                .await;
        }
    }
    let (_, _, metrics) = running.http("GET", "/metrics", "").await;
    // A family's series come in no set order: sorted, rank 1 first.
    let mut ranked: Vec<&str> = metrics
        .lines()
        .filter(|line| line.starts_with("slidewin_top_denied_keys{"))
        .collect();
    ranked.sort_unstable();
    assert_eq!(
        ranked,
        [
            r#"slidewin_top_denied_keys{rank="1",domain="api",rule="client",limit="client",key="client=ann"} 4"#,
            r#"slidewin_top_denied_keys{rank="2",domain="api",rule="client",limit="client",key="client=bo"} 1"#,
        ],
        "{metrics}"
    );
    running.stop().await;
}
