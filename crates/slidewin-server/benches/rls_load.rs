//! A closed-loop load generator for Envoy's RLS v3 gRPC, against `slidewin serve` and against
//! the ceiling (the same tonic server with a handler that answers OK at once), in the same
//! run, interleaved. `cargo bench -p slidewin-server --bench rls_load`.
//!
//! Each stream is a tokio task with a tonic connection of its own (one HTTP/2 connection per
//! stream, by default), sending `ShouldRateLimit` and waiting for its answer before sending the
//! next (closed loop). A shared `Channel` would multiplex every stream over one connection
//! behind one buffer task: that task, not the server, would then bound what 64 streams can do,
//! and both servers would measure the client. Envoy itself holds one connection per worker
//! thread to its rate limit service; `RLS_CONNECTIONS=n` spreads the streams over `n`
//! connections instead (1: one shared `Channel`).
//!
//! The servers, each on 127.0.0.1, all started before the first measurement:
//!
//! - `ceiling`: tonic's server with a `RateLimitService` that answers `OK`, one `OK` status per
//!   descriptor, without looking at anything else: what the transport costs;
//! - `slidewin-memory`: `slidewin serve` on the memory backend (`slidewin_server::serve`, the
//!   admin surfaces closed), the config below;
//! - `slidewin-listener`: the same listener with a config that knows no domain `bench`, so
//!   every check is `OK` with no limit at once: our listener's cost beside tonic's (`ceiling`);
//! - `slidewin-redis` (only with `RLS_REDIS=1`): the same on a `redis-server` of its own
//!   (`slidewin_test_support::RedisServer`, on the same two cores), failure policy closed.
//!
//! The config: a descriptor `client` (any value) with two limits, `burst` 1000 a second and
//! `hourly` 10,000 an hour (the default algorithm, the exact sliding log, or `RLS_ALGORITHM`'s;
//! 10,000 is the most a sliding log holds on Redis). The keys: 10,000 clients, `client-0` to `client-9999`, in turn
//! (a counter shared by the streams): so the checks spread over 20,000 sliding logs, not one
//! hot key, and every check is admitted (a client is checked once in 10,000 checks; `burst`
//! would bind at 10 million checks a second, `hourly` after 100 million checks in an hour).
//! Before measuring, a probe client's remaining must go down by one a check and its answer
//! carry both limits; the table counts any answer that is not `OK` as denied (there should be
//! none).
//!
//! Each measurement is bounded in time (`RLS_SECONDS`, default 3, after `RLS_WARMUP_MS`, default
//! 300, of the same load not recorded) and in count (`RLS_MAX_CHECKS`, default 2,000,000 checks).
//! Every check's latency is recorded, in nanoseconds, in a `Vec<u32>` per stream (8 MB at the
//! count's bound); the percentiles are nearest-rank over the sorted whole. A run is `RLS_ROUNDS`
//! rounds (default 3); each round measures every server at 1, 16 and 64 streams (`RLS_STREAMS`,
//! default `1,16,64`), in an order that rotates from round to round, so that the machine's drift
//! falls on all alike. The table shows, for each, the median over rounds of checks a second
//! and of each percentile, and the median over rounds of the ratio of its checks a second to
//! the ceiling's at the same streams in the same round.
//!
//! The servers run on a multi-threaded tokio runtime of their own, the clients on another, each
//! with as many workers as the machine has CPUs (`RLS_SERVER_THREADS`, `RLS_CLIENT_THREADS`),
//! as two processes would: client and server share the machine's cores. The servers' CPU time
//! per check answered is their runtime threads' time on a CPU over the measurement
//! (`/proc/self/task/*/schedstat`, user and system) divided by the checks: steadier than
//! checks a second on a machine shared with the clients.
//!
//! `RLS_ONLY=<name>` measures that server alone (for a profiler), without a ratio.
//!
//! `cargo bench` passes `--bench`; without it (`cargo test --benches`) this does nothing.

#[path = "support/ceiling.rs"]
mod ceiling;
#[path = "support/load.rs"]
mod load;

use ceiling::{Server, ceiling};

use load::{connect, env, median, runtime};
use tonic::transport::Channel;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use slidewin::time::MonotonicClock;
use slidewin_server::{Bounds, Config, Endpoints, Engine, Listeners, Metrics, ServeOptions};
use slidewin_store::Backend;
use tokio::sync::oneshot;

