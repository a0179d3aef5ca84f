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

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use slidewin_test_support::redis::RedisServer;

use crate::client::{config_version, grpc_client, http_call, http_client, http_load, nanos};
use crate::flood::{FLOOD_GRACE, FLOOD_TASKS, Flood, KEY_CAP, flood_client};
use crate::leases::{LEASE_CLIENTS, lease_client};
use crate::report::{Report, report};
use crate::server::{
    Reload, Server, Store, invalid_config, replace_file, rss_kib, signal, valid_config,
};

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
    // The leases' clients, half by gRPC, half by HTTP.
    let mut lease_clients = Vec::new();
    for i in 0..LEASE_CLIENTS {
        let grpc = i.is_multiple_of(2).then(|| grpc.clone());
        lease_clients.push(tokio::spawn(lease_client(
            grpc,
            http.clone(),
            base,
            stop.clone(),
            0x5851_f42d_4c95_7f2d ^ ((u64::try_from(i).unwrap_or(0) + 1) * 0x2000_0003),
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
    let mut lease_records = Vec::new();
    for client in lease_clients {
        lease_records.extend(client.await.map_err(|e| e.to_string())?);
    }
    records.extend(lease_records.iter().map(leases::LeaseRecord::as_record));
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
