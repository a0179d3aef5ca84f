//! One check by the engine alone, against limitador's in-memory `RateLimiter`, on the same
//! rules and keys, in the same run.
//! `cargo bench --manifest-path crates/slidewin-limitador-bench/Cargo.toml` (a package outside
//! the workspace, so that limitador's tree is built for this bench alone).
//!
//! The rules, alike on both sides: a descriptor `client` (any value) with two limits, `burst`
//! 1000 a second and `hourly` 10,000 an hour (the most a sliding log holds on Redis; the same
//! as `rls_load`'s), both of which must admit. The keys: 10,000 clients, `client-0` to
//! `client-9999`, one check each in turn (round-robin). Every check is admitted: a client is
//! checked once in 10,000 checks, so `burst` would need 10 million checks a second to bind, and
//! `hourly` 100 million checks within an hour (criterion's default times make about 10
//! million per function). That is checked, not assumed: before and after measuring, a probe
//! client is admitted, both limits apply, and its remaining goes down by one a check; and every
//! measured check's answer is looked at, a denial counted, and none allowed.
//!
//! Both sides start from the same prebuilt request (our `RateLimitRequest`: domain `bench`,
//! one descriptor `[client=<name>]`) and run on the real clock (`MonotonicClock`; limitador
//! reads `SystemTime`). Each check is a future polled once with a waker that does nothing (no
//! executor: the memory backend and limitador's blocking `RateLimiter` never wait), and must be
//! ready then.
//!
//! One criterion group, `engine/check`, four functions:
//!
//! - `slidewin`: `Engine::should_rate_limit` on the memory backend, the default algorithm
//!   (`sliding_log`, exact), its answer with the descriptor's status and the `RateLimit-Policy`
//!   and `RateLimit` fields (always rendered);
//! - `slidewin_fixed_window`: the same with `algorithm: fixed_window` on both limits,
//!   limitador's algorithm;
//! - `limitador`: what limitador-server does for one Envoy RLS request: the context built from
//!   the request's descriptors (a map per descriptor, bound as `descriptors`), then
//!   `check_rate_limited_and_update`. The limits: namespace `bench`, no condition, the variable
//!   `descriptors[0].client`, `max_value` 1000 over 1 s and 10,000 over 3600 s, named `burst`
//!   and `hourly`; no response headers (limitador-server's default, `--rate-limit-headers
//!   NONE`);
//! - `limitador_context_prebuilt`: `check_rate_limited_and_update` alone, on contexts built
//!   before measuring (limitador's floor: no request conversion at all).
//!
//! `ENGINE_INTERLEAVED=1` (same command) runs the four interleaved instead of criterion:
//! `ENGINE_ROUNDS` rounds (default 21), each timing `ENGINE_CHECKS` checks (default 100,000)
//! through each function in a rotating order, and prints each one's median time per check and
//! the median over rounds of each round's ratio of limitador's time to slidewin's (this VM's
//! speed drifts between criterion's functions, measured one after the other).

use std::collections::HashMap;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::Instant;

use criterion::{Criterion, criterion_group};
use limitador::RateLimiter;
use limitador::limit::{Context, Expression, Limit, Namespace, Predicate};
use slidewin::time::MonotonicClock;
use slidewin_http::Memory;
use slidewin_server::{
    Bounds, Code, Config, Engine, Entry, Metrics, RateLimitRequest, RequestDescriptor,
};

/// The clients checked in turn.
const CLIENTS: usize = 10_000;

/// The domain, and limitador's namespace.
const DOMAIN: &str = "bench";

/// Our config: the two limits, on the descriptor `client`; `{algorithm}` is filled in.
const CONFIG: &str = "domain: bench
descriptors:
  - key: client
    limits:
      - {name: burst, quota: 1000 per second, algorithm: ALGORITHM}
      - {name: hourly, quota: 10000 per hour, algorithm: ALGORITHM}
";

/// A future's output, polled once: it must be ready (nothing here waits).
fn now<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut TaskContext::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("a check waited: the memory backend never does"),
    }
}

fn request(client: &str) -> RateLimitRequest {
    RateLimitRequest::new(
        DOMAIN,
        vec![RequestDescriptor::new(vec![Entry::new("client", client)])],
    )
}

