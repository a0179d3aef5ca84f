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
/// (`memory::…`) and as one on a Redis of the test's own (`redis::…`), beside the bodies.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                super::$name(super::OnMemory).await;
            })*
        }
        mod redis {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                super::$name(super::OnRedis::start()).await;
            })*
        }
    };
}

/// envoy ratelimit's README examples, one a body.
mod examples;
/// The key cap, and the sliding log against a model.
mod model;
/// Our own semantics.
mod semantics;
