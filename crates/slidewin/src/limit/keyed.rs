//! [`Keyed`]: one limiter per key (per user, per IP), with bounded memory.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::{Mutex, MutexGuard, PoisonError};

use hashbrown::HashTable;

use crate::error::ConfigError;
use crate::limit::{Algorithm, CachePadded, Decision, LimitError, Quota, QuotaError};
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
///   per key (8 bytes for [`Gcra`](crate::Gcra)); the rules are shared.
/// * **Idle keys go.** A key back at its full quota is the same as a key never seen, so it is
///   dropped. No background thread: each shard sweeps itself on its first use one span after
///   its last sweep (so a key lives at most about two spans past its last request, if its
///   shard sees traffic), and [`sweep`](Keyed::sweep) sweeps every shard, for a timer.
/// * **A cap on live keys** ([`with_max_keys`](Keyed::with_max_keys)) holds under a flood of
///   distinct keys (governor issue #171: a limiter keyed by IP driven out of memory). At the
///   cap, idle keys are swept first; if none is idle, the **new** key is refused with
///   [`LimitError::KeysFull`]. A key that is being limited is never evicted, so no key can
///   escape its limit by pushing others out: the cost of a flood falls on new keys, and it
///   lifts as keys go quiet.
///
/// # Example
///
/// ```
/// use slidewin::{Keyed, Moment, SlidingLog};
///
/// let limiter = Keyed::<String, SlidingLog>::new("2/minute".parse()?)?;
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
    shards: Box<[ShardLock<K, A::State>]>,
    /// One hash per key, with a per-map random seed (keys may be chosen by an attacker): its
    /// middle bits pick the shard, and the shard's table probes with the same hash.
    hasher: RandomState,
    /// The cap on live keys; `usize::MAX` when uncapped. Each shard holds its share.
    max_keys: usize,
}

/// A shard behind its lock, on cache lines of its own.
type ShardLock<K, S> = CachePadded<Mutex<Shard<K, S>>>;

#[derive(Debug)]
struct Shard<K, S> {
    states: HashTable<(K, S)>,
    /// When the shard was last swept, in nanoseconds.
    swept: u64,
    /// Its share of the cap on live keys.
    max_keys: usize,
}