fn requests() -> Vec<RateLimitRequest> {
    (0..CLIENTS)
        .map(|i| request(&format!("client-{i}")))
        .collect()
}

/// Our engine on memory, with `algorithm` on both limits.
fn engine(algorithm: &str) -> Engine<Memory> {
    let config = Config::parse(&CONFIG.replace("ALGORITHM", algorithm), "bench.yaml").unwrap();
    Engine::new(
        Memory::new(),
        config,
        Arc::new(MonotonicClock),
        Bounds::default(),
        Metrics::new(),
    )
    .unwrap()
}

/// limitador's limiter with the same two limits.
fn limitador() -> RateLimiter {
    // Room for every client's two counters, so that none is evicted.
    let limiter = RateLimiter::new(4 * CLIENTS as u64);
    for (name, max, seconds) in [("burst", 1_000, 1), ("hourly", 10_000, 3_600)] {
        let variable: Expression = "descriptors[0].client".try_into().unwrap();
        let mut limit = Limit::new(DOMAIN, max, seconds, Vec::<Predicate>::new(), [variable]);
        limit.set_name(name.to_owned());
        limiter.add_limit(limit);
    }
    limiter
}

/// limitador's context for `request`, as limitador-server builds it from an Envoy request: one
/// map of entries per descriptor, bound as the list `descriptors`.
fn context(request: &RateLimitRequest) -> Context<'static> {
    let values: Vec<HashMap<String, String>> = request
        .descriptors
        .iter()
        .map(|d| {
            d.entries
                .iter()
                .map(|e| (e.key.clone(), e.value.clone()))
                .collect()
        })
        .collect();
    let mut ctx = Context::default();
    ctx.list_binding("descriptors".to_owned(), values);
    ctx
}

/// What one check of a side answers, for the checks before measuring: admitted, how many
/// limits applied, and the binding one's remaining.
struct Answer {
    admitted: bool,
    limits: usize,
    remaining: u64,
}

/// One check of a request, the `i`th client's (`usize::MAX` for the probe).
type Check = Box<dyn Fn(&RateLimitRequest, usize) -> Answer>;

/// A side under test: its name, its requests, and its check.
struct Side {
    name: &'static str,
    requests: Vec<RateLimitRequest>,
    check: Check,
}

impl Side {
    /// `n` checks, from client `*next` on, round-robin; none may be denied.
    fn run(&self, next: &mut usize, n: u64) {
        let mut denied = 0_u64;
        for _ in 0..n {
            let i = *next;
            *next = if i + 1 == CLIENTS { 0 } else { i + 1 };
            let answer = black_box((self.check)(&self.requests[i], i));
            denied += u64::from(!answer.admitted);
        }
        assert_eq!(denied, 0, "{}: checks denied", self.name);
    }

    /// Before and after measuring: a client of its own is admitted, both limits apply, and its
    /// remaining goes down by one a check.
    fn assert_counts(&self, probe: &RateLimitRequest) {
        let first = (self.check)(probe, usize::MAX);
        let second = (self.check)(probe, usize::MAX);
        for answer in [&first, &second] {
            assert!(answer.admitted, "{}: not admitted", self.name);
            assert_eq!(answer.limits, 2, "{}: two limits must apply", self.name);
        }
        assert_eq!(
            second.remaining + 1,
            first.remaining,
            "{}: a check must count",
            self.name
        );
    }
}

fn slidewin_side(name: &'static str, algorithm: &str) -> Side {
    let engine = engine(algorithm);
    Side {
        name,
        requests: requests(),
        check: Box::new(move |request, _| {
            let response = now(engine.should_rate_limit(request)).unwrap();
            let status = &response.statuses[0];
            Answer {
                admitted: response.overall_code == Code::Ok,
                // The limits that applied: the members of `RateLimit-Policy`.
                limits: response
                    .headers
                    .iter()
                    .find(|(name, _)| name == "ratelimit-policy")
                    .map_or(0, |(_, policy)| {
                        policy.as_bytes().split(|&b| b == b',').count()
                    }),
                remaining: u64::from(status.limit_remaining),
            }
        }),
    }
}

