//! [`Keyed`]: one limiter per key (per user, per IP), with bounded memory.

use std::borrow::Borrow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use hashbrown::{Equivalent, HashTable};

use crate::error::ConfigError;
use crate::limit::algorithm::Algorithm;
use crate::limit::budget::{MemoryBudget, OnBudget};
use crate::limit::{CachePadded, LimitError};
use crate::time::{Clock, Moment};

/// The most shards a map is split into: enough that threads on different keys rarely meet.
const MAX_SHARDS: usize = 64;
/// With a cap, the fewest keys a shard may hold, so that small caps are not spread too thin.
const MIN_KEYS_PER_SHARD: usize = 16;

/// One rate limiter per key, shared by threads (`Send + Sync`, `&self`), in memory that
/// follows the keys that are actually being limited.
///
/// * **Sharded.** Keys are spread over up to 64 independently locked maps, so threads working
///   on different keys rarely wait for each other. Only the algorithm's small state is stored
///   per key (8 bytes for [`Gcra`](crate::limit::Gcra)); the rules are shared.
/// * **Shards come with keys.** A shard is allocated when the first key to be held in it
///   comes, not when the limiter is built: one that has held no key is its own size (256
///   bytes) and its rules, and one that has held a few keys has its shards' slots (16 bytes a
///   shard) and a few shards (128 bytes each). A check that leaves a new key idle (a cost of
///   0) holds nothing, and allocates nothing.
/// * **Idle keys go.** A key back at its full quota is the same as a key never seen, so it is
///   dropped. No background thread: each shard sweeps itself on its first use one span after
///   its last sweep (so a key lives at most about two spans past its last request, if its
///   shard sees traffic), and [`sweep`](Keyed::sweep) sweeps every shard, for a timer. A shard
///   left with no key gives its table back.
/// * **A cap on live keys** ([`with_max_keys`](Keyed::with_max_keys)) holds under a flood of
///   distinct keys (governor issue #171: a limiter keyed by IP driven out of memory). The cap
///   is exact, across shards. At the cap, a key that has gone idle gives way to the new one;
///   if none is idle, the **new** key is refused with [`LimitError::KeysFull`]. A key that is
///   being limited is never evicted, so no key can escape its limit by pushing others out: the
///   cost of a flood falls on new keys, and it lifts as keys go quiet. Each shard keeps its
///   keys in the order they may go idle (a heap of deadlines), so a refusal costs O(1) and an
///   eviction O(log n): a flood at the cap runs at the speed of one below it.
///
/// # Example
///
/// ```
/// use slidewin::{Keyed, Moment};
/// use slidewin::limit::SlidingLog;
///
/// let limiter = Keyed::<String, _>::new(SlidingLog::new("2/minute".parse()?)?);
/// let now = Moment::from_secs(10);
/// assert!(limiter.check("alice", now, 1)?.allowed());
/// assert!(limiter.check("alice", now, 1)?.allowed());
/// assert!(!limiter.check("alice", now, 1)?.allowed());
/// assert!(limiter.check("bob", now, 1)?.allowed()); // keys are independent
/// assert_eq!(limiter.len(), 2);
/// assert_eq!(limiter.sweep(Moment::from_secs(70)), 2); // both back at full quota
/// assert!(limiter.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Keyed<K, A: Algorithm> {
    rules: A,
    /// The shards' slots, allocated with the first key (most rules see few keys, or none),
    /// `1 << shard_bits` of them; each shard allocated with the first key it holds. Two
    /// levels, so that a limiter that has held no key is small, and one that has held one key
    /// holds one shard, not all of them.
    shards: Slots<K, A::State>,
    /// The number of shards used, as a power of two.
    shard_bits: u32,
    /// One hash per key, with a per-map random seed (keys may be chosen by an attacker): its
    /// middle bits pick the shard, and the shard's table probes with the same hash.
    hasher: RandomState,
    /// The cap on live keys; `usize::MAX` when uncapped.
    max_keys: usize,
    /// With a cap: the keys held in all shards, and those about to be (a new key takes its
    /// place here before its shard holds it), so never more than `max_keys`.
    held: CachePadded<AtomicUsize>,
    /// With a memory budget: the budget, and what this limiter holds of it.
    budget: Option<OnBudget<K>>,
}

/// A shard behind its lock, on cache lines of its own.
type ShardLock<K, S> = CachePadded<ShardCell<K, S>>;

/// The shards' slots, allocated with the first key; each shard, with the first key it holds.
type Slots<K, S> = OnceLock<Box<[OnceLock<Box<ShardLock<K, S>>>]>>;

#[derive(Debug)]
struct ShardCell<K, S> {
    shard: Mutex<Shard<K, S>>,
    /// With a cap: the shard's soonest deadline (`u64::MAX` for none), written under its lock
    /// and read without, so that a new key at the cap finds a shard with a key gone idle
    /// without locking every shard.
    soonest: AtomicU64,
}

#[derive(Debug)]
struct Shard<K, S> {
    states: HashTable<(K, S)>,
    /// When the shard was last swept, in nanoseconds.
    swept: u64,
    /// With a cap: when its keys may go idle, soonest first, as (deadline in nanoseconds,
    /// the key's hash). Every key held has an entry no later than the time it goes idle
    /// (admissions only move that time later); entries of keys gone, or of keys whose time
    /// moved, are put right when they come to the top.
    deadlines: BinaryHeap<Reverse<(u64, u64)>>,
}

