//! The engine's check counted in instructions: `Engine::should_rate_limit` on the memory
//! backend, two exact sliding logs (`burst` 1000 a second, `hourly` 10,000 an hour) over 1,000
//! clients checked in turn, each check a future polled once. For callgrind, which counts
//! instructions the same whatever else the machine does:
//!
//! ```text
//! cargo bench -p slidewin-server --bench engine_instructions --no-run
//! ENGINE_CHECKS=20000 valgrind --tool=callgrind --toggle-collect='*counted_checks*' \
//!     target/release/deps/engine_instructions-<hash>
//! ```
//!
//! and the same with 40,000: the difference over 20,000 is one check's instructions, without
//! the setup and the first check of each key. No tracing subscriber is installed, so the
//! check's spans are off as they are in `slidewin serve` without `--otlp-endpoint`.
//!
//! `ENGINE_MEMORY_KEYS=1000000` measures memory instead: that many keys, each checked once
//! under one limit of 1000 a minute (a key holding one admission), and the resident memory
//! they add (`/proc/self/statm`), per key.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use slidewin::time::MonotonicClock;
use slidewin_http::Memory;
use slidewin_server::{
    Bounds, Code, Config, Engine, Entry, Metrics, RateLimitRequest, RequestDescriptor,
};

const CONFIG: &str = "domain: bench
descriptors:
  - key: client
    limits:
      - {name: burst, quota: 1000 per second}
      - {name: hourly, quota: 10000 per hour}
";

/// A future's output, polled once: the memory backend never waits.
fn now<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("a check waited: the memory backend never does"),
    }
}

/// `n` checks, the clients in turn; callgrind collects inside this function only.
#[inline(never)]
fn counted_checks(engine: &Engine<Memory>, requests: &[RateLimitRequest], n: usize) {
    for i in 0..n {
        let answer = now(engine.should_rate_limit(&requests[i % requests.len()]));
        assert!(black_box(answer).is_ok());
    }
}

const ONE_LIMIT: &str = "domain: bench
descriptors:
  - key: client
    rate_limit: {unit: minute, requests_per_unit: 1000}
";

/// The process's resident memory, in bytes (0 where `/proc` has none).
fn resident() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// `keys` keys checked once each, and the memory they hold, per key.
fn memory_per_key(keys: u64) {
    let config = Config::parse(ONE_LIMIT, "bench.yaml").expect("the config loads");
    // Room for the keys and the first check's, past the default cap of a million.
    let room = usize::try_from(keys)
        .unwrap_or(usize::MAX)
        .saturating_add(1);
    let engine = Engine::new(
        Memory::new().with_max_keys(room.max(Memory::DEFAULT_MAX_KEYS)),
        config,
        Arc::new(MonotonicClock),
        Bounds::default(),
        Metrics::new(),
    )
    .expect("the engine starts");
    let check = |i: u64| {
        let client = Entry::new("client", &format!("client-{i}"));
        let request = RateLimitRequest::new("bench", vec![RequestDescriptor::new(vec![client])]);
        let answer = now(engine.should_rate_limit(&request)).expect("decided");
        assert_eq!(
            answer.overall_code,
            Code::Ok,
            "every key admitted, none refused"
        );
    };
    // The rule's statistics and metrics, allocated at its first check, are not the keys'.
    check(u64::MAX);
    let before = resident();
    for i in 0..keys {
        check(i);
    }
    let added = resident().saturating_sub(before);
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
    let each = added as f64 / keys.max(1) as f64;
    println!("{keys} keys, one admission each: {added} bytes resident added, {each:.0} a key");
}

fn main() {
    if let Some(keys) = std::env::var("ENGINE_MEMORY_KEYS")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        memory_per_key(keys);
        return;
    }
    let checks: usize = std::env::var("ENGINE_CHECKS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000);
    let config = Config::parse(CONFIG, "bench.yaml").expect("the config loads");
    let engine = Engine::new(
        Memory::new(),
        config,
        Arc::new(MonotonicClock),
        Bounds::default(),
        Metrics::new(),
    )
    .expect("the engine starts");
    let requests: Vec<RateLimitRequest> = (0..1_000)
        .map(|i| {
            let client = Entry::new("client", &format!("client-{i}"));
            RateLimitRequest::new("bench", vec![RequestDescriptor::new(vec![client])])
        })
        .collect();
    // Every key's first check, which allocates it, before the checks that count.
    counted_checks(&engine, &requests, requests.len());
    counted_checks(&engine, &requests, checks);
}
