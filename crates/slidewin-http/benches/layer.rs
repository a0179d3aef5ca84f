//! What `RateLimitLayer` (memory backend) adds to a request, against `tower_governor`'s
//! `GovernorLayer`, and what `CircuitBreakerLayer` adds, against tower-resilience's circuit
//! breaker, on an axum `Router` whose handler answers at once, in the same run.
//! `cargo bench -p slidewin-http --features axum --bench layer`.
//!
//! One criterion group, `layer/per_request`, nine functions:
//!
//! - `no_layer`: the bare router (the floor);
//! - `tower_governor`: `GovernorLayer` keyed by `PeerIpKeyExtractor` (axum's
//!   `ConnectInfo<SocketAddr>`), with `use_headers()` (`x-ratelimit-limit` and
//!   `x-ratelimit-remaining` on every admitted response);
//! - `slidewin_gcra`: our layer, one `Kind::Gcra` policy on `Key::peer_ip()`, on the real
//!   clock (the layer's default, `TscClock`), sending `RateLimit-Policy` and `RateLimit`;
//! - `slidewin_gcra_without_stats`: the same with `stats(false)`;
//! - `slidewin_sliding_log_two_policies`: our layer, two `SlidingLog` policies (`burst` and
//!   `hourly`) on `Key::peer_ip()`, on a `ManualClock` (see [`STEP`]);
//! - `slidewin_sliding_logs_10_per_s_1000_per_hour`: the example policies, on a
//!   `ManualClock` (see [`EXAMPLE_STEP`]);
//! - `tower_resilience_breaker`: tower-resilience's `CircuitBreakerLayer` (its
//!   `tower-resilience-circuitbreaker` crate), a `5xx` a failure, in its default count-based
//!   window of 100 calls (its time-based window keeps a record per call); its errors made
//!   responses by axum's `HandleErrorLayer`, as a `Router` needs;
//! - `slidewin_breaker`: our `CircuitBreakerLayer`, an error-ratio rule over its default
//!   window (10 s in ten buckets), on the real clock (`TscClock`), which it reads twice a
//!   request (the permit's time and the response's, for the call's time);
//! - `slidewin_shed`: our `ShedLayer`, an adaptive concurrency limit (AIMD, slow above 1 s)
//!   on the real clock, read twice a request as the breaker's; its peer is `slidewin_breaker`
//!   (the same shape of layer), as no peer crate is a dev-dependency for it.
//!
//! Every request is `GET /` carrying `ConnectInfo(SocketAddr)` of one client, as axum's
//! `into_make_service_with_connect_info` puts it there; every one is admitted (checked once
//! before measuring, with the headers each layer claims to send). Each request is
//! `Router::clone().oneshot(request)` awaited on a current-thread tokio runtime (criterion's
//! `to_async`: one `block_on` per sample), and the time includes building the request and
//! dropping the response, the same for every function: the overhead of a layer is its time
//! less `no_layer`'s.
//!
//! `LAYER_INTERLEAVED=1` (same command) runs the routers interleaved instead of
//! criterion: 31 rounds, each timing 20,000 requests through every router in a rotating
//! order, and prints each one's median and the median of the rounds' ratios of its overhead to
//! its peer's (`tower_governor` for the rate limits, `tower_resilience_breaker` for the
//! breaker; this VM's speed drifts by up to a third between criterion's functions, measured
//! one after the other). `LAYER_INTERLEAVED=<text>` keeps `no_layer` and the routers whose
//! names contain `<text>`: `LAYER_INTERLEAVED=breaker` for the two breakers.
//!
//! `LAYER_ONLY=<name> LAYER_REQUESTS=<n>` prepares that router and sends it `n` requests
//! untimed, for an instruction count under callgrind (see [`counted`]).
//!
//! Without the crate's `axum` feature the layer cannot read `ConnectInfo` (it would answer
//! `500` for a missing key): the requests then also carry the bare `SocketAddr`, which it reads
//! either way, in every function alike.

use std::convert::Infallible;
use std::hint::black_box;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::error_handling::HandleErrorLayer;
use axum::extract::ConnectInfo;
use axum::routing::get;
use criterion::{Criterion, criterion_group};
use http::{Request, Response, StatusCode};
use slidewin::breaker::CircuitBreaker;
use slidewin::limit::{Kind, Rule, RuleSet};
use slidewin::shed::AdaptiveLimit;
use slidewin::time::ManualClock;
use slidewin::{Clock, Moment};
use slidewin_http::{
    CircuitBreakerLayer, Key, Limit, Memory, RateLimitLayer, RateLimitLayerBuilder, ShedLayer,
};
use tokio::runtime::Runtime;
use tower::{ServiceBuilder, ServiceExt};
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::PeerIpKeyExtractor;

