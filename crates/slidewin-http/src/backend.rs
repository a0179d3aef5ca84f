//! [`Backend`]: where a layer keeps its counts: [`Memory`], or Redis with the `redis` feature.

use std::fmt;
use std::future::{Future, ready};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::Arc;

use slidewin::limit::{
    Algorithm, Decisions, Equivalent, FixedWindow, Gcra, Kind, LimitError, MemoryBudget, RuleSet,
    SlidingCounter, SlidingLog,
};
use slidewin::{Decision, Keyed, Moment};

use crate::error::ConfigError;
use crate::limit::RequestKey;

/// Where a [`RateLimitLayer`](crate::RateLimitLayer) keeps its counts: one trait over
/// [`Memory`] and [`Redis`](crate::Redis), so one layer type and one test serve both.
///
/// A backend makes a **store** for each rule set the layer holds, and checks a key of a store
/// (a [`RequestKey`]: an address or text): every rule of the set admits, and then all are
/// charged, or none is (all-or-nothing).
///
/// # Example
///
/// ```
/// use slidewin::Moment;
/// use slidewin::limit::{Kind, Rule, RuleSet};
/// use slidewin_http::{Backend, Memory};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let memory = Memory::new();
/// let store = memory.store(RuleSet::from(Rule::new("api", Kind::SlidingLog, "1/s".parse()?)?))?;
/// assert!(memory.check(&store, "ann".into(), Moment::ZERO, 1).await?.allowed());
/// assert!(!memory.check(&store, "ann".into(), Moment::ZERO, 1).await?.allowed());
/// # Ok(()) }
/// ```
pub trait Backend: Send + Sync + 'static {
    /// The counts of one rule set, for every key.
    type Store: Send + Sync + 'static;

    /// A store for `rules`.
    ///
    /// # Errors
    ///
    /// What the backend cannot hold, named.
    fn store(&self, rules: RuleSet) -> Result<Self::Store, ConfigError>;

    /// Decides about `cost` for `key` in `store` at `now` (the layer's clock; a backend may
    /// keep time of its own, as Redis does by default), and charges it when every rule admits.
    fn check<'a>(
        &'a self,
        store: &'a Self::Store,
        key: RequestKey<'a>,
        now: Moment,
        cost: u64,
    ) -> impl Future<Output = Result<Checked, BackendError>> + Send + 'a;

    /// Moves the counts of `from`, a store being retired (its rule set changed by a reload),
    /// into `to`, the store replacing it, converted to `to`'s quotas at `now`; returns how
    /// many keys were carried. So a limit kept by name across a reload keeps its counts, and
    /// every answer afterwards is against the new quota.
    ///
    /// The default carries nothing and answers 0: for a backend whose counts do not live in
    /// the store, which has nothing to move. [`Redis`](crate::Redis) is one: it keeps a rule's
    /// counts in Redis under `{prefix:key}:name:kind`, a key without the quota in it, so a
    /// quota changed under the same name and kind is read from the same counts by the new
    /// store. [`Memory`] moves its keys, converted as [`Keyed::carry_from`] says.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::{Backend, Memory};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let memory = Memory::new();
    /// let api = |quota: &str| Rule::new("api", Kind::SlidingLog, quota.parse().unwrap());
    /// let old = memory.store(RuleSet::from(api("2/minute")?))?;
    /// assert!(memory.check(&old, "ann".into(), Moment::ZERO, 2).await?.allowed());
    ///
    /// // The reload raises the limit to 3: ann has used 2 of them.
    /// let new = memory.store(RuleSet::from(api("3/minute")?))?;
    /// assert_eq!(memory.carry(&new, &old, Moment::ZERO), 1);
    /// let checked = memory.check(&new, "ann".into(), Moment::ZERO, 1).await?;
    /// assert!(checked.allowed());
    /// assert_eq!((checked.decision().limit(), checked.decision().remaining()), (3, 0));
    /// # Ok(()) }
    /// ```
    fn carry(&self, to: &Self::Store, from: &Self::Store, now: Moment) -> usize {
        let _ = (to, from, now);
        0
    }

    /// [`check`](Backend::check), answered at once by a backend that never waits (memory):
    /// the layer then needs no boxed future for the request. `None`, the default, means the
    /// backend did nothing and must be asked with `check`. A backend answers at once always or
    /// never.
    fn check_at_once(
        &self,
        store: &Self::Store,
        key: RequestKey<'_>,
        now: Moment,
        cost: u64,
    ) -> Option<Result<Checked, BackendError>> {
        let _ = (store, key, now, cost);
        None
    }
}

