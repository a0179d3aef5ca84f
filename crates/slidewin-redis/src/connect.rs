//! Making a [`RedisLimiter`]: connected to Redis now ([`RedisLimiter::connect`]), or whether or
//! not Redis answers now ([`RedisLimiter::connect_lazily`]), as a service restarted during an
//! outage needs to come up at all.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Client};

use crate::cluster::Nodes;
use crate::connection::{Connection, within};
use crate::error::{RedisError, quote, redact};
use crate::limiter::{DEFAULT_TIMEOUT, RedisLimiter};
use crate::sentinel::SentinelPrimary;

/// How long the cluster client waits before it sends a command again after a refused
/// connection, `CLUSTERDOWN` or `TRYAGAIN`, in milliseconds: at least the first, at most the
/// second (from 10 ms, twice as long each retry). redis-rs's default waits at least 1.28 s,
/// longer than a call's timeout: a probe of a node that was still down or rejoining then
/// timed out after 1 s, and the next came half a second later, so checks were back on Redis
/// up to 1.5 s after it served again.
const CLUSTER_RETRY_WAIT: (u64, u64) = (10, 100);

impl RedisLimiter {
    /// Connects to one Redis server, such as `redis://127.0.0.1:6379/`.
    ///
    /// # Errors
    ///
    /// [`RedisError::Config`] for a URL that is not one (one without a scheme, such as
    /// `127.0.0.1:6379`, is told which it may mean); [`RedisError::Unavailable`] or
    /// [`RedisError::Timeout`] if Redis cannot be reached now (later calls recover by
    /// themselves once it can; [`connect_lazily`](RedisLimiter::connect_lazily) makes a limiter
    /// anyway). Messages show the URL with its password hidden.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), slidewin_redis::RedisError> {
    /// let redis = slidewin_redis::RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect(url: &str) -> Result<RedisLimiter, RedisError> {
        let (client, shown) = client(url)?;
        let manager = ConnectionManager::new_with_config(client, manager_config())
            .await
            .map_err(|e| RedisError::from_redis(&e, shown.clone()))?;
        Ok(RedisLimiter::with(Connection::Single(
            manager,
            Arc::from(shown),
        )))
    }

    /// Connects to one Redis server as [`connect`](RedisLimiter::connect) does, or when Redis
    /// cannot be reached now, makes the limiter anyway, its circuit open from the start: so that
    /// a service restarted during an outage comes up and answers.
    ///
    /// It tries Redis once, without retrying (a refused connection is known at once, a
    /// silent one after the timeout, 1 s). When Redis does not answer, the limiter starts as if
    /// its first call had failed that way: [`circuit_state`](RedisLimiter::circuit_state) is
    /// [`Open`](crate::CircuitState::Open), checks answer at once by the
    /// [`FailurePolicy`](crate::FailurePolicy) (or with the error that kept Redis away), and its
    /// probe connects in the background, checks going to Redis from its first answer (see
    /// [When Redis is down](RedisLimiter#when-redis-is-down)).
    ///
    /// # Errors
    ///
    /// [`RedisError::Config`] for a URL that is not one; an error of Redis's own answer (a
    /// wrong password) as [`connect`](RedisLimiter::connect) gives it. Never for Redis being
    /// away.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule};
    /// use slidewin_redis::{CircuitState, FailurePolicy, RedisLimiter, Rules};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // Port 1: nothing listens there.
    /// let redis = RedisLimiter::connect_lazily("redis://127.0.0.1:1/")
    ///     .await?
    ///     .with_failure_policy(FailurePolicy::Open);
    /// assert_eq!(redis.circuit_state(), CircuitState::Open);
    /// let api = Rules::try_from(Rule::new("api", Kind::Gcra, "10/s".parse()?)?)?;
    /// let decision = redis.check_now(&api, "alice", 1).await?;
    /// assert!(decision.allowed());
    /// assert!(decision.degraded().is_some());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect_lazily(url: &str) -> Result<RedisLimiter, RedisError> {
        let (client, shown) = client(url)?;
        RedisLimiter::lazily(client, shown).await
    }

    /// [`connect_lazily`](RedisLimiter::connect_lazily) with `client`, made.
    pub(crate) async fn lazily(client: Client, shown: String) -> Result<RedisLimiter, RedisError> {
        let manager = ConnectionManager::new_lazy_with_config(client.clone(), manager_config())
            .map_err(|e| RedisError::Config {
                detail: format!("`{shown}`: {e}"),
            })?;
        let limiter = RedisLimiter::with(Connection::Single(
            manager.clone(),
            Arc::from(shown.as_str()),
        ));
        match within(DEFAULT_TIMEOUT, first_answer(&client, manager)).await {
            Ok(()) => Ok(limiter),
            Err(fault) => limiter.started_down(fault.at(&shown)),
        }
    }

    /// Connects to a Redis Cluster through any of its nodes, such as
    /// `["redis://127.0.0.1:7000/"]`.
    ///
    /// # Errors
    ///
    /// As [`connect`](RedisLimiter::connect); [`RedisError::Config`] for no nodes.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), slidewin_redis::RedisError> {
    /// let nodes = ["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"];
    /// let redis = slidewin_redis::RedisLimiter::connect_cluster(&nodes).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect_cluster(nodes: &[&str]) -> Result<RedisLimiter, RedisError> {
        let (client, seeds) = cluster_client(nodes, |builder| builder)?;
        let connection = client
            .get_async_connection()
            .await
            .map_err(|e| RedisError::from_redis(&e, seeds.clone()))?;
        Ok(RedisLimiter::on_cluster(connection, seeds).await)
    }

    /// Connects to a Redis Cluster as [`connect_cluster`](RedisLimiter::connect_cluster)
    /// does, or when no node it is given answers now, makes the limiter anyway, its circuit
    /// open from the start, as [`connect_lazily`](RedisLimiter::connect_lazily) does for one
    /// server: its probe connects to the nodes in the background, and reads where the slots
    /// are once they answer.
    ///
    /// # Errors
    ///
    /// As [`connect_lazily`](RedisLimiter::connect_lazily); [`RedisError::Config`] for no
    /// nodes.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin_redis::{CircuitState, RedisLimiter};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), slidewin_redis::RedisError> {
    /// let nodes = ["redis://127.0.0.1:1/", "redis://127.0.0.1:2/"];
    /// let redis = RedisLimiter::connect_cluster_lazily(&nodes).await?;
    /// assert_eq!(redis.circuit_state(), CircuitState::Open);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect_cluster_lazily(nodes: &[&str]) -> Result<RedisLimiter, RedisError> {
        let (client, seeds) = cluster_client(nodes, |builder| builder)?;
        RedisLimiter::cluster_lazily(client, seeds).await
    }

    /// [`connect_cluster_lazily`](RedisLimiter::connect_cluster_lazily) with `client`, made.
    pub(crate) async fn cluster_lazily(
        client: ClusterClient,
        seeds: String,
    ) -> Result<RedisLimiter, RedisError> {
        match client.get_async_connection().await {
            Ok(connection) => Ok(RedisLimiter::on_cluster(connection, seeds).await),
            Err(err) => {
                let config = ClusterConfig::new()
                    .set_connection_timeout(DEFAULT_TIMEOUT)
                    .set_response_timeout(DEFAULT_TIMEOUT);
                let pending = client.get_pending_async_connection_with_config(config);
                let nodes = Arc::new(Nodes::unknown(&seeds));
                let limiter = RedisLimiter::with(Connection::Cluster(pending, nodes));
                limiter.started_down(RedisError::from_redis(&err, seeds))
            }
        }
    }

    /// Connects to the primary that Redis Sentinel names for `master`, through any of
    /// `sentinels` (`redis://host:26379/`; a password in a sentinel's URL is the sentinels'),
    /// or when none answers now, makes the limiter anyway, as
    /// [`connect_lazily`](RedisLimiter::connect_lazily) does. `auth` is the primary's
    /// (`password` or `user:password`). After a failover (the primary gone, silent, or made a
    /// replica), the next call asks the sentinels which server is the primary now: the calls in
    /// between fail as Redis being away does, and the circuit and the failure policy answer.
    ///
    /// # Errors
    ///
    /// [`RedisError::Config`] for no master name, no sentinel, a sentinel URL that is not
    /// one, or a `rediss://` one (over TLS, `connect_sentinel_lazily_with_tls`, with the `tls`
    /// feature); an error of the primary's own answer (a wrong password).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin_redis::{CircuitState, RedisLimiter};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), slidewin_redis::RedisError> {
    /// // No sentinel listens on port 1: the limiter is made anyway, its circuit open.
    /// let redis = RedisLimiter::connect_sentinel_lazily("mymaster", &["redis://127.0.0.1:1/"], None).await?;
    /// assert_eq!(redis.circuit_state(), CircuitState::Open);
    /// assert!(RedisLimiter::connect_sentinel_lazily("", &["redis://127.0.0.1:1/"], None).await.is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect_sentinel_lazily(
        master: &str,
        sentinels: &[&str],
        auth: Option<&str>,
    ) -> Result<RedisLimiter, RedisError> {
        for url in sentinels {
            if url.starts_with("rediss") {
                return Err(RedisError::Config {
                    detail: format!(
                        "`{}`: a rediss:// sentinel takes connect_sentinel_lazily_with_tls",
                        redact(url)
                    ),
                });
            }
            if let Err(err) = Client::open(*url) {
                return Err(not_a_url(url, &redact(url), &err));
            }
        }
        RedisLimiter::on_sentinel(SentinelPrimary::new(master, sentinels, auth)?).await
    }

    /// A limiter on `primary`, down if no primary answers yet.
    pub(crate) async fn on_sentinel(primary: SentinelPrimary) -> Result<RedisLimiter, RedisError> {
        let primary = Arc::new(primary);
        let shown = Arc::clone(&primary.shown);
        let mut connection = Connection::Sentinel(primary);
        let limiter = RedisLimiter::with(connection.clone());
        let ping = async { redis::cmd("PING").query_async::<()>(&mut connection).await };
        match within(DEFAULT_TIMEOUT, ping).await {
            Ok(()) => Ok(limiter),
            Err(fault) => limiter.started_down(fault.at(&shown)),
        }
    }

    /// On a cluster connected to, knowing where its slots are.
    async fn on_cluster(mut connection: ClusterConnection, seeds: String) -> RedisLimiter {
        // Where the slots are, to send each node its checks together. Without it (the cluster
        // answered something else), checks are grouped by slot until the map is read again.
        let nodes = Nodes::unknown(&seeds);
        let _ = nodes.refresh(&mut connection).await;
        RedisLimiter::with(Connection::Cluster(connection, Arc::new(nodes)))
    }
}

