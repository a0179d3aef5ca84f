//! The soak of `slidewin serve` (issue 21): one bounded run with every fault at once, its
//! promises checked from the clients' own records. `scripts/soak` builds and runs it.
//!
//! `slidewin-soak --slidewin PATH [--seconds N] [--redis | --redis-cluster]
//! [--failure-policy open|closed]`
//!
//! It starts `slidewin serve` as a child (ports of 127.0.0.1 chosen by the kernel, read from
//! its output), with a config in a temporary directory, and at once:
//! - 64 gRPC streams (a connection each) and 16 HTTP clients, closed loop, on 4 hot keys and
//!   500 cold ones, each check recorded (send time, answer time, key, decision or error);
//! - a flood of distinct keys on a rule of its own, as fast as the service answers, until it
//!   has decided ten times the key cap (the run waits for it before the SIGTERM; see `flood`);
//! - a reload every 5 s, valid and invalid in turn (the file replaced by a rename; SIGHUP too,
//!   twice);
//! - with `--redis`, redis-server killed (SIGKILL) twice, down 3 s each time, and restarted
//!   empty; with `--redis-cluster` (three masters, a replica each, a node timeout of 1 s), a
//!   master killed twice and failed over to its replica by Redis Cluster itself: the second
//!   time the new master is killed, and the first, restarted meanwhile as its replica, takes
//!   over again. The outage ends when the promoted replica serves the slots (their master, its
//!   `cluster_state` `ok`). Replication is asynchronous: the last writes a killed master
//!   acknowledged may not have reached its replica, so each stretch between returns has its
//!   windows checked apart, as after a single Redis's restart (empty); the failure policy's row checks both policies: degraded answers admitted with `open`,
//!   denied with `closed`, and decisions exact again within a second of each return;
//! - `VmRSS` of `/proc/<pid>/status` sampled each second, and every 100 flood keys;
//! - SIGTERM at the end, the load still running.
//!
//! Then it prints a table, one row a promise, and exits 1 if one is broken. How each is checked
//! is said at its row's code below and in `check`.

mod check;
mod flood;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use slidewin_test_support::redis::{RedisCluster, RedisServer};
use tonic::transport::{Channel, Endpoint};

use crate::check::{Admission, Window, worst_window};
use crate::flood::{FLOOD_GRACE, FLOOD_TASKS, Flood, FloodRun, KEY_CAP, flood_client};

/// A client's deadline: an answer later than this is a hang.
const DEADLINE: Duration = Duration::from_secs(2);
const GRPC_STREAMS: usize = 64;
const HTTP_CLIENTS: usize = 16;
const HOT_KEYS: u32 = 4;
const COLD_KEYS: u32 = 500;
/// How long a single Redis stays down each time (a cluster's outage lasts until its failover).
const DOWN: Duration = Duration::from_secs(3);
const SECOND: u64 = 1_000_000_000;

/// The rules: descriptor key, limit, span in seconds. Every one the exact sliding log.
const HOT: (&str, usize, u64) = ("hot", 100, 1);
const COLD: (&str, usize, u64) = ("cold", 5, 10);

/// The config in force: `generation` only changes a comment, so a valid reload keeps every
/// rule and its counts.
fn valid_config(generation: u32) -> String {
    format!(
        "# slidewin-soak, valid generation {generation}
domain: soak
descriptors:
  - key: {}
    rate_limit: {{name: hot, quota: {} per {} seconds, algorithm: sliding_log}}
  - key: {}
    rate_limit: {{name: cold, quota: {} per {} seconds, algorithm: sliding_log}}
  - key: flood
    rate_limit: {{name: flood, quota: 1 per 5 seconds, algorithm: sliding_log}}
",
        HOT.0, HOT.1, HOT.2, COLD.0, COLD.1, COLD.2
    )
}