/// A backend's answer: each rule's decision, and whether it was made without the store.
///
/// ```
/// use std::time::Duration;
/// use slidewin::Decision;
/// use slidewin::limit::Decisions;
/// use slidewin_http::Checked;
///
/// let each = Decisions::new(vec![Decision::allow(10, 9, Duration::ZERO)]).unwrap();
/// let checked = Checked::new(each);
/// assert!(checked.allowed() && checked.without_store().is_none());
/// assert_eq!(checked, Checked::one(Decision::allow(10, 9, Duration::ZERO)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    answer: Answer,
    without_store: Option<String>,
}

/// One rule's decision on its own, or a set's.
#[derive(Clone, Debug)]
pub(crate) enum Answer {
    One(Decision),
    Many(Decisions),
}

/// Equal when they say the same: one rule's decision, or a set of one rule that decided it.
impl PartialEq for Answer {
    fn eq(&self, other: &Answer) -> bool {
        self.as_slice() == other.as_slice() && self.binding() == other.binding()
    }
}

impl Eq for Answer {}

impl Answer {
    pub(crate) fn as_slice(&self) -> &[Decision] {
        match self {
            Answer::One(decision) => std::slice::from_ref(decision),
            Answer::Many(decisions) => decisions.as_slice(),
        }
    }

    pub(crate) fn binding(&self) -> usize {
        match self {
            Answer::One(_) => 0,
            Answer::Many(decisions) => decisions.binding(),
        }
    }

    pub(crate) fn decision(&self) -> Decision {
        match self {
            Answer::One(decision) => *decision,
            Answer::Many(decisions) => decisions.decision(),
        }
    }
}

impl Checked {
    /// A rule set's decisions, made by the store.
    #[must_use]
    pub fn new(decisions: Decisions) -> Checked {
        Checked {
            answer: Answer::Many(decisions),
            without_store: None,
        }
    }

    /// One rule's decision, made by the store.
    #[must_use]
    pub fn one(decision: Decision) -> Checked {
        Checked {
            answer: Answer::One(decision),
            without_store: None,
        }
    }

    /// Decisions made without the store (by a failure policy), and why.
    #[must_use]
    pub fn by_failure_policy(decisions: Decisions, why: String) -> Checked {
        Checked {
            answer: Answer::Many(decisions),
            without_store: Some(why),
        }
    }

    /// Whether every rule admitted.
    #[must_use]
    pub fn allowed(&self) -> bool {
        self.answer.decision().allowed()
    }

    /// Each rule's decision, in the order of the store's rules.
    #[must_use]
    pub fn decisions(&self) -> &[Decision] {
        self.answer.as_slice()
    }

    /// The binding rule's index (see [`Decisions::binding`]).
    #[must_use]
    pub fn binding(&self) -> usize {
        self.answer.binding()
    }

    /// The binding rule's decision.
    #[must_use]
    pub fn decision(&self) -> Decision {
        self.answer.decision()
    }

    /// Why the store could not decide, when a failure policy did.
    #[must_use]
    pub fn without_store(&self) -> Option<&str> {
        self.without_store.as_deref()
    }

    pub(crate) fn into_parts(self) -> (Answer, Option<String>) {
        (self.answer, self.without_store)
    }
}

