//! The draft's `pk` (a request's partition, as a keyed digest) and `qu` (what the costs
//! count) on the layer's fields, in memory and on Redis (whose checks wait: the other path).

use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use http::{Request, Response, StatusCode};
use sfv::{BareItem, Parser};
use slidewin::Moment;
use slidewin::limit::{Kind, Rule, RuleSet};
use slidewin::time::ManualClock;
use slidewin_http::{
    Backend, HttpConfigError, Key, Limit, Memory, PartitionKeys, QuotaUnit, RateLimitFields,
    RateLimitLayer, RequestKey,
};
use slidewin_redis::RedisLimiter;
use slidewin_store::Redis;
use slidewin_test_support::redis::RedisServer;
use tower::ServiceExt;

const SECRET: &[u8] = b"a secret the fleet shares, 32 b";

fn rules(quota: &str) -> RuleSet {
    RuleSet::from(Rule::new("api", Kind::SlidingLog, quota.parse().unwrap()).unwrap())
}

fn app<B: Backend>(backend: B) -> Router {
    let limit = Limit::new(rules("2/minute"))
        .key(Key::header("x-api-key".parse().unwrap()))
        .partition_keys(PartitionKeys::new(SECRET).unwrap());
    let layer = RateLimitLayer::builder(backend)
        .clock(ManualClock::new(Moment::from_secs(1_700_000_000)))
        .limit(limit)
        .build()
        .unwrap();
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

async fn call(app: &Router, api_key: &str) -> Response<Body> {
    let mut request = Request::get("/")
        .header("x-api-key", api_key)
        .body(Body::empty())
        .unwrap();
    let peer: SocketAddr = "203.0.113.7:4000".parse().unwrap();
    request.extensions_mut().insert(ConnectInfo(peer));
    app.clone().oneshot(request).await.unwrap()
}

/// The `RateLimit` member's `pk`, parsed back as a byte sequence.
fn pk(response: &Response<Body>) -> Vec<u8> {
    let field = response.headers()["ratelimit"].as_bytes();
    let list: sfv::List = Parser::new(field).parse_list().expect("a structured list");
    let sfv::ListEntry::Item(item) = &list[0] else {
        panic!("an item")
    };
    match item.params.get("pk") {
        Some(BareItem::ByteSequence(bytes)) => bytes.clone(),
        other => panic!("no byte sequence pk: {other:?}"),
    }
}

/// One key, one `pk`, on its admissions and on its refusal; another key, another; neither
/// shows the key; the digest is the one `PartitionKeys` gives.
async fn names_each_partition_by_its_digest<B: Backend>(backend: B) {
    let app = app(backend);
    let first = call(&app, "alice-key").await;
    let again = call(&app, "alice-key").await;
    let refused = call(&app, "alice-key").await;
    let other = call(&app, "bob-key").await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(pk(&first), pk(&again));
    assert_eq!(pk(&first), pk(&refused));
    assert_ne!(pk(&first), pk(&other));
    let keys = PartitionKeys::new(SECRET).unwrap();
    assert_eq!(pk(&first), keys.digest(RequestKey::Text("alice-key")));
    assert_eq!(pk(&first).len(), PartitionKeys::DIGEST_BYTES);
    let field = first.headers()["ratelimit"].to_str().unwrap();
    assert!(!field.contains("alice"), "{field}");
    // The policy is the same for every key, as the draft expects of it.
    assert_eq!(
        first.headers()["ratelimit-policy"],
        other.headers()["ratelimit-policy"]
    );
}

#[tokio::test]
async fn issue_33_pk_names_each_partition_by_its_digest_in_memory() {
    names_each_partition_by_its_digest(Memory::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_33_pk_names_each_partition_by_its_digest_on_redis() {
    let server = RedisServer::start();
    let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
    names_each_partition_by_its_digest(Redis::new(limiter).with_layer_clock()).await;
}

#[test]
fn a_partition_key_depends_on_the_secret_and_the_kind_of_key() {
    let ours = PartitionKeys::new(SECRET).unwrap();
    let theirs = PartitionKeys::new(b"another secret of 16+ bytes").unwrap();
    let text = RequestKey::Text("198.51.100.1");
    let address = RequestKey::Address("198.51.100.1".parse().unwrap());
    assert_ne!(ours.digest(text), theirs.digest(text));
    assert_ne!(ours.digest(text), ours.digest(address));
    assert_eq!(
        format!("{ours:?}"),
        "PartitionKeys { .. }",
        "never the secret"
    );
}

#[test]
fn a_short_secret_is_refused_naming_the_bound() {
    let err = PartitionKeys::new(&SECRET[..15]).unwrap_err();
    assert_eq!(err, HttpConfigError::ShortSecret { len: 15, min: 16 });
    assert!(err.to_string().contains("at least 16"), "{err}");
    assert!(PartitionKeys::new(&SECRET[..16]).is_ok());
    assert!(PartitionKeys::new(b"").is_err());
}

#[test]
fn qu_names_content_bytes_and_leases_concurrent_requests() {
    let bytes = RateLimitFields::with_unit(&rules("1000/s"), QuotaUnit::ContentBytes).unwrap();
    assert_eq!(bytes.policy(), r#""api";q=1000;w=1;qu="content-bytes""#);
    let requests = RateLimitFields::with_unit(&rules("1000/s"), QuotaUnit::Requests).unwrap();
    assert_eq!(
        requests.policy(),
        r#""api";q=1000;w=1"#,
        "the default unnamed"
    );
    let leases = RuleSet::from(Rule::new("held", Kind::Leases, "3/30s".parse().unwrap()).unwrap());
    for unit in [QuotaUnit::Requests, QuotaUnit::ConcurrentRequests] {
        let fields = RateLimitFields::with_unit(&leases, unit).unwrap();
        assert_eq!(fields.policy(), r#""held";q=3;qu="concurrent-requests""#);
    }
}

#[test]
fn a_unit_its_rules_cannot_count_is_refused() {
    let err = RateLimitFields::with_unit(&rules("5/s"), QuotaUnit::ConcurrentRequests).unwrap_err();
    assert_eq!(
        err,
        HttpConfigError::QuotaUnit {
            rule: "api".into(),
            unit: "concurrent-requests"
        }
    );
    let leases = RuleSet::from(Rule::new("held", Kind::Leases, "3/30s".parse().unwrap()).unwrap());
    assert!(RateLimitFields::with_unit(&leases, QuotaUnit::ContentBytes).is_err());
    // And by the layer, when it is built.
    let limit = Limit::new(rules("5/s")).quota_unit(QuotaUnit::ConcurrentRequests);
    let built = RateLimitLayer::builder(Memory::new()).limit(limit).build();
    assert!(matches!(built, Err(HttpConfigError::QuotaUnit { .. })));
}
