//! A Redis Sentinel of the tests' own: a primary, its replica, and one sentinel watching them
//! (`redis-server --sentinel`, the program Debian's `redis-sentinel` runs), on free ports of
//! 127.0.0.1, stopped when dropped.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::redis::{RedisServer, free_port};

/// The name the sentinel knows the primary by.
pub const MASTER: &str = "mymaster";

/// How many rounds of `redis-cli` a wait takes at most before it gives up: each round trip (a
/// process started) is the wait, so nothing here reads a clock.
const ROUNDS: u32 = 100_000;

/// A primary and its replica, both asking `password` when one is given, and a sentinel.
pub struct SentinelSet {
    /// The primary at the start (the replica after [`SentinelSet::failover`]).
    pub primary: RedisServer,
    /// Its replica at the start (the primary after a failover).
    pub replica: RedisServer,
    sentinel: Option<Child>,
    /// The sentinel's port, on 127.0.0.1.
    pub port: u16,
    /// Its TLS port, for a set of [`SentinelSet::start_tls`].
    pub tls_port: Option<u16>,
    dir: PathBuf,
}

impl SentinelSet {
    /// A primary, a replica in sync with it, and a sentinel that knows both.
    pub fn start(password: Option<&str>) -> SentinelSet {
        SentinelSet::launch(password, None)
    }

    /// As [`SentinelSet::start`] without a password, everything also over TLS: each server
    /// and the sentinel serve TLS on a port of their own ([`RedisServer::tls_port`],
    /// [`SentinelSet::tls_port`]), replicate and watch over TLS, and the sentinel names the
    /// servers by their TLS ports, as a deployment that speaks TLS only would. `tls` are
    /// `redis-server`'s certificate options (`--tls-cert-file`, `--tls-key-file`,
    /// `--tls-ca-cert-file`, ...); the servers' certificate is their client certificate too.
    /// The plain ports stay, for the test's `redis-cli`.
    pub fn start_tls(tls: &[String]) -> SentinelSet {
        SentinelSet::launch(None, Some(tls))
    }