/// A check a backend could not decide.
///
/// ```
/// use slidewin_http::BackendError;
/// let err = BackendError::CostTooHigh { cost: 20, max: 10 };
/// assert_eq!(err.to_string(), "a cost of 20 can never be admitted: the most at once is 10");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendError {
    /// The cost is more than the rules ever admit at once.
    CostTooHigh {
        /// The cost asked for.
        cost: u64,
        /// The most the rules admit at once.
        max: u64,
    },
    /// The store holds its cap of keys, none idle: a new key must wait.
    KeysFull {
        /// The cap.
        cap: usize,
    },
    /// The stores' memory budget ([`Memory::with_max_memory`]) is spent: a new key, or a key's
    /// growth, must wait.
    MemoryFull {
        /// The budget, in bytes.
        max_bytes: usize,
    },
    /// The store could not answer, and no failure policy answers for it.
    Unavailable {
        /// What failed (for logs: it may name internal addresses).
        detail: String,
    },
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendError::CostTooHigh { cost, max } => LimitError::CostTooHigh {
                cost: *cost,
                max: *max,
            }
            .fmt(f),
            BackendError::KeysFull { cap } => LimitError::KeysFull { cap: *cap }.fmt(f),
            BackendError::MemoryFull { max_bytes } => LimitError::MemoryFull {
                max_bytes: *max_bytes,
            }
            .fmt(f),
            BackendError::Unavailable { detail } => {
                write!(f, "the rate limit store could not answer: {detail}")
            }
        }
    }
}

impl std::error::Error for BackendError {}

impl From<LimitError> for BackendError {
    fn from(err: LimitError) -> BackendError {
        match err {
            LimitError::CostTooHigh { cost, max } => BackendError::CostTooHigh { cost, max },
            LimitError::KeysFull { cap } => BackendError::KeysFull { cap },
            LimitError::MemoryFull { max_bytes } => BackendError::MemoryFull { max_bytes },
            // A variant the core adds later: still an error, named.
            other => BackendError::Unavailable {
                detail: other.to_string(),
            },
        }
    }
}

/// Counts in this process's memory: a [`Keyed`] limiter per rule set, sharded, with idle keys
/// dropped and a cap on live keys (governor #171: a limiter keyed by IP driven out of memory
/// by a flood of addresses). At the cap, a new key is refused rather than a limited key
/// evicted, so that no client escapes its limit by pushing others out.
///
/// An address is kept and hashed as its bits (4 bytes, or 16 for IPv6), never as its text:
/// looking a client up costs no formatting and a short hash. Keys are hashed with `SipHash`
/// under a random seed, since clients choose them.
///
/// With [`with_max_memory`](Memory::with_max_memory), every store's keys also share a
/// [`MemoryBudget`] of bytes: a new key, or an admission that would grow a sliding log, is
/// refused with [`BackendError::MemoryFull`] while it is spent.
///
/// ```
/// use slidewin_http::Memory;
/// assert_eq!(Memory::new().max_keys(), Memory::DEFAULT_MAX_KEYS);
/// assert_eq!(Memory::new().with_max_keys(10_000).max_keys(), 10_000);
/// assert_eq!(Memory::new().with_max_memory(1 << 30).max_memory(), Some(1 << 30));
/// ```
#[derive(Clone, Debug)]
pub struct Memory {
    max_keys: usize,
    budget: Option<Arc<MemoryBudget>>,
}

impl Memory {
    /// The cap on live keys per rule set, by default: a million (tens of megabytes of sliding
    /// logs at most, and nothing for keys that are not live).
    pub const DEFAULT_MAX_KEYS: usize = 1_000_000;

    /// Counts in memory, with [`DEFAULT_MAX_KEYS`](Memory::DEFAULT_MAX_KEYS).
    #[must_use]
    pub fn new() -> Memory {
        Memory {
            max_keys: Memory::DEFAULT_MAX_KEYS,
            budget: None,
        }
    }

    /// The same, with at most `max_keys` live keys per rule set (a zero is refused when the
    /// layer is built).
    #[must_use]
    pub fn with_max_keys(self, max_keys: usize) -> Memory {
        Memory { max_keys, ..self }
    }

    /// The same, every store it makes holding its keys within one budget of `max_bytes`,
    /// shared: what a key holds (its entry, its text, a sliding log's stamps) is taken as it
    /// comes and grows, and given back as it goes. See [`MemoryBudget`].
    #[must_use]
    pub fn with_max_memory(self, max_bytes: usize) -> Memory {
        Memory {
            budget: Some(Arc::new(MemoryBudget::new(max_bytes))),
            ..self
        }
    }

