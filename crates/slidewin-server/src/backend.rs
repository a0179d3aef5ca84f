//! What the service needs of a backend beyond deciding: its name, its state, its keys.

use std::time::Duration;

use slidewin::Moment;
use slidewin_http::{Backend, Memory, Redis};
use slidewin_redis::{CircuitState, FailurePolicy, RedisError, RedisLimiter};

/// While Redis is down, the service probes it after 50 ms, then after twice the wait before, up
/// to every 500 ms (the limiter's own default goes to 2 s): a rate-limit service is back on
/// exact decisions within about half a second of Redis, for a probe every half second.
const PROBE_FIRST: Duration = Duration::from_millis(50);
const PROBE_LONGEST: Duration = Duration::from_millis(500);

/// A [`Backend`] the service can run on: [`Memory`] or [`Redis`].
pub trait ServiceBackend: Backend {
    /// `memory`, `redis` or `redis-cluster`.
    fn kind(&self) -> &'static str;

    /// `up`, or for Redis `down` (its circuit open) or `probing` (half-open).
    fn state(&self) -> &'static str;

    /// `open` or `closed` for Redis: what it answers while Redis is down.
    fn failure_policy(&self) -> Option<&'static str>;

    /// Keys held in `store` (memory), or 0 where the store keeps them (Redis).
    fn keys(&self, store: &Self::Store) -> u64;

    /// The bytes the backend's keys hold on its memory budget, and the budget: `None` where
    /// it keeps no budget (Redis keeps its counts in Redis).
    fn memory(&self) -> Option<(usize, usize)> {
        None
    }

    /// Whether `store` holds a key still live at `now` (those gone idle are dropped first):
    /// a store that holds none may be dropped and made again without losing a count. Redis
    /// keeps its counts in Redis, so its stores never do. The default, `true`, never drops one.
    fn holds_keys(&self, store: &Self::Store, now: Moment) -> bool {
        let _ = (store, now);
        true
    }

    /// Moves what `from` counted into `to`, which replaces it after a reload changed its
    /// quotas; the keys carried.
    fn carry_counts(&self, to: &Self::Store, from: &Self::Store, now: Moment) -> usize;
}

impl ServiceBackend for Memory {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn state(&self) -> &'static str {
        "up"
    }

    fn failure_policy(&self) -> Option<&'static str> {
        None
    }

    fn keys(&self, store: &Self::Store) -> u64 {
        u64::try_from(store.len()).unwrap_or(u64::MAX)
    }

    fn carry_counts(&self, to: &Self::Store, from: &Self::Store, now: Moment) -> usize {
        self.carry(to, from, now)
    }

    fn holds_keys(&self, store: &Self::Store, now: Moment) -> bool {
        store.sweep(now);
        !store.is_empty()
    }

    fn memory(&self) -> Option<(usize, usize)> {
        self.max_memory().map(|max| (self.memory_used(), max))
    }
}

/// Redis, with the shape it was connected to and its failure policy (which the limiter keeps
/// to itself).
pub struct RedisService {
    redis: Redis,
    cluster: bool,
    policy: FailurePolicy,
}

impl RedisService {
    /// `redis`, connected to one server or (`cluster`) a Redis Cluster, answering by `policy`
    /// while it is down.
    #[must_use]
    pub fn new(redis: Redis, cluster: bool, policy: FailurePolicy) -> RedisService {
        RedisService {
            redis,
            cluster,
            policy,
        }
    }

