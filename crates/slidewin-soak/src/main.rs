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
//! - 12 lease clients (issue 33) on a concurrency limit of 3 units with a 2 s lease, on 2 keys:
//!   each acquires, works a few milliseconds and releases with envoy's `is_negative_hits`, or
//!   dies holding its unit (one in five), some acquisitions and releases retried and some
//!   releases sent after the lease ended (see `leases`; their promise is in `lease_check`);
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
//! is said at its row's code in `report` and in `check`.
//!
//! This file reads the arguments and runs the soak; the load's clients are in `client`, the
//! key flood in `flood`, the service and its Redis in `server`, and the verdict in `report`.

mod check;
mod client;
mod flood;
mod lease_check;
mod leases;
mod report;
mod server;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use slidewin_test_support::redis::RedisServer;

use crate::client::Record;
use crate::client::{Http, config_version, grpc_client, http_call, http_client, http_load, nanos};
use crate::flood::{FLOOD_GRACE, FLOOD_TASKS, Flood, flood_client};
use crate::leases::LeaseRecord;
use crate::leases::{LEASE_CLIENTS, lease_client};
use crate::report::{Report, report};
use crate::server::{Server, Store, rss_kib, signal, valid_config};
use tokio::task::JoinHandle;

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
async fn soak(args: Args) -> Result<bool, String> {
    let dir = std::env::temp_dir().join(format!("slidewin-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let config = dir.join("soak.yaml");
    std::fs::write(&config, valid_config(0)).map_err(|e| e.to_string())?;
    let log = dir.join("serve.log");

    let store = match args.backend {
        Backend::Memory => Store::None,
        Backend::Redis => Store::One(RedisServer::start()),
        Backend::Cluster => Store::cluster(),
    };
    let (mut server, grpc, http) =
        server::start(&args.slidewin, &config, &log, &args.policy, &store)?;
    let pid = server.child.id();
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
    let flood_start = 2 * SECOND;
    let flood = Arc::new(Flood::new());
    let Load {
        clients,
        lease_clients,
    } = load(&grpc, &http, base, &stop, (&flood, flood_start, pid));
    let (rss, sampler) = sample_rss(pid, base, stop.clone());
    // The reloads: every 5 s, valid and invalid in turn, the 2nd and 3rd with a SIGHUP too.
    let reloader = tokio::spawn(server::reloads(
        http.clone(),
        config.clone(),
        base,
        total,
        first_version,
        pid,
    ));
    let (store, outages) = faults(args.backend, store, base, total).await?;
    tokio::time::sleep_until((base + Duration::from_nanos(total)).into()).await;
    // On a slow machine the flood may still be short of its keys: the load goes on until it
    // has them, within a bound (past it, the memory promise fails, saying how far it got).
    let flood_deadline = base + Duration::from_nanos(total) + FLOOD_GRACE;
    let _ = tokio::time::timeout_at(flood_deadline.into(), flood.reached()).await;
    let refusals = key_cap_refusals(&admin, &http).await;

    // SIGTERM, the load still running. Every check sent before this moment must be decided.
    let sigterm_at = nanos(base);
    let exit = terminate(&mut server, pid, base, sigterm_at).await?;
    let exited_at = nanos(base);
    stop.store(true, Ordering::Relaxed);
    let (records, lease_records) = records_of(clients, lease_clients).await?;
    let _ = sampler.await;
    let reloads = reloader.await.map_err(|e| e.to_string())??;
    drop(store);
    let rss = std::mem::take(&mut *rss.lock().unwrap_or_else(PoisonError::into_inner));

    let verdict = report(&Report {
        records: &records,
        leases: &lease_records,
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

/// `slidewin_key_cap_refusals_total` as `/metrics` on `http` says it now; `?` when it cannot.
async fn key_cap_refusals(admin: &Http, http: &str) -> String {
    let metrics = http_call(
        admin,
        hyper::Method::GET,
        &format!("http://{http}/metrics"),
        String::new(),
    )
    .await
    .map(|(_, _, body)| body)
    .unwrap_or_default();
    metrics
        .lines()
        .find(|l| l.starts_with("slidewin_key_cap_refusals_total"))
        .and_then(|l| l.split_whitespace().last())
        .unwrap_or("?")
        .to_owned()
}

/// Every client's records once they ended (the leases' also as checks), and the leases'.
async fn records_of(
    clients: Vec<JoinHandle<Vec<Record>>>,
    lease_clients: Vec<JoinHandle<Vec<LeaseRecord>>>,
) -> Result<(Vec<Record>, Vec<LeaseRecord>), String> {
    let mut records = Vec::new();
    for client in clients {
        records.extend(client.await.map_err(|e| e.to_string())?);
    }
    let mut lease_records = Vec::new();
    for client in lease_clients {
        lease_records.extend(client.await.map_err(|e| e.to_string())?);
    }
    records.extend(lease_records.iter().map(LeaseRecord::as_record));
    Ok((records, lease_records))
}

/// The load's tasks, each giving its records when it ends.
struct Load {
    /// The gRPC and HTTP clients' and the flood's.
    clients: Vec<JoinHandle<Vec<Record>>>,
    /// The leases' clients'.
    lease_clients: Vec<JoinHandle<Vec<LeaseRecord>>>,
}

/// The load on `grpc` and `http` from `base` until `stop`: the gRPC streams, the HTTP
/// clients, the leases' clients (half by gRPC, half by HTTP) and the flood (its progress, when
/// it starts, and the child's pid, whose memory it watches).
fn load(
    grpc: &str,
    http: &str,
    base: Instant,
    stop: &Arc<AtomicBool>,
    flood: (&Arc<Flood>, u64, u32),
) -> Load {
    let mut clients = Vec::new();
    for i in 0..GRPC_STREAMS {
        clients.push(tokio::spawn(grpc_client(
            grpc.to_owned(),
            base,
            Arc::clone(stop),
            0x9e37_79b9_7f4a_7c15 ^ ((u64::try_from(i).unwrap_or(0) + 1) * 0x1000_0001),
        )));
    }
    for i in 0..HTTP_CLIENTS {
        clients.push(tokio::spawn(http_load(
            http.to_owned(),
            base,
            Arc::clone(stop),
            0x2545_f491_4f6c_dd1d ^ ((u64::try_from(i).unwrap_or(0) + 1) * 0x3000_0007),
        )));
    }
    // The leases' clients, half by gRPC, half by HTTP.
    let mut lease_clients = Vec::new();
    for i in 0..LEASE_CLIENTS {
        let grpc = i.is_multiple_of(2).then(|| grpc.to_owned());
        lease_clients.push(tokio::spawn(lease_client(
            grpc,
            http.to_owned(),
            base,
            Arc::clone(stop),
            0x5851_f42d_4c95_7f2d ^ ((u64::try_from(i).unwrap_or(0) + 1) * 0x2000_0003),
        )));
    }
    // The flood: from `flood_start` on, distinct keys until ten times the cap were decided.
    let (flood, flood_start, pid) = flood;
    for _ in 0..FLOOD_TASKS {
        let (grpc, stop, flood) = (grpc.to_owned(), Arc::clone(stop), Arc::clone(flood));
        clients.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_nanos(flood_start)).await;
            flood_client(grpc, base, stop, flood, pid).await
        }));
    }
    Load {
        clients,
        lease_clients,
    }
}

/// Resident memory samples: (nanoseconds since the start, KiB).
type RssSamples = Arc<Mutex<Vec<(u64, u64)>>>;

/// The child's resident memory, sampled each second until `stop`.
fn sample_rss(pid: u32, base: Instant, stop: Arc<AtomicBool>) -> (RssSamples, JoinHandle<()>) {
    let rss = Arc::new(Mutex::new(Vec::<(u64, u64)>::new()));
    let samples = Arc::clone(&rss);
    let sampler = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        while !stop.load(Ordering::Relaxed) {
            tick.tick().await;
            if let Some(kib) = rss_kib(pid) {
                samples
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((nanos(base), kib));
            }
        }
    });
    (rss, sampler)
}