    /// The budget of bytes its stores share, if it has one.
    #[must_use]
    pub fn max_memory(&self) -> Option<usize> {
        self.budget.as_ref().map(|budget| budget.max_bytes())
    }

    /// The bytes its stores' keys hold now, on its budget (0 without one).
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::{Backend, Memory};
    ///
    /// let memory = Memory::new().with_max_memory(1 << 20);
    /// let store = memory.store(RuleSet::from(Rule::new("api", Kind::SlidingLog, "5/s".parse()?)?))?;
    /// assert_eq!(memory.memory_used(), 0);
    /// memory.check_at_once(&store, "ann".into(), Moment::ZERO, 1);
    /// assert!(memory.memory_used() > 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn memory_used(&self) -> usize {
        self.budget.as_ref().map_or(0, |budget| budget.used_bytes())
    }

    /// The cap on live keys per rule set.
    #[must_use]
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }
}

impl Memory {
    /// A keyed limiter of `algorithm` under this backend's cap, on its budget if it has one.
    fn keyed<A: Algorithm>(&self, algorithm: A) -> Result<Keyed<MemoryKey, A>, ConfigError> {
        let keyed = Keyed::new(algorithm).with_max_keys(self.max_keys)?;
        Ok(match &self.budget {
            Some(budget) => keyed.with_memory_budget(Arc::clone(budget), MemoryKey::heap_bytes),
            None => keyed,
        })
    }
}

impl Default for Memory {
    fn default() -> Memory {
        Memory::new()
    }
}

/// A [`Memory`] backend's counts for one rule set: a [`Keyed`] limiter of the rule's own
/// algorithm when there is one rule (lock-free for [`Gcra`] and [`FixedWindow`], and no
/// allocation per check), of the [`RuleSet`] otherwise.
pub struct MemoryStore(Store);

enum Store {
    Gcra(Keyed<MemoryKey, Gcra>),
    Log(Keyed<MemoryKey, SlidingLog>),
    Counter(Keyed<MemoryKey, SlidingCounter>),
    Fixed(Keyed<MemoryKey, FixedWindow>),
    Set(Keyed<MemoryKey, RuleSet>),
}

/// A key as [`Memory`] keeps it: an address by its bits, text as text.
#[derive(Clone, Debug, PartialEq, Eq)]
enum MemoryKey {
    V4(u32),
    V6(u128),
    Text(Box<str>),
}

impl MemoryKey {
    /// What the key holds on the heap: a text's bytes.
    fn heap_bytes(&self) -> usize {
        match self {
            MemoryKey::Text(text) => text.len(),
            MemoryKey::V4(_) | MemoryKey::V6(_) => 0,
        }
    }
}

impl Hash for MemoryKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Lookup(match self {
            MemoryKey::V4(bits) => RequestKey::Address(IpAddr::V4((*bits).into())),
            MemoryKey::V6(bits) => RequestKey::Address(IpAddr::V6((*bits).into())),
            MemoryKey::Text(text) => RequestKey::Text(text),
        })
        .hash(state);
    }
}

/// A [`RequestKey`] looking up its [`MemoryKey`]: it hashes as the key it stands for (both
/// hash through here), so that nothing is allocated to ask.
struct Lookup<'a>(RequestKey<'a>);

impl Hash for Lookup<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // One write for an address: the hasher's fixed cost is most of a short key's hash.
        match self.0 {
            RequestKey::Address(IpAddr::V4(v4)) => state.write_u64(u64::from(v4.to_bits())),
            RequestKey::Address(IpAddr::V6(v6)) => state.write_u128(v6.to_bits()),
            RequestKey::Text(text) => text.hash(state),
        }
    }
}

