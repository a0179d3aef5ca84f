//! What the soak runs and breaks: `slidewin serve` as a child, its config (valid and invalid
//! generations, replaced by a rename), signals, its memory, and the Redis it uses, killed and
//! brought back ([`Store`]).

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use slidewin_test_support::redis::{RedisCluster, RedisServer};

use crate::leases::LEASE;
use crate::{COLD, HOT};

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
