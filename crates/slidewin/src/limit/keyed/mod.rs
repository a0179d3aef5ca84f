//! [`Keyed`]: one limiter per key (per user, per IP), with bounded memory.
//!
//! This file holds the type, its building and its operations on the whole map; the parts of a
//! check live beside it: `check` (a key's check and peek), `shard` (the shards and their
//! sweeps) and `memory` (the places under a cap and the bytes on a budget).

mod check;
mod memory;
mod reserve;
mod shard;

use std::borrow::Borrow;
use std::collections::BinaryHeap;
use std::hash::{Hash, RandomState};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::error::ConfigError;
use crate::limit::CachePadded;
use crate::limit::algorithm::Algorithm;
use crate::limit::budget::{MemoryBudget, OnBudget};
use crate::time::{Clock, Moment};
use shard::{Slots, lock};

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
///   if none is idle, the **new** key is refused with [`LimitError::KeysFull`](crate::limit::LimitError::KeysFull). A key that is
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
    /// key's state, with [`LimitError::MemoryFull`](crate::limit::LimitError::MemoryFull) while the budget is spent. `key_heap` says
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
}

#[cfg(test)]
mod tests;