impl<K: Hash + Eq, A: Algorithm> Keyed<K, A> {
    /// A keyed limiter giving every key `quota`, with no cap on the number of keys.
    ///
    /// # Errors
    ///
    /// A [`QuotaError`] if the algorithm cannot work with the quota.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{Gcra, Keyed};
    /// let limiter = Keyed::<u32, Gcra>::new("10/s".parse()?)?;
    /// assert_eq!(limiter.quota().limit(), 10);
    /// assert_eq!(limiter.max_keys(), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(quota: Quota) -> Result<Keyed<K, A>, QuotaError> {
        Ok(Keyed::build(A::new(quota)?, MAX_SHARDS, usize::MAX))
    }

    /// The same limiter, holding at most `max_keys` live keys (see the type's docs for what
    /// happens at the cap). The cap is exact: the keys are spread over shards that each hold
    /// an equal share of it (within one), at least 16.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroMaxKeys`].
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{Keyed, LimitError, Moment, SlidingLog};
    ///
    /// let limiter = Keyed::<u32, SlidingLog>::new("1/minute".parse()?)?.with_max_keys(1)?;
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
        Ok(Keyed::build(self.rules, 1 << shards.ilog2(), max_keys))
    }

    fn build(rules: A, shards: usize, max_keys: usize) -> Keyed<K, A> {
        let shards = (0..shards)
            .map(|index| {
                // The first `max_keys % shards` shards hold one more, so the shares add up.
                let share = if max_keys == usize::MAX {
                    usize::MAX
                } else {
                    max_keys / shards + usize::from(index < max_keys % shards)
                };
                CachePadded(Mutex::new(Shard {
                    states: HashTable::new(),
                    swept: 0,
                    max_keys: share,
                }))
            })
            .collect();
        Keyed {
            rules,
            shards,
            hasher: RandomState::new(),
            max_keys,
        }
    }

    /// The quota every key gets.
    ///
    /// ```
    /// use slidewin::{FixedWindow, Keyed};
    /// let limiter = Keyed::<String, FixedWindow>::new("5/s".parse()?)?;
    /// assert_eq!(limiter.quota().to_string(), "5 per 1s");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quota(&self) -> Quota {
        self.rules.quota()
    }

    /// The cap on live keys, if there is one.
    ///
    /// ```
    /// use slidewin::{Gcra, Keyed};
    /// let limiter = Keyed::<u64, Gcra>::new("5/s".parse()?)?.with_max_keys(1_000)?;
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
    /// use slidewin::{Keyed, Moment, SlidingLog};
    /// let limiter = Keyed::<String, SlidingLog>::new("1/s".parse()?)?;
    /// assert!(limiter.check("10.0.0.1", Moment::ZERO, 1)?.allowed());
    /// assert!(!limiter.check("10.0.0.1", Moment::ZERO, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check<Q>(&self, key: &Q, now: Moment, cost: u64) -> Result<Decision, LimitError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let (hash, shard) = self.shard(key);
        self.check_in(shard, hash, key, now, cost)
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
    /// use slidewin::{Keyed, MonotonicClock, SlidingLog};
    /// let limiter = Keyed::<u32, SlidingLog>::new("1/minute".parse()?)?;
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
    ) -> Result<Decision, LimitError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let (hash, shard) = self.shard(key);
        self.check_in(shard, hash, key, clock.now(), cost)
    }

    #[inline]
    fn check_in<Q>(
        &self,
        mut shard: MutexGuard<'_, Shard<K, A::State>>,
        hash: u64,
        key: &Q,
        now: Moment,
        cost: u64,
    ) -> Result<Decision, LimitError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        shard.sweep_if_due(&self.rules, &self.hasher, now);
        if let Some((_, state)) = shard.states.find_mut(hash, |(k, _)| k.borrow() == key) {
            return self.rules.check(state, now, cost);
        }
        let mut state = self.rules.fresh();
        let decision = self.rules.check(&mut state, now, cost)?;
        if !self.rules.is_idle(&state, now) {
            if shard.states.len() >= shard.max_keys {
                shard.sweep(&self.rules, &self.hasher, now);
                if shard.states.len() >= shard.max_keys {
                    return Err(LimitError::KeysFull { cap: self.max_keys });
                }
            }
            let hasher = &self.hasher;
            shard
                .states
                .insert_unique(hash, (key.to_owned(), state), |(k, _)| hasher.hash_one(k));
        }
        Ok(decision)
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
    /// use slidewin::{Gcra, Keyed, Moment};
    /// let limiter = Keyed::<u32, Gcra>::new("1/s".parse()?)?;
    /// assert!(limiter.peek(&7, Moment::ZERO, 1)?.allowed());
    /// assert!(limiter.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn peek<Q>(&self, key: &Q, now: Moment, cost: u64) -> Result<Decision, LimitError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let (hash, shard) = self.shard(key);
        match shard.states.find(hash, |(k, _)| k.borrow() == key) {
            Some((_, state)) => self.rules.peek(state, now, cost),
            None => self.rules.peek(&self.rules.fresh(), now, cost),
        }
    }

    /// Gives `key` its full quota back; returns whether it held any state.
    ///
    /// ```
    /// use slidewin::{Keyed, Moment, SlidingLog};
    /// let limiter = Keyed::<u32, SlidingLog>::new("1/minute".parse()?)?;
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
        let (hash, mut shard) = self.shard(key);
        match shard.states.find_entry(hash, |(k, _)| k.borrow() == key) {
            Ok(entry) => {
                entry.remove();
                true
            }
            Err(_) => false,
        }
    }

    /// Gives every key its full quota back, and the memory with it.
    ///
    /// ```
    /// use slidewin::{Keyed, Moment, SlidingLog};
    /// let limiter = Keyed::<u32, SlidingLog>::new("1/minute".parse()?)?;
    /// limiter.check(&1, Moment::ZERO, 1)?;
    /// limiter.reset_all();
    /// assert!(limiter.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reset_all(&self) {
        for shard in &self.shards {
            lock(shard).states = HashTable::new();
        }
    }

    /// Drops every key that is back at its full quota at `now`, and the memory they held;
    /// returns how many. Safe to call at any time: an idle key is the same as a key never seen.
    ///
    /// ```
    /// use slidewin::{Keyed, Moment, SlidingLog};
    /// let limiter = Keyed::<u32, SlidingLog>::new("1/s".parse()?)?;
    /// limiter.check(&1, Moment::ZERO, 1)?;
    /// limiter.check(&2, Moment::from_millis(500), 1)?;
    /// assert_eq!(limiter.sweep(Moment::from_secs(1)), 1); // key 1 only
    /// assert_eq!(limiter.len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sweep(&self, now: Moment) -> usize {
        self.shards
            .iter()
            .map(|shard| lock(shard).sweep(&self.rules, &self.hasher, now))
            .sum()
    }

    /// How many keys hold state (some of them may be idle until the next sweep).
    ///
    /// ```
    /// use slidewin::{Gcra, Keyed};
    /// let limiter = Keyed::<u32, Gcra>::new("1/s".parse()?)?;
    /// assert_eq!(limiter.len(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| lock(shard).states.len())
            .sum()
    }

    /// Whether no key holds state.
    ///
    /// ```
    /// use slidewin::{Gcra, Keyed};
    /// let limiter = Keyed::<u32, Gcra>::new("1/s".parse()?)?;
    /// assert!(limiter.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The key's hash and its shard, locked.
    #[inline]
    fn shard<Q: Hash + ?Sized>(&self, key: &Q) -> (u64, MutexGuard<'_, Shard<K, A::State>>) {
        let hash = self.hasher.hash_one(key);
        // Bits below the top seven, which the table keeps as its probe tags: a shard's keys
        // share their shard bits, so those must not be the tags.
        let bits = self.shards.len().ilog2();
        let index = (hash << 7).checked_shr(u64::BITS - bits).unwrap_or(0);
        let index = usize::try_from(index).unwrap_or(0); // below the number of shards
        (hash, lock(&self.shards[index]))
    }
}