fn limitador_answer(
    result: Result<limitador::CheckResult, limitador::errors::LimitadorError>,
) -> Answer {
    let result = result.unwrap();
    Answer {
        admitted: !result.limited,
        limits: result.counters.len(),
        remaining: result
            .counters
            .iter()
            .filter_map(limitador::counter::Counter::remaining)
            .min()
            .unwrap_or(u64::MAX),
    }
}

fn limitador_side() -> Side {
    let limiter = limitador();
    let namespace = Namespace::from(DOMAIN);
    Side {
        name: "limitador",
        requests: requests(),
        check: Box::new(move |request, _| {
            limitador_answer(now(async {
                let ctx = context(request);
                limiter.check_rate_limited_and_update(&namespace, &ctx, 1)
            }))
        }),
    }
}

fn limitador_prebuilt_side() -> Side {
    let limiter = limitador();
    let namespace = Namespace::from(DOMAIN);
    let requests = requests();
    let contexts: Vec<Context<'static>> = requests.iter().map(context).collect();
    Side {
        name: "limitador_context_prebuilt",
        requests,
        check: Box::new(move |request, i| {
            let built;
            let ctx = match contexts.get(i) {
                Some(ctx) => ctx,
                None => {
                    // The probe, outside the measurement.
                    built = context(request);
                    &built
                }
            };
            limitador_answer(now(async {
                limiter.check_rate_limited_and_update(&namespace, ctx, 1)
            }))
        }),
    }
}

fn sides() -> [Side; 4] {
    [
        slidewin_side("slidewin", "sliding_log"),
        slidewin_side("slidewin_fixed_window", "fixed_window"),
        limitador_side(),
        limitador_prebuilt_side(),
    ]
}

fn probe() -> RateLimitRequest {
    request("probe")
}

fn check(c: &mut Criterion) {
    let probe = probe();
    let mut group = c.benchmark_group("engine/check");
    for side in sides() {
        side.assert_counts(&probe);
        let mut next = 0;
        group.bench_function(side.name, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                side.run(&mut next, iters);
                start.elapsed()
            });
        });
        side.assert_counts(&probe); // still counting after the measurement
    }
    group.finish();
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The four interleaved: each round times `ENGINE_CHECKS` checks through each side, in an order
/// that rotates from round to round, so that the machine's drift falls on all alike.
fn interleaved() {
    let rounds = usize::try_from(env_or("ENGINE_ROUNDS", 21).max(1)).unwrap_or(21);
    let checks = env_or("ENGINE_CHECKS", 100_000).max(1);
    let probe = probe();
    let sides = sides();
    let mut next = vec![0; sides.len()];
    for (side, next) in sides.iter().zip(&mut next) {
        side.assert_counts(&probe);
        side.run(next, checks); // warm up: every client's counters exist
    }
    let mut times = vec![Vec::with_capacity(rounds); sides.len()];
    for round in 0..rounds {
        for k in 0..sides.len() {
            let i = (round + k) % sides.len();
            let start = Instant::now();
            sides[i].run(&mut next[i], checks);
            #[allow(clippy::cast_precision_loss)] // a count of checks, far below 2^52
            times[i].push(start.elapsed().as_secs_f64() * 1e9 / checks as f64);
        }
    }
    for side in &sides {
        side.assert_counts(&probe);
    }
    println!(
        "engine/interleaved: {rounds} rounds of {checks} checks per function, medians over rounds"
    );
    println!("| function | ns per check | limitador / it | limitador_context_prebuilt / it |");
    println!("| --- | ---: | ---: | ---: |");
    for (i, side) in sides.iter().enumerate() {
        let ratio = |j: usize| median((0..rounds).map(|r| times[j][r] / times[i][r]).collect());
        println!(
            "| {} | {:.0} | {:.2}x | {:.2}x |",
            side.name,
            median(times[i].clone()),
            ratio(2),
            ratio(3),
        );
    }
}

criterion_group!(benches, check);

fn main() {
    if std::env::var_os("ENGINE_INTERLEAVED").is_some() {
        interleaved();
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
