//! What the service needs of a backend beyond deciding: its name, its state, its keys.

use slidewin::Moment;
use slidewin_http::{Backend, Memory, Redis};
use slidewin_redis::{CircuitState, FailurePolicy};

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
        Some(match self.policy {
            FailurePolicy::Open => "open",
            FailurePolicy::Closed => "closed",
        })
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
