//! envoyproxy/ratelimit's README examples as facts, and our own semantics, checked against the
//! engine. Each body runs twice through one macro: on the memory backend and on a Redis of its
//! own (on the engine's `ManualClock`), and must give the same answers on both.
//!
//! The example configs are in `tests/examples/`, copied unchanged from that README: that they
//! load as they are is half the point. Where a README decision rests on a fixed window's reset,
//! the test checks our sliding window instead, and says so.

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use proptest::prelude::*;
use proptest::test_runner::{RngSeed, TestCaseError};
use sfv::{BareItem, List, ListEntry, Parser};
use slidewin::Moment;
use slidewin::time::ManualClock;
use slidewin_redis::RedisLimiter;
use slidewin_server::{
    Bounds, Code, Config, DescriptorStatus, Engine, Entry, FailurePolicy, RateLimitRequest,
    RateLimitResponse, RequestDescriptor, RequestError, Unit,
};
use slidewin_store::{Backend, Memory, Redis};
use slidewin_test_support::redis::RedisServer;

/// A moment well inside Redis's exact range, as Unix time, on a whole second.
const START: Moment = Moment::from_secs(1_700_000_000);

const EXAMPLE1: &str = include_str!("../examples/example1_mongo_cps.yaml");
const EXAMPLE2: &str = include_str!("../examples/example2_messaging.yaml");
const EXAMPLE3: &str = include_str!("../examples/example3_edge_proxy_per_ip.yaml");
const EXAMPLE4_NOT_MATCHING: &str = include_str!("../examples/example4_not_matching.yaml");
const EXAMPLE4_MATCHING: &str = include_str!("../examples/example4_matching.yaml");
const EXAMPLE5: &str = include_str!("../examples/example5_internal.yaml");
const EXAMPLE6: &str = include_str!("../examples/example6_shadow_mode.yaml");
const EXAMPLE7: &str = include_str!("../examples/example7_replaces.yaml");
const EXAMPLE8: &str = include_str!("../examples/example8_detailed_metric.yaml");
const EXAMPLE9_TRAILING: &str = include_str!("../examples/example9_trailing_wildcard.yaml");
const EXAMPLE9_MIDDLE: &str = include_str!("../examples/example9_middle_wildcard.yaml");
const EXAMPLE9_MULTIPLE: &str = include_str!("../examples/example9_multiple_wildcards.yaml");
const EXAMPLE10: &str = include_str!("../examples/example10_value_to_metric.yaml");
const EXAMPLE10_WILDCARD: &str =
    include_str!("../examples/example10_value_to_metric_wildcard.yaml");
const EXAMPLE11: &str = include_str!("../examples/example11_share_threshold.yaml");
const EXAMPLE11_METRICS: &str = include_str!("../examples/example11_share_threshold_metrics.yaml");

/// Where a test's engines keep their counts: each call a new backend (on Redis, a new
/// connection to the test's one server).
trait Setup {
    type B: Backend;
    async fn backend(&self) -> Self::B;
}

struct OnMemory;

impl Setup for OnMemory {
    type B = Memory;
    async fn backend(&self) -> Memory {
        Memory::new()
    }
}

/// A Redis server of the test's own, stopped when the test ends.
struct OnRedis {
    server: RedisServer,
}

impl OnRedis {
    fn start() -> OnRedis {
        OnRedis {
            server: RedisServer::start(),
        }
    }
}

impl Setup for OnRedis {
    type B = Redis;
    async fn backend(&self) -> Redis {
        // No failure policy on the limiter: a Redis that fails is an error, never an answer.
        let limiter = RedisLimiter::connect(&self.server.url())
            .await
            .expect("the test's Redis");
        Redis::new(limiter.with_failure_policy(FailurePolicy::Open)).with_layer_clock()
    }
}

/// An engine on a clock the test moves.
struct Env<B: Backend> {
    engine: Engine<B>,
    clock: ManualClock,
}

async fn env<S: Setup>(setup: &S, yaml: &str) -> Env<S::B> {
    env_with(setup, yaml, Bounds::default()).await
}

async fn env_with<S: Setup>(setup: &S, yaml: &str, bounds: Bounds) -> Env<S::B> {
    build(setup.backend().await, parse(yaml), bounds)
}

fn parse(yaml: &str) -> Config {
    Config::parse(yaml, "test.yaml").unwrap_or_else(|e| panic!("the config loads: {e}"))
}

fn build<B: Backend>(backend: B, config: Config, bounds: Bounds) -> Env<B> {
    let clock = ManualClock::new(START);
    let engine = Engine::new(
        backend,
        config,
        Arc::new(clock.clone()),
        bounds,
        slidewin_server::Metrics::new(),
    )
    .expect("the engine starts");
    Env { engine, clock }
}

/// A request of `descriptors` in `domain`, one hit each.
fn request(domain: &str, descriptors: &[&[(&str, &str)]]) -> RateLimitRequest {
    RateLimitRequest::new(
        domain,
        descriptors
            .iter()
            .map(|entries| {
                RequestDescriptor::new(entries.iter().map(|(k, v)| Entry::new(k, v)).collect())
            })
            .collect(),
    )
}

impl<B: Backend> Env<B> {
    async fn ask(&self, request: &RateLimitRequest) -> RateLimitResponse {
        self.engine
            .should_rate_limit(request)
            .await
            .unwrap_or_else(|e| panic!("{request:?}: {e}"))
    }

    async fn hit(&self, domain: &str, descriptors: &[&[(&str, &str)]]) -> RateLimitResponse {
        self.ask(&request(domain, descriptors)).await
    }

    /// A request of one descriptor: its status, which is the overall code too.
    async fn one(&self, domain: &str, entries: &[(&str, &str)]) -> DescriptorStatus {
        let response = self.hit(domain, &[entries]).await;
        assert_eq!(response.statuses.len(), 1);
        let status = response.statuses.into_iter().next().expect("one status");
        assert_eq!(response.overall_code, status.code, "{entries:?}");
        status
    }

    /// `n` requests of one descriptor, each admitted.
    async fn admit(&self, domain: &str, entries: &[(&str, &str)], n: u32) {
        for i in 1..=n {
            let status = self.one(domain, entries).await;
            assert_eq!(status.code, Code::Ok, "request {i} of {n} for {entries:?}");
        }
    }

    /// One request of one descriptor, which must be over the limit.
    async fn deny(&self, domain: &str, entries: &[(&str, &str)]) -> DescriptorStatus {
        let status = self.one(domain, entries).await;
        assert_eq!(status.code, Code::OverLimit, "{entries:?}: {status:?}");
        status
    }