/// How far the sliding-log variant's `ManualClock` moves before each request: 11 ms, so the
/// client sends about 91 requests a second and every one is admitted. Its `burst` policy
/// (`100/s`) then holds a log of about 91 stamps, near its limit, as a busy client's would:
/// each request expires about one stamp and adds one. The `hourly` policy (`400000/hour`)
/// holds what an hour at that rate leaves, about 327,000 stamps, once [`PREFILL`] requests
/// have gone through before the measurement: a log at its steady size, which each request
/// too moves by one stamp out and one in. A real clock would not do: requests a microsecond
/// apart would spend `100/s` at once, and a limit high enough to admit them all would be a
/// log of millions. Every function moves a `ManualClock` of its own by the same step, so the
/// step's atomic add is in the floor too.
const STEP: Duration = Duration::from_millis(11);

/// The step of the variant with the example policies: just over 3.6 s, so that
/// `1000/hour` admits every request.
const EXAMPLE_STEP: Duration = Duration::from_millis(3_700);

/// Requests sent through the sliding-log variant before it is measured: an hour and a bit of
/// its clock, so that its `hourly` log has reached its steady size.
const PREFILL: u64 = 330_000;

/// The one client.
fn peer() -> SocketAddr {
    "203.0.113.7:50000".parse().unwrap()
}

fn request() -> Request<Body> {
    let mut request = Request::get("/").body(Body::empty()).unwrap();
    request.extensions_mut().insert(ConnectInfo(peer()));
    #[cfg(not(feature = "axum"))]
    request.extensions_mut().insert(peer());
    request
}

fn router() -> Router {
    Router::new().route("/", get(|| async { "" }))
}

fn rule(name: &str, kind: Kind, quota: &str) -> Rule {
    Rule::new(name, kind, quota.parse().unwrap()).unwrap()
}

/// A router under test: its name, the router, the clock it moves before each request, and the
/// headers every admitted response must carry.
struct Variant {
    name: &'static str,
    router: Router,
    clock: ManualClock,
    headers: &'static [&'static str],
    /// Requests to send before measuring.
    prefill: u64,
    /// How far the clock moves before each request.
    step: Duration,
    /// The peer whose overhead the interleaved pass divides this one's by.
    peer: &'static str,
}

impl Variant {
    /// `requests` requests one after the other, each moving the clock first.
    async fn run(&self, requests: u64) {
        for _ in 0..requests {
            self.one().await;
        }
    }

    async fn one(&self) -> Response<Body> {
        self.clock.advance(self.step);
        let response = self.router.clone().oneshot(request()).await.unwrap();
        debug_assert_eq!(response.status(), StatusCode::OK);
        black_box(response)
    }

    /// Before measuring: the prefill, then a check.
    fn prepare(&self, rt: &Runtime) {
        // Not `run`, which an instruction count toggles on.
        rt.block_on(async {
            for _ in 0..self.prefill {
                self.one().await;
            }
        });
        self.check(rt);
    }

    /// One request, outside the timing: it must be admitted and carry the headers.
    fn check(&self, rt: &Runtime) {
        let response = rt.block_on(self.one());
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "{}: not admitted",
            self.name
        );
        for header in self.headers {
            assert!(
                response.headers().contains_key(*header),
                "{}: no `{header}` in {:?}",
                self.name,
                response.headers()
            );
        }
    }
}

