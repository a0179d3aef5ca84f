//! The breaker's state, shared by threads without a lock: a [`Word`] moved by compare-and-swap,
//! and beside it what a transition sets once (its time, and where a closed window begins).
//!
//! A transition is a claim, like a `WindowMetrics` bucket's:
//!
//! 1. compare-and-swap the word from the state read to the next generation's, marked
//!    *settling*; of the threads racing for one transition exactly one wins;
//! 2. write the time and the floor (a release fence first, so a reader that sees one of these
//!    writes sees the mark too);
//! 3. store the word without the mark (release).
//!
//! Readers read the word (waiting while it is settling: a few stores), then what is beside it,
//! then the word again (after an acquire fence), seqlock-style: if the generation moved, what
//! they read may belong to a later state, and they start over. The half-open probes' counters
//! live in the word, so handing out and completing a probe is one compare-and-swap with no
//! side data. The generation has 16 bits: a reader would have to sleep through 65,536
//! transitions between its two reads of the word to be fooled.

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering, fence};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering, fence};

use super::state::Word;
use crate::spin::backoff;
use crate::time::Moment;

/// What a transition writes beside the word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Aux {
    /// When the state began (an open state's wait counts from here).
    pub(super) since: Moment,
    /// The bucket (epoch) where the closed window begins; set by transitions to closed.
    pub(super) floor: u64,
    /// The floor bucket's counts when the window began: they belong to an earlier state.
    pub(super) baseline: [u64; 4],
}

pub(super) struct Cell {
    word: AtomicU64,
    since: AtomicU64,
    floor: AtomicU64,
    baseline: [AtomicU64; 4],
}

impl Cell {
    pub(super) fn new(aux: Aux) -> Cell {
        Cell {
            word: AtomicU64::new(Word::closed().0),
            since: AtomicU64::new(aux.since.as_nanos()),
            floor: AtomicU64::new(aux.floor),
            baseline: aux.baseline.map(AtomicU64::new),
        }
    }

    /// The word, once no transition is settling it.
    pub(super) fn load(&self) -> Word {
        let mut spins = 0_u32;
        loop {
            let word = Word(self.word.load(Ordering::Acquire));
            if !word.is_settling() {
                return word;
            }
            backoff(&mut spins);
        }
    }

    /// What the transition to `word` wrote beside it, or `None` if the word has moved on to
    /// another generation since.
    pub(super) fn aux(&self, word: Word) -> Option<Aux> {
        let aux = Aux {
            since: Moment::from_nanos(self.since.load(Ordering::Relaxed)),
            floor: self.floor.load(Ordering::Relaxed),
            baseline: std::array::from_fn(|i| self.baseline[i].load(Ordering::Relaxed)),
        };
        fence(Ordering::Acquire);
        let now = Word(self.word.load(Ordering::Relaxed));
        (!now.is_settling() && now.generation() == word.generation()).then_some(aux)
    }

    /// Moves the word from `current` to `next` (both settled), as a probe is handed out or
    /// completes: no side data changes.
    pub(super) fn update(&self, current: Word, next: Word) -> bool {
        self.word
            .compare_exchange(current.0, next.0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// A transition from `current` to `next` (a settling word of the next generation), writing
    /// `since` and, for a closed window, its floor and baseline. `false` if another thread
    /// moved the word first: then nothing is written.
    pub(super) fn transition(
        &self,
        current: Word,
        next: Word,
        since: Moment,
        window: Option<(u64, [u64; 4])>,
    ) -> bool {
        if !self.update(current, next) {
            return false;
        }
        fence(Ordering::Release);
        self.since.store(since.as_nanos(), Ordering::Relaxed);
        if let Some((floor, baseline)) = window {
            self.floor.store(floor, Ordering::Relaxed);
            for (cell, n) in self.baseline.iter().zip(baseline) {
                cell.store(n, Ordering::Relaxed);
            }
        }
        self.word.store(next.settled().0, Ordering::Release);
        true
    }
}