    fn advance_ms(&self, ms: u64) {
        self.clock.advance(Duration::from_millis(ms));
    }

    fn metrics(&self) -> String {
        self.engine.metrics().encode()
    }
}

/// A descriptor's entries, as the tests write them.
type Entries<'a> = &'a [(&'a str, &'a str)];

/// The limit that decided: requests per unit and unit.
fn limit(status: &DescriptorStatus) -> (u32, Option<Unit>) {
    let limit = status
        .current_limit
        .as_ref()
        .unwrap_or_else(|| panic!("a limit in {status:?}"));
    (limit.requests_per_unit, limit.unit)
}

fn limit_name(status: &DescriptorStatus) -> &str {
    &status.current_limit.as_ref().expect("a limit").name
}

/// The status of a descriptor no limit applies to.
fn no_limit(status: &DescriptorStatus) {
    assert_eq!(status.code, Code::Ok, "{status:?}");
    assert_eq!(status.current_limit, None, "{status:?}");
}

/// The one value of header `name`, if any (never two).
fn header<'a>(response: &'a RateLimitResponse, name: &str) -> Option<&'a str> {
    let mut found = response.headers.iter().filter(|(n, _)| n.as_str() == name);
    let first = found.next().map(|(_, v)| v.to_str().expect("ASCII"));
    assert!(
        found.next().is_none(),
        "one {name} in {:?}",
        response.headers
    );
    first
}

/// A `RateLimit` or `RateLimit-Policy` field parsed as a client would, with `sfv`: each
/// member's name and its parameters, which must be Integers.
fn fields(field: &str) -> Vec<(String, Vec<(String, i64)>)> {
    let list: List = Parser::new(field)
        .parse()
        .unwrap_or_else(|e| panic!("`{field}` is no structured List: {e:?}"));
    let mut out = Vec::new();
    for member in &list {
        let ListEntry::Item(item) = member else {
            panic!("an inner list in `{field}`");
        };
        let BareItem::String(name) = &item.bare_item else {
            panic!("a member of `{field}` whose name is no String");
        };
        let mut params = Vec::new();
        for (key, value) in &item.params {
            let BareItem::Integer(n) = value else {
                panic!("a parameter of `{field}` that is no Integer");
            };
            params.push((key.as_str().to_owned(), i64::from(*n)));
        }
        out.push((name.as_str().to_owned(), params));
    }
    out
}

fn member(name: &str, params: &[(&str, i64)]) -> (String, Vec<(String, i64)>) {
    (
        name.to_owned(),
        params.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
    )
}

/// Runs each body, a function generic over its [`Setup`], as a test on memory
/// (`$group::memory::…`) and as one on a Redis of the test's own (`$group::redis::…`).
macro_rules! on_both_backends {
    ($group:ident: $($name:ident),* $(,)?) => {
        mod $group {
            mod memory {
                $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::super::$name(super::super::OnMemory).await;
                })*
            }
            mod redis {
                $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::super::$name(super::super::OnRedis::start()).await;
                })*
            }
        }
    };
}

on_both_backends! {
    examples:
    example1_two_values_of_one_key,
    example2_nested_and_multiple_descriptors,
    example3_value_before_key,
    example4_depth_must_match,
    example5_unlimited,
    example6_shadow_mode,
    example7_replaces,
    example8_detailed_metric,
    example9_wildcards,
    example10_value_to_metric,
    example11_share_threshold,
    example11_share_threshold_above_the_limit,
}

/// Example 1: two values of one key, 500 per second each, counted apart; a value the config
/// does not name matches nothing.
async fn example1_two_values_of_one_key<S: Setup>(s: S) {
    let e = env(&s, EXAMPLE1).await;
    // Half a second into a second: envoy's fixed window would reset 500 ms from here.
    e.advance_ms(500);
    let users = [("database", "users")];
    let first = e.one("mongo_cps", &users).await;
    assert_eq!(first.code, Code::Ok);
    assert_eq!(limit(&first), (500, Some(Unit::Second)));
    assert_eq!(limit_name(&first), "database_users");
    assert_eq!(first.limit_remaining, 499);
    e.admit("mongo_cps", &users, 499).await;
    assert_eq!(e.deny("mongo_cps", &users).await.limit_remaining, 0);

    let default = e.one("mongo_cps", &[("database", "default")]).await;
    assert_eq!((default.code, default.limit_remaining), (Code::Ok, 499));
    assert_eq!(limit(&default), (500, Some(Unit::Second)));
    no_limit(&e.one("mongo_cps", &[("database", "orders")]).await);

    // Sliding, not fixed: still over at the next second's start, and 999 ms after the
    // 500 admissions; admitted a whole second after them.
    e.advance_ms(500);
    e.deny("mongo_cps", &users).await;
    e.advance_ms(499);
    e.deny("mongo_cps", &users).await;
    e.advance_ms(1);
    assert_eq!(e.one("mongo_cps", &users).await.limit_remaining, 499);
}

/// Example 2: nested descriptors (5 marketing messages a day per number) and a limit per
/// number (100 a day); a request of both is over when either is (a logical OR), and each
/// number has its own counts.
async fn example2_nested_and_multiple_descriptors<S: Setup>(s: S) {
    let e = env(&s, EXAMPLE2).await;
    let marketing = [("message_type", "marketing"), ("to_number", "2061111111")];
    let number = [("to_number", "2061111111")];
    for i in 1..=5 {
        let r = e.hit("messaging", &[&marketing, &number]).await;
        assert_eq!(r.overall_code, Code::Ok, "request {i}");
        assert_eq!(limit(&r.statuses[0]), (5, Some(Unit::Day)));
        assert_eq!(limit(&r.statuses[1]), (100, Some(Unit::Day)));
        assert_eq!(r.statuses[0].limit_remaining, 5 - i);
        assert_eq!(r.statuses[1].limit_remaining, 100 - i);
    }
    let sixth = e.hit("messaging", &[&marketing, &number]).await;
    assert_eq!(sixth.overall_code, Code::OverLimit);
    assert_eq!(sixth.statuses[0].code, Code::OverLimit);
    assert_eq!(sixth.statuses[1].code, Code::Ok);
    // Each descriptor is decided on its own: the admitted one counted this request.
    assert_eq!(sixth.statuses[1].limit_remaining, 94);

    // Any value of to_number gets its own 5 marketing messages.
    let other = e
        .one(
            "messaging",
            &[("message_type", "marketing"), ("to_number", "2062222222")],
        )
        .await;
    assert_eq!((other.code, other.limit_remaining), (Code::Ok, 4));
    // Another message type matches nothing.
    no_limit(
        &e.one(
            "messaging",
            &[
                ("message_type", "transactional"),
                ("to_number", "2061111111"),
            ],
        )
        .await,
    );

    // The 100 a day of the first number: 94 left.
    e.admit("messaging", &number, 94).await;
    e.deny("messaging", &number).await;
    let second_number = e.one("messaging", &[("to_number", "2062222222")]).await;
    assert_eq!(second_number.limit_remaining, 99);

    // Sliding: a day after the first admissions, not at midnight.
    e.advance_ms(86_400_000 - 1);
    e.deny("messaging", &marketing).await;
    e.advance_ms(1);
    assert_eq!(e.one("messaging", &marketing).await.limit_remaining, 4);
}

