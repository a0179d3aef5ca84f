//! The shards a [`Keyed`] spreads its keys over, each behind its own lock and allocated with
//! the first key it holds, and how they let idle keys go: the sweep of a shard once a span,
//! and with a cap the deadlines that find a key gone idle without a sweep.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use hashbrown::HashTable;

use super::Keyed;
use crate::limit::CachePadded;
use crate::limit::algorithm::Algorithm;
use crate::time::Moment;

/// A shard behind its lock, on cache lines of its own.
pub(super) type ShardLock<K, S> = CachePadded<ShardCell<K, S>>;

/// The shards' slots, allocated with the first key; each shard, with the first key it holds.
pub(super) type Slots<K, S> = OnceLock<Box<[OnceLock<Box<ShardLock<K, S>>>]>>;

#[derive(Debug)]
pub(super) struct ShardCell<K, S> {
    pub(super) shard: Mutex<Shard<K, S>>,
    /// With a cap: the shard's soonest deadline (`u64::MAX` for none), written under its lock
    /// and read without, so that a new key at the cap finds a shard with a key gone idle
    /// without locking every shard.
    pub(super) soonest: AtomicU64,
}

#[derive(Debug)]
pub(super) struct Shard<K, S> {
    pub(super) states: HashTable<(K, S)>,
    /// When the shard was last swept, in nanoseconds.
    pub(super) swept: u64,
    /// With a cap: when its keys may go idle, soonest first, as (deadline in nanoseconds,
    /// the key's hash). Every key held has an entry no later than the time it goes idle
    /// (admissions only move that time later); entries of keys gone, or of keys whose time
    /// moved, are put right when they come to the top.
    pub(super) deadlines: BinaryHeap<Reverse<(u64, u64)>>,
}

/// The states are only written whole, so a lock poisoned by a panic elsewhere is still sound.
#[inline]
pub(super) fn lock<K, S>(cell: &ShardLock<K, S>) -> MutexGuard<'_, Shard<K, S>> {
    cell.0.shard.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<K: Hash + Eq, A: Algorithm> Keyed<K, A> {
    /// Shard `index`, if a key has been put in it.
    #[inline]
    pub(super) fn cell(&self, index: usize) -> Option<&ShardLock<K, A::State>> {
        self.shards.get()?.get(index)?.get().map(|cell| &**cell)
    }

    /// Shard `index`, allocated now if no key has been put in it yet.
    pub(super) fn cell_or_make(&self, index: usize) -> &ShardLock<K, A::State> {
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
    pub(super) fn cells(&self) -> impl Iterator<Item = &ShardLock<K, A::State>> {
        self.shards
            .get()
            .into_iter()
            .flat_map(|slots| slots.iter())
            .filter_map(|slot| slot.get().map(|cell| &**cell))
    }

    /// When a key with `state` goes idle, in nanoseconds (`u64::MAX`: never); `None` if it
    /// already is at `now`.
    #[inline]
    pub(super) fn deadline_of(&self, state: &A::State, now: Moment) -> Option<u64> {
        match self.rules.idle_at(state) {
            Some(at) if at <= now => None,
            Some(at) => Some(at.as_nanos()),
            None => Some(u64::MAX),
        }
    }

    /// A shard whose soonest deadline has passed at `now`: it may hold a key gone idle.
    pub(super) fn shard_with_idle(&self, now: Moment) -> Option<&ShardLock<K, A::State>> {
        self.cells()
            .find(|cell| cell.0.soonest.load(Ordering::Relaxed) <= now.as_nanos())
    }

    /// Removes keys of `shard` gone idle at `now`, going through its deadlines that have
    /// passed, soonest first, until one is found or none is left; returns whether any was.
    /// A deadline of a key still limited is replaced by its new one, past `now`.
    #[inline(never)]
    pub(super) fn evict_idle(
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
    pub(super) fn rebuild_deadlines(
        &self,
        cell: &ShardLock<K, A::State>,
        shard: &mut Shard<K, A::State>,
    ) {
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
    pub(super) fn sweep_if_due(
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
    pub(super) fn sweep_shard(
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

    /// The key's hash and its shard.
    #[inline]
    pub(super) fn shard<Q: Hash + ?Sized>(&self, key: &Q) -> (u64, usize) {
        let hash = self.hasher.hash_one(key);
        // Bits below the top seven, which the table keeps as its probe tags: a shard's keys
        // share their shard bits, so those must not be the tags.
        let bits = self.shard_bits;
        let index = (hash << 7).checked_shr(u64::BITS - bits).unwrap_or(0);
        let index = usize::try_from(index).unwrap_or(0); // below the number of shards
        (hash, index)
    }
}
