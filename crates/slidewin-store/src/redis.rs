//! [`Redis`]: counts on Redis or a Redis Cluster through a `RedisLimiter`, with the `redis`
//! feature.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use slidewin::limit::{Reservation, RuleSet};
use slidewin::{ConfigError, Moment};
use slidewin_redis::{CircuitState, FailurePolicy};

use crate::denials::Denials;
use crate::{Backend, BackendError, BackendKind, BackendState, Checked, RequestKey};

/// Counts on Redis or a Redis Cluster, through a
/// [`RedisLimiter`](slidewin_redis::RedisLimiter): the same decisions as [`Memory`](crate::Memory), shared by
/// every process that uses the same Redis and prefix. Its
/// [`FailurePolicy`], if set, answers while Redis cannot, and the answer says so
/// ([`Checked::degraded`]).
///
/// Time is the Redis server's by default, so that every process agrees;
/// [`with_layer_clock`](Redis::with_layer_clock) uses the layer's clock instead (for tests
/// and replays, on the Unix timeline).
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use slidewin_redis::{FailurePolicy, RedisLimiter};
/// let limiter = RedisLimiter::connect("redis://127.0.0.1/").await?
///     .with_failure_policy(FailurePolicy::Open);
/// let backend = slidewin_store::Redis::new(limiter);
/// # Ok(()) }
/// ```
///
/// A denial Redis gives a one-unit check, with nothing left and a wait, is kept and answered
/// again without asking Redis until the wait ends (see [`Redis::with_denial_cache`]).
#[derive(Clone)]
pub struct Redis {
    limiter: slidewin_redis::RedisLimiter,
    layer_clock: bool,
    denials: Arc<Denials>,
}

impl fmt::Debug for Redis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redis")
            .field("limiter", &self.limiter)
            .field("layer_clock", &self.layer_clock)
            .field("denials_answered", &self.denials.answered())
            .finish()
    }
}

impl Redis {
    /// How many denials are kept at most, by default: about 300 bytes each.
    pub const DEFAULT_DENIAL_CACHE: usize = 16_384;

    /// Counts through `limiter`, at the Redis server's time.
    #[must_use]
    pub fn new(limiter: slidewin_redis::RedisLimiter) -> Redis {
        Redis {
            limiter,
            layer_clock: false,
            denials: Arc::new(Denials::new(Redis::DEFAULT_DENIAL_CACHE)),
        }
    }

    /// The same, keeping at most `capacity` denials (0: none, every check asks Redis). A key
    /// that Redis denied one unit with nothing left and a `retry_after` is denied until then
    /// whatever any process does, since counts only grow and a denied check counts nothing:
    /// its one-unit checks are answered here until the wait ends, each wait and reset shorter
    /// by the time gone by. A flood on one hot key then costs Redis one call per wait. Where
    /// other processes admit meanwhile, Redis's wait could be longer than the one answered
    /// here; the decision is Redis's either way.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin_redis::RedisLimiter;
    /// let limiter = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let backend = slidewin_store::Redis::new(limiter).with_denial_cache(0);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_denial_cache(self, capacity: usize) -> Redis {
        Redis {
            denials: Arc::new(Denials::new(capacity)),
            ..self
        }
    }

    /// The same, at the layer's clock's time, taken as Unix time: every process must then
    /// share one clock.
    #[must_use]
    pub fn with_layer_clock(self) -> Redis {
        Redis {
            layer_clock: true,
            ..self
        }
    }

    /// The same, its keys under `prefix` instead of `slidewin`
    /// ([`RedisLimiter::with_prefix`](slidewin_redis::RedisLimiter::with_prefix)): services
    /// that share a Redis under different prefixes share no counts.
    #[must_use]
    pub fn with_key_prefix(self, prefix: &str) -> Redis {
        Redis {
            limiter: self.limiter.with_prefix(prefix),
            ..self
        }
    }

    /// The limiter.
    #[must_use]
    pub fn limiter(&self) -> &slidewin_redis::RedisLimiter {
        &self.limiter
    }
}

