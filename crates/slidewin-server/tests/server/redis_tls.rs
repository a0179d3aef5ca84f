//! Redis over TLS as managed deployments serve it (issue 31): one server with a password and
//! a client certificate, a Redis Cluster, and Redis Sentinel through a failover, each checked
//! through the service with the test's CA. Certificates are made at test time.

use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{CertificateParams, ExtendedKeyUsagePurpose, KeyPair};
use slidewin::time::MonotonicClock;
use slidewin_server::{Bounds, Config, Endpoints, Engine, Metrics};

use crate::support::server::{self, Served};
use crate::tls::{authority, client_of, json_check, named};

/// Redis over TLS, as managed Redis services require it (issue 31): a `rediss://` URL with a
/// password, the service trusting the test's CA and presenting a client certificate it signed,
/// to a `redis-server` that verifies its clients (`--tls-auth-clients yes`). Without the client
/// certificate Redis refuses the handshake: the backend is down, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_31_redis_over_tls_with_a_password_and_a_client_certificate() {
    use slidewin_server::{FailurePolicy, RedisTls, connect_redis};
    use slidewin_store::{Backend, BackendState};
    use slidewin_test_support::redis::{RedisServer, free_port};

    let pki = redis_pki("single");
    let tls_port = free_port();
    let mut args = vec!["--tls-port".to_owned(), tls_port.to_string()];
    args.extend(pki.args.iter().cloned());
    args.extend(["--requirepass".to_owned(), "s3cret".to_owned()]);
    let redis = RedisServer::start_with(&args);
    let url = format!("rediss://:s3cret@localhost:{tls_port}/");

    let tls = pki.tls.clone();
    let backend = connect_redis(&url, FailurePolicy::Closed, Some(&tls))
        .await
        .expect("the backend is made");
    decided_by(backend).await;

    // No client certificate: Redis refuses the handshake, and the backend says it is down.
    let without = RedisTls {
        client: None,
        ..tls
    };
    let backend = connect_redis(&url, FailurePolicy::Closed, Some(&without))
        .await
        .expect("the backend is made, down");
    assert_ne!(backend.state(), BackendState::Up);
    drop(redis);
    std::fs::remove_dir_all(&pki.dir).unwrap();
}

/// A Redis Cluster over TLS (issue 31), as managed clusters in transit-encryption mode serve
/// it: `rediss://` seeds, the nodes' TLS ports learnt from the cluster, the test's CA trusted,
/// a client certificate presented to nodes that verify their clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_31_a_redis_cluster_over_tls_with_a_client_certificate() {
    use slidewin_server::{FailurePolicy, connect_redis_cluster};
    use slidewin_test_support::redis::RedisCluster;

    let pki = redis_pki("cluster");
    let cluster = RedisCluster::start_tls(&pki.args);
    let seeds: Vec<String> = cluster
        .nodes
        .iter()
        .map(|node| format!("rediss://127.0.0.1:{}/", node.tls_port.unwrap()))
        .collect();
    let backend = connect_redis_cluster(&seeds, FailurePolicy::Closed, Some(&pki.tls))
        .await
        .expect("the backend is made");
    decided_by(backend).await;
    // The check was counted on a node, over TLS.
    let keys: usize = (0..3)
        .map(|node| {
            cluster.nodes[node]
                .cli(&["dbsize"])
                .trim()
                .parse::<usize>()
                .unwrap()
        })
        .sum();
    assert!(keys >= 1, "a key on the cluster");
    drop(cluster);
    std::fs::remove_dir_all(&pki.dir).unwrap();
}