/// The clients checked in turn.
const CLIENTS: u64 = 10_000;

const CONFIG: &str = "domain: bench
descriptors:
  - key: client
    limits:
      - {name: burst, quota: 1000 per second}
      - {name: hourly, quota: 10000 per hour}
";

/// The name of the server runtime's threads, whose CPU time is the servers'.
const SERVER_THREADS: &str = "rls-server";

/// What the environment says, with the defaults.
struct Settings {
    seconds: Duration,
    warmup: Duration,
    max_checks: u64,
    rounds: usize,
    streams: Vec<usize>,
    connections: Option<usize>,
    redis: bool,
    only: Option<String>,
    server_threads: usize,
    client_threads: usize,
}

impl Settings {
    fn from_env() -> Settings {
        let cpus = std::thread::available_parallelism().map_or(2, usize::from);
        let streams = std::env::var("RLS_STREAMS").unwrap_or_else(|_| "1,16,64".to_owned());
        Settings {
            seconds: Duration::from_secs_f64(env("RLS_SECONDS").unwrap_or(3.0)),
            warmup: Duration::from_millis(env("RLS_WARMUP_MS").unwrap_or(300)),
            max_checks: env("RLS_MAX_CHECKS").unwrap_or(2_000_000),
            rounds: env::<usize>("RLS_ROUNDS").unwrap_or(3).max(1),
            streams: streams
                .split(',')
                .map(|s| {
                    s.trim()
                        .parse::<usize>()
                        .ok()
                        .filter(|&n| n > 0)
                        .unwrap_or_else(|| panic!("RLS_STREAMS={streams}: counts above 0"))
                })
                .collect(),
            connections: env::<usize>("RLS_CONNECTIONS").map(|n| n.max(1)),
            redis: std::env::var("RLS_REDIS").is_ok_and(|v| v == "1"),
            only: std::env::var("RLS_ONLY")
                .ok()
                .filter(|name| !name.is_empty()),
            server_threads: env("RLS_SERVER_THREADS").unwrap_or(cpus),
            client_threads: env("RLS_CLIENT_THREADS").unwrap_or(cpus),
        }
    }
}

/// `slidewin serve` on `backend`, with [`CONFIG`], its limits under `RLS_ALGORITHM` (as the
/// config names one: `gcra`, `sliding_counter`, ...) when set.
async fn slidewin<B: Backend>(name: &'static str, backend: B) -> Server {
    let config = match std::env::var("RLS_ALGORITHM") {
        Ok(algorithm) if !algorithm.is_empty() => CONFIG
            .replace(
                " per second}",
                &format!(" per second, algorithm: {algorithm}}}"),
            )
            .replace(
                " per hour}",
                &format!(" per hour, algorithm: {algorithm}}}"),
            ),
        _ => CONFIG.to_owned(),
    };
    serving(name, backend, &config, true).await
}

/// `slidewin serve`'s listener and endpoints with a config that knows no domain `bench`: each
/// check answered `OK` with no limit at once, as the ceiling answers, through our listener
/// instead of tonic's server (issue 32: the listener's own cost against tonic's).
async fn listener_alone() -> Server {
    let elsewhere = "domain: elsewhere\ndescriptors:\n  - key: client\n    rate_limit: {unit: second, requests_per_unit: 1}\n";
    serving(
        "slidewin-listener",
        slidewin_store::Memory::new(),
        elsewhere,
        false,
    )
    .await
}

