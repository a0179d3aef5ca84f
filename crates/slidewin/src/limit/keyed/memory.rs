//! What a [`Keyed`]'s keys hold: with a cap, a place each among `max_keys`; on a
//! [`MemoryBudget`](crate::limit::MemoryBudget), the bytes of their entries, keys and states.
//! A new key takes its place before its shard holds it, and a key gone gives it back.

use std::cmp::Reverse;
use std::hash::Hash;
use std::sync::atomic::Ordering;

use super::Keyed;
use crate::limit::LimitError;
use crate::limit::algorithm::Algorithm;
use crate::limit::budget::OnBudget;

impl<K: Hash + Eq, A: Algorithm> Keyed<K, A> {
    #[inline]
    pub(super) fn capped(&self) -> bool {
        self.max_keys != usize::MAX
    }

    /// What a key holds of a budget: its entry, its own heap, its state's.
    #[inline]
    pub(super) fn weigh(&self, budget: &OnBudget<K>, key: &K, state: &A::State) -> usize {
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
    pub(super) fn weigh_removed(&self, key: &K, state: &A::State) -> usize {
        self.budget
            .as_ref()
            .map_or(0, |budget| self.weigh(budget, key, state))
    }

    /// Whether a new key needs a place: under a cap, or on a budget.
    #[inline]
    pub(super) fn limited(&self) -> bool {
        self.capped() || self.budget.is_some()
    }

    /// Why a new key found no place: the cap, if it is full; else the budget.
    pub(super) fn full(&self) -> LimitError {
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

    /// Takes a place for a new key of `bytes`: under the cap, and on the budget; `false` if
    /// either is full (and nothing is taken).
    #[inline]
    pub(super) fn take_place(&self, bytes: usize) -> bool {
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
    pub(super) fn forget(&self, n: usize, bytes: usize) {
        if self.capped() && n > 0 {
            self.held.0.fetch_sub(n, Ordering::Relaxed);
        }
        if let Some(budget) = &self.budget
            && bytes > 0
        {
            budget.give_back(bytes);
        }
    }
}
