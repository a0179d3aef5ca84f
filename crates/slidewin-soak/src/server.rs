//! What the soak runs and breaks: `slidewin serve` as a child, its config (valid and invalid
//! generations, replaced by a rename), signals, its memory, and the Redis it uses, killed and
//! brought back ([`Store`]).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use slidewin_test_support::redis::{RedisCluster, RedisServer};

use crate::client::{config_version, http_client, nanos};
use crate::leases::LEASE;
use crate::{COLD, HOT, SECOND};

/// The config in force: `generation` only changes a comment, so a valid reload keeps every
/// rule and its counts.
pub(crate) fn valid_config(generation: u32) -> String {
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
  - key: {}
    rate_limit: {{name: lease, quota: {} concurrent, lease: {} seconds}}
",
        HOT.0, HOT.1, HOT.2, COLD.0, COLD.1, COLD.2, LEASE.0, LEASE.1, LEASE.2
    )
}

/// An invalid config that, were any of it taken, would raise the hot limit and the leases'
/// units tenfold: the window and lease checks would see it.
pub(crate) fn invalid_config(generation: u32) -> String {
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
  - key: {}
    rate_limit: {{name: lease, quota: {} concurrent, lease: {} seconds}}
",
        HOT.0,
        HOT.1 * 10,
        HOT.2,
        COLD.0,
        COLD.1 * 10,
        COLD.2,
        LEASE.0,
        LEASE.1 * 10,
        LEASE.2
    )
}

/// Sends `signal` (TERM, HUP) to `pid` with kill(1): the workspace has no libc binding.
pub(crate) fn signal(pid: u32, signal: &str) -> Result<(), String> {
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
pub(crate) fn replace_file(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("yaml.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// One reload and what `/api/config` said after it.
pub(crate) struct Reload {
    pub(crate) at: u64,
    pub(crate) valid: bool,
    pub(crate) sighup: bool,
    pub(crate) before: u64,
    pub(crate) after: u64,
}

/// `slidewin serve` (the binary `slidewin`) started on `store` with the config file `config`
/// and failure policy `policy`, its log in `log`; where it listens: gRPC, then HTTP.
pub(crate) fn start(
    slidewin: &Path,
    config: &Path,
    log: &Path,
    policy: &str,
    store: &Store,
) -> Result<(Server, String, String), String> {
    let mut command = Command::new(slidewin);
    command
        .arg("serve")
        .arg("--config")
        .arg(config)
        .args(["--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"])
        .args(["--max-keys", &crate::flood::KEY_CAP.to_string()])
        .args(["--failure-policy", policy]);
    match store {
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
    let log_file = std::fs::File::create(log).map_err(|e| e.to_string())?;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log_file)
        .spawn()
        .map_err(|e| format!("{}: {e}", slidewin.display()))?;
    let stdout = child.stdout.take().ok_or("the child's output")?;
    let server = Server { child };
    // Its output says where it listens; read it on a thread, and keep draining it.
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
    let (grpc, http) = rx.recv_timeout(Duration::from_secs(30)).map_err(|_| {
        format!(
            "slidewin serve did not say where it listens; its log: {}",
            log.display()
        )
    })?;
    Ok((server, grpc, http))
}

/// The reloads, from `base` until 3 s before `total`: every 5 s, the config file replaced,
/// valid and invalid in turn, the 2nd and 3rd with a SIGHUP to `pid` too; each with the
/// config version before and 1.5 s after.
pub(crate) async fn reloads(
    http: String,
    config: std::path::PathBuf,
    base: Instant,
    total: u64,
    first_version: u64,
    pid: u32,
) -> Result<Vec<Reload>, String> {
    let client = http_client();
    let mut reloads = Vec::new();
    let mut version = first_version;
    let mut n: u32 = 1;
    while u64::from(n) * 5 * SECOND + 3 * SECOND < total {
        tokio::time::sleep_until((base + Duration::from_secs(u64::from(n) * 5)).into()).await;
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
}

/// The child, killed if the soak ends early.
pub(crate) struct Server {
    pub(crate) child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub(crate) fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The Redis of a run, whichever kind.
pub(crate) enum Store {
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
    pub(crate) fn cluster() -> Store {
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
    pub(crate) fn kill(&mut self) {
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
    pub(crate) fn recover(&mut self) {
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
    pub(crate) fn rejoin(&mut self) {
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
