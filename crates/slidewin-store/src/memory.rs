//! [`Memory`]: counts in this process, a keyed limiter per rule set with a cap on live keys
//! and an optional budget of bytes.

use std::fmt;
use std::future::{Future, ready};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::Arc;

use slidewin::limit::{
    Algorithm, Equivalent, FixedWindow, Gcra, Kind, MemoryBudget, Reservation, RuleSet,
    SlidingCounter, SlidingLog,
};
use slidewin::{Keyed, Moment};

use slidewin::ConfigError;

use crate::{Backend, BackendError, BackendKind, Checked, RequestKey};

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
/// use slidewin_store::Memory;
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
    /// use slidewin_store::{Backend, Memory};
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

/// `$call` on `$store`'s keyed map whatever its kind, its `Ok` mapped by `$one` for a rule
/// alone and by `$set` for a set (a `Decision` and `Decisions`: the answers' types differ).
macro_rules! each_store {
    ($store:expr, |$keyed:ident| $call:expr, $one:expr, $set:expr) => {
        match &$store.0 {
            Store::Gcra($keyed) => $call.map($one),
            Store::Log($keyed) | Store::Refunds($keyed) => $call.map($one),
            Store::Counter($keyed) => $call.map($one),
            Store::Fixed($keyed) => $call.map($one),
            Store::Set($keyed) => $call.map($set),
        }
    };
}

enum Store {
    Gcra(Keyed<MemoryKey, Gcra>),
    Log(Keyed<MemoryKey, SlidingLog>),
    /// A log built `with_refunds`: its release refunds its oldest units.
    Refunds(Keyed<MemoryKey, SlidingLog>),
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
    /// use slidewin_store::{Backend, Memory};
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
            Store::Log(keyed) | Store::Refunds(keyed) => keyed.len(),
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
    /// use slidewin_store::{Backend, Memory};
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
            Store::Log(keyed) | Store::Refunds(keyed) => keyed.sweep(now),
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
    /// use slidewin_store::{Backend, Memory};
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
            // A log's counts carry whether it refunds or not (a reload that turns it on).
            (Store::Log(to) | Store::Refunds(to), Store::Log(from) | Store::Refunds(from)) => {
                to.carry_from(from, now)
            }
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
        // One rate in a `Keyed` of its own algorithm; leases, calendar quotas (whose quota is
        // not a span), and several rules, in a set's (whose release reaches its leases and its
        // refunds).
        let one = match rules.rules() {
            [rule] => {
                let quota = rule.quota();
                match rule.kind() {
                    Kind::Gcra => Some(Store::Gcra(self.keyed(Gcra::new(quota)?)?)),
                    Kind::SlidingLog if rule.refunds() => {
                        Some(Store::Refunds(self.keyed(SlidingLog::new(quota)?)?))
                    }
                    Kind::SlidingLog => Some(Store::Log(self.keyed(SlidingLog::new(quota)?)?)),
                    Kind::SlidingCounter => {
                        Some(Store::Counter(self.keyed(SlidingCounter::new(quota)?)?))
                    }
                    Kind::FixedWindow => Some(Store::Fixed(self.keyed(FixedWindow::new(quota)?)?)),
                    Kind::Leases | Kind::Calendar => None,
                }
            }
            _ => None,
        };
        let store = match one {
            Some(store) => store,
            None => Store::Set(self.keyed(rules)?),
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

    fn release<'a>(
        &'a self,
        store: &'a MemoryStore,
        key: RequestKey<'a>,
        now: Moment,
        units: u64,
    ) -> impl Future<Output = Result<u64, BackendError>> + Send + 'a {
        ready(Ok(match &store.0 {
            Store::Set(keyed) => keyed.release(&Lookup(key), now, units),
            Store::Refunds(keyed) => keyed.refund(&Lookup(key), now, units),
            // A rate alone that does not refund: nothing comes back.
            _ => 0,
        }))
    }

    fn peek<'a>(
        &'a self,
        store: &'a MemoryStore,
        key: RequestKey<'a>,
        now: Moment,
        cost: u64,
    ) -> impl Future<Output = Result<Checked, BackendError>> + Send + 'a {
        let key = &Lookup(key);
        let answer = each_store!(
            store,
            |keyed| keyed.peek_equivalent(key, now, cost),
            Checked::one,
            Checked::new
        );
        ready(answer.map_err(BackendError::from))
    }

    fn reserve<'a>(
        &'a self,
        store: &'a MemoryStore,
        key: RequestKey<'a>,
        now: Moment,
        estimate: u64,
    ) -> impl Future<Output = Result<(Checked, Option<Reservation>), BackendError>> + Send + 'a
    {
        ready(reserve_memory(store, key, now, estimate))
    }

    fn settle<'a>(
        &'a self,
        store: &'a MemoryStore,
        key: RequestKey<'a>,
        reservation: Reservation,
        actual: u64,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send + 'a {
        if reservation.units() == 0 {
            return ready(charge_memory(store, key, reservation.at(), actual));
        }
        let key = &Lookup(key);
        ready(Ok(match &store.0 {
            Store::Gcra(keyed) => keyed.settle(key, reservation, actual),
            Store::Log(keyed) | Store::Refunds(keyed) => keyed.settle(key, reservation, actual),
            Store::Counter(keyed) => keyed.settle(key, reservation, actual),
            Store::Fixed(keyed) => keyed.settle(key, reservation, actual),
            Store::Set(keyed) => keyed.settle(key, reservation, actual),
        }))
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

    fn kind(&self) -> BackendKind {
        BackendKind::Memory
    }

    fn keys(&self, store: &MemoryStore) -> Option<u64> {
        Some(u64::try_from(store.len()).unwrap_or(u64::MAX))
    }

    fn memory(&self) -> Option<(usize, usize)> {
        self.max_memory().map(|max| (self.memory_used(), max))
    }

    fn holds_keys(&self, store: &MemoryStore, now: Moment) -> bool {
        store.sweep(now);
        !store.is_empty()
    }
}

fn check_memory(
    store: &MemoryStore,
    key: RequestKey<'_>,
    now: Moment,
    cost: u64,
) -> Result<Checked, BackendError> {
    let key = &Lookup(key);
    let answer = each_store!(
        store,
        |keyed| keyed.check_equivalent(key, now, cost),
        Checked::one,
        Checked::new
    );
    answer.map_err(BackendError::from)
}

fn reserve_memory(
    store: &MemoryStore,
    key: RequestKey<'_>,
    now: Moment,
    estimate: u64,
) -> Result<(Checked, Option<Reservation>), BackendError> {
    let key = &Lookup(key);
    let answer = each_store!(
        store,
        |keyed| keyed.reserve_equivalent(key, now, estimate),
        |(decision, reserved)| (Checked::one(decision), reserved),
        |(decisions, reserved)| (Checked::new(decisions), reserved)
    );
    answer.map_err(BackendError::from)
}

/// An unreserved settle: `units` charged at `now`, the key made as a check makes it (within
/// the cap and the budget). Whether anything was charged.
fn charge_memory(
    store: &MemoryStore,
    key: RequestKey<'_>,
    now: Moment,
    units: u64,
) -> Result<bool, BackendError> {
    let key = &Lookup(key);
    let charged = each_store!(
        store,
        |keyed| keyed.charge_equivalent(key, now, units),
        drop,
        drop
    );
    charged.map(|()| units > 0).map_err(BackendError::from)
}

#[cfg(test)]
mod tests;