/// An invalid config that, were any of it taken, would raise the hot limit tenfold: the window
/// check would see it.
fn invalid_config(generation: u32) -> String {
    format!(
        "# slidewin-soak, invalid generation {generation}
domain: soak
descriptors:
  - key: {}
    rate_limit: {{name: hot, quota: {} per {} seconds}}
  - key: {}
    rate_limit: {{name: cold, quota: {} per {} seconds, algorithm: leaky}}
  - key: flood
    rate_limit: {{name: flood, quota: 1 per 5 seconds}}
",
        HOT.0,
        HOT.1 * 10,
        HOT.2,
        COLD.0,
        COLD.1 * 10,
        COLD.2
    )
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Backend {
    Memory,
    Redis,
    Cluster,
}

struct Args {
    seconds: u64,
    backend: Backend,
    slidewin: PathBuf,
    policy: String,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        seconds: 120,
        backend: Backend::Memory,
        slidewin: PathBuf::from("target/release/slidewin"),
        policy: "open".to_owned(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--seconds" => {
                let n = it.next().ok_or("--seconds needs a number")?;
                args.seconds = n
                    .parse()
                    .map_err(|_| format!("--seconds {n}: not a number"))?;
            }
            "--redis" => args.backend = Backend::Redis,
            "--redis-cluster" => args.backend = Backend::Cluster,
            "--slidewin" => args.slidewin = it.next().ok_or("--slidewin needs a path")?.into(),
            "--failure-policy" => {
                args.policy = it.next().ok_or("--failure-policy needs open or closed")?;
                if args.policy != "open" && args.policy != "closed" {
                    return Err(format!("--failure-policy {}: open or closed", args.policy));
                }
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let least = if args.backend == Backend::Memory {
        10
    } else {
        20
    };
    if args.seconds < least {
        return Err(format!("--seconds: at least {least} for this backend"));
    }
    Ok(args)
}

/// What a check got.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Decision {
    Ok,
    Over,
    /// An answer that is an error: its kind, and what it said.
    Error(String, String),
    /// Nothing within the deadline.
    Timeout,
}

/// Where a check went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    Grpc,
    Http,
    Flood,
}

/// One check, as its client saw it.
#[derive(Clone, Debug)]
struct Record {
    send: u64,
    answer: u64,
    /// The key's index: hot ones first, then the cold ones; the flood's keys are all
    /// `u32::MAX`.
    key: u32,
    via: Via,
    decision: Decision,
    /// The answer carried `slidewin-degraded`.
    degraded: bool,
}

/// Nanoseconds since `base`.
fn nanos(base: Instant) -> u64 {
    u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

fn key_entry(key: u32) -> (&'static str, String) {
    if key < HOT_KEYS {
        (HOT.0, format!("h{key}"))
    } else {
        (COLD.0, format!("c{}", key - HOT_KEYS))
    }
}

/// A small generator of our own (xorshift), one per client.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Half the checks on a hot key, half on a cold one.
    fn key(&mut self) -> u32 {
        let r = self.next();
        let pick = u32::try_from(r >> 40).unwrap_or(0);
        if r & 1 == 0 {
            pick % HOT_KEYS
        } else {
            HOT_KEYS + pick % COLD_KEYS
        }
    }
}

