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

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use slidewin::time::MonotonicClock;
use slidewin_http::Memory;
use slidewin_server::{
    Bounds, Config, Engine, Entry, Metrics, RateLimitRequest, RequestDescriptor,
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

fn main() {
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