impl<K: Hash + Eq, A: Algorithm> Keyed<K, A> {
    /// A keyed limiter enforcing `algorithm` for every key, with no cap on the number of keys.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::Keyed;
    /// use slidewin::limit::Gcra;
    ///
    /// let limiter = Keyed::<u32, _>::new(Gcra::new("10/s".parse()?)?);
    /// assert_eq!(limiter.algorithm().quota().limit(), 10);
    /// assert_eq!(limiter.max_keys(), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn new(algorithm: A) -> Keyed<K, A> {
        Keyed::build(algorithm, MAX_SHARDS, usize::MAX)
    }

    /// The same limiter, holding at most `max_keys` live keys (see the type's docs for what
    /// happens at the cap). The cap is exact: a new key is refused only when `max_keys` keys
    /// are held and none of them is idle, whichever shards they are in.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroMaxKeys`].
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{Keyed, Moment};
    /// use slidewin::limit::{LimitError, SlidingLog};
    ///
    /// let limiter = Keyed::<u32, _>::new(SlidingLog::new("1/minute".parse()?)?).with_max_keys(1)?;
    /// assert!(limiter.check(&1, Moment::ZERO, 1)?.allowed());
    /// // Key 1 is being limited, so it stays; the new key waits.
    /// assert_eq!(limiter.check(&2, Moment::ZERO, 1), Err(LimitError::KeysFull { cap: 1 }));
    /// // A minute later key 1 is idle and gives way.
    /// assert!(limiter.check(&2, Moment::from_secs(60), 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_max_keys(self, max_keys: usize) -> Result<Keyed<K, A>, ConfigError> {
        if max_keys == 0 {
            return Err(ConfigError::ZeroMaxKeys);
        }
        // A power of two, so that the shard is a shift of the hash.
        let shards = (max_keys / MIN_KEYS_PER_SHARD).clamp(1, MAX_SHARDS);
        let budget = self
            .budget
            .as_ref()
            .map(|on| (Arc::clone(&on.shared), on.key_heap()));
        let keyed = Keyed::build(self.rules, 1 << shards.ilog2(), max_keys);
        Ok(match budget {
            Some((budget, key_heap)) => keyed.with_memory_budget(budget, key_heap),
            None => keyed,
        })
    }

    /// The same limiter, its keys' memory taken from `budget`, which other limiters may share
    /// (see [`MemoryBudget`]): a new key is refused, and so is an admission that would grow a
    /// key's state, with [`LimitError::MemoryFull`] while the budget is spent. `key_heap` says
    /// how many bytes a key holds on the heap (`|_| 0` for integers and addresses,
    /// `|k: &String| k.capacity()` for strings). Keys it already holds are counted now, even
    /// past the budget. Give it a cap too ([`with_max_keys`](Keyed::with_max_keys), first), so
    /// that keys gone idle give way to new ones at once rather than at the next sweep.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    /// use slidewin::{Keyed, Moment};
    /// use slidewin::limit::{Gcra, MemoryBudget};
    ///
    /// let budget = Arc::new(MemoryBudget::new(1 << 20));
    /// let limiter = Keyed::<String, _>::new(Gcra::new("10/s".parse()?)?)
    ///     .with_max_keys(10_000)?
    ///     .with_memory_budget(Arc::clone(&budget), |key| key.capacity());
    /// assert!(limiter.check("ann", Moment::ZERO, 1)?.allowed());
    /// assert!(budget.used_bytes() > 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_memory_budget(
        mut self,
        budget: Arc<MemoryBudget>,
        key_heap: fn(&K) -> usize,
    ) -> Keyed<K, A> {
        let on = OnBudget::new(budget, key_heap);
        let held: usize = self
            .cells()
            .map(|cell| {
                let shard = lock(cell);
                let bytes = shard.states.iter();
                bytes.map(|(k, s)| self.weigh(&on, k, s)).sum::<usize>()
            })
            .sum();
        on.settle(0, held);
        self.budget = Some(on);
        self
    }

    fn build(rules: A, shards: usize, max_keys: usize) -> Keyed<K, A> {
        Keyed {
            rules,
            shards: OnceLock::new(),
            shard_bits: shards.ilog2(),
            hasher: RandomState::new(),
            max_keys,
            held: CachePadded(AtomicUsize::new(0)),
            budget: None,
        }
    }

    #[inline]
    fn capped(&self) -> bool {
        self.max_keys != usize::MAX
    }

    /// Shard `index`, if a key has been put in it.
    #[inline]
    fn cell(&self, index: usize) -> Option<&ShardLock<K, A::State>> {
        self.shards.get()?.get(index)?.get().map(|cell| &**cell)
    }

    /// Shard `index`, allocated now if no key has been put in it yet.
    fn cell_or_make(&self, index: usize) -> &ShardLock<K, A::State> {
        let slots = self
            .shards
            .get_or_init(|| (0..1 << self.shard_bits).map(|_| OnceLock::new()).collect());
        // `index` is below the number of shards: `shard` makes it so.
        slots[index].get_or_init(|| {
            Box::new(CachePadded(ShardCell {
                shard: Mutex::new(Shard {
                    states: HashTable::new(),
                    swept: 0,
                    deadlines: BinaryHeap::new(),
                }),
                soonest: AtomicU64::new(u64::MAX),
            }))
        })
    }

    /// The shards allocated so far, in order.
    fn cells(&self) -> impl Iterator<Item = &ShardLock<K, A::State>> {
        self.shards
            .get()
            .into_iter()
            .flat_map(|slots| slots.iter())
            .filter_map(|slot| slot.get().map(|cell| &**cell))
    }

    /// The algorithm every key gets, with its quota.
    ///
    /// ```
    /// use slidewin::Keyed;
    /// use slidewin::limit::FixedWindow;
    ///
    /// let limiter = Keyed::<String, _>::new(FixedWindow::new("5/s".parse()?)?);
    /// assert_eq!(limiter.algorithm().quota().to_string(), "5 per 1s");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn algorithm(&self) -> &A {
        &self.rules
    }

    /// The cap on live keys, if there is one.
    ///
    /// ```
    /// use slidewin::Keyed;
    /// use slidewin::limit::Gcra;
    ///
    /// let limiter = Keyed::<u64, _>::new(Gcra::new("5/s".parse()?)?).with_max_keys(1_000)?;
    /// assert_eq!(limiter.max_keys(), Some(1_000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_keys(&self) -> Option<usize> {
        (self.max_keys != usize::MAX).then_some(self.max_keys)
    }

    /// Decides about `cost` for `key` at `now`, and consumes it from the key's quota when
    /// admitted.
    ///
    /// # Errors
    ///
    /// [`LimitError::CostTooHigh`] when `cost` could never be admitted;
    /// [`LimitError::KeysFull`] when `key` is new and the cap is reached by keys that are all
    /// being limited.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{Keyed, Moment};
    /// use slidewin::limit::SlidingLog;
    ///
    /// let limiter = Keyed::<String, _>::new(SlidingLog::new("1/s".parse()?)?);
    /// assert!(limiter.check("10.0.0.1", Moment::ZERO, 1)?.allowed());
    /// assert!(!limiter.check("10.0.0.1", Moment::ZERO, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check<Q>(&self, key: &Q, now: Moment, cost: u64) -> Result<A::Output, LimitError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let (hash, index) = self.shard(key);
        self.check_in(index, hash, key, || key.to_owned(), || now, cost)
    }

    /// [`check`](Keyed::check) by a key of another type that stands for a `K`, as hashbrown's
    /// [`Equivalent`] says: it must hash as the `K` it stands for does, and `K::from` makes that
    /// `K` only when the key is new. So a map of an enum of addresses and names can be asked
    /// with an address or a `&str`, neither allocated to look up.
    ///
    /// # Errors
    ///
    /// As [`check`](Keyed::check).
    ///
    /// # Example
    ///
    /// ```
    /// use std::hash::{Hash, Hasher};
    /// use std::net::Ipv4Addr;
    /// use slidewin::{Keyed, Moment};
    /// use slidewin::limit::{Equivalent, SlidingLog};
    ///
    /// /// A client: by address, or by name.
    /// #[derive(PartialEq, Eq)]
    /// enum Client {
    ///     Address(Ipv4Addr),
    ///     Name(String),
    /// }
    ///
    /// /// The same, borrowed.
    /// enum Asked<'a> {
    ///     Address(Ipv4Addr),
    ///     Name(&'a str),
    /// }
    ///
    /// impl Hash for Asked<'_> {
    ///     fn hash<H: Hasher>(&self, state: &mut H) {
    ///         match self {
    ///             Asked::Address(address) => state.write_u32(address.to_bits()),
    ///             Asked::Name(name) => name.hash(state),
    ///         }
    ///     }
    /// }
    ///
    /// impl Hash for Client {
    ///     fn hash<H: Hasher>(&self, state: &mut H) {
    ///         Asked::from(self).hash(state) // as the borrowed form hashes
    ///     }
    /// }
    ///
    /// impl<'a> From<&'a Client> for Asked<'a> {
    ///     fn from(client: &'a Client) -> Asked<'a> {
    ///         match client {
    ///             Client::Address(address) => Asked::Address(*address),
    ///             Client::Name(name) => Asked::Name(name),
    ///         }
    ///     }
    /// }
    ///
    /// impl Equivalent<Client> for Asked<'_> {
    ///     fn equivalent(&self, client: &Client) -> bool {
    ///         match (self, Asked::from(client)) {
    ///             (Asked::Address(a), Asked::Address(b)) => *a == b,
    ///             (Asked::Name(a), Asked::Name(b)) => *a == b,
    ///             _ => false,
    ///         }
    ///     }
    /// }
    ///
    /// impl From<&Asked<'_>> for Client {
    ///     fn from(asked: &Asked<'_>) -> Client {
    ///         match asked {
    ///             Asked::Address(address) => Client::Address(*address),
    ///             Asked::Name(name) => Client::Name(name.to_string()),
    ///         }
    ///     }
    /// }
    ///
    /// let limiter = Keyed::<Client, _>::new(SlidingLog::new("1/s".parse()?)?);
    /// let home = Asked::Address(Ipv4Addr::new(192, 0, 2, 1));
    /// assert!(limiter.check_equivalent(&home, Moment::ZERO, 1)?.allowed());
    /// assert!(!limiter.check_equivalent(&home, Moment::ZERO, 1)?.allowed());
    /// assert!(limiter.check_equivalent(&Asked::Name("ann"), Moment::ZERO, 1)?.allowed());
    /// assert_eq!(limiter.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check_equivalent<'q, Q>(
        &self,
        key: &'q Q,
        now: Moment,
        cost: u64,
    ) -> Result<A::Output, LimitError>
    where
        Q: Hash + Equivalent<K> + ?Sized,
        K: From<&'q Q>,
    {
        let (hash, index) = self.shard(key);
        self.check_in(index, hash, key, || K::from(key), || now, cost)
    }

    /// [`check`](Keyed::check) at `clock.now()`, read while holding the key's shard: checks of
    /// one key then happen in the order of their times.
    ///
    /// # Errors
    ///
    /// As [`check`](Keyed::check).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::Keyed;
    /// use slidewin::limit::SlidingLog;
    /// use slidewin::time::MonotonicClock;
    ///
    /// let limiter = Keyed::<u32, _>::new(SlidingLog::new("1/minute".parse()?)?);
    /// assert!(limiter.check_now(&7, &MonotonicClock, 1)?.allowed());
    /// assert!(!limiter.check_now(&7, &MonotonicClock, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check_now<Q>(
        &self,
        key: &Q,
        clock: &impl Clock,
        cost: u64,
    ) -> Result<A::Output, LimitError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let (hash, index) = self.shard(key);
        self.check_in(index, hash, key, || key.to_owned(), || clock.now(), cost)
    }

    /// The check of `key` in its shard, `index`, at the time `now()` reads while the shard is
    /// locked; `owned` makes the key to keep when it is new.
    #[inline]
    fn check_in<Q>(
        &self,
        index: usize,
        hash: u64,
        key: &Q,
        owned: impl FnOnce() -> K,
        now: impl Fn() -> Moment,
        cost: u64,
    ) -> Result<A::Output, LimitError>
    where
        Q: Equivalent<K> + ?Sized,
    {
        // A new key at the cap may free a key gone idle in another shard, which it cannot
        // lock while holding its own; it then starts again. Each round that finds nothing
        // there leaves that shard's soonest deadline past `now`, so a few rounds suffice.
        let mut rounds = 0;
        let (mut owned, mut made) = (Some(owned), None);
        loop {
            let Some(cell) = self.cell(index) else {
                if let Some(answer) = self.check_before_shard(index, &now, cost) {
                    return answer;
                }
                continue; // in the shard just allocated
            };
            let mut shard = lock(cell);
            let now = now();
            self.sweep_if_due(cell, &mut shard, now);
            if let Some((_, state)) = shard.states.find_mut(hash, |(k, _)| key.equivalent(k)) {
                return match &self.budget {
                    None => self.rules.check(state, now, cost),
                    Some(budget) => self.check_on_budget(budget, state, now, cost),
                };
            }
            let mut state = self.rules.fresh();
            let decision = self.rules.check(&mut state, now, cost)?;
            let Some(deadline) = self.deadline_of(&state, now) else {
                return Ok(decision); // idle: the same as a key never seen
            };
            // On a budget, the key is made now, to be weighed; else only once it has a place.
            let bytes = match &self.budget {
                Some(budget) => {
                    let key = made.get_or_insert_with(|| make(&mut owned));
                    self.weigh(budget, key, &state)
                }
                None => 0,
            };
            if self.limited()
                && !self.take_place(bytes)
                && !(self.evict_idle(cell, &mut shard, now) && self.take_place(bytes))
            {
                drop(shard);
                match self.shard_with_idle(now) {
                    Some(other) if rounds <= 1 << self.shard_bits => {
                        rounds += 1;
                        self.evict_idle(other, &mut lock(other), now);
                        continue;
                    }
                    _ => return Err(self.full()),
                }
            }
            let key = made.take().unwrap_or_else(|| make(&mut owned));
            self.insert(cell, &mut shard, hash, key, state, deadline);
            return Ok(decision);
        }
    }

    /// A check of `state`, held on `budget`: the room its state may grow into is taken first
    /// (a denial is still answered when none is left), and what it holds after is settled.
    #[inline(never)]
    fn check_on_budget(
        &self,
        budget: &OnBudget<K>,
        state: &mut A::State,
        now: Moment,
        cost: u64,
    ) -> Result<A::Output, LimitError> {
        let before = self.rules.heap_bytes(state);
        let growth = self.rules.growth_bytes(state, now);
        if growth > 0 && !budget.take(growth) {
            let peeked = self.rules.peek(state, now, cost)?;
            if !peeked.as_ref().allowed() {
                return Ok(peeked);
            }
            return Err(LimitError::MemoryFull {
                max_bytes: budget.shared.max_bytes(),
            });
        }
        let answer = self.rules.check(state, now, cost);
        budget.settle(before + growth, self.rules.heap_bytes(state));
        answer
    }

    /// What a key holds of a budget: its entry, its own heap, its state's.
    #[inline]
    fn weigh(&self, budget: &OnBudget<K>, key: &K, state: &A::State) -> usize {
        budget.weigh(key, self.rules.heap_bytes(state)) + self.entry_bytes()
    }

    /// A key's entry, as a budget counts it: twice its size in the table (which grows by
    /// doubling), two control bytes, and with a cap its deadline, twice (a heap that doubles).
    #[inline]
    fn entry_bytes(&self) -> usize {
        let deadline = if self.capped() {
            2 * size_of::<Reverse<(u64, u64)>>()
        } else {
            0
        };
        2 * size_of::<(K, A::State)>() + 2 + deadline
    }

    /// What a key `removed` gives back: its place under the cap, and its bytes on a budget.
    #[inline]
    fn weigh_removed(&self, key: &K, state: &A::State) -> usize {
        self.budget
            .as_ref()
            .map_or(0, |budget| self.weigh(budget, key, state))
    }

    /// Whether a new key needs a place: under a cap, or on a budget.
    #[inline]
    fn limited(&self) -> bool {
        self.capped() || self.budget.is_some()
    }

    /// Why a new key found no place: the cap, if it is full; else the budget.
    fn full(&self) -> LimitError {
        match &self.budget {
            Some(budget)
                if !self.capped() || self.held.0.load(Ordering::Relaxed) < self.max_keys =>
            {
                LimitError::MemoryFull {
                    max_bytes: budget.shared.max_bytes(),
                }
            }
            _ => LimitError::KeysFull { cap: self.max_keys },
        }
    }

    /// A check of a new key in shard `index`, which holds none yet: the key's fresh state
    /// checked at `now()`. An answer that leaves the key idle, or an error, is the answer, with
    /// nothing allocated (a key idle is the same as a key never seen). Otherwise the shard is
    /// allocated, and `None` says to check there, from the start (at the cap the key may still
    /// be refused there, its shard kept: at worst every shard, as a limiter used to start with).
    #[cold]
    #[inline(never)]
    fn check_before_shard(
        &self,
        index: usize,
        now: &impl Fn() -> Moment,
        cost: u64,
    ) -> Option<Result<A::Output, LimitError>> {
        let now = now();
        let mut state = self.rules.fresh();
        let answer = self.rules.check(&mut state, now, cost);
        if answer.is_err() || self.deadline_of(&state, now).is_none() {
            return Some(answer);
        }
        self.cell_or_make(index);
        None
    }

    /// Puts a new key in `shard` (its place under the cap already taken), with its deadline.
    #[inline]
    fn insert(
        &self,
        cell: &ShardLock<K, A::State>,
        shard: &mut Shard<K, A::State>,
        hash: u64,
        key: K,
        state: A::State,
        deadline: u64,
    ) {
        let hasher = &self.hasher;
        shard
            .states
            .insert_unique(hash, (key, state), |(k, _)| hasher.hash_one(k));
        if self.capped() {
            shard.deadlines.push(Reverse((deadline, hash)));
            if shard.deadlines.len() > 2 * shard.states.len() + 64 {
                // Entries of keys reset by hand pile up only here.
                self.rebuild_deadlines(cell, shard);
            } else {
                cell.0.soonest.fetch_min(deadline, Ordering::Relaxed);
            }
        }
    }

    /// When a key with `state` goes idle, in nanoseconds (`u64::MAX`: never); `None` if it
    /// already is at `now`.
    #[inline]
    fn deadline_of(&self, state: &A::State, now: Moment) -> Option<u64> {
        match self.rules.idle_at(state) {
            Some(at) if at <= now => None,
            Some(at) => Some(at.as_nanos()),
            None => Some(u64::MAX),
        }
    }

    /// Takes a place for a new key of `bytes`: under the cap, and on the budget; `false` if
    /// either is full (and nothing is taken).
    #[inline]
    fn take_place(&self, bytes: usize) -> bool {
        let under_cap = !self.capped()
            || self
                .held
                .0
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                    (held < self.max_keys).then_some(held + 1)
                })
                .is_ok();
        if !under_cap {
            return false;
        }
        if let Some(budget) = &self.budget
            && !budget.take(bytes)
        {
            self.forget(1, 0);
            return false;
        }
        true
    }

    /// Gives back the places of `n` keys a shard no longer holds, and their `bytes`.
    #[inline]
    fn forget(&self, n: usize, bytes: usize) {
        if self.capped() && n > 0 {
            self.held.0.fetch_sub(n, Ordering::Relaxed);
        }
        if let Some(budget) = &self.budget
            && bytes > 0
        {
            budget.give_back(bytes);
        }
    }

    /// A shard whose soonest deadline has passed at `now`: it may hold a key gone idle.
    fn shard_with_idle(&self, now: Moment) -> Option<&ShardLock<K, A::State>> {
        self.cells()
            .find(|cell| cell.0.soonest.load(Ordering::Relaxed) <= now.as_nanos())
    }

    /// Removes keys of `shard` gone idle at `now`, going through its deadlines that have
    /// passed, soonest first, until one is found or none is left; returns whether any was.
    /// A deadline of a key still limited is replaced by its new one, past `now`.
    #[inline(never)]
    fn evict_idle(
        &self,
        cell: &ShardLock<K, A::State>,
        shard: &mut Shard<K, A::State>,
        now: Moment,
    ) -> bool {
        let (mut freed, mut bytes) = (0, 0);
        // Each entry is seen at most once: those put back are due after `now`.
        for _ in 0..shard.deadlines.len() {
            match shard.deadlines.peek() {
                Some(&Reverse((deadline, _))) if deadline <= now.as_nanos() => {}
                _ => break,
            }
            let Some(Reverse((_, hash))) = shard.deadlines.pop() else {
                break;
            };
            // The keys on this hash's probe path, its own among them if it is still held:
            // those idle go; the soonest deadline of the others goes back.
            while let Ok(entry) = shard
                .states
                .find_entry(hash, |(_, state)| self.rules.is_idle(state, now))
            {
                let ((key, state), _) = entry.remove();
                bytes += self.weigh_removed(&key, &state);
                freed += 1;
            }
            let next = shard
                .states
                .iter_hash(hash)
                .filter_map(|(_, state)| self.deadline_of(state, now))
                .min();
            if let Some(next) = next {
                shard.deadlines.push(Reverse((next, hash)));
            }
            if freed > 0 {
                break;
            }
        }
        let soonest = shard.deadlines.peek().map_or(u64::MAX, |r| r.0.0);
        cell.0.soonest.store(soonest, Ordering::Relaxed);
        self.forget(freed, bytes);
        freed > 0
    }

    /// The deadlines of the keys `shard` holds, afresh.
    fn rebuild_deadlines(&self, cell: &ShardLock<K, A::State>, shard: &mut Shard<K, A::State>) {
        let mut deadlines = std::mem::take(&mut shard.deadlines).into_vec();
        deadlines.clear();
        deadlines.extend(shard.states.iter().map(|(k, state)| {
            let deadline = self.rules.idle_at(state).map_or(u64::MAX, Moment::as_nanos);
            Reverse((deadline, self.hasher.hash_one(k)))
        }));
        let (len, capacity) = (deadlines.len(), deadlines.capacity());
        if (capacity > 64 && len <= capacity / 4) || (len == 0 && capacity > 0) {
            deadlines.shrink_to(2 * len);
        }
        shard.deadlines = BinaryHeap::from(deadlines);
        let soonest = shard.deadlines.peek().map_or(u64::MAX, |r| r.0.0);
        cell.0.soonest.store(soonest, Ordering::Relaxed);
    }

    /// Sweeps `shard` if a span has passed since its last sweep: every key idle since then is
    /// gone, and the cost, O(keys), is paid by the keys added since.
    #[inline]
    fn sweep_if_due(
        &self,
        cell: &ShardLock<K, A::State>,
        shard: &mut Shard<K, A::State>,
        now: Moment,
    ) {
        if now.as_nanos().saturating_sub(shard.swept) >= self.rules.sweep_every() {
            self.sweep_shard(cell, shard, now);
        }
    }

    #[inline(never)]
    fn sweep_shard(
        &self,
        cell: &ShardLock<K, A::State>,
        shard: &mut Shard<K, A::State>,
        now: Moment,
    ) -> usize {
        let before = shard.states.len();
        let mut bytes = 0;
        shard.states.retain(|(key, state)| {
            let idle = self.rules.is_idle(state, now);
            if idle {
                bytes += self.weigh_removed(key, state);
            }
            !idle
        });
        // The memory follows the keys down; a shrink leaves the table half full, and a shard
        // left with no key gives its table back.
        let (len, capacity) = (shard.states.len(), shard.states.capacity());
        if (capacity > 64 && len <= capacity / 4) || (len == 0 && capacity > 0) {
            let hasher = &self.hasher;
            shard
                .states
                .shrink_to(2 * shard.states.len(), |(k, _)| hasher.hash_one(k));
        }
        shard.swept = shard.swept.max(now.as_nanos());
        let removed = before - shard.states.len();
        if self.capped() {
            self.rebuild_deadlines(cell, shard);
        }
        self.forget(removed, bytes);
        removed
    }

    /// Decides as [`check`](Keyed::check) would, without consuming anything or adding the
    /// key.
    ///
    /// # Errors
    ///
    /// [`LimitError::CostTooHigh`] when `cost` could never be admitted.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{Keyed, Moment};
    /// use slidewin::limit::Gcra;
    ///
    /// let limiter = Keyed::<u32, _>::new(Gcra::new("1/s".parse()?)?);
    /// assert!(limiter.peek(&7, Moment::ZERO, 1)?.allowed());
    /// assert!(limiter.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn peek<Q>(&self, key: &Q, now: Moment, cost: u64) -> Result<A::Output, LimitError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let (hash, index) = self.shard(key);
        let Some(cell) = self.cell(index) else {
            return self.rules.peek(&self.rules.fresh(), now, cost);
        };
        let shard = lock(cell);
        match shard.states.find(hash, |(k, _)| k.borrow() == key) {
            Some((_, state)) => self.rules.peek(state, now, cost),
            None => self.rules.peek(&self.rules.fresh(), now, cost),
        }
    }

    /// [`peek`](Keyed::peek) at `clock.now()`, read while holding the key's shard.
    ///
    /// # Errors
    ///
    /// As [`peek`](Keyed::peek).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::Keyed;
    /// use slidewin::limit::Gcra;
    /// use slidewin::time::MonotonicClock;
    ///
    /// let limiter = Keyed::<u32, _>::new(Gcra::new("1/minute".parse()?)?);
    /// assert!(limiter.peek_now(&7, &MonotonicClock, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn peek_now<Q>(
        &self,
        key: &Q,
        clock: &impl Clock,
        cost: u64,
    ) -> Result<A::Output, LimitError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let (hash, index) = self.shard(key);
        let Some(cell) = self.cell(index) else {
            return self.rules.peek(&self.rules.fresh(), clock.now(), cost);
        };
        let shard = lock(cell);
        let now = clock.now();
        match shard.states.find(hash, |(k, _)| k.borrow() == key) {
            Some((_, state)) => self.rules.peek(state, now, cost),
            None => self.rules.peek(&self.rules.fresh(), now, cost),
        }
    }

    /// Gives `key` its full quota back; returns whether it held any state.
    ///
    /// ```
    /// use slidewin::{Keyed, Moment};
    /// use slidewin::limit::SlidingLog;
    ///
    /// let limiter = Keyed::<u32, _>::new(SlidingLog::new("1/minute".parse()?)?);
    /// limiter.check(&1, Moment::ZERO, 1)?;
    /// assert!(limiter.reset(&1));
    /// assert!(limiter.check(&1, Moment::ZERO, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reset<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let (hash, index) = self.shard(key);
        let Some(cell) = self.cell(index) else {
            return false;
        };
        let mut shard = lock(cell);
        match shard.states.find_entry(hash, |(k, _)| k.borrow() == key) {
            Ok(entry) => {
                let ((key, state), _) = entry.remove();
                self.forget(1, self.weigh_removed(&key, &state));
                true
            }
            Err(_) => false,
        }
    }

    /// Gives every key its full quota back, and the memory with it.
    ///
    /// ```
    /// use slidewin::{Keyed, Moment};
    /// use slidewin::limit::SlidingLog;
    ///
    /// let limiter = Keyed::<u32, _>::new(SlidingLog::new("1/minute".parse()?)?);
    /// limiter.check(&1, Moment::ZERO, 1)?;
    /// limiter.reset_all();
    /// assert!(limiter.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reset_all(&self) {
        for cell in self.cells() {
            let mut shard = lock(cell);
            let held = shard.states.len();
            let states = std::mem::take(&mut shard.states);
            let bytes = states.iter().map(|(k, s)| self.weigh_removed(k, s)).sum();
            shard.deadlines = BinaryHeap::new();
            cell.0.soonest.store(u64::MAX, Ordering::Relaxed);
            self.forget(held, bytes);
        }
    }

    /// Moves every key of `old`, a limiter being retired (its quota changed by a reload),
    /// into this one, its state converted to this limiter's quota at `now`; returns how many
    /// keys were carried. `old` is left empty.
    ///
    /// So a changed quota keeps the counts: afterwards every answer is computed against the
    /// new quota, with what the keys were admitted under the old one still counted
    /// (limitador #522: a raised limit answered against the stale one, and an underflow). How
    /// each algorithm converts a state:
    ///
    /// * [`SlidingLog`](crate::limit::SlidingLog): the stamps are kept; under a lower limit,
    ///   the oldest units beyond it are dropped, which changes no decision on a cost of 1 or
    ///   more (a window holding more than the limit denies it, and the wait is the same).
    ///   Exact, for what the log still holds.
    /// * [`SlidingCounter`](crate::limit::SlidingCounter) and
    ///   [`FixedWindow`](crate::limit::FixedWindow): the counts, for the same span (above a
    ///   lower limit, every cost of 1 or more is denied, with nothing remaining); for another
    ///   span, fresh: their windows are aligned to the span, and a count cannot be split over
    ///   windows that cut across its own.
    /// * [`Gcra`](crate::limit::Gcra): the bucket keeps what it owes: its TAT (the time it
    ///   owes, as Redis keeps it), or where the rate fell, the units it owes converted to the
    ///   new rate, if later (at most an empty bucket).
    /// * [`RuleSet`](crate::limit::RuleSet): rule by rule, by name: a rule of the same name
    ///   and kind carries its state as above; a new, renamed or changed-kind rule starts fresh.
    ///
    /// A key whose state converts to nothing, or to a state idle at `now` under the new
    /// quota, is dropped (it would answer as a fresh one). A key this limiter already holds
    /// keeps its own state. With a cap, carrying stops at the cap (the keys left start fresh,
    /// and which they are depends on the hashes); nothing is evicted for them.
    ///
    /// Carry before this limiter takes requests, and stop sending them to `old` first if
    /// every count matters: an admission that reaches `old` after its shard was moved stays
    /// behind. Each shard of `old` is locked while it is emptied, and each shard of this one
    /// while a key is put in it; never two at once.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{Keyed, Moment};
    /// use slidewin::limit::SlidingLog;
    ///
    /// let old = Keyed::<String, _>::new(SlidingLog::new("5/minute".parse()?)?);
    /// for _ in 0..5 {
    ///     assert!(old.check("alice", Moment::from_secs(1), 1)?.allowed());
    /// }
    /// assert!(!old.check("alice", Moment::from_secs(2), 1)?.allowed());
    ///
    /// // A reload raises the limit to 8: alice keeps her 5, and has 3 left, not 8.
    /// let new = Keyed::<String, _>::new(SlidingLog::new("8/minute".parse()?)?);
    /// assert_eq!(new.carry_from(&old, Moment::from_secs(2)), 1);
    /// assert!(old.is_empty());
    /// let decision = new.check("alice", Moment::from_secs(3), 1)?;
    /// assert!(decision.allowed());
    /// assert_eq!((decision.limit(), decision.remaining()), (8, 2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn carry_from(&self, old: &Keyed<K, A>, now: Moment) -> usize {
        let mut carried = 0;
        let mut full = false;
        for old_cell in old.cells() {
            let states = {
                let mut shard = lock(old_cell);
                let states = std::mem::take(&mut shard.states);
                shard.deadlines = BinaryHeap::new();
                old_cell.0.soonest.store(u64::MAX, Ordering::Relaxed);
                let bytes = states.iter().map(|(k, s)| old.weigh_removed(k, s)).sum();
                old.forget(states.len(), bytes);
                states
            };
            if full {
                continue; // dropped: `old` is retiring
            }
            for (key, state) in states {
                let Some(state) = self.rules.carry(&old.rules, state, now) else {
                    continue;
                };
                let Some(deadline) = self.deadline_of(&state, now) else {
                    continue; // idle: the same as a key never seen
                };
                let (hash, index) = self.shard(&key);
                let cell = self.cell_or_make(index);
                let mut shard = lock(cell);
                if shard.states.find(hash, |(k, _)| *k == key).is_some() {
                    continue; // its own state, newer
                }
                if self.limited() && !self.take_place(self.weigh_removed(&key, &state)) {
                    full = true;
                    break;
                }
                self.insert(cell, &mut shard, hash, key, state, deadline);
                carried += 1;
            }
        }
        carried
    }

    /// Drops every key that is back at its full quota at `now`, and the memory they held;
    /// returns how many. Safe to call at any time: an idle key is the same as a key never seen.
    ///
    /// ```
    /// use slidewin::{Keyed, Moment};
    /// use slidewin::limit::SlidingLog;
    ///
    /// let limiter = Keyed::<u32, _>::new(SlidingLog::new("1/s".parse()?)?);
    /// limiter.check(&1, Moment::ZERO, 1)?;
    /// limiter.check(&2, Moment::from_millis(500), 1)?;
    /// assert_eq!(limiter.sweep(Moment::from_secs(1)), 1); // key 1 only
    /// assert_eq!(limiter.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sweep(&self, now: Moment) -> usize {
        self.cells()
            .map(|cell| self.sweep_shard(cell, &mut lock(cell), now))
            .sum()
    }

    /// [`sweep`](Keyed::sweep) at `clock.now()`.
    ///
    /// ```
    /// use slidewin::{Keyed, Moment};
    /// use slidewin::limit::SlidingLog;
    /// use slidewin::time::ManualClock;
    ///
    /// let clock = ManualClock::new(Moment::ZERO);
    /// let limiter = Keyed::<u32, _>::new(SlidingLog::new("1/s".parse()?)?);
    /// limiter.check_now(&1, &clock, 1)?;
    /// clock.set(Moment::from_secs(1));
    /// assert_eq!(limiter.sweep_now(&clock), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sweep_now(&self, clock: &impl Clock) -> usize {
        self.sweep(clock.now())
    }

    /// How many keys hold state (some of them may be idle until the next sweep). With a cap,
    /// the count the cap is held to, which never exceeds it; without one, the sum of the
    /// shards' counts, each read in turn.
    ///
    /// ```
    /// use slidewin::Keyed;
    /// use slidewin::limit::Gcra;
    ///
    /// let limiter = Keyed::<u32, _>::new(Gcra::new("1/s".parse()?)?);
    /// assert_eq!(limiter.len(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> usize {
        if self.capped() {
            return self.held.0.load(Ordering::Relaxed);
        }
        self.cells().map(|cell| lock(cell).states.len()).sum()
    }

    /// Whether no key holds state.
    ///
    /// ```
    /// use slidewin::Keyed;
    /// use slidewin::limit::Gcra;
    ///
    /// let limiter = Keyed::<u32, _>::new(Gcra::new("1/s".parse()?)?);
    /// assert!(limiter.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The key's hash and its shard.
    #[inline]
    fn shard<Q: Hash + ?Sized>(&self, key: &Q) -> (u64, usize) {
        let hash = self.hasher.hash_one(key);
        // Bits below the top seven, which the table keeps as its probe tags: a shard's keys
        // share their shard bits, so those must not be the tags.
        let bits = self.shard_bits;
        let index = (hash << 7).checked_shr(u64::BITS - bits).unwrap_or(0);
        let index = usize::try_from(index).unwrap_or(0); // below the number of shards
        (hash, index)
    }
}