fn grpc_request(key: &str, value: String) -> RateLimitRequest {
    RateLimitRequest {
        domain: "soak".to_owned(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: key.to_owned(),
                value,
            }],
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

async fn grpc_check(
    client: &mut RateLimitServiceClient<Channel>,
    request: RateLimitRequest,
) -> (Decision, bool) {
    match tokio::time::timeout(DEADLINE, client.should_rate_limit(request)).await {
        Err(_) => (Decision::Timeout, false),
        Ok(Err(status)) => {
            // The message, then its causes (h2's reason is in them).
            let mut said = status.message().to_owned();
            let mut source = std::error::Error::source(&status);
            while let Some(cause) = source {
                said = format!("{said}: {cause}");
                source = cause.source();
            }
            (
                Decision::Error(format!("grpc {:?}", status.code()), said),
                false,
            )
        }
        Ok(Ok(response)) => {
            let response = response.into_inner();
            let degraded = response
                .response_headers_to_add
                .iter()
                .any(|h| h.key.eq_ignore_ascii_case("slidewin-degraded"));
            let decision = if response.overall_code == Code::Ok as i32 {
                Decision::Ok
            } else if response.overall_code == Code::OverLimit as i32 {
                Decision::Over
            } else {
                Decision::Error(
                    "grpc answer".to_owned(),
                    format!("overall_code {}", response.overall_code),
                )
            };
            (decision, degraded)
        }
    }
}

async fn grpc_client(grpc: String, base: Instant, stop: Arc<AtomicBool>, seed: u64) -> Vec<Record> {
    let mut records = Vec::new();
    let Ok(endpoint) = Endpoint::from_shared(format!("http://{grpc}")) else {
        return records;
    };
    let mut client = RateLimitServiceClient::new(endpoint.connect_lazy());
    let mut rng = Rng(seed | 1);
    while !stop.load(Ordering::Relaxed) {
        let key = rng.key();
        let (name, value) = key_entry(key);
        let send = nanos(base);
        let (decision, degraded) = grpc_check(&mut client, grpc_request(name, value)).await;
        let answer = nanos(base);
        let failed = matches!(decision, Decision::Error(..) | Decision::Timeout);
        records.push(Record {
            send,
            answer,
            key,
            via: Via::Grpc,
            decision,
            degraded,
        });
        if failed {
            // A refused connection answers at once: do not spin on it.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    records
}

type Http = Client<HttpConnector, Full<Bytes>>;

fn http_client() -> Http {
    Client::builder(TokioExecutor::new()).build_http()
}

/// One HTTP exchange: status, whether `slidewin-degraded` came, the body.
async fn http_call(
    client: &Http,
    method: hyper::Method,
    url: &str,
    body: String,
) -> Result<(u16, bool, String), String> {
    let request = hyper::Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let exchange = async {
        let response = client.request(request).await.map_err(|e| {
            let mut said = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                said = format!("{said}: {s}");
                source = s.source();
            }
            said
        })?;
        let status = response.status().as_u16();
        let degraded = response.headers().contains_key("slidewin-degraded");
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        Ok((
            status,
            degraded,
            String::from_utf8_lossy(&body).into_owned(),
        ))
    };
    match tokio::time::timeout(DEADLINE, exchange).await {
        Ok(answer) => answer,
        Err(_) => Err("timeout".to_owned()),
    }
}

async fn http_load(http: String, base: Instant, stop: Arc<AtomicBool>, seed: u64) -> Vec<Record> {
    let mut records = Vec::new();
    let client = http_client();
    let url = format!("http://{http}/json");
    let mut rng = Rng(seed | 1);
    while !stop.load(Ordering::Relaxed) {
        let key = rng.key();
        let (name, value) = key_entry(key);
        let body = serde_json::json!({
            "domain": "soak",
            "descriptors": [{"entries": [{"key": name, "value": value}]}],
        })
        .to_string();
        let send = nanos(base);
        let answer = http_call(&client, hyper::Method::POST, &url, body).await;
        let (decision, degraded) = match answer {
            Ok((200, degraded, _)) => (Decision::Ok, degraded),
            Ok((429, degraded, _)) => (Decision::Over, degraded),
            Ok((status, degraded, body)) => (
                Decision::Error(format!("http {status}"), body.chars().take(160).collect()),
                degraded,
            ),
            Err(e) if e == "timeout" => (Decision::Timeout, false),
            Err(e) => (Decision::Error("http transport".to_owned(), e), false),
        };
        let failed = matches!(decision, Decision::Error(..) | Decision::Timeout);
        records.push(Record {
            send,
            answer: nanos(base),
            key,
            via: Via::Http,
            decision,
            degraded,
        });
        if failed {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    records
}

/// The config version `/api/config` reports.
async fn config_version(client: &Http, http: &str) -> Result<u64, String> {
    let (status, _, body) = http_call(
        client,
        hyper::Method::GET,
        &format!("http://{http}/api/config"),
        String::new(),
    )
    .await?;
    if status != 200 {
        return Err(format!("/api/config: {status} {body}"));
    }
    let json: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("/api/config: {e}"))?;
    json["version"]
        .as_u64()
        .ok_or_else(|| format!("/api/config has no version: {body}"))
}

/// Sends `signal` (TERM, HUP) to `pid` with kill(1): the workspace has no libc binding.
fn signal(pid: u32, signal: &str) -> Result<(), String> {
    let status = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .map_err(|e| format!("kill -{signal}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill -{signal} {pid}: {status}"))
    }
}

/// Writes the config by a rename, so the service never reads half a file.
fn replace_file(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("yaml.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// One reload and what `/api/config` said after it.
struct Reload {
    at: u64,
    valid: bool,
    sighup: bool,
    before: u64,
    after: u64,
}

/// The child, killed if the soak ends early.
struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The Redis of a run, whichever kind.
enum Store {
    None,
    One(RedisServer),
    /// A cluster with a replica per master, and the shard whose master is killed: its master
    /// now, and while it is down the replica that takes over.
    Cluster {
        cluster: RedisCluster,
        master: usize,
        successor: Option<usize>,
    },
}

/// The soak's cluster's node timeout: a lost master's replica takes over after it, and an
/// election of half a second to a second more (Redis Cluster's default is 15 s).
const NODE_TIMEOUT: Duration = Duration::from_millis(1000);

impl Store {
    fn cluster() -> Store {
        let cluster = RedisCluster::start_replicated(NODE_TIMEOUT);
        let master = (0..cluster.nodes.len())
            .find(|&node| cluster.is_master(node))
            .expect("a cluster has masters");
        Store::Cluster {
            cluster,
            master,
            successor: None,
        }
    }

    /// The fault: SIGKILL to the server, or to the shard's master.
    fn kill(&mut self) {
        match self {
            Store::None => {}
            Store::One(server) => server.kill(),
            Store::Cluster {
                cluster,
                master,
                successor,
            } => {
                *successor = cluster.replica_of(*master);
                cluster.nodes[*master].kill();
            }
        }
    }

    /// Blocks until Redis serves again: a single server is restarted (empty) and accepts
    /// connections; a cluster fails the killed master over to its replica by itself, which
    /// then serves its slots (it is their master and its `cluster_state` is `ok`).
    fn recover(&mut self) {
        match self {
            Store::None => {}
            Store::One(server) => server.restart(),
            Store::Cluster {
                cluster, successor, ..
            } => {
                if let Some(successor) = *successor {
                    cluster.until_serving(successor);
                }
            }
        }
    }

    /// After an outage, blocks until the cluster is whole again: the killed master restarts
    /// and rejoins as its successor's replica, in sync with it, so that the next kill can fail
    /// over again (to it).
    fn rejoin(&mut self) {
        if let Store::Cluster {
            cluster,
            master,
            successor,
        } = self
        {
            cluster.nodes[*master].restart();
            cluster.until_replica(*master);
            if let Some(successor) = successor.take() {
                *master = successor;
            }
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("slidewin-soak: {e}");
            return ExitCode::from(2);
        }
    };
    match soak(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("slidewin-soak: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs the soak; `Ok(false)` when a promise was broken.
#[allow(clippy::too_many_lines)]
async fn soak(args: Args) -> Result<bool, String> {
    let dir = std::env::temp_dir().join(format!("slidewin-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let config = dir.join("soak.yaml");
    std::fs::write(&config, valid_config(0)).map_err(|e| e.to_string())?;
    let log = dir.join("serve.log");

    let mut store = match args.backend {
        Backend::Memory => Store::None,
        Backend::Redis => Store::One(RedisServer::start()),
        Backend::Cluster => Store::cluster(),
    };
    let mut command = Command::new(&args.slidewin);
    command
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .args(["--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
        .args(["--max-keys", &KEY_CAP.to_string()])
        .args(["--failure-policy", &args.policy]);
    match &store {
        Store::None => {}
        Store::One(server) => {
            command.args(["--redis", &server.url()]);
        }
        Store::Cluster { cluster, .. } => {
            // URLs: `--redis-cluster`'s help says host:port, but the service's cluster
            // client takes only redis:// URLs (it says `Redis URL did not parse` to host:port).
            let seeds: Vec<String> = cluster.urls();
            command.args(["--redis-cluster", &seeds.join(",")]);
        }
    }
    let log_file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log_file)
        .spawn()
        .map_err(|e| format!("{}: {e}", args.slidewin.display()))?;
    let pid = child.id();
    let stdout = child.stdout.take().ok_or("the child's output")?;
    let mut server = Server { child };
    // Its output says where it listens; read it on a thread, and keep draining it.
    let (grpc, http) = {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (mut grpc, mut http) = (None, None);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.trim().strip_prefix("Envoy RLS gRPC") {
                    grpc = Some(rest.trim().to_owned());
                }
                if let Some(rest) = line.trim().strip_prefix("dashboard") {
                    http = Some(
                        rest.trim()
                            .trim_start_matches("http://")
                            .trim_end_matches('/')
                            .to_owned(),
                    );
                }
                if let (Some(g), Some(h)) = (&grpc, &http) {
                    let _ = tx.send((g.clone(), h.clone()));
                    grpc = None;
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(30)).map_err(|_| {
            format!(
                "slidewin serve did not say where it listens; its log: {}",
                log.display()
            )
        })?
    };
    println!(
        "slidewin-soak: {} s, {:?} backend, failure policy {}; slidewin serve pid {pid}, gRPC {grpc}, HTTP {http}; log {}",
        args.seconds,
        args.backend,
        args.policy,
        log.display()
    );
    let admin = http_client();
    let first_version = config_version(&admin, &http).await?;

    let base = Instant::now();
    let total = args.seconds * SECOND;
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for i in 0..GRPC_STREAMS {
        clients.push(tokio::spawn(grpc_client(
            grpc.clone(),
            base,
            stop.clone(),
            0x9e37_79b9_7f4a_7c15 ^ ((u64::try_from(i).unwrap_or(0) + 1) * 0x1000_0001),
        )));
    }
    for i in 0..HTTP_CLIENTS {
        clients.push(tokio::spawn(http_load(
            http.clone(),
            base,
            stop.clone(),
            0x2545_f491_4f6c_dd1d ^ ((u64::try_from(i).unwrap_or(0) + 1) * 0x3000_0007),
        )));
    }
    // The flood: from 2 s on, distinct keys until ten times the cap were decided.
    let flood_start = 2 * SECOND;
    let flood = Arc::new(Flood::new());
    for _ in 0..FLOOD_TASKS {
        let (grpc, stop, flood) = (grpc.clone(), stop.clone(), flood.clone());
        clients.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_nanos(flood_start)).await;
            flood_client(grpc, base, stop, flood, pid).await
        }));
    }
    // The RSS, each second.
    let rss = Arc::new(Mutex::new(Vec::<(u64, u64)>::new()));
    let sampler = {
        let (rss, stop) = (rss.clone(), stop.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                if let Some(kib) = rss_kib(pid) {
                    rss.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push((nanos(base), kib));
                }
            }
        })
    };
    // The reloads: every 5 s, valid and invalid in turn, the 2nd and 3rd with a SIGHUP too.
    let reloader = {
        let (http, config) = (http.clone(), config.clone());
        tokio::spawn(async move {
            let client = http_client();
            let mut reloads = Vec::new();
            let mut version = first_version;
            let mut n: u32 = 1;
            while u64::from(n) * 5 * SECOND + 3 * SECOND < total {
                tokio::time::sleep_until((base + Duration::from_secs(u64::from(n) * 5)).into())
                    .await;
                let valid = n.is_multiple_of(2);
                let text = if valid {
                    valid_config(n)
                } else {
                    invalid_config(n)
                };
                let at = nanos(base);
                if let Err(e) = replace_file(&config, &text) {
                    return Err(format!("writing the config: {e}"));
                }
                let sighup = n == 2 || n == 3;
                if sighup {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    signal(pid, "HUP")?;
                }
                tokio::time::sleep(Duration::from_millis(1500)).await;
                let after = config_version(&client, &http).await?;
                reloads.push(Reload {
                    at,
                    valid,
                    sighup,
                    before: version,
                    after,
                });
                version = after;
                n += 1;
            }
            Ok(reloads)
        })
    };
    // The faults: Redis killed at a third and two thirds of the run. A single Redis stays down
    // `DOWN` and is restarted, empty; a cluster's master is failed over to its replica (the
    // second time, the first master, back as a replica, takes over again).
    let mut outages: Vec<(u64, u64)> = Vec::new();
    if args.backend != Backend::Memory {
        for k in 1..=2 {
            tokio::time::sleep_until((base + Duration::from_nanos(total * k / 3)).into()).await;
            let killed_at = nanos(base);
            store.kill();
            if args.backend == Backend::Redis {
                tokio::time::sleep(DOWN).await;
            }
            // Recovering blocks until Redis serves again: the end of the outage.
            store = tokio::task::spawn_blocking(move || {
                store.recover();
                store
            })
            .await
            .map_err(|e| e.to_string())?;
            outages.push((killed_at, nanos(base)));
            store = tokio::task::spawn_blocking(move || {
                store.rejoin();
                store
            })
            .await
            .map_err(|e| e.to_string())?;
        }
    }
    tokio::time::sleep_until((base + Duration::from_nanos(total)).into()).await;
    // On a slow machine the flood may still be short of its keys: the load goes on until it
    // has them, within a bound (past it, the memory promise fails, saying how far it got).
    let flood_deadline = base + Duration::from_nanos(total) + FLOOD_GRACE;
    let _ = tokio::time::timeout_at(flood_deadline.into(), flood.reached()).await;
    let metrics = http_call(
        &admin,
        hyper::Method::GET,
        &format!("http://{http}/metrics"),
        String::new(),
    )
    .await
    .map(|(_, _, body)| body)
    .unwrap_or_default();
    let refusals = metrics
        .lines()
        .find(|l| l.starts_with("slidewin_key_cap_refusals_total"))
        .and_then(|l| l.split_whitespace().last())
        .unwrap_or("?")
        .to_owned();

    // SIGTERM, the load still running. Every check sent before this moment must be decided.
    let sigterm_at = nanos(base);
    signal(pid, "TERM")?;
    let exit = loop {
        match server.child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if nanos(base) - sigterm_at > 15 * SECOND => break None,
            Ok(None) => tokio::time::sleep(Duration::from_millis(5)).await,
            Err(e) => return Err(e.to_string()),
        }
    };
    let exited_at = nanos(base);
    stop.store(true, Ordering::Relaxed);
    let mut records = Vec::new();
    for client in clients {
        records.extend(client.await.map_err(|e| e.to_string())?);
    }
    let _ = sampler.await;
    let reloads = reloader.await.map_err(|e| e.to_string())??;
    drop(store);
    let rss = std::mem::take(&mut *rss.lock().unwrap_or_else(PoisonError::into_inner));

    let verdict = report(&Report {
        records: &records,
        outages: &outages,
        reloads: &reloads,
        rss: &rss,
        sigterm_at,
        exited_at,
        exit_ok: exit.is_some_and(|s| s.success()),
        exit: exit.map_or_else(|| "still running after 15 s".to_owned(), |s| s.to_string()),
        policy: &args.policy,
        flood: flood.run(flood_start),
        refusals: &refusals,
        backend: args.backend,
    });
    if verdict {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        println!("slidewin serve's log is kept: {}", log.display());
    }
    Ok(verdict)
}

struct Report<'a> {
    records: &'a [Record],
    outages: &'a [(u64, u64)],
    reloads: &'a [Reload],
    rss: &'a [(u64, u64)],
    sigterm_at: u64,
    exited_at: u64,
    exit_ok: bool,
    exit: String,
    policy: &'a str,
    flood: FloodRun,
    refusals: &'a str,
    backend: Backend,
}

fn secs(nanos: u64) -> String {
    format!("{:.3} s", Duration::from_nanos(nanos).as_secs_f64())
}

fn millis(nanos: u64) -> String {
    format!(
        "{:.0} ms",
        Duration::from_nanos(nanos).as_secs_f64() * 1000.0
    )
}

/// Whether a check's error says the check never reached the service, however close to the
/// SIGTERM it was sent (on two loaded cores the client's runtime may write a check's bytes
/// several milliseconds after taking its send time):
/// - refused at connect: HTTP/1's keep-alive race (the service closed the idle connection at
///   the SIGTERM, and hyper's pool connected anew);
/// - refused by the service's `GOAWAY` with no error (h2's "connection error received: not a
///   result of an error"): a stream above the `GOAWAY`'s last stream id, or one the client
///   would have opened after it, which the service did not process (RFC 9113, 6.8);
/// - cancelled with "connection closed": hyper's for a request still queued for its connection
///   when the connection ended, never written to it.
fn never_reached(said: &str) -> bool {
    said.contains("Connection refused")
        || said.contains("tcp connect error")
        || said.contains("connection error received: not a result of an error")
        || said.contains("operation was canceled: connection closed")
}

/// Prints the table; true when every promise held.
#[allow(clippy::too_many_lines)]
fn report(r: &Report<'_>) -> bool {
    let mut rows: Vec<(&str, bool, String)> = Vec::new();
    let before_term = |rec: &&Record| rec.send < r.sigterm_at;

    // 1. Windows. Admissions are the non-degraded OKs of the hot and cold keys; each backend
    // epoch (a Redis restart empties it; a failover may lose the killed master's last writes,
    // which its replica had not yet received) is checked apart, by answer time.
    let epoch_of = |answer: u64| r.outages.iter().filter(|o| o.1 <= answer).count();
    let mut logs: HashMap<(u32, usize), Vec<Admission>> = HashMap::new();
    for rec in r.records {
        if rec.key != u32::MAX && rec.decision == Decision::Ok && !rec.degraded {
            logs.entry((rec.key, epoch_of(rec.answer)))
                .or_default()
                .push(Admission {
                    send: rec.send,
                    answer: rec.answer,
                });
        }
    }
    let mut worst: BTreeMap<&str, (usize, Window, u32)> = BTreeMap::new();
    for ((key, _), log) in &mut logs {
        let (rule, limit, span) = if *key < HOT_KEYS { HOT } else { COLD };
        let window = worst_window(log, span * SECOND);
        let entry = worst
            .entry(rule)
            .or_insert((limit, Window::default(), *key));
        if (window.certain, window.loose) > (entry.1.certain, entry.1.loose) {
            *entry = (limit, window, *key);
        }
    }
    let windows_ok = worst.values().all(|(limit, w, _)| w.certain <= *limit);
    let admitted: usize = logs.values().map(Vec::len).sum();
    rows.push((
        "no window admitted more than its limit",
        windows_ok,
        worst
            .iter()
            .map(|(rule, (limit, w, key))| {
                format!(
                    "{rule}: worst {}/{limit} certain ({} by answer times, key {}, at {})",
                    w.certain,
                    w.loose,
                    key_entry(*key).1,
                    secs(w.at)
                )
            })
            .chain(std::iter::once(format!("{admitted} admissions checked")))
            .collect::<Vec<_>>()
            .join("; "),
    ));

    // 2. Answers: before the SIGTERM, every check got a decision or an error that says what
    // failed, none past the deadline.
    let sent: Vec<&Record> = r.records.iter().filter(before_term).collect();
    let timeouts = sent
        .iter()
        .filter(|rec| rec.decision == Decision::Timeout)
        .count();
    let mute = sent
        .iter()
        .filter(|rec| matches!(&rec.decision, Decision::Error(_, said) if said.trim().is_empty()))
        .count();
    let slowest = sent
        .iter()
        .map(|rec| rec.answer - rec.send)
        .max()
        .unwrap_or(0);
    rows.push((
        "every check answered, none past its deadline",
        timeouts == 0 && mute == 0,
        format!(
            "{} checks before SIGTERM; {timeouts} past the {} s deadline; {mute} errors without a reason; slowest answer {}",
            sent.len(),
            DEADLINE.as_secs(),
            millis(slowest)
        ),
    ));

    // 3. The failure policy: checks sent and answered while Redis was down are degraded and
    // decided by the policy (open: admitted; closed: denied), and no degraded answer anywhere
    // is other than the policy's; after its return (a single Redis restarted, a cluster's
    // replica serving the lost master's slots), the last degraded answer is within a second.
    if r.backend != Backend::Memory {
        let policy_code = if r.policy == "open" {
            Decision::Ok
        } else {
            Decision::Over
        };
        // With a cluster, one master of three is down: only its slots' keys are degraded, the
        // others are decided as usual. Every check inside must still be a decision, and every
        // degraded one the policy's.
        let (mut down, mut by_policy, mut wrong, mut late) = (0, 0, 0, 0);
        let mut recoveries = Vec::new();
        for (i, &(killed, ready)) in r.outages.iter().enumerate() {
            // Up from `ready` until the next kill: a check answered degraded in that time, sent
            // after the return, is the service not yet back.
            let next = r.outages.get(i + 1).map_or(r.sigterm_at, |o| o.0);
            let mut recovery = 0;
            for rec in r.records {
                if rec.send >= killed && rec.answer <= ready {
                    down += 1;
                    if rec.degraded && rec.decision == policy_code {
                        by_policy += 1;
                    } else if rec.degraded
                        || r.backend == Backend::Redis
                        || !matches!(rec.decision, Decision::Ok | Decision::Over)
                    {
                        wrong += 1;
                    }
                }
                if rec.send >= ready && rec.answer < next && rec.degraded {
                    recovery = recovery.max(rec.answer - ready);
                    if rec.send >= ready + SECOND {
                        late += 1;
                    }
                }
            }
            recoveries.push(recovery);
        }
        let recovery = recoveries.iter().copied().max().unwrap_or(0);
        let policy = if r.policy == "open" {
            "OK"
        } else {
            "OVER_LIMIT"
        };
        let outside = r
            .records
            .iter()
            .filter(|rec| rec.degraded && r.outages.first().is_none_or(|o| rec.answer < o.0))
            .count();
        let against = r
            .records
            .iter()
            .filter(|rec| rec.degraded && rec.decision != policy_code)
            .count();
        rows.push((
            "failure policy while Redis was down, exact within 1 s of its return",
            down > 0
                && by_policy > 0
                && wrong == 0
                && against == 0
                && recovery <= SECOND
                && late == 0
                && outside == 0,
            format!(
                "outages of {}; {by_policy}/{down} checks inside them degraded and {policy}, {wrong} neither that nor (cluster: a live master's) decision; {against} degraded answers not {policy} in the whole run; recovery {} (last degraded answer after each return); {late} degraded sent 1 s after a return; {outside} degraded before any kill",
                r.outages
                    .iter()
                    .map(|&(killed, ready)| millis(ready - killed))
                    .collect::<Vec<_>>()
                    .join(", "),
                recoveries
                    .iter()
                    .map(|&n| millis(n))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    } else {
        let degraded = r.records.iter().filter(|rec| rec.degraded).count();
        rows.push((
            "nothing degraded (memory: no backend to lose)",
            degraded == 0,
            format!("{degraded} degraded answers"),
        ));
    }

    // 4. Memory under the flood: ten times the cap in keys, and resident memory as flat while
    // the keys from 5x to 10x the cap were decided as from 1x to 5x (see `flood`).
    let peak = r.rss.iter().map(|s| s.1).max().unwrap_or(0);
    let (flood_ok, flood_figures) = flood::memory_row(&r.flood, r.refusals, peak);
    rows.push((
        "resident memory flat under the flood",
        flood_ok,
        flood_figures,
    ));

    // 5. Shutdown: exit 0, and every check in flight at the SIGTERM decided.
    let in_flight: Vec<&Record> = r
        .records
        .iter()
        .filter(|rec| rec.send < r.sigterm_at && rec.answer >= r.sigterm_at)
        .collect();
    // A check whose error says it never reached the service was not in its hands, so not in
    // flight there (see `never_reached`).
    let refused =
        |rec: &&&Record| matches!(&rec.decision, Decision::Error(_, said) if never_reached(said));
    let never_reached = in_flight.iter().filter(refused).count();
    // The client's send time is before its bytes reach the service: on two loaded cores, its
    // runtime may write them a few milliseconds later, after the signal (kill(1) itself takes
    // about a millisecond). A check sent within `RACE` of the SIGTERM and refused with an error
    // that says so raced the signal; one sent earlier must have been decided.
    const RACE: u64 = 5_000_000;
    let undecided: Vec<&&Record> = in_flight
        .iter()
        .filter(|rec| !matches!(rec.decision, Decision::Ok | Decision::Over) && !refused(rec))
        .collect();
    let raced = undecided
        .iter()
        .filter(|rec| r.sigterm_at - rec.send <= RACE)
        .count();
    let earliest = undecided
        .iter()
        .map(|rec| r.sigterm_at - rec.send)
        .max()
        .unwrap_or(0);
    let mut said: Vec<&str> = undecided
        .iter()
        .filter_map(|rec| match &rec.decision {
            Decision::Error(_, said) => Some(said.as_str()),
            _ => None,
        })
        .collect();
    said.sort_unstable();
    said.dedup();
    said.truncate(3);
    let undecided = undecided.len() - raced;
    let after = r
        .records
        .iter()
        .filter(|rec| rec.send >= r.sigterm_at)
        .count();
    rows.push((
        "SIGTERM let in-flight checks finish, exit 0",
        r.exit_ok && undecided == 0,
        format!(
            "{}, {} after SIGTERM; {} checks sent before it and answered after, {undecided} undecided, {raced} refused within {} ms of it (raced the signal; earliest {:.2} ms before it: {said:?}), {never_reached} never reached it (refused at connect, past its GOAWAY, or never written); {after} sent after it",
            r.exit,
            millis(r.exited_at - r.sigterm_at),
            in_flight.len(),
            RACE / 1_000_000,
            Duration::from_nanos(earliest).as_secs_f64() * 1000.0
        ),
    ));

    // 6. Reloads: the version moves on each valid one and only on those.
    let wrong: Vec<String> = r
        .reloads
        .iter()
        .filter(|l| (l.after > l.before) != l.valid)
        .map(|l| {
            format!(
                "{} at {}{}: version {} -> {}",
                if l.valid { "valid" } else { "invalid" },
                secs(l.at),
                if l.sighup { " (+SIGHUP)" } else { "" },
                l.before,
                l.after
            )
        })
        .collect();
    let valid = r.reloads.iter().filter(|l| l.valid).count();
    rows.push((
        "invalid reloads changed nothing, valid ones took",
        !r.reloads.is_empty() && wrong.is_empty(),
        format!(
            "{valid} valid, {} invalid ({} with SIGHUP); versions {}{}",
            r.reloads.len() - valid,
            r.reloads.iter().filter(|l| l.sighup).count(),
            r.reloads
                .iter()
                .map(|l| l.after.to_string())
                .collect::<Vec<_>>()
                .join(","),
            if wrong.is_empty() {
                String::new()
            } else {
                format!("; wrong: {}", wrong.join(", "))
            }
        ),
    ));

    println!();
    println!("{:<70} {:<6} figures", "promise", "result");
    for (promise, ok, figures) in &rows {
        println!(
            "{promise:<70} {:<6} {figures}",
            if *ok { "PASS" } else { "FAIL" }
        );
    }
    let count = |via: Via| r.records.iter().filter(|rec| rec.via == via).count();
    println!();
    println!(
        "checks made: {} ({} gRPC, {} HTTP, {} flood), {} admitted, {} over limit",
        r.records.len(),
        count(Via::Grpc),
        count(Via::Http),
        count(Via::Flood),
        r.records
            .iter()
            .filter(|rec| rec.decision == Decision::Ok)
            .count(),
        r.records
            .iter()
            .filter(|rec| rec.decision == Decision::Over)
            .count()
    );
    let mut kinds: BTreeMap<String, (usize, usize, &str)> = BTreeMap::new();
    for rec in r.records {
        let (kind, said) = match &rec.decision {
            Decision::Error(kind, said) => (kind.as_str(), said.as_str()),
            Decision::Timeout => ("timeout", ""),
            _ => continue,
        };
        let entry = kinds.entry(kind.to_owned()).or_insert((0, 0, said));
        if rec.send < r.sigterm_at {
            entry.0 += 1;
        } else {
            entry.1 += 1;
        }
    }
    if kinds.is_empty() {
        println!("errors: none");
    }
    for (kind, (before, after, said)) in &kinds {
        println!("errors: {kind}: {before} before SIGTERM, {after} after; e.g. {said:?}");
    }
    println!(
        "peak RSS: {:.1} MiB; samples (s:MiB): {}",
        peak as f64 / 1024.0,
        r.rss
            .iter()
            .map(|(t, k)| format!("{}:{}", t / SECOND, k / 1024))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let ok = rows.iter().all(|row| row.1);
    println!(
        "\nslidewin-soak: {}",
        if ok {
            "every promise held"
        } else {
            "a promise was BROKEN"
        }
    );
    ok
}

#[cfg(test)]
mod tests {
    use super::never_reached;

    #[test]
    fn errors_that_say_the_service_never_took_the_check_are_not_in_flight() {
        // As the soak's clients wrote them (tonic and hyper's texts, their causes joined).
        for said in [
            "tcp connect error: transport error: tcp connect error: tcp connect error: Connection refused (os error 111)",
            "client error (Connect): tcp connect error: Connection refused (os error 111)",
            "h2 protocol error: http2 error: transport error: http2 error: connection error received: not a result of an error",
            "operation was canceled: transport error: operation was canceled: connection closed",
        ] {
            assert!(never_reached(said), "{said}");
        }
        // A check cut after it was sent, or whose fate the error does not say, may have been
        // in the service's hands.
        for said in [
            "client error (SendRequest): connection closed before message completed",
            "h2 protocol error: http2 error: stream error received: unexpected internal error encountered",
            "h2 protocol error: http2 error: connection error received: protocol error",
            "error reading a body from connection: Connection reset by peer (os error 104)",
            "timeout",
        ] {
            assert!(!never_reached(said), "{said}");
        }
    }
}