    /// The limiter it checks on: to wait for Redis (its
    /// [`circuit_changed`](RedisLimiter::circuit_changed)), or to say why it is away.
    ///
    /// ```
    /// use slidewin_server::{FailurePolicy, RedisService};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), slidewin_redis::RedisError> {
    /// let redis = RedisService::connect("redis://127.0.0.1:1/", FailurePolicy::Open).await?;
    /// if let Some(why) = redis.limiter().why_unavailable() {
    ///     eprintln!("not ready: {why}");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn limiter(&self) -> &RedisLimiter {
        self.redis.limiter()
    }

    /// `slidewin serve --redis URL`'s backend: one Redis server, answering by `policy` while
    /// it is down. A Redis that cannot be reached now does not keep the service from starting
    /// (a service restarted during an outage must come up): it starts `down`
    /// ([`state`](ServiceBackend::state)), says so in a warn line naming the URL (its password
    /// hidden) and the policy, answers by the policy, and logs when Redis first answers.
    ///
    /// # Errors
    ///
    /// A URL that is not one, or Redis refusing the connection itself (a wrong password).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin_server::{FailurePolicy, RedisService, ServiceBackend};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), slidewin_redis::RedisError> {
    /// // Nothing listens on port 1: the backend is made anyway, down.
    /// let redis = RedisService::connect("redis://127.0.0.1:1/", FailurePolicy::Open).await?;
    /// assert_eq!((redis.kind(), redis.state()), ("redis", "down"));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect(url: &str, policy: FailurePolicy) -> Result<RedisService, RedisError> {
        let limiter = RedisLimiter::connect_lazily(url).await?;
        RedisService::started(limiter, false, policy)
    }

    /// `slidewin serve --redis-cluster`'s backend: a Redis Cluster through its seed `nodes`
    /// (URLs), as [`connect`](RedisService::connect) makes one server's.
    ///
    /// # Errors
    ///
    /// As [`connect`](RedisService::connect); no nodes.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin_server::{FailurePolicy, RedisService, ServiceBackend};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), slidewin_redis::RedisError> {
    /// let nodes = ["redis://127.0.0.1:1/".to_owned()];
    /// let redis = RedisService::connect_cluster(&nodes, FailurePolicy::Closed).await?;
    /// assert_eq!((redis.kind(), redis.state()), ("redis-cluster", "down"));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect_cluster(
        nodes: &[String],
        policy: FailurePolicy,
    ) -> Result<RedisService, RedisError> {
        let seeds: Vec<&str> = nodes.iter().map(String::as_str).collect();
        let limiter = RedisLimiter::connect_cluster_lazily(&seeds).await?;
        RedisService::started(limiter, true, policy)
    }

    /// The service's backend on `limiter`, just made: the service's probe waits and `policy`;
    /// when Redis did not answer, a warn line now and an info line when it first does.
    fn started(
        limiter: RedisLimiter,
        cluster: bool,
        policy: FailurePolicy,
    ) -> Result<RedisService, RedisError> {
        let limiter = limiter
            .with_failure_policy(policy)
            .with_circuit_backoff(PROBE_FIRST, PROBE_LONGEST)?;
        let service = RedisService::new(Redis::new(limiter.clone()), cluster, policy);
        if let Some(why) = limiter.why_unavailable() {
            let policy = policy_name(policy);
            tracing::warn!(
                failure_policy = policy,
                "starting without Redis ({why}): answering by the failure policy ({policy}) \
                 until it answers; not ready until then"
            );
            tokio::spawn(async move {
                let mut state = limiter.circuit_state();
                while state != CircuitState::Closed {
                    state = limiter.circuit_changed(state).await;
                }
                tracing::info!("Redis answers: decisions are Redis's again");
            });
        }
        Ok(service)
    }
}

/// How a policy is named: in `--failure-policy`, the dashboard and the logs.
fn policy_name(policy: FailurePolicy) -> &'static str {
    match policy {
        FailurePolicy::Open => "open",
        FailurePolicy::Closed => "closed",
    }
}

impl Backend for RedisService {
    type Store = <Redis as Backend>::Store;

    fn store(
        &self,
        rules: slidewin::limit::RuleSet,
    ) -> Result<Self::Store, slidewin_http::ConfigError> {
        self.redis.store(rules)
    }

    fn check<'a>(
        &'a self,
        store: &'a Self::Store,
        key: slidewin_http::RequestKey<'a>,
        now: Moment,
        cost: u64,
    ) -> impl Future<Output = Result<slidewin_http::Checked, slidewin_http::BackendError>> + Send + 'a
    {
        self.redis.check(store, key, now, cost)
    }
}

impl ServiceBackend for RedisService {
    fn kind(&self) -> &'static str {
        if self.cluster {
            "redis-cluster"
        } else {
            "redis"
        }
    }

    fn state(&self) -> &'static str {
        match self.redis.limiter().circuit_state() {
            CircuitState::Closed => "up",
            CircuitState::HalfOpen => "probing",
            _ => "down",
        }
    }

    fn failure_policy(&self) -> Option<&'static str> {
        Some(policy_name(self.policy))
    }

    fn keys(&self, _store: &Self::Store) -> u64 {
        0
    }

    fn holds_keys(&self, _store: &Self::Store, _now: Moment) -> bool {
        false
    }

    /// Redis keys a rule's counts by its name and kind, not its quota: they carry themselves.
    fn carry_counts(&self, _to: &Self::Store, _from: &Self::Store, _now: Moment) -> usize {
        0
    }
}