/// Example 3: a key's value is matched before the key alone: 10 per second per address,
/// and 0 (always over) for the address listed.
async fn example3_value_before_key<S: Setup>(s: S) {
    let e = env(&s, EXAMPLE3).await;
    let ip = [("remote_address", "50.0.0.1")];
    let first = e.one("edge_proxy_per_ip", &ip).await;
    assert_eq!(limit(&first), (10, Some(Unit::Second)));
    assert_eq!(first.limit_remaining, 9);
    e.admit("edge_proxy_per_ip", &ip, 9).await;
    e.deny("edge_proxy_per_ip", &ip).await;

    let listed = [("remote_address", "50.0.0.5")];
    for _ in 0..3 {
        let status = e.deny("edge_proxy_per_ip", &listed).await;
        assert_eq!(limit(&status), (0, Some(Unit::Second)));
        assert_eq!(status.limit_remaining, 0);
        e.advance_ms(1_000);
    }
    let other = e
        .one("edge_proxy_per_ip", &[("remote_address", "50.0.0.2")])
        .await;
    assert_eq!((other.code, other.limit_remaining), (Code::Ok, 9));
}

/// Example 4: a request's descriptor matches a config entry at the same depth only.
async fn example4_depth_must_match<S: Setup>(s: S) {
    let two = [("key", "value"), ("subkey", "subvalue")];
    let flat = env(&s, EXAMPLE4_NOT_MATCHING).await;
    no_limit(&flat.one("example4", &two).await);
    assert_eq!(
        limit(&flat.one("example4", &[("key", "value")]).await),
        (300, Some(Unit::Second))
    );

    let nested = env(&s, EXAMPLE4_MATCHING).await;
    let first = nested.one("example4", &two).await;
    assert_eq!(limit(&first), (300, Some(Unit::Second)));
    assert_eq!(first.limit_remaining, 299);
    nested.admit("example4", &two, 299).await;
    nested.deny("example4", &two).await;
    // The first level alone is a placeholder with no limit.
    no_limit(&nested.one("example4", &[("key", "value")]).await);
    // Any subkey value: its own 300.
    let other = nested
        .one("example4", &[("key", "value"), ("subkey", "other")])
        .await;
    assert_eq!(other.limit_remaining, 299);
}

/// Example 5: an unlimited descriptor is always OK with `LimitRemaining` at `MaxUint32` and no
/// current limit, unlike a descriptor no config entry matches.
async fn example5_unlimited<S: Setup>(s: S) {
    let e = env(&s, EXAMPLE5).await;
    for _ in 0..1_000 {
        let ldap = e.one("internal", &[("ldap", "bind")]).await;
        assert_eq!(ldap.code, Code::Ok);
        assert_eq!(ldap.limit_remaining, u32::MAX);
        assert_eq!(ldap.current_limit, None);
    }
    let azure = [("azure", "blob")];
    assert_eq!(
        limit(&e.one("internal", &azure).await),
        (100, Some(Unit::Minute))
    );
    e.admit("internal", &azure, 99).await;
    e.deny("internal", &azure).await;
    // Both in one request: the limited one decides; the unlimited one stays unlimited.
    let both = e.hit("internal", &[&[("ldap", "bind")], &azure]).await;
    assert_eq!(both.overall_code, Code::OverLimit);
    assert_eq!(
        (both.statuses[0].code, both.statuses[0].limit_remaining),
        (Code::Ok, u32::MAX)
    );
    let unknown = e.one("internal", &[("gcp", "bucket")]).await;
    no_limit(&unknown);
    assert_eq!(unknown.limit_remaining, 0);
}

/// Example 6: a shadow-mode limit never denies, and its breaches are counted; the other
/// user's limit denies.
async fn example6_shadow_mode<S: Setup>(s: S) {
    let e = env(&s, EXAMPLE6).await;
    let user_a = [("service", "auth-service"), ("user", "user-a")];
    for i in 1..=30 {
        let r = e.hit("example6", &[&user_a]).await;
        assert_eq!(r.overall_code, Code::Ok, "request {i}");
        assert_eq!(r.statuses[0].code, Code::Ok);
        assert_eq!(limit(&r.statuses[0]), (10, Some(Unit::Second)));
        assert_eq!(
            header(&r, "retry-after"),
            None,
            "shadow mode admits: no Retry-After"
        );
    }
    let metrics = e.metrics();
    let labels = r#"{domain="example6",rule="service.user_user-a"}"#;
    assert!(
        metrics.contains(&format!("slidewin_rate_limit_shadow_mode_total{labels} 20")),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!("slidewin_rate_limit_over_limit_total{labels} 20")),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!("slidewin_rate_limit_total_hits_total{labels} 30")),
        "{metrics}"
    );

    let user_b = [("service", "auth-service"), ("user", "user-b")];
    assert_eq!(
        limit(&e.one("example6", &user_b).await),
        (20, Some(Unit::Second))
    );
    e.admit("example6", &user_b, 19).await;
    e.deny("example6", &user_b).await;
    no_limit(
        &e.one(
            "example6",
            &[("service", "auth-service"), ("user", "user-c")],
        )
        .await,
    );
}

/// Example 7: a limit that replaces a named one drops it from the request, and the
/// replaced limit's counts are left as they were.
async fn example7_replaces<S: Setup>(s: S) {
    let e = env(&s, EXAMPLE7).await;
    let first = [("key_1", "value_1"), ("user", "bkthomps")];
    let second = [("key_2", "value_2"), ("user", "bkthomps")];
    for i in 1..=10 {
        let r = e.hit("example7", &[&first, &second]).await;
        assert_eq!(r.overall_code, Code::Ok, "request {i}");
        no_limit(&r.statuses[0]);
        assert_eq!(limit(&r.statuses[1]), (10, Some(Unit::Second)));
        assert_eq!(r.statuses[1].limit_remaining, 10 - i);
    }
    let r = e.hit("example7", &[&first, &second]).await;
    assert_eq!(r.overall_code, Code::OverLimit);
    no_limit(&r.statuses[0]);
    assert_eq!(r.statuses[1].code, Code::OverLimit);

    // The 5 per second of the replaced limit were never touched.
    let alone = e.one("example7", &first).await;
    assert_eq!(limit(&alone), (5, Some(Unit::Second)));
    assert_eq!(limit_name(&alone), "specific_limit");
    assert_eq!(alone.limit_remaining, 4);
    e.admit("example7", &first, 4).await;
    e.deny("example7", &first).await;

    e.advance_ms(1_000);
    let second_alone = e.one("example7", &second).await;
    assert_eq!(
        (limit(&second_alone), second_alone.limit_remaining),
        ((10, Some(Unit::Second)), 9)
    );
}