/// `slidewin serve` on `backend` with the config `text`; `limited`: its answers carry limits.
async fn serving<B: Backend>(name: &'static str, backend: B, text: &str, limited: bool) -> Server {
    let config = Config::parse(text, "bench.yaml").unwrap();
    let engine = Engine::new(
        backend,
        config,
        Arc::new(MonotonicClock),
        Bounds::default(),
        Metrics::new(),
    )
    .unwrap();
    let service = Endpoints::new(engine, vec![]);
    let options = ServeOptions {
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        http_addr: "127.0.0.1:0".parse().unwrap(),
        admin: false,
        ..ServeOptions::default()
    };
    let listeners = Listeners::bind(&options).await.unwrap();
    let addr = listeners.grpc_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        slidewin_server::serve(service, listeners, false, async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    Server {
        name,
        addr,
        stop,
        task,
        limited,
    }
}

fn request(client: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: "bench".to_owned(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "client".to_owned(),
                value: client.to_owned(),
            }],
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

/// Before measuring: a probe client is answered `OK`; on slidewin, with both limits, `burst`
/// binding, and one less remaining a check.
async fn assert_answers(server: &Server) {
    let mut client = RateLimitServiceClient::new(connect(server.addr).await);
    let probe = request(&format!("probe-{}", server.name));
    let first = client
        .should_rate_limit(probe.clone())
        .await
        .unwrap()
        .into_inner();
    let second = client.should_rate_limit(probe).await.unwrap().into_inner();
    for answer in [&first, &second] {
        assert_eq!(answer.overall_code, Code::Ok as i32, "{}", server.name);
        assert_eq!(answer.statuses.len(), 1, "{}", server.name);
    }
    if server.limited {
        let binding = first.statuses[0].current_limit.as_ref();
        assert_eq!(
            binding.map(|l| l.name.as_str()),
            Some("burst"),
            "{}",
            server.name
        );
        assert_eq!(
            second.statuses[0].limit_remaining + 1,
            first.statuses[0].limit_remaining,
            "{}: a check must count",
            server.name
        );
        let policy = first
            .response_headers_to_add
            .iter()
            .find(|h| h.key == "ratelimit-policy")
            .map(|h| h.value.split(',').count());
        assert_eq!(policy, Some(2), "{}: both limits apply", server.name);
    }
}

/// The CPU time the threads named `name` (a runtime's: workers and blocking threads) have
/// used, user and system: each thread's `/proc/self/task/<tid>/schedstat`, whose first field
/// is its time on a CPU in nanoseconds (`utime` + `stime` at a nanosecond's resolution instead
/// of a tick's). A thread that ended is missing from the sum: take the difference over a
/// span in which the runtime's threads live. Zero where `/proc` has none of it (not Linux).
pub(crate) fn cpu_of_threads(name: &str) -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let nanos = tasks
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm")).is_ok_and(|comm| comm.trim() == name)
        })
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
            stat.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum();
    Duration::from_nanos(nanos)
}

/// Redis's time in `EVALSHA` since the last `CONFIG RESETSTAT`, and its calls.
fn script_time(redis: &slidewin_test_support::redis::RedisServer) -> Option<(Duration, u64)> {
    let stats = redis.cli(&["info", "commandstats"]);
    let line = stats.lines().find(|l| l.starts_with("cmdstat_evalsha:"))?;
    let field = |name: &str| -> Option<u64> {
        line.split([':', ','])
            .find_map(|f| f.strip_prefix(name)?.trim().parse().ok())
    };
    Some((Duration::from_micros(field("usec=")?), field("calls=")?))
}

/// One measurement's result.
struct Measured {
    checks: u64,
    elapsed: Duration,
    /// The CPU time the server's runtime used meanwhile.
    server_cpu: Duration,
    /// On Redis: Redis's own time in the scripts meanwhile (`INFO commandstats`'s `usec` of
    /// `EVALSHA`, which batch many checks a call), and the calls.
    redis_scripts: Option<(Duration, u64)>,
    /// Every check's latency, in nanoseconds, sorted.
    latencies: Vec<u32>,
    denied: u64,
}

impl Measured {
    fn per_second(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)] // a count of checks, far below 2^52
        let checks = self.checks as f64;
        checks / self.elapsed.as_secs_f64()
    }

    /// The server's CPU time per check answered, in microseconds.
    fn cpu_per_check_us(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)] // a count of checks, far below 2^52
        let checks = self.checks.max(1) as f64;
        self.server_cpu.as_secs_f64() * 1e6 / checks
    }

    /// The `p`th quantile, nearest rank, in microseconds.
    fn quantile_us(&self, p: f64) -> f64 {
        load::quantile(&self.latencies, p) / 1e3
    }
}

/// What one stream did.
struct Stream {
    latencies: Vec<u32>,
    denied: u64,
    finished: Instant,
}