    fn launch(password: Option<&str>, tls: Option<&[String]>) -> SentinelSet {
        // A server's options to serve TLS on `port` and replicate over it.
        let over_tls = |port: u16| -> Vec<String> {
            tls.map(|tls| {
                let ours = ["--tls-port", &port.to_string(), "--tls-replication", "yes"]
                    .map(str::to_owned);
                ours.into_iter().chain(tls.iter().cloned()).collect()
            })
            .unwrap_or_default()
        };
        let tls_ports = tls.map(|_| [free_port(), free_port(), free_port()]);
        let auth: Vec<String> = password
            .map(|p| {
                vec![
                    "--requirepass".into(),
                    p.into(),
                    "--masterauth".into(),
                    p.into(),
                ]
            })
            .unwrap_or_default();
        let [primary_tls, replica_tls, sentinel_tls] =
            tls_ports.map_or([None; 3], |ports| ports.map(Some));
        let mut primary_args = auth.clone();
        primary_args.extend(primary_tls.map(over_tls).unwrap_or_default());
        let mut primary = RedisServer::start_with(&primary_args);
        primary.tls_port = primary_tls;
        // Where the others reach the primary: its TLS port, in a set over TLS.
        let primary_at = primary_tls.unwrap_or(primary.port);
        let mut replica_args = auth.clone();
        replica_args.extend(replica_tls.map(over_tls).unwrap_or_default());
        replica_args.extend([
            "--replicaof".into(),
            "127.0.0.1".into(),
            primary_at.to_string(),
        ]);
        if let Some(port) = replica_tls {
            // What the primary tells the sentinel about it: its TLS port.
            replica_args.extend(["--replica-announce-port".into(), port.to_string()]);
        }
        let mut replica = RedisServer::start_with(&replica_args);
        replica.tls_port = replica_tls;
        until(|| {
            with_auth(&replica, password, &["info", "replication"])
                .contains("master_link_status:up")
        });
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("slidewin-sentinel-test-{port}"));
        std::fs::create_dir_all(&dir).expect("a directory for the sentinel");
        let mut conf = format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor {MASTER} 127.0.0.1 {} 1\n\
             sentinel down-after-milliseconds {MASTER} 1000\nsentinel failover-timeout {MASTER} 10000\n",
            dir.display(),
            primary_at
        );
        if let Some(password) = password {
            conf.push_str(&format!("sentinel auth-pass {MASTER} {password}\n"));
        }
        if let (Some(port), Some(tls)) = (sentinel_tls, tls) {
            conf.push_str(&format!("tls-port {port}\ntls-replication yes\n"));
            for pair in tls.chunks(2) {
                conf.push_str(&format!(
                    "{} {}\n",
                    pair[0].trim_start_matches('-'),
                    pair[1]
                ));
            }
        }
        let file = dir.join("sentinel.conf");
        std::fs::write(&file, conf).expect("the sentinel's config");
        let mut child = Command::new("redis-server")
            .arg(&file)
            .arg("--sentinel")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server on the PATH");
        let mut lines = BufReader::new(child.stdout.take().expect("its output")).lines();
        loop {
            match lines.next() {
                Some(Ok(line)) if line.contains("+monitor") => break,
                Some(Ok(_)) => {}
                _ => panic!("the sentinel on port {port} exited before it watched the primary"),
            }
        }
        std::thread::spawn(move || lines.for_each(drop));
        let set = SentinelSet {
            primary,
            replica,
            sentinel: Some(child),
            port,
            tls_port: sentinel_tls,
            dir,
        };
        // Known, connected to, and in sync, as the sentinel sees it: a replica it could promote.
        let replica_port = set.replica_at().to_string();
        until(|| {
            let replicas = set.ask(&["sentinel", "replicas", MASTER]);
            replicas.contains(&replica_port)
                && replicas.contains("master-link-status\nok")
                && !replicas.contains("disconnected")
        });
        set
    }

    /// `redis://127.0.0.1:port/`: the sentinel's URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// `rediss://127.0.0.1:tls_port/`: the sentinel's URL over TLS, for a set of
    /// [`SentinelSet::start_tls`].
    pub fn tls_url(&self) -> Option<String> {
        self.tls_port
            .map(|port| format!("rediss://127.0.0.1:{port}/"))
    }

    /// The port the sentinel knows the replica by.
    fn replica_at(&self) -> u16 {
        self.replica.tls_port.unwrap_or(self.replica.port)
    }

    /// Asks the sentinel `args` with `redis-cli`: what it printed.
    pub fn ask(&self, args: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli on the PATH");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The port of the primary the sentinel names now (a TLS port, in a set over TLS).
    pub fn primary_port(&self) -> u16 {
        self.ask(&["sentinel", "get-master-addr-by-name", MASTER])
            .lines()
            .nth(1)
            .and_then(|port| port.trim().parse().ok())
            .unwrap_or(0)
    }

    /// A failover: the replica made the primary (`SENTINEL FAILOVER`), returning once the
    /// sentinel names it and it says it is the primary.
    pub fn failover(&self, password: Option<&str>) {
        // The sentinel may not have seen the replica's latest state yet (NOGOODSLAVE): ask again.
        let mut asked = String::new();
        let promoted = (0..ROUNDS).any(|_| {
            asked = self.ask(&["sentinel", "failover", MASTER]);
            asked.contains("OK")
        });
        assert!(promoted, "the sentinel refused the failover: {asked}");
        until(|| self.primary_port() == self.replica_at());
        until(|| with_auth(&self.replica, password, &["role"]).starts_with("master"));
    }
}

/// `redis-cli` against `server` with `password`, if any.
fn with_auth(server: &RedisServer, password: Option<&str>, args: &[&str]) -> String {
    let mut all = Vec::new();
    if let Some(password) = password {
        all.extend(["--no-auth-warning", "-a", password]);
    }
    all.extend_from_slice(args);
    server.cli(&all)
}

/// Waits for `done`, asking at most [`ROUNDS`] times.
fn until(mut done: impl FnMut() -> bool) {
    assert!(
        (0..ROUNDS).any(|_| done()),
        "not done after {ROUNDS} rounds"
    );
}

impl Drop for SentinelSet {
    fn drop(&mut self) {
        if let Some(mut child) = self.sentinel.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