/// The connection's settings: each attempt and each answer waited for at most the default
/// timeout; reconnecting retried up to every half second.
pub(crate) fn manager_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(DEFAULT_TIMEOUT))
        .set_response_timeout(Some(DEFAULT_TIMEOUT))
        .set_max_delay(Duration::from_millis(500))
}

/// The client of `url`, and the URL as messages show it.
pub(crate) fn client(url: &str) -> Result<(Client, String), RedisError> {
    let shown = redact(url);
    let client = Client::open(url).map_err(|e| not_a_url(url, &shown, &e))?;
    Ok((client, shown))
}

/// What a URL that redis-rs refused is told: its error, and for one without a scheme (as
/// `host:port` is) the URL it may mean.
pub(crate) fn not_a_url(url: &str, shown: &str, err: &redis::RedisError) -> RedisError {
    let hint = if url.contains("://") {
        String::new()
    } else {
        format!("; a Redis URL starts with its scheme: did you mean redis://{shown}?")
    };
    RedisError::Config {
        detail: format!("`{shown}`: {err}{hint}"),
    }
}

/// Redis's first answer, on a connection of its own made once (the manager's would retry for
/// seconds before a refusal is known), then on the manager's.
async fn first_answer(client: &Client, mut manager: ConnectionManager) -> redis::RedisResult<()> {
    let once = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(DEFAULT_TIMEOUT))
        .set_response_timeout(Some(DEFAULT_TIMEOUT));
    drop(
        client
            .get_multiplexed_async_connection_with_config(&once)
            .await?,
    );
    redis::cmd("PING").query_async(&mut manager).await
}