/// One stream's closed loop until `deadline` or until the shared `tickets` reach `max`: each
/// ticket is one check, of the client it numbers.
async fn stream(
    channel: Channel,
    requests: Arc<Vec<RateLimitRequest>>,
    tickets: Arc<AtomicU64>,
    max: u64,
    deadline: Instant,
    record: bool,
) -> Stream {
    let mut client = RateLimitServiceClient::new(channel);
    let mut latencies = Vec::new();
    let mut denied = 0;
    loop {
        let ticket = tickets.fetch_add(1, Ordering::Relaxed);
        if ticket >= max {
            break;
        }
        #[allow(clippy::cast_possible_truncation)] // below CLIENTS
        let request = requests[(ticket % CLIENTS) as usize].clone();
        let start = Instant::now();
        if start >= deadline {
            break;
        }
        let answer = client
            .should_rate_limit(request)
            .await
            .unwrap_or_else(|status| panic!("a check failed: {status}"))
            .into_inner();
        let took = start.elapsed();
        if record {
            latencies.push(u32::try_from(took.as_nanos()).unwrap_or(u32::MAX));
        }
        if answer.overall_code != Code::Ok as i32 {
            denied += 1;
        }
    }
    Stream {
        latencies,
        denied,
        finished: Instant::now(),
    }
}

/// `streams` closed loops on `server` for `settings.seconds` (after the warm-up), over
/// connections of their own (or `settings.connections` of them).
async fn measure(
    server: &Server,
    streams: usize,
    settings: &Settings,
    requests: &Arc<Vec<RateLimitRequest>>,
    tickets: &Arc<AtomicU64>,
) -> Measured {
    let connections = settings.connections.unwrap_or(streams).min(streams);
    let mut channels = Vec::with_capacity(connections);
    for _ in 0..connections {
        channels.push(connect(server.addr).await);
    }
    let run = |duration: Duration, max: u64, record: bool| {
        let start = Instant::now();
        let deadline = start + duration;
        // The count's bound is on this run's checks: the shared counter goes on from here.
        let max = tickets.load(Ordering::Relaxed).saturating_add(max);
        let tasks: Vec<_> = (0..streams)
            .map(|i| {
                tokio::spawn(stream(
                    channels[i % connections].clone(),
                    Arc::clone(requests),
                    Arc::clone(tickets),
                    max,
                    deadline,
                    record,
                ))
            })
            .collect();
        async move {
            let mut done = Vec::with_capacity(tasks.len());
            for task in tasks {
                done.push(task.await.unwrap());
            }
            (start, done)
        }
    };
    let _ = run(settings.warmup, u64::MAX, false).await;
    let cpu_before = cpu_of_threads(SERVER_THREADS);
    let (start, done) = run(settings.seconds, settings.max_checks, true).await;
    let server_cpu = cpu_of_threads(SERVER_THREADS).saturating_sub(cpu_before);
    let finished = done.iter().map(|s| s.finished).max().unwrap_or(start);
    let denied = done.iter().map(|s| s.denied).sum();
    let mut latencies: Vec<u32> = done.into_iter().flat_map(|s| s.latencies).collect();
    latencies.sort_unstable();
    Measured {
        checks: latencies.len() as u64,
        elapsed: finished - start,
        server_cpu,
        redis_scripts: None,
        latencies,
        denied,
    }
}

