//! Redis servers of the tests' own: started on free ports of 127.0.0.1, stopped when dropped.
//! Tests never use a server someone else started. `redis-server` and `redis-cli` must be on the
//! `PATH` (`scripts/test` installs them when missing).

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A port free now, with the cluster bus port (10000 above) free too, both below the range the
/// kernel hands out to outgoing connections. A server's port in that range can be taken while
/// the server is down: a client reconnecting to it may be given the very port as its own and
/// connect to itself (TCP's simultaneous open), and the restart then fails to bind (seen once
/// in `redis_down_then_back_errors_then_recovers`).
///
/// A test that needs a Redis that is down, then comes up, takes one and later starts a server
/// there ([`RedisServer::start_on`], [`RedisCluster::start_at`]).
pub fn free_port() -> u16 {
    use std::hash::BuildHasher;
    use std::sync::atomic::{AtomicU16, Ordering};
    // Below the kernel's first ephemeral port (Linux: /proc/sys/net/ipv4/ip_local_port_range).
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let (low, high) = (10_000, ephemeral.saturating_sub(10_000).max(10_001));
    // Each test binary starts at a place of its own and hands out distinct ports.
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let start = std::collections::hash_map::RandomState::new().hash_one(std::process::id())
        % u64::from(high - low);
    let start = u16::try_from(start).expect("below a u16");
    let _ = NEXT.compare_exchange(0, start + 1, Ordering::Relaxed, Ordering::Relaxed);
    loop {
        let port = low + (NEXT.fetch_add(1, Ordering::Relaxed) % (high - low));
        if TcpListener::bind(("127.0.0.1", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok()
        {
            return port;
        }
    }
}

/// One `redis-server` of our own, in a directory of its own.
pub struct RedisServer {
    child: Option<Child>,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
    /// As a cluster node: its node timeout, in milliseconds.
    cluster: Option<u64>,
    /// More of `redis-server`'s options, after ours (TLS, a password).
    extra: Vec<String>,
    /// As a node of [`RedisCluster::start_tls`]: the port it serves TLS on, on 127.0.0.1.
    pub tls_port: Option<u16>,
}

impl RedisServer {
    /// A server on a free port.
    pub fn start() -> RedisServer {
        RedisServer::launch(free_port(), None)
    }

    /// A server on `port`, one from [`free_port`]: a Redis that was down coming up where its
    /// clients look for it.
    pub fn start_on(port: u16) -> RedisServer {
        RedisServer::launch(port, None)
    }

    /// A server on a free port with more of `redis-server`'s options (`--tls-port`,
    /// `--requirepass`, ...), given after ours.
    pub fn start_with(extra: &[String]) -> RedisServer {
        let mut server = RedisServer::prepared(free_port(), None);
        server.extra = extra.to_vec();
        server.spawn();
        server
    }

    fn launch(port: u16, cluster: Option<u64>) -> RedisServer {
        let mut server = RedisServer::prepared(port, cluster);
        server.spawn();
        server
    }

    fn prepared(port: u16, cluster: Option<u64>) -> RedisServer {
        let dir = std::env::temp_dir().join(format!("slidewin-redis-test-{port}"));
        std::fs::create_dir_all(&dir).expect("a directory for the server");
        RedisServer {
            child: None,
            port,
            dir,
            cluster,
            extra: Vec::new(),
            tls_port: None,
        }
    }

    /// Starts the process and returns once it accepts connections: it says so on its output,
    /// so nothing here waits on a clock.
    fn spawn(&mut self) {
        // SLIDEWIN_REDIS_CPUS=0 pins the servers to those CPUs (`taskset -c`): the benches use
        // it to give Redis a core of its own, as a server of its own would have.
        let mut command = match std::env::var("SLIDEWIN_REDIS_CPUS") {
            Ok(cpus) if !cpus.is_empty() => {
                let mut taskset = Command::new("taskset");
                taskset.args(["-c", &cpus, "redis-server"]);
                taskset
            }
            _ => Command::new("redis-server"),
        };
        command
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .args(["--daemonize", "no", "--loglevel", "notice"])
            .arg("--dir")
            .arg(&self.dir);
        if let Some(node_timeout) = self.cluster {
            command.args(["--cluster-enabled", "yes"]);
            command.args(["--cluster-node-timeout", &node_timeout.to_string()]);
            // A replica syncs at once: Redis's default waits 5 s for more replicas to come.
            command.args(["--repl-diskless-sync-delay", "0"]);
            // A lost node's slots go unserved, the others' stay served: what the tests of a
            // lost node look at does not hang on how soon the others notice.
            command.args(["--cluster-require-full-coverage", "no"]);
            command.args([
                "--cluster-config-file",
                &format!("nodes-{}.conf", self.port),
            ]);
        }
        command.args(&self.extra);
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server on the PATH (scripts/test installs it)");
        let stdout = child.stdout.take().expect("the server's output");
        let mut lines = BufReader::new(stdout).lines();
        loop {
            match lines.next() {
                Some(Ok(line)) if line.contains("Ready to accept connections") => break,
                Some(Ok(_)) => {}
                _ => panic!(
                    "redis-server on port {} exited before it was ready",
                    self.port
                ),
            }
        }
        // Keep draining its output, so that it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        self.child = Some(child);
    }

    /// `redis://127.0.0.1:port/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Whether it runs: started, and not killed since.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the server at once, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, empty.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// How many `EVALSHA` calls the server has run since the last `CONFIG RESETSTAT`.
    pub fn script_calls(&self) -> u64 {
        self.calls("evalsha")
    }

    /// How many times the server has run `command` (lowercase) since the last `CONFIG
    /// RESETSTAT`, scripts' calls included.
    pub fn calls(&self, command: &str) -> u64 {
        let prefix = format!("cmdstat_{command}:calls=");
        self.cli(&["info", "commandstats"])
            .lines()
            .find_map(|line| line.strip_prefix(prefix.as_str()))
            .and_then(|rest| rest.split(',').next()?.parse().ok())
            .unwrap_or(0)
    }

    /// The microseconds the server spent in `command` (lowercase) since the last `CONFIG
    /// RESETSTAT`, its scripts' time included (`INFO commandstats`'s `usec`).
    pub fn usec(&self, command: &str) -> u64 {
        let prefix = format!("cmdstat_{command}:");
        self.cli(&["info", "commandstats"])
            .lines()
            .find_map(|line| line.strip_prefix(prefix.as_str()))
            .and_then(|rest| {
                let field = rest.split(',').find_map(|f| f.strip_prefix("usec="))?;
                field.parse().ok()
            })
            .unwrap_or(0)
    }

    /// Runs `redis-cli` against this server and returns what it printed.
    pub fn cli(&self, args: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli on the PATH");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Redis Cluster of our own, its slots all covered: three masters, and with
/// [`RedisCluster::start_replicated`] a replica of each.
pub struct RedisCluster {
    /// Its nodes. Which is a master and which a replica changes with failovers: ask
    /// [`RedisCluster::is_master`] and [`RedisCluster::replica_of`].
    pub nodes: Vec<RedisServer>,
}

/// How many rounds of `redis-cli` a wait on the cluster takes at most before it gives up: each
/// round trip (a process started, a few milliseconds) is the wait.
const ROUNDS: u32 = 100_000;

impl RedisCluster {
    /// Three masters on free ports, their slots assigned, up on every node; no replicas, and
    /// a node timeout of 2 s.
    pub fn start() -> RedisCluster {
        RedisCluster::create(&[free_port(), free_port(), free_port()], 0, 2_000)
    }

    /// Three masters as [`RedisCluster::start`] makes, each serving TLS too, on a port of its
    /// own ([`RedisServer::tls_port`]), and speaking TLS on the cluster bus: `tls` are
    /// `redis-server`'s certificate options (`--tls-cert-file`, `--tls-key-file`,
    /// `--tls-ca-cert-file`, ...). It is made and watched over the plain ports; a client on a
    /// TLS port is told the nodes' TLS ports (`CLUSTER SLOTS`), as a managed cluster that
    /// speaks TLS only would tell it.
    pub fn start_tls(tls: &[String]) -> RedisCluster {
        let nodes = (0..3)
            .map(|_| {
                let (port, tls_port) = (free_port(), free_port());
                let mut node = RedisServer::prepared(port, Some(2_000));
                node.extra = [
                    "--tls-port".to_owned(),
                    tls_port.to_string(),
                    // The bus where `CLUSTER MEET` on the plain port looks for it.
                    "--cluster-port".to_owned(),
                    (port + 10_000).to_string(),
                    "--tls-cluster".to_owned(),
                    "yes".to_owned(),
                ]
                .into_iter()
                .chain(tls.iter().cloned())
                .collect();
                node.tls_port = Some(tls_port);
                node.spawn();
                node
            })
            .collect();
        RedisCluster::join(nodes, 0)
    }

    /// Three masters as [`RedisCluster::start`] makes, the first on `first`, one from
    /// [`free_port`]: a cluster that was down coming up where its clients look for it.
    pub fn start_at(first: u16) -> RedisCluster {
        RedisCluster::create(&[first, free_port(), free_port()], 0, 2_000)
    }

    /// Three masters and a replica of each, on free ports, their slots assigned, up on every
    /// node, each replica in sync with its master. `node_timeout` is Redis Cluster's: how long
    /// a master stays unreachable before its replica takes over (by itself, after an election
    /// of half a second to a second more).
    pub fn start_replicated(node_timeout: std::time::Duration) -> RedisCluster {
        let millis = u64::try_from(node_timeout.as_millis()).unwrap_or(u64::MAX);
        let ports: Vec<u16> = (0..6).map(|_| free_port()).collect();
        RedisCluster::create(&ports, 1, millis)
    }

    fn create(ports: &[u16], replicas: u32, node_timeout: u64) -> RedisCluster {
        let nodes: Vec<RedisServer> = ports
            .iter()
            .map(|&port| RedisServer::launch(port, Some(node_timeout)))
            .collect();
        RedisCluster::join(nodes, replicas)
    }

    /// `nodes`, started, made one cluster with `replicas` replicas a master.
    fn join(nodes: Vec<RedisServer>, replicas: u32) -> RedisCluster {
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let created = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .expect("redis-cli on the PATH");
        let said = String::from_utf8_lossy(&created.stdout);
        assert!(
            said.contains("All 16384 slots covered"),
            "cluster create said:\n{said}"
        );
        let cluster = RedisCluster { nodes };
        // Every node must agree the cluster is up before a client's view of it is complete,
        // and a replica must have its master's data before it can take over.
        for node in 0..cluster.nodes.len() {
            cluster.until(node, "came up", |cluster, node| {
                cluster.nodes[node]
                    .cli(&["cluster", "info"])
                    .contains("cluster_state:ok")
                    && (cluster.is_master(node) || cluster.is_synced_replica(node))
            });
        }
        cluster
    }

    /// Asks until `ready` holds for `node`; panics, saying what it waited for, if it never
    /// does.
    fn until(&self, node: usize, what: &str, ready: impl Fn(&RedisCluster, usize) -> bool) {
        let mut asked = 0;
        while !ready(self, node) {
            asked += 1;
            assert!(
                asked < ROUNDS,
                "the node on port {} never {what}",
                self.nodes[node].port
            );
        }
    }

    /// One cluster for the tests of a binary that run at once: started by the first, stopped
    /// when the last lets go of it (a cluster takes a while to start; each test keeps to a
    /// prefix of its own).
    pub fn shared() -> std::sync::Arc<RedisCluster> {
        use std::sync::{Arc, Mutex, PoisonError, Weak};
        static SHARED: Mutex<Weak<RedisCluster>> = Mutex::new(Weak::new());
        let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(cluster) = shared.upgrade() {
            return cluster;
        }
        let cluster = Arc::new(RedisCluster::start());
        *shared = Arc::downgrade(&cluster);
        cluster
    }

    /// Each node's URL.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The node that serves `key` (a Redis key, hash tag included).
    pub fn node_of(&self, key: &str) -> usize {
        let asked = self
            .nodes
            .iter()
            .position(RedisServer::is_running)
            .expect("a node that runs");
        self.owner_seen_by(asked, key)
            .unwrap_or_else(|slots| panic!("no node serves the slot of {key}:\n{slots}"))
    }

    /// The node that serves `key`'s slot as node `asked` sees it (`cluster slots`), or what
    /// it listed when it names none of ours.
    fn owner_seen_by(&self, asked: usize, key: &str) -> Result<usize, String> {
        let asked = &self.nodes[asked];
        let slot: u16 = asked
            .cli(&["cluster", "keyslot", key])
            .trim()
            .parse()
            .expect("a slot");
        let slots = asked.cli(&["cluster", "slots"]);
        // `cluster slots` lists: start, end, then the master's ip and port, per range.
        let lines: Vec<&str> = slots.lines().map(str::trim).collect();
        for window in lines.windows(4) {
            // (No let chains: this crate builds with Rust 1.85.)
            let (Ok(start), Ok(end), Ok(port)) = (
                window[0].parse::<u16>(),
                window[1].parse::<u16>(),
                window[3].parse::<u16>(),
            ) else {
                continue;
            };
            if !(start..=end).contains(&slot) || window[2] != "127.0.0.1" {
                continue;
            }
            if let Some(node) = self.nodes.iter().position(|n| n.port == port) {
                return Ok(node);
            }
        }
        Err(slots)
    }

    /// Returns once every running node says `owner` serves `key`'s slot: after a failover the
    /// nodes learn of it one gossip round apart, and a client that asks one still behind is
    /// sent elsewhere.
    pub fn until_every_node_sees(&self, key: &str, owner: usize) {
        for asked in (0..self.nodes.len()).filter(|&n| self.nodes[n].is_running()) {
            self.until(asked, "saw the new owner of the slot", |cluster, asked| {
                cluster.owner_seen_by(asked, key) == Ok(owner)
            });
        }
    }

    /// Whether `node` runs and is a master.
    pub fn is_master(&self, node: usize) -> bool {
        self.nodes[node].is_running()
            && self.nodes[node].cli(&["role"]).lines().next() == Some("master")
    }

    /// Whether `node` runs as a replica whose link to its master is up.
    fn is_synced_replica(&self, node: usize) -> bool {
        let said = self.nodes[node].cli(&["info", "replication"]);
        said.contains("role:slave") && said.contains("master_link_status:up")
    }

    /// The node that replicates `master`, if one runs.
    pub fn replica_of(&self, master: usize) -> Option<usize> {
        let of = format!("master_port:{}", self.nodes[master].port);
        (0..self.nodes.len()).find(|&node| {
            node != master
                && self.nodes[node].is_running()
                && self.nodes[node]
                    .cli(&["info", "replication"])
                    .lines()
                    .any(|line| line.trim() == of)
        })
    }

    /// Returns once `node` serves slots as a master, its cluster up in its own view: after a
    /// failover to it, when the keys of its slots are served again.
    pub fn until_serving(&self, node: usize) {
        self.until(node, "served slots as a master", |cluster, node| {
            let server = &cluster.nodes[node];
            // `myself`'s line of `cluster nodes`: id, address, flags, master, ping, pong,
            // epoch, link, then its slot ranges.
            let serves = server
                .cli(&["cluster", "nodes"])
                .lines()
                .find(|line| line.contains("myself"))
                .is_some_and(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    fields.get(2).is_some_and(|f| f.contains("master")) && fields.len() > 8
                });
            serves
                && server
                    .cli(&["cluster", "info"])
                    .contains("cluster_state:ok")
        });
    }

    /// Returns once the replica of `master` has every write `master` has taken so far: what
    /// was written then survives a failover.
    pub fn until_replicated(&self, master: usize) {
        let replica = self.replica_of(master).expect("a replica of the master");
        let offset = |node: usize, field: &str| -> Option<u64> {
            self.nodes[node]
                .cli(&["info", "replication"])
                .lines()
                .find_map(|line| line.trim().strip_prefix(field)?.parse().ok())
        };
        let written = offset(master, "master_repl_offset:").expect("the master's offset");
        self.until(replica, "caught up with its master", |_, replica| {
            offset(replica, "slave_repl_offset:").is_some_and(|at| at >= written)
        });
    }

    /// Returns once `node` is a replica in sync with its master: after a failed master
    /// restarts, when it has rejoined as its successor's replica.
    pub fn until_replica(&self, node: usize) {
        self.until(node, "became a synced replica", |cluster, node| {
            cluster.is_synced_replica(node)
        });
    }
}