fn variants() -> Vec<Variant> {
    // 1,000,000 a second with a burst of 10^9, alike for both GCRAs: never spent here.
    let governor = GovernorConfigBuilder::default()
        .key_extractor(PeerIpKeyExtractor)
        .per_nanosecond(1_000)
        .burst_size(1_000_000_000)
        .use_headers()
        .finish()
        .unwrap();
    let gcra = RuleSet::from(rule("api", Kind::Gcra, "1000000/s burst 1000000000"));
    let sliding_logs = RuleSet::new([
        rule("burst", Kind::SlidingLog, "100/s"),
        rule("hourly", Kind::SlidingLog, "400000/hour"),
    ])
    .unwrap();
    let log_clock = ManualClock::new(Moment::ZERO);
    // The issue's own example, a client at both its limits: 10 a second and 1000 an hour,
    // a request every 3.7 s (each admitted), the hourly log holding 973 stamps once the
    // prefill has run an hour of its clock.
    let example = RuleSet::new([
        rule("burst", Kind::SlidingLog, "10/s"),
        rule("hourly", Kind::SlidingLog, "1000/hour"),
    ])
    .unwrap();
    let example_clock = ManualClock::new(Moment::ZERO);
    vec![
        Variant {
            name: "no_layer",
            router: router(),
            clock: ManualClock::default(),
            headers: &[],
            prefill: 0,
            step: STEP,
            peer: GOVERNOR,
        },
        Variant {
            name: GOVERNOR,
            router: router().layer(GovernorLayer::new(governor)),
            clock: ManualClock::default(),
            headers: &["x-ratelimit-limit", "x-ratelimit-remaining"],
            prefill: 0,
            step: STEP,
            peer: GOVERNOR,
        },
        ours(
            "slidewin_gcra",
            layer(Limit::new(gcra.clone())).build().unwrap(),
            ManualClock::default(),
            0,
            STEP,
        ),
        ours(
            "slidewin_gcra_without_stats",
            layer(Limit::new(gcra)).stats(false).build().unwrap(),
            ManualClock::default(),
            0,
            STEP,
        ),
        ours(
            "slidewin_sliding_log_two_policies",
            layer(Limit::new(sliding_logs))
                .clock(log_clock.clone())
                .build()
                .unwrap(),
            log_clock,
            PREFILL,
            STEP,
        ),
        ours(
            "slidewin_sliding_logs_10_per_s_1000_per_hour",
            layer(Limit::new(example))
                .clock(example_clock.clone())
                .build()
                .unwrap(),
            example_clock,
            1_000,
            EXAMPLE_STEP,
        ),
        breaker(RESILIENCE, tower_resilience()),
        breaker("slidewin_breaker", slidewin_breaker()),
        Variant {
            peer: "slidewin_breaker",
            ..breaker("slidewin_shed", slidewin_shed())
        },
    ]
}

/// The peers, by name.
const GOVERNOR: &str = "tower_governor";
const RESILIENCE: &str = "tower_resilience_breaker";

/// A router under a breaker, which sends no header.
fn breaker(name: &'static str, router: Router) -> Variant {
    Variant {
        name,
        router,
        clock: ManualClock::default(),
        headers: &[],
        prefill: 0,
        step: STEP,
        peer: RESILIENCE,
    }
}

/// Ours: trips at half the calls failing, over its default window; never trips here.
fn slidewin_breaker() -> Router {
    let breaker = CircuitBreaker::builder().error_ratio(0.5);
    router().layer(CircuitBreakerLayer::builder(breaker).build().unwrap())
}

/// Ours: an adaptive concurrency limit; one request at a time never reaches it.
fn slidewin_shed() -> Router {
    let limit = AdaptiveLimit::builder(Duration::from_secs(1));
    router().layer(ShedLayer::builder(limit).build().unwrap())
}

/// tower-resilience's, counting a `5xx` as a failure like ours; a `Router` needs its layers
/// infallible, so its errors (an open circuit) become `503`s.
fn tower_resilience() -> Router {
    use tower_resilience_circuitbreaker::CircuitBreakerLayer as Peer;
    let peer = Peer::builder()
        .failure_rate_threshold(0.5)
        .failure_classifier(|result: &Result<Response<Body>, Infallible>| {
            result.as_ref().is_ok_and(|r| r.status().is_server_error())
        })
        .build()
        .unwrap();
    let layers = ServiceBuilder::new()
        .layer(HandleErrorLayer::new(|_| async {
            StatusCode::SERVICE_UNAVAILABLE
        }))
        .layer(peer);
    router().layer(layers)
}

/// A builder of our layer on the memory backend with `limit`, keyed by the peer's address.
fn layer(limit: Limit) -> RateLimitLayerBuilder<Memory> {
    RateLimitLayer::builder(Memory::new()).limit(limit.key(Key::peer_ip()))
}