/// [`carry`](Backend::carry) is the default, which moves nothing: a rule's counts live in
/// Redis under `{prefix:key}:name:kind`, a key without the quota in it, so a store for the new
/// quota of a rule kept by name and kind reads the same counts.
impl Backend for Redis {
    type Store = slidewin_redis::Rules;

    fn store(&self, rules: RuleSet) -> Result<Self::Store, ConfigError> {
        slidewin_redis::Rules::new(rules)
    }

    async fn check<'a>(
        &'a self,
        store: &'a Self::Store,
        key: RequestKey<'a>,
        now: Moment,
        cost: u64,
    ) -> Result<Checked, BackendError> {
        let text = text_of(key);
        let answer = if self.layer_clock {
            self.limiter.check(store, &text, now, cost).await
        } else {
            self.limiter.check_now(store, &text, cost).await
        };
        let decision = answer.map_err(backend_error)?;
        let checked = checked_of(&decision);
        if decision.degraded().is_none() {
            // `now` was read before Redis decided: the wait kept ends no later.
            self.denials.keep(store, &text, now, cost, &checked);
        }
        Ok(checked)
    }

    /// Peeks through [`RedisLimiter::peek`](slidewin_redis::RedisLimiter::peek), at the
    /// layer's time or Redis's as checks are; the failure policy answers while Redis is away,
    /// degraded, as a check's.
    async fn peek<'a>(
        &'a self,
        store: &'a Self::Store,
        key: RequestKey<'a>,
        now: Moment,
        cost: u64,
    ) -> Result<Checked, BackendError> {
        let text = text_of(key);
        let answer = if self.layer_clock {
            self.limiter.peek(store, &text, now, cost).await
        } else {
            self.limiter.peek_now(store, &text, cost).await
        };
        answer
            .map(|decision| checked_of(&decision))
            .map_err(backend_error)
    }

    /// Gives back through [`RedisLimiter::release`](slidewin_redis::RedisLimiter::release),
    /// at the layer's time or Redis's as checks are.
    async fn release<'a>(
        &'a self,
        store: &'a Self::Store,
        key: RequestKey<'a>,
        now: Moment,
        units: u64,
    ) -> Result<u64, BackendError> {
        let text = text_of(key);
        let answer = if self.layer_clock {
            self.limiter.release(store, &text, now, units).await
        } else {
            self.limiter.release_now(store, &text, units).await
        };
        answer.map_err(|err| match err {
            slidewin_redis::RedisError::Limit(err) => err.into(),
            err => BackendError::Unavailable {
                detail: err.to_string(),
            },
        })
    }

    /// Reserves through [`RedisLimiter::reserve`](slidewin_redis::RedisLimiter::reserve), at the
    /// layer's time, or at Redis's read first
    /// ([`reserve_now`](slidewin_redis::RedisLimiter::reserve_now)). While Redis is away the
    /// failure policy answers, degraded, and nothing is reserved: an admission it makes was
    /// never counted, so there is nothing to settle (the denials kept are not consulted: a
    /// reserve is never answered without Redis while it is up).
    async fn reserve<'a>(
        &'a self,
        store: &'a Self::Store,
        key: RequestKey<'a>,
        now: Moment,
        estimate: u64,
    ) -> Result<(Checked, Option<Reservation>), BackendError> {
        let text = text_of(key);
        let answer = if self.layer_clock {
            self.limiter.reserve(store, &text, now, estimate).await
        } else {
            self.limiter.reserve_now(store, &text, estimate).await
        };
        let (decision, reserved) = answer.map_err(backend_error)?;
        // An admission the policy made was never counted: nothing to settle.
        let reserved = reserved.filter(|_| decision.degraded().is_none());
        Ok((checked_of(&decision), reserved))
    }

    /// Settles through [`RedisLimiter::settle`](slidewin_redis::RedisLimiter::settle): one
    /// script call. While Redis is away it fails with [`BackendError::Unavailable`] whatever
    /// the failure policy: the reservation keeps its estimate, as one never settled does
    /// (what the policy would decide is for admissions, not for counts already made). An
    /// [`unreserved`](Reservation::unreserved) reservation is charged at Redis's time, as
    /// checks count ([`charge_now`](slidewin_redis::RedisLimiter::charge_now)), unless the
    /// layer's clock is used.
    async fn settle<'a>(
        &'a self,
        store: &'a Self::Store,
        key: RequestKey<'a>,
        reservation: Reservation,
        actual: u64,
    ) -> Result<bool, BackendError> {
        let text = text_of(key);
        let answer = if reservation.units() == 0 && !self.layer_clock {
            self.limiter.charge_now(store, &text, actual).await
        } else {
            self.limiter.settle(store, &text, reservation, actual).await
        };
        if actual < reservation.units() {
            // Counts went down (once the settle is in): a denial kept for the key may no
            // longer hold.
            self.denials.forget(store, &text);
        }
        answer.map_err(backend_error)
    }

    /// A denial kept from Redis that still holds (see [`Redis::with_denial_cache`]).
    fn check_at_once(
        &self,
        store: &Self::Store,
        key: RequestKey<'_>,
        now: Moment,
        cost: u64,
    ) -> Option<Result<Checked, BackendError>> {
        let text = text_of(key);
        self.denials.answer(store, &text, now, cost).map(Ok)
    }

    fn denials_answered(&self) -> u64 {
        self.denials.answered()
    }

    fn kind(&self) -> BackendKind {
        if self.limiter.is_cluster() {
            BackendKind::RedisCluster
        } else {
            BackendKind::Redis
        }
    }

    /// Its circuit's state: closed is up, half-open probing, open down.
    fn state(&self) -> BackendState {
        state_of(self.limiter.circuit_state())
    }

    /// As its circuit changes.
    fn state_changed(&self, from: BackendState) -> impl Future<Output = BackendState> + Send {
        let limiter = self.limiter.clone();
        async move {
            loop {
                let circuit = limiter.circuit_state();
                let now = state_of(circuit);
                if now != from {
                    return now;
                }
                limiter.circuit_changed(circuit).await;
            }
        }
    }

    fn failure_policy(&self) -> Option<FailurePolicy> {
        self.limiter.failure_policy()
    }

    /// Its stores hold nothing: the counts are in Redis.
    fn holds_keys(&self, _store: &Self::Store, _now: Moment) -> bool {
        false
    }
}

/// A decision as the store answers it: degraded when the failure policy made it.
fn checked_of(decision: &slidewin_redis::RedisDecision) -> Checked {
    match decision.degraded() {
        Some(why) => Checked::degraded_by(decision.decisions().clone(), why.to_string()),
        None => Checked::new(decision.decisions().clone()),
    }
}

/// A limiter's error as a backend's: a limit's own, or Redis unavailable.
fn backend_error(err: slidewin_redis::RedisError) -> BackendError {
    match err {
        slidewin_redis::RedisError::Limit(err) => err.into(),
        err => BackendError::Unavailable {
            detail: err.to_string(),
        },
    }
}

/// Redis names a key by its text: an address by its standard text.
fn text_of(key: RequestKey<'_>) -> Cow<'_, str> {
    match key {
        RequestKey::Text(text) => Cow::Borrowed(text),
        RequestKey::Address(address) => Cow::Owned(address.to_string()),
    }
}

/// A circuit's state as a backend's: closed is up, half-open probing, open down.
fn state_of(circuit: CircuitState) -> BackendState {
    match circuit {
        CircuitState::Closed => BackendState::Up,
        CircuitState::HalfOpen => BackendState::Probing,
        _ => BackendState::Down,
    }
}