impl Equivalent<MemoryKey> for Lookup<'_> {
    fn equivalent(&self, key: &MemoryKey) -> bool {
        match (self.0, key) {
            (RequestKey::Address(IpAddr::V4(v4)), MemoryKey::V4(bits)) => v4.to_bits() == *bits,
            (RequestKey::Address(IpAddr::V6(v6)), MemoryKey::V6(bits)) => v6.to_bits() == *bits,
            (RequestKey::Text(text), MemoryKey::Text(kept)) => text == &**kept,
            _ => false,
        }
    }
}

impl From<&Lookup<'_>> for MemoryKey {
    fn from(lookup: &Lookup<'_>) -> MemoryKey {
        match lookup.0 {
            RequestKey::Address(IpAddr::V4(v4)) => MemoryKey::V4(v4.to_bits()),
            RequestKey::Address(IpAddr::V6(v6)) => MemoryKey::V6(v6.to_bits()),
            RequestKey::Text(text) => MemoryKey::Text(text.into()),
        }
    }
}

impl MemoryStore {
    /// The keys held now.
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::{Backend, Memory};
    ///
    /// let memory = Memory::new();
    /// let store = memory.store(RuleSet::from(Rule::new("api", Kind::Gcra, "1/s".parse()?)?))?;
    /// memory.check_at_once(&store, "ann".into(), Moment::ZERO, 1);
    /// assert_eq!(store.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        match &self.0 {
            Store::Gcra(keyed) => keyed.len(),
            Store::Log(keyed) => keyed.len(),
            Store::Counter(keyed) => keyed.len(),
            Store::Fixed(keyed) => keyed.len(),
            Store::Set(keyed) => keyed.len(),
        }
    }

    /// Whether no key is held.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every key back at its full quota at `now` ([`Keyed::sweep`]); returns how many.
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::{Backend, Memory};
    ///
    /// let memory = Memory::new();
    /// let store = memory.store(RuleSet::from(Rule::new("api", Kind::SlidingLog, "1/s".parse()?)?))?;
    /// memory.check_at_once(&store, "ann".into(), Moment::ZERO, 1);
    /// assert_eq!(store.sweep(Moment::from_secs(1)), 1);
    /// assert!(store.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sweep(&self, now: Moment) -> usize {
        match &self.0 {
            Store::Gcra(keyed) => keyed.sweep(now),
            Store::Log(keyed) => keyed.sweep(now),
            Store::Counter(keyed) => keyed.sweep(now),
            Store::Fixed(keyed) => keyed.sweep(now),
            Store::Set(keyed) => keyed.sweep(now),
        }
    }

    /// Moves every key of `old`, a store being retired, into this one, its counts converted
    /// to this store's quotas at `now` ([`Keyed::carry_from`] says how, algorithm by
    /// algorithm); returns how many keys were carried, and leaves `old` empty.
    ///
    /// A store keeps one rule in a [`Keyed`] of the rule's own algorithm, and several in a
    /// [`Keyed`] of the [`RuleSet`], where the rules carry by name. Between the two shapes
    /// (a rule added to a one-rule set, or all but one removed) or between two algorithms,
    /// nothing is carried: the answer is 0 and `old` is left as it is, for the caller to drop.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::{Backend, Memory};
    ///
    /// let memory = Memory::new();
    /// let api = |quota: &str| Rule::new("api", Kind::FixedWindow, quota.parse().unwrap());
    /// let old = memory.store(RuleSet::from(api("10/s")?))?;
    /// memory.check_at_once(&old, "ann".into(), Moment::ZERO, 4);
    ///
    /// let new = memory.store(RuleSet::from(api("20/s")?))?;
    /// assert_eq!(new.carry_from(&old, Moment::ZERO), 1);
    /// let checked = memory.check_at_once(&new, "ann".into(), Moment::ZERO, 1).unwrap()?;
    /// assert_eq!(checked.decision().remaining(), 15); // 20 - 4 - 1
    ///
    /// // A one-rule store and a two-rule store hold different shapes: nothing carries.
    /// let two = memory.store(RuleSet::new([api("20/s")?, Rule::new("day", Kind::Gcra, "1000/day".parse()?)?])?)?;
    /// assert_eq!(two.carry_from(&new, Moment::ZERO), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn carry_from(&self, old: &MemoryStore, now: Moment) -> usize {
        match (&self.0, &old.0) {
            (Store::Gcra(to), Store::Gcra(from)) => to.carry_from(from, now),
            (Store::Log(to), Store::Log(from)) => to.carry_from(from, now),
            (Store::Counter(to), Store::Counter(from)) => to.carry_from(from, now),
            (Store::Fixed(to), Store::Fixed(from)) => to.carry_from(from, now),
            (Store::Set(to), Store::Set(from)) => to.carry_from(from, now),
            _ => 0,
        }
    }
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("len", &self.len())
            .finish()
    }
}

