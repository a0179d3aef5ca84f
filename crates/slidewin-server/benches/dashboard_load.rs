//! The data plane's latency with the dashboard open (issue 29, finding 4): `slidewin serve`
//! in-process on a config of 4,000 rules, one gRPC client checking in a closed loop, with no
//! dashboard event stream open and with 32 (the most the service allows), interleaved.
//! `cargo bench -p slidewin-server --bench dashboard_load`.
//!
//! The service: `slidewin_server::serve` on the memory backend, the admin surfaces open, on
//! 127.0.0.1, on a multi-threaded tokio runtime of its own (`DASH_SERVER_THREADS`, default the
//! machine's CPUs). The config: domain `api`, descriptors `r0` to `r3999` (`DASH_RULES`), each
//! `1000 per second` on the default algorithm (the exact sliding log).
//!
//! The client, on a runtime of its own (`DASH_CLIENT_THREADS`, default the CPUs), as a second
//! process would: one tonic connection, one check at a time, each on the next rule in turn
//! (`r0`, `r1`, ...), so that every rule has traffic and the dashboard's ranking of the
//! busiest rules is real work. Every check's latency is recorded; the percentiles are
//! nearest-rank.
//!
//! The dashboards: `DASH_STREAMS` (default 32) tasks on the client's runtime, each with an
//! HTTP/1 connection of its own on `GET /api/events`, reading every byte as a browser would.
//! Each has its first event before the measurement starts, and they are closed after it.
//!
//! A run is `DASH_ROUNDS` rounds (default 3); each measures the checks for `DASH_SECONDS`
//! (default 5, after `DASH_WARMUP_MS`, default 500, of the same load not recorded) with no
//! stream and with the streams open, in an order that alternates from round to round. The
//! table shows each measurement, then the median over rounds of each column.
//!
//! Around the rounds, what one snapshot costs on its own, built and serialised on the bench's
//! thread as the feed builds it, 21 times: before any check (every rule idle) and after the
//! rounds (every rule with counts in its minute).
//!
//! `cargo bench` passes `--bench`; without it (`cargo test --benches`) this does nothing.

#[path = "support/load.rs"]
mod load;

use load::{connect, env, median, runtime};
use tonic::transport::Channel;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use slidewin::time::MonotonicClock;
use slidewin_server::{Bounds, Config, Endpoints, Engine, Listeners, Metrics, ServeOptions};
use tokio::sync::oneshot;

/// What the environment says, with the defaults.
struct Settings {
    rules: usize,
    streams: usize,
    seconds: Duration,
    warmup: Duration,
    rounds: usize,
    server_threads: usize,
    client_threads: usize,
}

impl Settings {
    fn from_env() -> Settings {
        let cpus = std::thread::available_parallelism().map_or(2, usize::from);
        Settings {
            rules: env::<usize>("DASH_RULES").unwrap_or(4_000).max(1),
            streams: env::<usize>("DASH_STREAMS").unwrap_or(32).max(1),
            seconds: Duration::from_secs_f64(env("DASH_SECONDS").unwrap_or(5.0)),
            warmup: Duration::from_millis(env("DASH_WARMUP_MS").unwrap_or(500)),
            rounds: env::<usize>("DASH_ROUNDS").unwrap_or(3).max(1),
            server_threads: env("DASH_SERVER_THREADS").unwrap_or(cpus),
            client_threads: env("DASH_CLIENT_THREADS").unwrap_or(cpus),
        }
    }
}

fn config(rules: usize) -> String {
    let mut yaml = String::from("domain: api\ndescriptors:\n");
    for i in 0..rules {
        yaml.push_str(&format!(
            "  - key: r{i}\n    rate_limit: {{unit: second, requests_per_unit: 1000}}\n"
        ));
    }
    yaml
}

/// A service on free ports of 127.0.0.1.
struct Started {
    grpc: SocketAddr,
    http: SocketAddr,
    stop: oneshot::Sender<()>,
    service: Endpoints<slidewin_store::Memory>,
}