/// The states are only written whole, so a lock poisoned by a panic elsewhere is still sound.
#[inline]
fn lock<T>(mutex: &CachePadded<Mutex<T>>) -> MutexGuard<'_, T> {
    mutex.0.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<K: Hash, S> Shard<K, S> {
    /// Sweeps if a span has passed since the last sweep: every key idle since then is gone,
    /// and the cost, O(keys), is paid by the keys added since.
    #[inline]
    fn sweep_if_due<A: Algorithm<State = S>>(
        &mut self,
        rules: &A,
        hasher: &RandomState,
        now: Moment,
    ) {
        if now.as_nanos().saturating_sub(self.swept) >= rules.quota().span_nanos() {
            self.sweep(rules, hasher, now);
        }
    }

    #[inline(never)]
    fn sweep<A: Algorithm<State = S>>(
        &mut self,
        rules: &A,
        hasher: &RandomState,
        now: Moment,
    ) -> usize {
        let before = self.states.len();
        self.states.retain(|(_, state)| !rules.is_idle(state, now));
        // The memory follows the keys down; a shrink leaves the table half full.
        if self.states.capacity() > 64 && self.states.len() <= self.states.capacity() / 4 {
            self.states
                .shrink_to(2 * self.states.len(), |(k, _)| hasher.hash_one(k));
        }
        self.swept = self.swept.max(now.as_nanos());
        before - self.states.len()
    }
}