impl Backend for Memory {
    type Store = MemoryStore;

    fn store(&self, rules: RuleSet) -> Result<MemoryStore, ConfigError> {
        let store = match rules.rules() {
            [rule] => {
                let quota = rule.quota();
                match rule.kind() {
                    Kind::Gcra => Store::Gcra(self.keyed(Gcra::new(quota)?)?),
                    Kind::SlidingLog => Store::Log(self.keyed(SlidingLog::new(quota)?)?),
                    Kind::SlidingCounter => {
                        Store::Counter(self.keyed(SlidingCounter::new(quota)?)?)
                    }
                    Kind::FixedWindow => Store::Fixed(self.keyed(FixedWindow::new(quota)?)?),
                }
            }
            _ => Store::Set(self.keyed(rules)?),
        };
        Ok(MemoryStore(store))
    }

    fn check<'a>(
        &'a self,
        store: &'a MemoryStore,
        key: RequestKey<'a>,
        now: Moment,
        cost: u64,
    ) -> impl Future<Output = Result<Checked, BackendError>> + Send + 'a {
        ready(check_memory(store, key, now, cost))
    }

    /// Moves the keys: `MemoryStore::carry_from`.
    fn carry(&self, to: &MemoryStore, from: &MemoryStore, now: Moment) -> usize {
        to.carry_from(from, now)
    }

    fn check_at_once(
        &self,
        store: &MemoryStore,
        key: RequestKey<'_>,
        now: Moment,
        cost: u64,
    ) -> Option<Result<Checked, BackendError>> {
        Some(check_memory(store, key, now, cost))
    }
}

fn check_memory(
    store: &MemoryStore,
    key: RequestKey<'_>,
    now: Moment,
    cost: u64,
) -> Result<Checked, BackendError> {
    let key = &Lookup(key);
    let answer = match &store.0 {
        Store::Gcra(keyed) => keyed.check_equivalent(key, now, cost).map(Checked::one),
        Store::Log(keyed) => keyed.check_equivalent(key, now, cost).map(Checked::one),
        Store::Counter(keyed) => keyed.check_equivalent(key, now, cost).map(Checked::one),
        Store::Fixed(keyed) => keyed.check_equivalent(key, now, cost).map(Checked::one),
        Store::Set(keyed) => keyed.check_equivalent(key, now, cost).map(Checked::new),
    };
    answer.map_err(BackendError::from)
}

/// Counts on Redis or a Redis Cluster, through a
/// [`RedisLimiter`](slidewin_redis::RedisLimiter): the same decisions as [`Memory`], shared by
/// every process that uses the same Redis and prefix. Its
/// [`FailurePolicy`](slidewin_redis::FailurePolicy), if set, answers while Redis cannot, and
/// the layer can say so in a header
/// ([`degraded_header`](crate::RateLimitLayerBuilder::degraded_header)).
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
/// let backend = slidewin_http::Redis::new(limiter);
/// # Ok(()) }
/// ```
#[cfg(feature = "redis")]
#[derive(Clone, Debug)]
pub struct Redis {
    limiter: slidewin_redis::RedisLimiter,
    layer_clock: bool,
}