/// The service on free ports of 127.0.0.1.
async fn start(rules: usize) -> Started {
    let config = Config::parse(&config(rules), "bench.yaml").unwrap();
    let engine = Engine::new(
        slidewin_store::Memory::new(),
        config,
        Arc::new(MonotonicClock),
        Bounds::default(),
        Metrics::new(),
    )
    .unwrap();
    let options = ServeOptions {
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        http_addr: "127.0.0.1:0".parse().unwrap(),
        admin: true,
        ..ServeOptions::default()
    };
    let listeners = Listeners::bind(&options).await.unwrap();
    let (grpc, http) = (
        listeners.grpc_addr().unwrap(),
        listeners.http_addr().unwrap(),
    );
    let (stop, stopped) = oneshot::channel::<()>();
    let service = Endpoints::new(engine, vec![]);
    let served = service.clone();
    tokio::spawn(async move {
        slidewin_server::serve(served, listeners, true, async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    Started {
        grpc,
        http,
        stop,
        service,
    }
}

/// What one snapshot costs, built and serialised as the dashboard's feed does (on this
/// thread, with no check running): the median and the most of `n`, in milliseconds.
fn snapshot_cost(service: &Endpoints<slidewin_store::Memory>, n: usize) -> (f64, f64) {
    let mut took: Vec<f64> = (0..n)
        .map(|_| {
            let start = Instant::now();
            let json = serde_json::to_vec(&service.snapshot()).unwrap();
            assert!(!json.is_empty());
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    took.sort_by(f64::total_cmp);
    (took[n / 2], took[n - 1])
}

fn request(rule: usize) -> RateLimitRequest {
    RateLimitRequest {
        domain: "api".to_owned(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: format!("r{rule}"),
                value: "bench".to_owned(),
            }],
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

/// Open event streams, read to the end by tasks of their own.
struct Dashboards {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    events: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
    opened: Instant,
}

impl Dashboards {
    /// `n` streams, each once it has its first event.
    async fn open(http: SocketAddr, n: usize) -> Dashboards {
        let events = Arc::new(AtomicU64::new(0));
        let bytes = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::with_capacity(n);
        let mut firsts = Vec::with_capacity(n);
        for _ in 0..n {
            let (first, got_first) = oneshot::channel::<()>();
            firsts.push(got_first);
            let (events, bytes) = (Arc::clone(&events), Arc::clone(&bytes));
            tasks.push(tokio::spawn(async move {
                let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
                let uri = format!("http://{http}/api/events").parse().unwrap();
                let response = client.get(uri).await.unwrap();
                assert_eq!(response.status(), 200, "an event stream");
                let mut body = response.into_body();
                let mut first = Some(first);
                while let Some(frame) = body.frame().await {
                    let Ok(data) = frame.unwrap().into_data() else {
                        continue;
                    };
                    bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
                    let ends = data.windows(2).filter(|w| *w == b"\n\n").count();
                    events.fetch_add(ends as u64, Ordering::Relaxed);
                    if ends > 0
                        && let Some(first) = first.take()
                    {
                        let _ = first.send(());
                    }
                }
            }));
        }
        for got_first in firsts {
            got_first.await.expect("a first event");
        }
        Dashboards {
            tasks,
            events,
            bytes,
            opened: Instant::now(),
        }
    }

    /// Closes the streams: the events a stream received a second while open, and the bytes
    /// an event weighed.
    fn close(self) -> (f64, f64) {
        for task in &self.tasks {
            task.abort();
        }
        let events = self.events.load(Ordering::Relaxed) as f64;
        let bytes = self.bytes.load(Ordering::Relaxed) as f64;
        let streams = self.tasks.len().max(1) as f64;
        (
            events / streams / self.opened.elapsed().as_secs_f64(),
            bytes / events.max(1.0),
        )
    }
}

/// The checks of one measurement: every latency in nanoseconds, sorted, and the time taken.
struct Measured {
    latencies: Vec<u32>,
    elapsed: Duration,
}

impl Measured {
    /// The `p`th quantile, nearest rank, in milliseconds.
    fn quantile_ms(&self, p: f64) -> f64 {
        load::quantile(&self.latencies, p) / 1e6
    }

    fn per_second(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }
}

/// One client's closed loop for `duration`, on the rules in turn from `next`.
async fn checks(
    client: &mut RateLimitServiceClient<Channel>,
    requests: &[RateLimitRequest],
    next: &mut usize,
    duration: Duration,
) -> Measured {
    let start = Instant::now();
    let mut latencies = Vec::new();
    while start.elapsed() < duration {
        let request = requests[*next % requests.len()].clone();
        *next += 1;
        let sent = Instant::now();
        let answer = client
            .should_rate_limit(request)
            .await
            .unwrap_or_else(|status| panic!("a check failed: {status}"))
            .into_inner();
        latencies.push(u32::try_from(sent.elapsed().as_nanos()).unwrap_or(u32::MAX));
        assert_eq!(
            answer.overall_code,
            Code::Ok as i32,
            "every check is admitted"
        );
    }
    latencies.sort_unstable();
    Measured {
        latencies,
        elapsed: start.elapsed(),
    }
}

/// One row: streams open, checks a second, p50, p90, p99, p99.9, max (ms), events a second a
/// stream, bytes an event.
type Row = (usize, f64, f64, f64, f64, f64, f64, f64, f64);

fn print_row(label: &str, row: &Row) {
    let (streams, rate, p50, p90, p99, p999, max, events, bytes) = *row;
    println!(
        "{label:>7} | {streams:>7} | {rate:>9.0} | {p50:>6.3} | {p90:>6.3} | {p99:>6.3} | {p999:>6.3} | {max:>7.2} | {events:>6.2} | {bytes:>8.0}"
    );
}

fn main() {
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("dashboard_load: run it with `cargo bench --bench dashboard_load`");
        return;
    }
    let settings = Settings::from_env();
    let server_rt = runtime(settings.server_threads, "dash-server");
    let client_rt = runtime(settings.client_threads, "dash-client");
    let Started {
        grpc,
        http,
        stop,
        service,
    } = server_rt.block_on(start(settings.rules));
    println!(
        "dashboard_load: {} rules, {} s a measurement, {} rounds, server {} threads, client {} \
         threads, {} CPUs",
        settings.rules,
        settings.seconds.as_secs_f64(),
        settings.rounds,
        settings.server_threads,
        settings.client_threads,
        std::thread::available_parallelism().map_or(0, usize::from),
    );
    // Before any check, no rule has counts.
    let (idle_ms, idle_max_ms) = snapshot_cost(&service, 21);
    println!(
        "one snapshot of {} idle rules, built and serialised: {idle_ms:.2} ms (median of 21), \
         {idle_max_ms:.2} ms at most",
        settings.rules
    );
    println!(
        "  round | streams | checks/s  | p50 ms | p90 ms | p99 ms | p99.9  | max ms  | ev/s   | B/event"
    );
    let rows: Vec<Row> = client_rt.block_on(async {
        let mut client = RateLimitServiceClient::new(connect(grpc).await);
        let requests: Vec<RateLimitRequest> = (0..settings.rules).map(request).collect();
        let mut next = 0;
        let mut rows = Vec::new();
        for round in 0..settings.rounds {
            let order = if round % 2 == 0 {
                [0, settings.streams]
            } else {
                [settings.streams, 0]
            };
            for streams in order {
                let dashboards = if streams > 0 {
                    Some(Dashboards::open(http, streams).await)
                } else {
                    None
                };
                let _ = checks(&mut client, &requests, &mut next, settings.warmup).await;
                let m = checks(&mut client, &requests, &mut next, settings.seconds).await;
                let (events, bytes) = dashboards.map_or((0.0, 0.0), Dashboards::close);
                let row = (
                    streams,
                    m.per_second(),
                    m.quantile_ms(0.50),
                    m.quantile_ms(0.90),
                    m.quantile_ms(0.99),
                    m.quantile_ms(0.999),
                    m.quantile_ms(1.0),
                    events,
                    bytes,
                );
                print_row(&(round + 1).to_string(), &row);
                rows.push(row);
            }
        }
        rows
    });
    for streams in [0, settings.streams] {
        let of: Vec<&Row> = rows.iter().filter(|row| row.0 == streams).collect();
        let col = |pick: fn(&Row) -> f64| median(of.iter().map(|row| pick(row)).collect());
        let row = (
            streams,
            col(|r| r.1),
            col(|r| r.2),
            col(|r| r.3),
            col(|r| r.4),
            col(|r| r.5),
            col(|r| r.6),
            col(|r| r.7),
            col(|r| r.8),
        );
        print_row("median", &row);
    }
    // After the rounds, every rule has counts in its minute.
    let (median_ms, max_ms) = snapshot_cost(&service, 21);
    println!(
        "one snapshot of {} rules with counts, built and serialised: {median_ms:.2} ms (median \
         of 21), {max_ms:.2} ms at most",
        settings.rules
    );
    let _ = stop.send(());
    drop(server_rt);
}