/// The key `owned` makes, once: a new key's is made to be weighed, or when it is put in.
fn make<K>(owned: &mut Option<impl FnOnce() -> K>) -> K {
    match owned.take() {
        Some(owned) => owned(),
        None => unreachable!("a new key is made once, and kept until it is put in"),
    }
}

/// The states are only written whole, so a lock poisoned by a panic elsewhere is still sound.
#[inline]
fn lock<K, S>(cell: &ShardLock<K, S>) -> MutexGuard<'_, Shard<K, S>> {
    cell.0.shard.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::limit::SlidingLog;
    use crate::limit::algorithm::Locked;
    use crate::limit::algorithm::sealed::Enforce;

    /// How often `Counting` looked at a state to tell whether it is idle.
    static LOOKS: AtomicUsize = AtomicUsize::new(0);

    /// An algorithm that counts how often its state is looked at to tell whether it is idle.
    #[derive(Clone, Debug)]
    struct Counting<A> {
        inner: A,
    }

    impl<A: Algorithm> Algorithm for Counting<A> {}

    impl<A: Algorithm> Enforce for Counting<A> {
        type Output = A::Output;
        type State = A::State;
        type Cell = Locked<A::State>;
        fn sweep_every(&self) -> u64 {
            self.inner.sweep_every()
        }
        fn carry(&self, old: &Self, state: A::State, now: Moment) -> Option<A::State> {
            self.inner.carry(&old.inner, state, now)
        }
        fn fresh(&self) -> A::State {
            self.inner.fresh()
        }
        type Pending = A::Pending;
        fn prepare(
            &self,
            state: &A::State,
            now: Moment,
            cost: u64,
        ) -> Result<(A::Output, A::Pending), LimitError> {
            self.inner.prepare(state, now, cost)
        }
        fn commit(state: &mut A::State, pending: A::Pending, cost: u64) {
            A::commit(state, pending, cost);
        }
        fn idle_at(&self, state: &A::State) -> Option<Moment> {
            LOOKS.fetch_add(1, Ordering::Relaxed);
            self.inner.idle_at(state)
        }
        fn is_idle(&self, state: &A::State, now: Moment) -> bool {
            LOOKS.fetch_add(1, Ordering::Relaxed);
            self.inner.is_idle(state, now)
        }
    }

    /// With 5 million keys, a cap of 100,000 and `SlidingLog` at 100/minute, checks went from
    /// 1.23 million a second below the cap to about 30,000 once full: every refused key swept
    /// its whole shard. A refusal now looks at no key's state but its own.
    #[test]
    fn a_flood_at_the_cap_sweeps_nothing_per_refusal() {
        const CAP: usize = 10_000;
        let inner = SlidingLog::new("100/minute".parse().unwrap()).unwrap();
        let limiter = Keyed::<u64, _>::new(Counting { inner })
            .with_max_keys(CAP)
            .unwrap();
        let mut now = Moment::from_secs(1);
        for key in 0..CAP as u64 {
            assert!(limiter.check(&key, now, 1).unwrap().allowed());
        }
        let before = LOOKS.load(Ordering::Relaxed);
        const FLOOD: usize = 200_000;
        for key in 0..FLOOD as u64 {
            now += Duration::from_micros(100); // 20 s in all: no key goes idle
            let result = limiter.check(&(CAP as u64 + key), now, 1);
            assert_eq!(result, Err(LimitError::KeysFull { cap: CAP }));
        }
        let looks = LOOKS.load(Ordering::Relaxed) - before;
        // One look at the new key's own state; shards sweep themselves once per span (none
        // here).
        assert!(looks <= FLOOD, "{looks} looks for {FLOOD} refused keys");
        // A minute after the first keys, they are idle: the flood's next keys take their places.
        now = Moment::from_secs(61);
        for key in 0..CAP as u64 {
            assert!(limiter.check(&(1_000_000 + key), now, 1).unwrap().allowed());
        }
        assert_eq!(limiter.len(), CAP);
    }
}