#[cfg(feature = "redis")]
impl Redis {
    /// Counts through `limiter`, at the Redis server's time.
    #[must_use]
    pub fn new(limiter: slidewin_redis::RedisLimiter) -> Redis {
        Redis {
            limiter,
            layer_clock: false,
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

    /// The limiter.
    #[must_use]
    pub fn limiter(&self) -> &slidewin_redis::RedisLimiter {
        &self.limiter
    }
}

/// [`carry`](Backend::carry) is the default, which moves nothing: a rule's counts live in
/// Redis under `{prefix:key}:name:kind`, a key without the quota in it, so a store for the new
/// quota of a rule kept by name and kind reads the same counts.
#[cfg(feature = "redis")]
impl Backend for Redis {
    type Store = slidewin_redis::Rules;

    fn store(&self, rules: RuleSet) -> Result<Self::Store, ConfigError> {
        slidewin_redis::Rules::new(rules).map_err(|err| ConfigError::Backend {
            detail: err.to_string(),
        })
    }

    async fn check<'a>(
        &'a self,
        store: &'a Self::Store,
        key: RequestKey<'a>,
        now: Moment,
        cost: u64,
    ) -> Result<Checked, BackendError> {
        // Redis names a key by its text: an address by its standard text.
        let text = match key {
            RequestKey::Text(text) => std::borrow::Cow::Borrowed(text),
            RequestKey::Address(address) => std::borrow::Cow::Owned(address.to_string()),
        };
        let answer = if self.layer_clock {
            self.limiter.check(store, &text, now, cost).await
        } else {
            self.limiter.check_now(store, &text, cost).await
        };
        match answer {
            Ok(decision) => Ok(match decision.made_without_redis() {
                Some(why) => {
                    Checked::by_failure_policy(decision.decisions().clone(), why.to_string())
                }
                None => Checked::new(decision.decisions().clone()),
            }),
            Err(slidewin_redis::RedisError::Limit(err)) => Err(err.into()),
            Err(err) => Err(BackendError::Unavailable {
                detail: err.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::hash::{BuildHasher, RandomState};
    use std::net::{Ipv4Addr, Ipv6Addr};

    use slidewin::limit::{Kind, Rule};

    use super::*;

    fn keys() -> Vec<RequestKey<'static>> {
        let v4 = Ipv4Addr::new(203, 0, 113, 7);
        vec![
            RequestKey::Address(IpAddr::V4(v4)),
            RequestKey::Address(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 8))),
            RequestKey::Address(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            RequestKey::Address(IpAddr::V4(Ipv4Addr::BROADCAST)),
            RequestKey::Address(IpAddr::V6(v4.to_ipv6_mapped())),
            RequestKey::Address(IpAddr::V6(Ipv6Addr::LOCALHOST)),
            RequestKey::Address(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1))),
            RequestKey::Text("203.0.113.7"),
            RequestKey::Text(""),
            RequestKey::Text("k-42"),
        ]
    }

    /// A lookup hashes as the key it makes, and stands for that key and no other: the
    /// contract of `Keyed::check_equivalent`.
    #[test]
    fn a_lookup_hashes_as_its_key_and_matches_only_it() {
        let hasher = RandomState::new();
        let keys = keys();
        for (i, asked) in keys.iter().enumerate() {
            let lookup = Lookup(*asked);
            let kept = MemoryKey::from(&lookup);
            assert_eq!(
                hasher.hash_one(&lookup),
                hasher.hash_one(&kept),
                "{asked:?}"
            );
            for (j, other) in keys.iter().enumerate() {
                let other = MemoryKey::from(&Lookup(*other));
                assert_eq!(lookup.equivalent(&other), i == j, "{asked:?} and {other:?}");
            }
        }
    }

    /// Each key is counted apart, an address and the text that spells it included, and the
    /// same key together.
    #[tokio::test]
    async fn each_key_has_its_own_count_in_memory() {
        let memory = Memory::new();
        let rule = Rule::new("api", Kind::SlidingLog, "2/minute".parse().unwrap()).unwrap();
        let store = memory.store(RuleSet::from(rule)).unwrap();
        for round in 0..3u64 {
            for key in keys() {
                let checked = memory.check(&store, key, Moment::ZERO, 1).await.unwrap();
                assert_eq!(checked.allowed(), round < 2, "{key:?}, round {round}");
                assert_eq!(checked.decision().remaining(), 1u64.saturating_sub(round));
            }
        }
        assert_eq!(store.len(), keys().len());
    }
}