/// The faults: Redis killed at a third and two thirds of the run. A single Redis stays down
/// `DOWN` and is restarted, empty; a cluster's master is failed over to its replica (the
/// second time, the first master, back as a replica, takes over again). The store as it
/// ends, and each outage's (kill, return) times.
async fn faults(
    backend: Backend,
    mut store: Store,
    base: Instant,
    total: u64,
) -> Result<(Store, Vec<(u64, u64)>), String> {
    let mut outages: Vec<(u64, u64)> = Vec::new();
    if backend == Backend::Memory {
        return Ok((store, outages));
    }
    for k in 1..=2 {
        tokio::time::sleep_until((base + Duration::from_nanos(total * k / 3)).into()).await;
        let killed_at = nanos(base);
        store.kill();
        if backend == Backend::Redis {
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
    Ok((store, outages))
}

/// SIGTERM to the child, sent at `sigterm_at`; its exit status, or `None` when it still ran
/// 15 s after.
async fn terminate(
    server: &mut Server,
    pid: u32,
    base: Instant,
    sigterm_at: u64,
) -> Result<Option<std::process::ExitStatus>, String> {
    signal(pid, "TERM")?;
    loop {
        match server.child.try_wait() {
            Ok(Some(status)) => return Ok(Some(status)),
            Ok(None) if nanos(base) - sigterm_at > 15 * SECOND => return Ok(None),
            Ok(None) => tokio::time::sleep(Duration::from_millis(5)).await,
            Err(e) => return Err(e.to_string()),
        }
    }
}
