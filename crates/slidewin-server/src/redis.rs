//! The service's Redis backends: connected lazily, probed often, and said to be away once.

use std::time::Duration;

use slidewin_redis::{CircuitState, FailurePolicy, RedisError, RedisLimiter, RedisTls};
use slidewin_store::Redis;

/// While Redis is down, the service probes it after 50 ms, then after twice the wait before, up
/// to every 500 ms (the limiter's own default goes to 2 s): a rate-limit service is back on
/// exact decisions within about half a second of Redis, for a probe every half second.
const PROBE_FIRST: Duration = Duration::from_millis(50);
const PROBE_LONGEST: Duration = Duration::from_millis(500);

/// `slidewin serve --redis URL`'s backend: one Redis server, answering by `policy` while it is
/// down; over TLS (a `rediss://` URL) with `tls`'s certificates if given, else the system's
/// authorities. A Redis that cannot be reached now does not keep the service from starting (a
/// service restarted during an outage must come up): it starts
/// [`Down`](slidewin_store::BackendState::Down), says so in a warn line naming the URL (its
/// password hidden) and the policy, answers by the policy, and logs when Redis first answers.
///
/// # Errors
///
/// A URL that is not one, or Redis refusing the connection itself (a wrong password).
///
/// # Example
///
/// ```
/// use slidewin_server::{FailurePolicy, connect_redis};
/// use slidewin_store::{Backend, BackendKind, BackendState};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), slidewin_redis::RedisError> {
/// // Nothing listens on port 1: the backend is made anyway, down.
/// let redis = connect_redis("redis://127.0.0.1:1/", FailurePolicy::Open, None).await?;
/// assert_eq!((redis.kind(), redis.state()), (BackendKind::Redis, BackendState::Down));
/// if let Some(why) = redis.limiter().why_unavailable() {
///     eprintln!("not ready: {why}");
/// }
/// # Ok(())
/// # }
/// ```
pub async fn connect_redis(
    url: &str,
    policy: FailurePolicy,
    tls: Option<&RedisTls>,
) -> Result<Redis, RedisError> {
    let limiter = match tls {
        Some(tls) => RedisLimiter::connect_lazily_with_tls(url, tls).await?,
        None => RedisLimiter::connect_lazily(url).await?,
    };
    started(limiter, policy)
}

/// `slidewin serve --redis-cluster`'s backend: a Redis Cluster through its seed `nodes`
/// (URLs), as [`connect_redis`] makes one server's.
///
/// # Errors
///
/// As [`connect_redis`]; no nodes.
///
/// # Example
///
/// ```
/// use slidewin_server::{FailurePolicy, connect_redis_cluster};
/// use slidewin_store::{Backend, BackendKind, BackendState};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), slidewin_redis::RedisError> {
/// let nodes = ["redis://127.0.0.1:1/".to_owned()];
/// let redis = connect_redis_cluster(&nodes, FailurePolicy::Closed, None).await?;
/// assert_eq!((redis.kind(), redis.state()), (BackendKind::RedisCluster, BackendState::Down));
/// # Ok(())
/// # }
/// ```
pub async fn connect_redis_cluster(
    nodes: &[String],
    policy: FailurePolicy,
    tls: Option<&RedisTls>,
) -> Result<Redis, RedisError> {
    let seeds: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let limiter = match tls {
        Some(tls) => RedisLimiter::connect_cluster_lazily_with_tls(&seeds, tls).await?,
        None => RedisLimiter::connect_cluster_lazily(&seeds).await?,
    };
    started(limiter, policy)
}

/// `slidewin serve --redis-sentinel`'s backend: the primary that Redis Sentinel names for
/// `master`, through `sentinels` (URLs; a password in one is the sentinels'), `auth` the
/// primary's (`password` or `user:password`); asked for again after a failover. Made as
/// [`connect_redis`] makes one server's. `rediss://` sentinels mean TLS to them and to the
/// primary, with `tls`'s certificates (the system's authorities without).
///
/// # Errors
///
/// As [`connect_redis`]; no master name or no sentinel; certificates for `redis://`
/// sentinels, or sentinels some of which are `rediss://`.
///
/// # Example
///
/// ```
/// use slidewin_server::{FailurePolicy, connect_redis_sentinel};
/// use slidewin_store::{Backend, BackendState};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), slidewin_redis::RedisError> {
/// let sentinels = ["redis://127.0.0.1:1/".to_owned()];
/// let redis = connect_redis_sentinel("mymaster", &sentinels, None, FailurePolicy::Open, None).await?;
/// assert_eq!(redis.state(), BackendState::Down);
/// # Ok(())
/// # }
/// ```
pub async fn connect_redis_sentinel(
    master: &str,
    sentinels: &[String],
    auth: Option<&str>,
    policy: FailurePolicy,
    tls: Option<&RedisTls>,
) -> Result<Redis, RedisError> {
    let sentinels: Vec<&str> = sentinels.iter().map(String::as_str).collect();
    let limiter = if sentinels.iter().any(|url| url.starts_with("rediss://")) {
        let tls = tls.cloned().unwrap_or_default();
        RedisLimiter::connect_sentinel_lazily_with_tls(master, &sentinels, auth, &tls).await?
    } else if tls.is_some() {
        return Err(RedisError::Config {
            detail: "certificates for Redis are for rediss:// sentinels, and these are \
                     redis://"
                .to_owned(),
        });
    } else {
        RedisLimiter::connect_sentinel_lazily(master, &sentinels, auth).await?
    };
    started(limiter, policy)
}

/// The service's backend on `limiter`, just made: the service's probe waits and `policy`;
/// when Redis did not answer, a warn line now and an info line when it first does.
fn started(limiter: RedisLimiter, policy: FailurePolicy) -> Result<Redis, RedisError> {
    let limiter = limiter
        .with_failure_policy(policy)
        .with_circuit_backoff(PROBE_FIRST, PROBE_LONGEST)?;
    if let Some(why) = limiter.why_unavailable() {
        tracing::warn!(
            failure_policy = policy.as_str(),
            "starting without Redis ({why}): answering by the failure policy ({policy}) \
             until it answers; not ready until then"
        );
        let watched = limiter.clone();
        tokio::spawn(async move {
            let mut state = watched.circuit_state();
            while state != CircuitState::Closed {
                state = watched.circuit_changed(state).await;
            }
            tracing::info!("Redis answers: decisions are Redis's again");
        });
    }
    Ok(Redis::new(limiter))
}