/// Redis Sentinel over TLS (issue 31; it was refused): `rediss://` sentinels that verify their
/// clients name the primary by its TLS port, and after a failover the new one, reached over
/// TLS too, where the old primary's counts are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_31_redis_sentinel_over_tls_follows_a_failover() {
    use slidewin::Moment;
    use slidewin::limit::{Kind, Rule};
    use slidewin_redis::{CircuitState, Rules};
    use slidewin_server::{FailurePolicy, connect_redis_sentinel};
    use slidewin_test_support::sentinel::{MASTER, SentinelSet};

    let pki = redis_pki("sentinel");
    let set = SentinelSet::start_tls(&pki.args);
    let sentinels = [set.tls_url().unwrap()];
    let policy = FailurePolicy::Closed;
    let backend = connect_redis_sentinel(MASTER, &sentinels, None, policy, Some(&pki.tls))
        .await
        .expect("the backend is made");
    decided_by(backend.clone()).await;
    let redis = backend.limiter();
    let rule = Rule::new("api", Kind::SlidingLog, "2/minute".parse().unwrap()).unwrap();
    let rule = Rules::try_from(rule).unwrap();
    let now = Moment::from_secs(1_000_000);
    let first = redis.check(&rule, "ann", now, 1).await.unwrap();
    assert!(first.allowed() && first.degraded().is_none(), "{first:?}");
    assert!((0..100_000).any(|_| set.replica.cli(&["dbsize"]).trim() != "0"));

    set.failover(None);
    assert_eq!(Some(set.primary_port()), set.replica.tls_port);
    // Between the failover and the next question to the sentinel, checks fail as Redis being
    // away does; then the new primary answers, over TLS.
    let mut second = None;
    for _ in 0..1_000 {
        let answer = redis.check(&rule, "ann", now, 1).await.unwrap();
        if answer.degraded().is_none() {
            second = Some(answer);
            break;
        }
        let mut state = redis.circuit_state();
        while state != CircuitState::Closed {
            state = redis.circuit_changed(state).await;
        }
    }
    let second = second.expect("the new primary answers");
    assert!(second.allowed(), "the second of two");
    let third = redis.check(&rule, "ann", now, 1).await.unwrap();
    assert!(
        !third.allowed() && third.degraded().is_none(),
        "counted on the new primary"
    );

    // Certificates with redis:// sentinels are refused, naming why.
    let plain = [set.url()];
    let refused = connect_redis_sentinel(MASTER, &plain, None, policy, Some(&pki.tls)).await;
    let Err(error) = refused else {
        panic!("certificates with redis:// sentinels are refused")
    };
    let error = error.to_string();
    assert!(error.contains("rediss://"), "{error}");
    drop(set);
    std::fs::remove_dir_all(&pki.dir).unwrap();
}

/// A test's Redis PKI: a CA, a server certificate for `localhost` and 127.0.0.1 (a cluster
/// names its nodes by address) that serves as a node's client certificate on the cluster bus
/// too, and a client certificate of the CA.
struct RedisPki {
    dir: PathBuf,
    /// `redis-server`'s options: its certificate, and clients verified.
    args: Vec<String>,
    /// What the service trusts and presents.
    tls: slidewin_server::RedisTls,
}

fn redis_pki(test: &str) -> RedisPki {
    let ca = authority();
    let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    let mut params = named(CertificateParams::new(names).unwrap(), "redis");
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let server_key = KeyPair::generate().unwrap();
    let server_cert = params.signed_by(&server_key, &ca).unwrap();
    let client = client_of(&ca);
    let dir = std::env::temp_dir().join(format!("slidewin-rediss-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let args = vec![
        "--tls-cert-file".to_owned(),
        file("redis.pem", &server_cert.pem()),
        "--tls-key-file".to_owned(),
        file("redis-key.pem", &server_key.serialize_pem()),
        "--tls-ca-cert-file".to_owned(),
        file("ca.pem", &ca.pem()),
        "--tls-auth-clients".to_owned(),
        "yes".to_owned(),
    ];
    let tls = slidewin_server::RedisTls {
        ca: Some(ca.pem().into_bytes()),
        client: Some((client.cert.into_bytes(), client.key.into_bytes())),
    };
    RedisPki { dir, args, tls }
}

/// Asserts that `backend` is up and that a `POST /json` through the service is decided by it,
/// not by a failure policy.
async fn decided_by(backend: slidewin_store::Redis) {
    use slidewin_store::{Backend, BackendState};
    let why = backend.limiter().why_unavailable();
    assert_eq!(backend.state(), BackendState::Up, "{why:?}");
    let served = start_on_redis(backend).await;
    let (status, body) = json_check(served.http).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        !body.contains("degraded"),
        "decided by Redis, over TLS: {body}"
    );
    served.stop().await;
}

async fn start_on_redis(backend: slidewin_store::Redis) -> Served {
    let config = Config::parse(Config::EXAMPLE, "example.yaml").unwrap();
    let engine = Engine::new(
        backend,
        config,
        Arc::new(MonotonicClock),
        Bounds::default(),
        Metrics::new(),
    )
    .unwrap();
    Served::start(Endpoints::new(engine, vec![]), &server::local()).await
}