fn main() {
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("rls_load: a load generator; run it with `cargo bench --bench rls_load`");
        return;
    }
    let settings = Settings::from_env();
    let server_rt = runtime(settings.server_threads, SERVER_THREADS);
    let client_rt = runtime(settings.client_threads, "rls-client");

    let redis = settings
        .redis
        .then(slidewin_test_support::redis::RedisServer::start);
    let servers: Vec<Server> = server_rt.block_on(async {
        let mut servers = vec![
            ceiling().await,
            slidewin("slidewin-memory", slidewin_store::Memory::new()).await,
            listener_alone().await,
        ];
        if let Some(redis) = &redis {
            let limiter = slidewin_redis::RedisLimiter::connect(&redis.url())
                .await
                .unwrap()
                .with_failure_policy(slidewin_server::FailurePolicy::Closed);
            let backend = slidewin_store::Redis::new(
                limiter.with_failure_policy(slidewin_server::FailurePolicy::Closed),
            );
            servers.push(slidewin("slidewin-redis", backend).await);
        }
        servers
    });
    client_rt.block_on(async {
        for server in &servers {
            assert_answers(server).await;
        }
    });

    let requests: Arc<Vec<RateLimitRequest>> = Arc::new(
        (0..CLIENTS)
            .map(|i| request(&format!("client-{i}")))
            .collect(),
    );
    let tickets = Arc::new(AtomicU64::new(0));
    // results[server][streams index]: one measurement per round.
    let mut results: Vec<Vec<Vec<Measured>>> = servers
        .iter()
        .map(|_| settings.streams.iter().map(|_| Vec::new()).collect())
        .collect();
    println!(
        "rls_load: {} rounds of {:?} s (after {:?} of warm-up, at most {} checks) per server and streams; connections: {}",
        settings.rounds,
        settings.seconds.as_secs_f64(),
        settings.warmup,
        settings.max_checks,
        settings
            .connections
            .map_or_else(|| "one per stream".to_owned(), |n| n.to_string()),
    );
    for round in 0..settings.rounds {
        for (s, &streams) in settings.streams.iter().enumerate() {
            for k in 0..servers.len() {
                let i = (round + s + k) % servers.len();
                if settings
                    .only
                    .as_deref()
                    .is_some_and(|name| name != servers[i].name)
                {
                    continue;
                }
                let on_redis = redis
                    .as_ref()
                    .filter(|_| servers[i].name == "slidewin-redis");
                if let Some(redis) = on_redis {
                    redis.cli(&["config", "resetstat"]);
                }
                let mut measured = client_rt.block_on(measure(
                    &servers[i],
                    streams,
                    &settings,
                    &requests,
                    &tickets,
                ));
                measured.redis_scripts = on_redis.and_then(script_time);
                println!(
                    "  round {}: {:<16} {streams:>3} streams {:>9.0} checks/s  server CPU {:>5.1} us/check  p50 {:>7.1} us  p99 {:>7.1} us  p99.9 {:>7.1} us  denied {}",
                    round + 1,
                    servers[i].name,
                    measured.per_second(),
                    measured.cpu_per_check_us(),
                    measured.quantile_us(0.5),
                    measured.quantile_us(0.99),
                    measured.quantile_us(0.999),
                    measured.denied,
                );
                if let Some((time, calls)) = measured.redis_scripts {
                    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
                    let (checks, calls) = (measured.checks.max(1) as f64, calls.max(1) as f64);
                    let us = time.as_secs_f64() * 1e6;
                    println!(
                        "           Redis: {:.2} us a check in its scripts, {:.1} checks a call (INFO commandstats)",
                        us / checks,
                        checks / calls,
                    );
                }
                results[i][s].push(measured);
            }
        }
    }
    for server in &servers {
        client_rt.block_on(assert_answers(server)); // still counting after the load
    }

    println!();
    println!(
        "| server | streams | checks/s | server CPU per check (µs) | p50 (µs) | p99 (µs) | p99.9 (µs) | vs ceiling | denied |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (s, &streams) in settings.streams.iter().enumerate() {
        for (i, server) in servers.iter().enumerate() {
            let runs = &results[i][s];
            if runs.is_empty() {
                continue; // not measured (`RLS_ONLY`)
            }
            let of = |f: &dyn Fn(&Measured) -> f64| median(runs.iter().map(f).collect());
            let ceiling = &results[0][s];
            let ratio = if ceiling.is_empty() {
                "–".to_owned()
            } else {
                let ratios = runs
                    .iter()
                    .zip(ceiling)
                    .map(|(m, ceiling)| m.per_second() / ceiling.per_second());
                format!("{:.0}%", median(ratios.collect()) * 100.0)
            };
            println!(
                "| {} | {streams} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} | {ratio} | {} |",
                server.name,
                of(&Measured::per_second),
                of(&Measured::cpu_per_check_us),
                of(&|m| m.quantile_us(0.5)),
                of(&|m| m.quantile_us(0.99)),
                of(&|m| m.quantile_us(0.999)),
                runs.iter().map(|m| m.denied).sum::<u64>(),
            );
        }
    }

    server_rt.block_on(async {
        for server in servers {
            let _ = server.stop.send(());
            let _ = server.task.await;
        }
    });
    drop(redis);
}