/// One of our routers: `layer` on the router, sending the IETF fields.
fn ours<C: Clock + Send + Sync + 'static>(
    name: &'static str,
    layer: RateLimitLayer<Memory, C>,
    clock: ManualClock,
    prefill: u64,
    step: Duration,
) -> Variant {
    Variant {
        name,
        router: router().layer(layer),
        clock,
        headers: &["ratelimit-policy", "ratelimit"],
        prefill,
        step,
        peer: GOVERNOR,
    }
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn per_request(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("layer/per_request");
    // `LAYER_ONLY=<name>` prepares and measures that router alone (for a profiler: the
    // sliding logs' prefill would otherwise dominate any profile).
    let only = std::env::var("LAYER_ONLY").ok();
    for variant in variants() {
        if only.as_deref().is_some_and(|name| name != variant.name) {
            continue;
        }
        variant.prepare(&rt);
        group.bench_function(variant.name, |b| {
            b.to_async(&rt).iter(|| variant.one());
        });
        variant.check(&rt); // still admitting after the measurement
    }
    group.finish();
}

/// Requests per variant per round of the interleaved pass.
const REQUESTS: u64 = 20_000;
const ROUNDS: usize = 31;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The same routers, interleaved: each round times `REQUESTS` requests through each, in an
/// order that rotates from round to round, so that the machine's drift falls on all alike.
/// Prints each one's median time per request, its overhead over `no_layer` (the medians'
/// difference), and the median over rounds of each round's ratio of its overhead to its
/// peer's. Run when `LAYER_INTERLEAVED` is set:
/// `LAYER_INTERLEAVED=1 cargo bench -p slidewin-http --features axum --bench layer`; with
/// any value but `1`, only `no_layer` and the routers whose names contain it (and their peers).
fn interleaved(only: &str) {
    let rt = runtime();
    let all = variants();
    let kept = |v: &Variant| only == "1" || v.name.contains(only);
    let peers: Vec<&str> = all.iter().filter(|v| kept(v)).map(|v| v.peer).collect();
    let variants: Vec<Variant> = all
        .into_iter()
        .enumerate()
        .filter(|(i, v)| *i == 0 || kept(v) || peers.contains(&v.name))
        .map(|(_, v)| v)
        .collect();
    for variant in &variants {
        variant.prepare(&rt);
        rt.block_on(variant.run(REQUESTS)); // warm up
    }
    let mut times = vec![Vec::with_capacity(ROUNDS); variants.len()];
    for round in 0..ROUNDS {
        for k in 0..variants.len() {
            let i = (round + k) % variants.len();
            let start = Instant::now();
            rt.block_on(variants[i].run(REQUESTS));
            times[i].push(start.elapsed().as_secs_f64() * 1e9 / REQUESTS as f64);
        }
    }
    for variant in &variants {
        variant.check(&rt);
    }
    let overhead = |i: usize, round: usize| times[i][round] - times[0][round];
    let medians: Vec<f64> = times.iter().map(|t| median(t.clone())).collect();
    println!("layer/interleaved: {ROUNDS} rounds of {REQUESTS} requests per router, medians");
    for (i, variant) in variants.iter().enumerate() {
        let peer = variants.iter().position(|v| v.name == variant.peer);
        let ratio = peer.map_or(String::new(), |peer| {
            let ratios = (0..ROUNDS).map(|r| overhead(i, r) / overhead(peer, r));
            format!(
                "  vs {}'s overhead {:.2}x",
                variant.peer,
                median(ratios.collect())
            )
        });
        println!(
            "{:<46} {:>8.1} ns  overhead {:>7.1} ns{ratio}",
            variant.name,
            medians[i],
            medians[i] - medians[0],
        );
    }
}

criterion_group!(benches, per_request);

/// `LAYER_ONLY=<name> LAYER_REQUESTS=<n>`: that router prepared, then `n` requests and no
/// timing, for an instruction count (`valgrind --tool=callgrind
/// --toggle-collect='*counted_requests*'`, divided by `n`).
fn counted(only: &str, requests: u64) {
    let rt = runtime();
    let variant = variants()
        .into_iter()
        .find(|v| v.name == only)
        .unwrap_or_else(|| panic!("LAYER_ONLY={only}: no such router"));
    variant.prepare(&rt);
    counted_requests(&rt, &variant, requests);
    variant.check(&rt);
}

/// The requests an instruction count toggles on: a function of its own, never inlined.
#[inline(never)]
fn counted_requests(rt: &Runtime, variant: &Variant, requests: u64) {
    rt.block_on(variant.run(requests));
}

fn main() {
    let requests = std::env::var("LAYER_REQUESTS").ok();
    if let (Some(only), Some(requests)) = (std::env::var("LAYER_ONLY").ok(), requests) {
        let requests = requests
            .parse()
            .unwrap_or_else(|e| panic!("LAYER_REQUESTS={requests}: {e}"));
        counted(&only, requests);
        return;
    }
    if let Ok(only) = std::env::var("LAYER_INTERLEAVED") {
        interleaved(&only);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