/// Example 8: a descriptor with no value counts each value apart, and a value named has
/// its own limit. (The README's list says "/ sec"; its config says minute, which is what
/// is tested.) `detailed_metric` counts each value's hits in a series of its own, as the
/// README's metric keys name them.
async fn example8_detailed_metric<S: Setup>(s: S) {
    let e = env(&s, EXAMPLE8).await;
    for value in ["unspecified_value", "unspecified_value2"] {
        let entries = [("key1", value)];
        assert_eq!(
            limit(&e.one("example8", &entries).await),
            (10, Some(Unit::Minute))
        );
        e.admit("example8", &entries, 9).await;
        e.deny("example8", &entries).await;
    }
    let value1 = [("key1", "value1")];
    assert_eq!(
        limit(&e.one("example8", &value1).await),
        (20, Some(Unit::Minute))
    );
    e.admit("example8", &value1, 19).await;
    e.deny("example8", &value1).await;
    let metrics = e.metrics();
    assert!(metrics.contains(r#"rule="key1""#), "{metrics}");
    for key in ["key1_unspecified_value", "key1_unspecified_value2"] {
        let series = format!(r#"descriptor="{key}",result="over_limit"}} 1"#);
        assert!(metrics.contains(&series), "{key}: {metrics}");
    }
}

/// Example 9: `*` at the end, in the middle, several times; each matched value counted
/// on its own.
async fn example9_wildcards<S: Setup>(s: S) {
    let trailing = env(&s, EXAMPLE9_TRAILING).await;
    for value in ["value1", "value2", "valueXYZ", "value"] {
        let status = trailing.one("example9", &[("key1", value)]).await;
        assert_eq!(
            (limit(&status), status.limit_remaining),
            ((20, Some(Unit::Minute)), 19),
            "{value}"
        );
    }
    for value in ["valu", "other", "xvalue1"] {
        no_limit(&trailing.one("example9", &[("key1", value)]).await);
    }
    trailing.admit("example9", &[("key1", "value1")], 19).await;
    trailing.deny("example9", &[("key1", "value1")]).await;
    assert_eq!(
        trailing.one("example9", &[("key1", "value2")]).await.code,
        Code::Ok
    );

    let middle = env(&s, EXAMPLE9_MIDDLE).await;
    for value in ["/api/123/action", "/api/user-id/action", "/api//action"] {
        assert_eq!(
            limit(&middle.one("example9", &[("path", value)]).await),
            (20, Some(Unit::Minute)),
            "{value}"
        );
    }
    for value in ["/api/123/other", "/api/action", "/v2/api/1/action"] {
        no_limit(&middle.one("example9", &[("path", value)]).await);
    }

    let multiple = env(&s, EXAMPLE9_MULTIPLE).await;
    for value in ["/api/v1/resource/123/action", "/api/v2/resource/456/action"] {
        assert_eq!(
            limit(&multiple.one("example9", &[("route", value)]).await),
            (20, Some(Unit::Minute)),
            "{value}"
        );
    }
    for value in ["/api/v1/resource/123/other", "/api/v1/other/123/action"] {
        no_limit(&multiple.one("example9", &[("route", value)]).await);
    }
}

/// Example 10: three levels without values: each combination of values counted on its
/// own; a wildcard in the middle level. `value_to_metric` puts the request's values in the
/// series beside the rule's, as the README's metric keys name them.
async fn example10_value_to_metric<S: Setup>(s: S) {
    let e = env(&s, EXAMPLE10).await;
    let api = [
        ("route", "api"),
        ("http_method", "GET"),
        ("subject_id", "123"),
    ];
    let web = [
        ("route", "web"),
        ("http_method", "POST"),
        ("subject_id", "456"),
    ];
    assert_eq!(
        limit(&e.one("example10", &api).await),
        (60, Some(Unit::Minute))
    );
    e.admit("example10", &api, 59).await;
    e.deny("example10", &api).await;
    assert_eq!(e.one("example10", &web).await.limit_remaining, 59);
    no_limit(
        &e.one("example10", &[("route", "api"), ("http_method", "GET")])
            .await,
    );
    let metrics = e.metrics();
    assert!(
        metrics.contains(r#"rule="route.http_method.subject_id""#),
        "{metrics}"
    );
    for key in [
        "route_api.http_method_GET.subject_id",
        "route_web.http_method_POST.subject_id",
    ] {
        assert!(
            metrics.contains(&format!(r#"descriptor="{key}""#)),
            "{key}: {metrics}"
        );
    }

    let w = env(&s, EXAMPLE10_WILDCARD).await;
    let read = [
        ("user", "alice"),
        ("action", "readfile"),
        ("resource", "documents"),
    ];
    let first = w.one("example10_wildcard", &read).await;
    assert_eq!(
        (limit(&first), first.limit_remaining),
        ((100, Some(Unit::Minute)), 99)
    );
    let metrics = w.metrics();
    let key = "user_alice.action_readfile.resource";
    assert!(
        metrics.contains(&format!(r#"descriptor="{key}""#)),
        "{metrics}"
    );
    no_limit(
        &w.one(
            "example10_wildcard",
            &[
                ("user", "alice"),
                ("action", "write"),
                ("resource", "documents"),
            ],
        )
        .await,
    );
}

/// Example 11: with `share_threshold`, every value a wildcard matches counts as one;
/// without it, each value is counted on its own.
async fn example11_share_threshold<S: Setup>(s: S) {
    let e = env(&s, EXAMPLE11).await;
    e.admit("example11", &[("files", "files/a.pdf")], 5).await;
    e.admit("example11", &[("files", "files/b.csv")], 5).await;
    let c = e.deny("example11", &[("files", "files/c.txt")]).await;
    assert_eq!(limit(&c), (10, Some(Unit::Hour)));

    e.admit(
        "example11",
        &[("files_no_share", "files_no_share/a.pdf")],
        10,
    )
    .await;
    e.deny("example11", &[("files_no_share", "files_no_share/a.pdf")])
        .await;
    e.admit(
        "example11",
        &[("files_no_share", "files_no_share/b.csv")],
        10,
    )
    .await;
    e.deny("example11", &[("files_no_share", "files_no_share/b.csv")])
        .await;
}

/// Example 11's second config: `share_threshold` on a wildcard level with the limit one
/// level below: every `api/*` route shares the method's 60 a minute (envoy ratelimit keeps
/// the pattern for the entry's index, whatever level the limit is at).
async fn example11_share_threshold_above_the_limit<S: Setup>(s: S) {
    let e = env(&s, EXAMPLE11_METRICS).await;
    let v1 = [("route", "api/v1"), ("method", "GET")];
    assert_eq!(
        limit(&e.one("example11_metrics", &v1).await),
        (60, Some(Unit::Minute))
    );
    e.admit("example11_metrics", &v1, 29).await;
    e.admit(
        "example11_metrics",
        &[("route", "api/v2"), ("method", "GET")],
        30,
    )
    .await;
    e.deny(
        "example11_metrics",
        &[("route", "api/v3"), ("method", "GET")],
    )
    .await;
    // Another method: its own 60.
    assert_eq!(
        e.one(
            "example11_metrics",
            &[("route", "api/v1"), ("method", "POST")]
        )
        .await
        .limit_remaining,
        59
    );
}

const FIVE_PER_SECOND: &str = "domain: edge
descriptors:
  - key: client
    rate_limit:
      unit: second
      requests_per_unit: 5
  - key: fixed
    rate_limit:
      unit: second
      requests_per_unit: 5
      algorithm: fixed_window
";

const LISTS: &str = "domain: lists
descriptors:
  - key: client
    limits:
      - {name: burst, unit: second, requests_per_unit: 2}
      - {name: hourly, unit: hour, requests_per_unit: 5}
";

const TEN_PER_MINUTE: &str = "domain: hits
descriptors:
  - key: client
    rate_limit: {unit: minute, requests_per_unit: 10}
";

const QUOTAS: &str = r#"domain: quotas
descriptors:
  - key: client
    rate_limit:
      quota: "5 per 10 seconds"
  - key: route
    rate_limit:
      quota: "7 per 60 seconds"
"#;

const HEADERS: &str = "domain: hdr
descriptors:
  - key: client
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: route
    rate_limit: {unit: minute, requests_per_unit: 10}
";

const BOUNDED: &str = "domain: b
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 100}
";

const CRAFTED: &str = "domain: crafted
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 1}
    descriptors:
      - key: j
        rate_limit: {unit: minute, requests_per_unit: 1}
";

const REPLACED_UNLIMITED: &str = "domain: r
descriptors:
  - key: internal
    rate_limit:
      name: free
      unlimited: true
  - key: client
    rate_limit:
      replaces:
        - name: free
      unit: second
      requests_per_unit: 5
";

const SHADOW_AND_ENFORCED: &str = "domain: sh
descriptors:
  - key: watch
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: client
    rate_limit: {unit: second, requests_per_unit: 1}
";

const UNQUOTED_VALUES: &str = "domain: unquoted
descriptors:
  - key: to_number
    value: 2061111111
    rate_limit: {unit: day, requests_per_unit: 5}
  - key: status
    value: 429
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: internal
    value: true
    rate_limit: {unit: minute, requests_per_unit: 2}
";

on_both_backends! {
    semantics:
    sliding_window_edge,
    fixed_window_admits_twice_the_limit_across_its_edge,
    limits_list_is_all_or_nothing,
    hits_addend,
    quota_of_any_span,
    unknown_domain_and_unmatched_descriptors,
    headers_name_the_policies_and_the_tightest,
    request_bounds,
    crafted_values_keep_to_their_own_counts,
    replaced_unlimited_limit_stays_unlimited,
    retry_after_comes_from_an_enforcing_limit,
    unquoted_scalar_values_load_as_text,
}

/// The window is `(now - span, now]`: 5 per second admitted at t, the 6th denied at
/// t + 999 ms, admitted at t + 1 s exactly.
async fn sliding_window_edge<S: Setup>(s: S) {
    let e = env(&s, FIVE_PER_SECOND).await;
    e.advance_ms(250);
    let ann = [("client", "ann")];
    for left in (0..5).rev() {
        let status = e.one("edge", &ann).await;
        assert_eq!((status.code, status.limit_remaining), (Code::Ok, left));
        assert_eq!(status.duration_until_reset, Some(Duration::from_secs(1)));
    }
    e.advance_ms(999);
    let denied = e.deny("edge", &ann).await;
    assert_eq!(denied.limit_remaining, 0);
    assert_eq!(denied.duration_until_reset, Some(Duration::from_millis(1)));
    e.advance_ms(1);
    let admitted = e.one("edge", &ann).await;
    assert_eq!((admitted.code, admitted.limit_remaining), (Code::Ok, 4));
}

/// A fixed window admits twice the limit across its boundary; the sliding window, on the
/// same requests, admits the limit only.
async fn fixed_window_admits_twice_the_limit_across_its_edge<S: Setup>(s: S) {
    let e = env(&s, FIVE_PER_SECOND).await;
    let fixed = [("fixed", "ann")];
    let sliding = [("client", "ann")];
    // The last millisecond of the window [START, START + 1 s).
    e.advance_ms(999);
    e.admit("edge", &fixed, 5).await;
    e.admit("edge", &sliding, 5).await;
    // One millisecond on, in the next fixed window: 10 in 2 ms for the fixed window.
    e.advance_ms(1);
    e.admit("edge", &fixed, 5).await;
    e.deny("edge", &fixed).await;
    let denied = e.deny("edge", &sliding).await;
    assert_eq!(
        denied.duration_until_reset,
        Some(Duration::from_millis(999))
    );
    e.advance_ms(998);
    e.deny("edge", &sliding).await;
    e.advance_ms(1);
    e.admit("edge", &sliding, 5).await;
    e.deny("edge", &sliding).await;
}

/// A `limits` list is all-or-nothing: a request one limit denies is counted by none.
async fn limits_list_is_all_or_nothing<S: Setup>(s: S) {
    let e = env(&s, LISTS).await;
    let ann = [("client", "ann")];
    let first = e.one("lists", &ann).await;
    assert_eq!((limit_name(&first), first.limit_remaining), ("burst", 1));
    e.admit("lists", &ann, 1).await;
    // Denied by the burst three times: had they counted in the hourly limit, it would be
    // full (2 + 3 = 5) and deny everything below.
    for _ in 0..3 {
        let denied = e.deny("lists", &ann).await;
        assert_eq!(limit_name(&denied), "burst");
        assert_eq!(limit(&denied), (2, Some(Unit::Second)));
    }
    e.advance_ms(1_000);
    e.admit("lists", &ann, 2).await;
    e.advance_ms(1_000);
    let last = e.one("lists", &ann).await;
    assert_eq!(
        (last.code, limit_name(&last), last.limit_remaining),
        (Code::Ok, "hourly", 0)
    );
    let hourly = e.deny("lists", &ann).await;
    assert_eq!(limit_name(&hourly), "hourly");
    assert_eq!(limit(&hourly), (5, Some(Unit::Hour)));
    // Both limits are in the policy, in one field.
    let r = e.hit("lists", &[&[("client", "bob")]]).await;
    let policy = fields(header(&r, "ratelimit-policy").expect("a policy"));
    assert_eq!(
        policy,
        vec![
            member("burst", &[("q", 2), ("w", 1)]),
            member("hourly", &[("q", 5), ("w", 3_600)])
        ]
    );
}

/// `hits_addend`: the request's (0 means 1), a descriptor's own over it, `Some(0)` checks
/// without counting, and a cost the limit cannot admit is over it with nothing counted.
async fn hits_addend<S: Setup>(s: S) {
    let e = env(&s, TEN_PER_MINUTE).await;
    let remaining = |r: &RateLimitResponse| (r.overall_code, r.statuses[0].limit_remaining);
    let mut req = request("hits", &[&[("client", "ann")]]);
    req.hits_addend = 3;
    assert_eq!(remaining(&e.ask(&req).await), (Code::Ok, 7));
    req.hits_addend = 0;
    assert_eq!(remaining(&e.ask(&req).await), (Code::Ok, 6));
    // The descriptor's own wins over the request's.
    req.hits_addend = 3;
    req.descriptors[0].hits_addend = Some(4);
    assert_eq!(remaining(&e.ask(&req).await), (Code::Ok, 2));
    // Some(0): a look, twice, counting nothing.
    req.descriptors[0].hits_addend = Some(0);
    assert_eq!(remaining(&e.ask(&req).await), (Code::Ok, 2));
    assert_eq!(remaining(&e.ask(&req).await), (Code::Ok, 2));
    // More than is left, then more than the limit: over, and nothing counted.
    req.descriptors[0].hits_addend = Some(3);
    assert_eq!(e.ask(&req).await.overall_code, Code::OverLimit);
    req.descriptors[0].hits_addend = Some(11);
    let too_much = e.ask(&req).await;
    assert_eq!(too_much.overall_code, Code::OverLimit);
    assert_eq!(limit(&too_much.statuses[0]), (10, Some(Unit::Minute)));
    req.descriptors[0].hits_addend = Some(0);
    assert_eq!(remaining(&e.ask(&req).await), (Code::Ok, 2));
    // Exactly what is left: admitted; then a look at a full limit is OK with 0 left, as
    // in envoy ratelimit (the count after adding 0 is not over the limit).
    req.descriptors[0].hits_addend = Some(2);
    assert_eq!(remaining(&e.ask(&req).await), (Code::Ok, 0));
    req.descriptors[0].hits_addend = Some(0);
    assert_eq!(remaining(&e.ask(&req).await), (Code::Ok, 0));
    req.descriptors[0].hits_addend = None;
    assert_eq!(e.ask(&req).await.overall_code, Code::OverLimit);

    // Two descriptors of one request, each with its own cost.
    let mut two = request("hits", &[&[("client", "bob")], &[("client", "cat")]]);
    two.hits_addend = 2;
    two.descriptors[1].hits_addend = Some(5);
    let r = e.ask(&two).await;
    assert_eq!(
        (r.statuses[0].limit_remaining, r.statuses[1].limit_remaining),
        (8, 5)
    );
}

/// `quota: "5 per 10 seconds"`: any span; no envoy unit when the span is none.
async fn quota_of_any_span<S: Setup>(s: S) {
    let e = env(&s, QUOTAS).await;
    let ann = [("client", "ann")];
    let r = e.hit("quotas", &[&ann]).await;
    let current = r.statuses[0].current_limit.clone().expect("a limit");
    assert_eq!((current.requests_per_unit, current.unit), (5, None));
    assert_eq!(current.name, "client");
    assert_eq!(
        fields(header(&r, "ratelimit-policy").expect("a policy")),
        vec![member("client", &[("q", 5), ("w", 10)])]
    );
    e.admit("quotas", &ann, 4).await;
    let denied = e.deny("quotas", &ann).await;
    assert_eq!(denied.duration_until_reset, Some(Duration::from_secs(10)));
    e.advance_ms(9_999);
    e.deny("quotas", &ann).await;
    e.advance_ms(1);
    e.admit("quotas", &ann, 5).await;
    // A span that is a unit gets the unit.
    assert_eq!(
        limit(&e.one("quotas", &[("route", "/a")]).await),
        (7, Some(Unit::Minute))
    );
}

/// An unknown domain limits nothing; nor does a descriptor that matches nothing.
async fn unknown_domain_and_unmatched_descriptors<S: Setup>(s: S) {
    let e = env(&s, FIVE_PER_SECOND).await;
    let r = e
        .hit("nowhere", &[&[("client", "ann")], &[("other", "x")]])
        .await;
    assert_eq!(r.overall_code, Code::Ok);
    assert_eq!(r.statuses.len(), 2);
    r.statuses.iter().for_each(no_limit);
    assert!(r.headers.is_empty(), "{:?}", r.headers);

    let r = e
        .hit(
            "edge",
            &[
                &[("other", "x")],
                &[("client", "ann")],
                &[("client", "ann"), ("deeper", "y")],
            ],
        )
        .await;
    assert_eq!(r.overall_code, Code::Ok);
    no_limit(&r.statuses[0]);
    assert_eq!(limit(&r.statuses[1]), (5, Some(Unit::Second)));
    no_limit(&r.statuses[2]);
    let only_unmatched = e.hit("edge", &[&[("other", "x")]]).await;
    assert!(
        only_unmatched.headers.is_empty(),
        "{:?}",
        only_unmatched.headers
    );
}

/// `RateLimit-Policy` lists every matched policy, `RateLimit` names the tightest, and
/// `Retry-After` comes only with a denial; both `RateLimit` fields parse as structured Lists.
async fn headers_name_the_policies_and_the_tightest<S: Setup>(s: S) {
    let e = env(&s, HEADERS).await;
    let client: &[(&str, &str)] = &[("client", "ann")];
    let route: &[(&str, &str)] = &[("route", "/a")];
    let policies = vec![
        member("client", &[("q", 3), ("w", 1)]),
        member("route", &[("q", 10), ("w", 60)]),
    ];

    let r = e.hit("hdr", &[client, route]).await;
    assert_eq!(
        fields(header(&r, "ratelimit-policy").expect("a policy")),
        policies
    );
    assert_eq!(
        fields(header(&r, "ratelimit").expect("a RateLimit")),
        vec![member("client", &[("r", 2), ("t", 1)])]
    );
    assert_eq!(header(&r, "retry-after"), None);

    // The route alone, to 1 left: then it is the tightest.
    e.admit("hdr", route, 8).await;
    let r = e.hit("hdr", &[client, route]).await;
    assert_eq!(r.overall_code, Code::Ok);
    assert_eq!(
        fields(header(&r, "ratelimit-policy").expect("a policy")),
        policies
    );
    assert_eq!(
        fields(header(&r, "ratelimit").expect("a RateLimit")),
        vec![member("route", &[("r", 0), ("t", 60)])]
    );
    assert_eq!(header(&r, "retry-after"), None);

    // Over the route's limit: Retry-After, in seconds until it admits.
    e.advance_ms(30_000);
    let r = e.hit("hdr", &[client, route]).await;
    assert_eq!(r.overall_code, Code::OverLimit);
    assert_eq!(
        fields(header(&r, "ratelimit").expect("a RateLimit")),
        vec![member("route", &[("r", 0), ("t", 30)])]
    );
    assert_eq!(header(&r, "retry-after"), Some("30"));

    // One descriptor: its policy only.
    let r = e.hit("hdr", &[client]).await;
    assert_eq!(
        fields(header(&r, "ratelimit-policy").expect("a policy")),
        vec![policies[0].clone()]
    );
}

/// Each bound exceeded is refused with its error, whose message names the bound; at the
/// bounds, a request is decided; a refused request counts nothing.
async fn request_bounds<S: Setup>(s: S) {
    let bounds = Bounds {
        max_descriptors: 2,
        max_entries: 2,
        max_text_len: 8,
        ..Bounds::default()
    };
    let e = env_with(&s, BOUNDED, bounds).await;
    let at_bounds = request(
        "b",
        &[&[("k", "12345678")], &[("12345678", "v"), ("j", "w")]],
    );
    assert_eq!(e.ask(&at_bounds).await.statuses[0].limit_remaining, 99);

    let refuse = async |request: RateLimitRequest| {
        let err = e
            .engine
            .should_rate_limit(&request)
            .await
            .expect_err("refused");
        assert!(err.is_invalid_argument(), "{err}");
        err
    };
    let err = refuse(request("b", &[&[("k", "x")], &[("k", "x")], &[("k", "x")]])).await;
    assert_eq!(err, RequestError::TooManyDescriptors { count: 3, max: 2 });
    assert!(err.to_string().contains("max_descriptors"), "{err}");
    let err = refuse(request("b", &[&[("k", "x"), ("j", "y"), ("i", "z")]])).await;
    assert_eq!(
        err,
        RequestError::TooManyEntries {
            descriptor: 0,
            count: 3,
            max: 2
        }
    );
    assert!(err.to_string().contains("max_entries"), "{err}");
    let err = refuse(request("b", &[&[("k", "x")], &[("k", "123456789")]])).await;
    assert_eq!(
        err,
        RequestError::TextTooLong {
            descriptor: 1,
            what: "value",
            len: 9,
            max: 8
        }
    );
    assert!(err.to_string().contains("max_text_len"), "{err}");
    let err = refuse(request("b", &[&[("123456789", "x")]])).await;
    assert_eq!(
        err,
        RequestError::TextTooLong {
            descriptor: 0,
            what: "key",
            len: 9,
            max: 8
        }
    );
    assert!(err.to_string().contains("max_text_len"), "{err}");
    let err = refuse(request("123456789", &[&[("k", "x")]])).await;
    assert_eq!(err, RequestError::DomainTooLong { len: 9, max: 8 });
    assert!(err.to_string().contains("max_text_len"), "{err}");
    assert_eq!(
        refuse(request("", &[&[("k", "x")]])).await,
        RequestError::EmptyDomain
    );
    assert_eq!(refuse(request("b", &[])).await, RequestError::NoDescriptors);
    assert_eq!(
        refuse(request("b", &[&[("k", "x")], &[]])).await,
        RequestError::EmptyDescriptor { descriptor: 1 }
    );

    // Every refused request above carried ("k", "x"): none of them counted it.
    assert_eq!(e.one("b", &[("k", "x")]).await.limit_remaining, 99);
}

/// No crafted value reaches another descriptor's counts: entries are kept apart however
/// their values spell separators, lengths or another entry.
async fn crafted_values_keep_to_their_own_counts<S: Setup>(s: S) {
    let e = env(&s, CRAFTED).await;
    let pairs: &[(Entries<'_>, Entries<'_>)] = &[
        (&[("k", "a1:b")], &[("k", "a"), ("j", "b")]),
        (&[("k", "a1:j1:b")], &[("k", "a"), ("j", "b")]),
        (&[("k", "a"), ("j", "b_j_c")], &[("k", "a_j_b"), ("j", "c")]),
        (&[("k", "a:j:b"), ("j", "c")], &[("k", "a"), ("j", "b:j:c")]),
        (&[("k", "a1:b"), ("j", "")], &[("k", "a"), ("j", "1:b0:")]),
        (&[("k", "{x}"), ("j", "y")], &[("k", "{x"), ("j", "}y")]),
        (&[("k", "x\ny")], &[("k", "x"), ("j", "y")]),
        (&[("k", "é")], &[("k", "e\u{301}")]),
    ];
    for (i, (one, other)) in pairs.iter().enumerate() {
        e.clock.advance(Duration::from_secs(120));
        e.admit("crafted", one, 1).await;
        e.deny("crafted", one).await;
        let status = e.one("crafted", other).await;
        assert_eq!(
            (status.code, status.limit_remaining),
            (Code::Ok, 0),
            "pair {i}: {other:?} after {one:?}"
        );
    }
}

/// An unlimited limit named in another's `replaces` is still unlimited: envoy ratelimit
/// takes unlimited limits out before it drops the replaced ones, and answers them OK with
/// `LimitRemaining` at `MaxUint32`.
async fn replaced_unlimited_limit_stays_unlimited<S: Setup>(s: S) {
    let e = env(&s, REPLACED_UNLIMITED).await;
    let r = e
        .hit("r", &[&[("internal", "x")], &[("client", "ann")]])
        .await;
    assert_eq!(r.overall_code, Code::Ok);
    assert_eq!(r.statuses[0].current_limit, None);
    assert_eq!(r.statuses[0].limit_remaining, u32::MAX);
    assert_eq!(limit(&r.statuses[1]), (5, Some(Unit::Second)));
}

/// A shadow-mode limit never denies, so it must not set the wait either: with a shadow limit
/// denying for an hour and an enforced one denying for a second, `Retry-After` is the second
/// (envoy ratelimit's headers, too, come from the enforced descriptor that failed).
async fn retry_after_comes_from_an_enforcing_limit<S: Setup>(s: S) {
    let e = env(&s, SHADOW_AND_ENFORCED).await;
    let both: [&[(&str, &str)]; 2] = [&[("watch", "x")], &[("client", "ann")]];
    let first = e.hit("sh", &both).await;
    assert_eq!(first.overall_code, Code::Ok);
    let second = e.hit("sh", &both).await;
    assert_eq!(second.overall_code, Code::OverLimit);
    assert_eq!(second.statuses[0].code, Code::Ok, "shadow mode admits");
    assert_eq!(second.statuses[1].code, Code::OverLimit);
    assert_eq!(header(&second, "retry-after"), Some("1"));
    assert_eq!(
        fields(header(&second, "ratelimit").expect("a RateLimit")),
        vec![member("client", &[("r", 0), ("t", 1)])]
    );
    // And it is true: a second on, the request is admitted.
    e.advance_ms(1_000);
    assert_eq!(e.hit("sh", &both).await.overall_code, Code::Ok);
}

/// envoy ratelimit reads a descriptor's `value` as text whatever its YAML scalar looks like
/// (go-yaml sets a string field from the scalar's text): a phone number, a status code or
/// `true` unquoted name the value they spell.
async fn unquoted_scalar_values_load_as_text<S: Setup>(s: S) {
    let e = env(&s, UNQUOTED_VALUES).await;
    let number = e.one("unquoted", &[("to_number", "2061111111")]).await;
    assert_eq!(limit(&number), (5, Some(Unit::Day)));
    let status = e.one("unquoted", &[("status", "429")]).await;
    assert_eq!(limit(&status), (3, Some(Unit::Minute)));
    let internal = e.one("unquoted", &[("internal", "true")]).await;
    assert_eq!(limit(&internal), (2, Some(Unit::Minute)));
}

/// The memory backend's key cap: a new key past it is over the limit (no limited key is pushed
/// out) and counted in the metrics; once the keys held go idle, new keys are admitted.
#[tokio::test]
async fn memory_key_cap_refuses_new_keys() {
    let e = build(
        Memory::new().with_max_keys(2),
        parse(FIVE_PER_SECOND),
        Bounds::default(),
    );
    e.admit("edge", &[("client", "a")], 1).await;
    e.admit("edge", &[("client", "b")], 1).await;
    let refused = e.deny("edge", &[("client", "c")]).await;
    assert_eq!(limit(&refused), (5, Some(Unit::Second)));
    assert_eq!(refused.limit_remaining, 0);
    let metrics = e.metrics();
    assert!(
        metrics.contains("slidewin_key_cap_refusals_total 1"),
        "{metrics}"
    );
    // The keys held keep their counts.
    assert_eq!(e.one("edge", &[("client", "a")]).await.limit_remaining, 3);
    assert_eq!(e.one("edge", &[("client", "b")]).await.limit_remaining, 3);
    // Idle a window on, they make room.
    e.advance_ms(2_000);
    assert_eq!(e.one("edge", &[("client", "c")]).await.limit_remaining, 4);
}

/// A step of the model test: milliseconds to move on, hits, which client.
fn step() -> impl Strategy<Value = (u64, u64, usize)> {
    let advance = prop_oneof![Just(0u64), Just(1), Just(999), Just(1_000), 0u64..1_500];
    (advance, 1u64..=3, 0usize..2)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(0x0005_11de_3143),
        ..ProptestConfig::default()
    })]

    /// A `sliding_log` limit against an obviously right model: admit iff the hits admitted in
    /// `(now - span, now]` plus this request's are at most the limit; the remaining and the
    /// time until reset follow from the same list.
    #[test]
    fn sliding_log_matches_a_list_of_admissions(
        limit in 1u64..=5,
        steps in proptest::collection::vec(step(), 1..60),
    ) {
        against_the_model(limit, &steps)?;
    }
}

/// `steps` on one `sliding_log` limit of `limit` a second, on two clients, each decision
/// checked against a list of each client's admissions.
fn against_the_model(limit: u64, steps: &[(u64, u64, usize)]) -> Result<(), TestCaseError> {
    let yaml = format!(
        "domain: p
descriptors:
  - key: k
    rate_limit: {{unit: second, requests_per_unit: {limit}, algorithm: sliding_log}}
"
    );
    let e = build(Memory::new(), parse(&yaml), Bounds::default());
    let span = 1_000_000_000u64;
    let mut now = START.as_nanos();
    let mut admitted: [Vec<(u64, u64)>; 2] = [Vec::new(), Vec::new()];
    for &(advance, hits, who) in steps {
        e.advance_ms(advance);
        now += advance * 1_000_000;
        let mut req = request("p", &[&[("k", ["ann", "bob"][who])]]);
        req.hits_addend = hits;
        let response = e
            .engine
            .should_rate_limit(&req)
            .now_or_never()
            .expect("memory decides at once")
            .expect("a valid request");
        let status = &response.statuses[0];
        let log = &mut admitted[who];
        let window: Vec<(u64, u64)> = log
            .iter()
            .copied()
            .filter(|(t, _)| *t > now - span)
            .collect();
        let used: u64 = window.iter().map(|(_, h)| h).sum();
        let admit = used + hits <= limit;
        prop_assert_eq!(
            status.code == Code::Ok,
            admit,
            "at {} ns: {} used, {} hits",
            now,
            used,
            hits
        );
        prop_assert_eq!(response.overall_code, status.code);
        if admit {
            log.push((now, hits));
            prop_assert_eq!(u64::from(status.limit_remaining), limit - used - hits);
            prop_assert_eq!(
                status.duration_until_reset,
                Some(Duration::from_nanos(span))
            );
        } else if hits > limit {
            // A cost the limit never admits: over it, nothing counted, no reset to wait for.
            prop_assert_eq!(status.limit_remaining, 0);
            prop_assert_eq!(status.duration_until_reset, None);
        } else {
            let newest = window
                .iter()
                .map(|(t, _)| *t)
                .max()
                .expect("something in the window");
            prop_assert_eq!(u64::from(status.limit_remaining), limit - used);
            prop_assert_eq!(
                status.duration_until_reset,
                Some(Duration::from_nanos(newest + span - now))
            );
        }
    }
    Ok(())
}