/// The cluster client of `nodes`, and the nodes as messages show them.
/// A client of the cluster `nodes`, `more` adding to its builder (its TLS).
pub(crate) fn cluster_client(
    nodes: &[&str],
    more: impl FnOnce(ClusterClientBuilder) -> ClusterClientBuilder,
) -> Result<(ClusterClient, String), RedisError> {
    if nodes.is_empty() {
        return Err(RedisError::Config {
            detail: "a cluster needs at least one node, got none".to_string(),
        });
    }
    let seeds = nodes
        .iter()
        .map(|url| redact(url))
        .collect::<Vec<_>>()
        .join(", ");
    let seeds = quote(&seeds);
    for node in nodes {
        if let Err(err) = Client::open(*node) {
            return Err(not_a_url(node, &redact(node), &err));
        }
    }
    let builder = ClusterClient::builder(nodes.iter().copied());
    let client = more(builder)
        .connection_timeout(DEFAULT_TIMEOUT)
        .response_timeout(DEFAULT_TIMEOUT)
        .retries(2)
        .min_retry_wait(CLUSTER_RETRY_WAIT.0)
        .max_retry_wait(CLUSTER_RETRY_WAIT.1)
        .retry_wait_formula(CLUSTER_RETRY_WAIT.0, 2)
        .build()
        .map_err(|e| RedisError::Config {
            detail: format!("[{seeds}]: {e}"),
        })?;
    Ok((client, seeds))
}
