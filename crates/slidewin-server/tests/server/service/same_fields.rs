//! Issue 30: the service and the layer chose the binding limit by different rules, so for the
//! same rules they could name different limits in `RateLimit`, and one 429 carried `t=57`
//! beside `Retry-After: 49`. Both now use the core's `Binding`: for the same rule set and the
//! same history they send the same `RateLimit-Policy`, `RateLimit` and `Retry-After`, and a
//! denial's `t` is its `Retry-After`.

use super::*;
use axum::Router;
use axum::routing::get;
use proptest::prelude::*;
use slidewin::limit::{Kind, Rule, RuleSet};
use slidewin_http::{Key, Limit, RateLimitLayer};
use slidewin_server::{Code, Entry, RateLimitRequest, RequestDescriptor};
use tower::ServiceExt;

const KINDS: [Kind; 4] = [
    Kind::SlidingLog,
    Kind::SlidingCounter,
    Kind::FixedWindow,
    Kind::Gcra,
];

#[derive(Clone, Debug)]
struct Spec {
    kind: Kind,
    limit: u64,
    span_secs: u64,
    shadow: bool,
}

fn spec() -> impl Strategy<Value = Spec> {
    (0..KINDS.len(), 3u64..8, 1u64..6, prop::bool::weighted(0.3)).prop_map(
        |(kind, limit, span_secs, shadow)| Spec {
            kind: KINDS[kind],
            limit,
            span_secs,
            shadow,
        },
    )
}

/// The config: the enforced rules in one `limits` list, the shadow ones in another.
fn yaml(specs: &[Spec]) -> String {
    let mut text = String::from("domain: p\ndescriptors:\n");
    for (key, shadow) in [("enforced", false), ("watched", true)] {
        let part: Vec<(usize, &Spec)> = specs
            .iter()
            .enumerate()
            .filter(|(_, s)| s.shadow == shadow)
            .collect();
        if part.is_empty() {
            continue;
        }
        text += &format!("  - key: {key}\n    shadow_mode: {shadow}\n    limits:\n");
        for (i, s) in part {
            text += &format!(
                "      - {{name: r{i}, quota: {} per {} seconds, algorithm: {}}}\n",
                s.limit,
                s.span_secs,
                s.kind.name()
            );
        }
    }
    text
}

fn layer_of(specs: &[Spec], clock: &ManualClock) -> Router {
    let rules = specs.iter().enumerate().map(|(i, s)| {
        let quota = format!("{} per {} seconds", s.limit, s.span_secs);
        Rule::new(&format!("r{i}"), s.kind, quota.parse().unwrap()).unwrap()
    });
    // The layer lists its policies in its rules' order: enforced first, as the config.
    let (enforced, shadow): (Vec<_>, Vec<_>) = rules.zip(specs).partition(|(_, s)| !s.shadow);
    let mut limit =
        Limit::new(RuleSet::new(enforced.iter().chain(&shadow).map(|(r, _)| r.clone())).unwrap())
            .key(Key::global())
            .cost_fn(|parts| parts.headers["x-cost"].to_str().unwrap().parse().unwrap());
    for (rule, _) in &shadow {
        limit = limit.shadow(rule.name()).unwrap();
    }
    let layer = RateLimitLayer::builder(Memory::new())
        .clock(clock.clone())
        .limit(limit)
        .build()
        .unwrap();
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

fn request(specs: &[Spec], cost: u64) -> RateLimitRequest {
    let mut descriptors = Vec::new();
    for (key, shadow) in [("enforced", false), ("watched", true)] {
        if specs.iter().any(|s| s.shadow == shadow) {
            descriptors.push(RequestDescriptor::new(vec![Entry::new(key, "v")]));
        }
    }
    let mut request = RateLimitRequest::new("p", descriptors);
    request.hits_addend = cost;
    request
}

type Fields = (bool, Option<String>, Option<String>, Option<String>);

fn field(value: Option<&http::HeaderValue>) -> Option<String> {
    value.map(|v| v.to_str().unwrap().to_owned())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_layer_and_the_service_send_the_same_fields(
        specs in prop::collection::vec(spec(), 1..4),
        history in prop::collection::vec((0u64..2_500, 1u64..4), 1..40),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let clock = ManualClock::new(Moment::from_secs(1_000));
            let config = Config::parse(&yaml(&specs), "p.yaml").unwrap();
            let engine = Engine::new(
                Memory::new(),
                config,
                Arc::new(clock.clone()),
                Bounds::default(),
                Metrics::new(),
            )
            .unwrap();
            let layer = layer_of(&specs, &clock);
            for (step, (wait_ms, cost)) in history.into_iter().enumerate() {
                clock.advance(Duration::from_millis(wait_ms));
                let answer = engine.should_rate_limit(&request(&specs, cost)).await.unwrap();
                let header = |name: &str| {
                    answer.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v)
                };
                let service: Fields = (
                    answer.overall_code == Code::OverLimit,
                    field(header("ratelimit-policy")),
                    field(header("ratelimit")),
                    field(header("retry-after")),
                );
                let http = http::Request::get("/")
                    .header("x-cost", cost)
                    .body(axum::body::Body::empty())
                    .unwrap();
                let response = layer.clone().oneshot(http).await.unwrap();
                let headers = response.headers();
                let layer_fields: Fields = (
                    response.status() == http::StatusCode::TOO_MANY_REQUESTS,
                    field(headers.get("ratelimit-policy")),
                    field(headers.get("ratelimit")),
                    field(headers.get("retry-after")),
                );
                prop_assert_eq!(&service, &layer_fields, "step {}", step);
                if let (Some(limit), Some(retry)) = (&service.2, &service.3) {
                    prop_assert!(limit.ends_with(&format!(";t={retry}")), "{} {}", limit, retry);
                }
            }
            Ok(())
        })?;
    }
}
