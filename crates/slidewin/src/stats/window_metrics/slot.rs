//! One bucket of the ring, and the lock-free protocol that recycles it for a newer epoch.
//!
//! A slot holds one epoch (bucket number, `t / bucket_len`) at a time, in `stamp`. Its counters
//! are **never reset**: they count up for as long as the ring lives, and a `base` per counter
//! says where the current epoch began. A bucket's count is `counts - base`, modulo 2^64.
//!
//! Recycling the slot for a newer epoch `e` (a "claim"):
//!
//! 1. wait while another claim of the slot is settling;
//! 2. read every counter (the snapshot);
//! 3. compare-and-swap the stamp from what was read to `e`, marked *settling*;
//! 4. set each `base` to the snapshot, empty the min/max words (tagged with `e`) and the
//!    saturation word, and clear the settling mark.
//!
//! An add for `e` adds only after it has seen the stamp at `e` (step 3), so after the snapshot:
//! it is counted in `e`, never erased, and never waits, even for a claim in progress (but for
//! the saturation checks below, which read the base and so wait for it to settle). An add for
//! the old epoch that lands after the snapshot is counted in `e`, a fresher bucket. Nothing is
//! ever subtracted or stored over a count, so no add can vanish in a race; Sentinel instead
//! sets the new start and then zeroes the counters, erasing the adds of the new window that
//! land in between. Claims of one slot never overlap (step 1), so each base is set once per
//! epoch, from the snapshot just before it, whatever the counters hold.
//!
//! Readers validate like a seqlock: stamp, counters, stamp again; they wait only while a claim
//! is settling (a few stores), since the bases are not final before that.
//!
//! **Saturation.** A bucket counts each counter exactly below 2^63 (`LIMIT`); at or past it,
//! the counter reads `u64::MAX`, never a wrapped number. The add itself stays one atomic add:
//! an add below 2^36 (`FAST`) adds, and only when the sum crossed a multiple of 2^36 does it
//! read its bucket's count, and mark the counter saturated in the saturation word if the count
//! has reached 2^63. Every 2^36 that a bucket counts thus has its count checked, and with `T`
//! threads adding at once at most `T` checks are still to come, so a bucket is marked before
//! it counts `2^63 + (T + 2) 2^36`, which is below 2^64 for `T` below 2^26: no reader sees a
//! wrapped count unmarked. A larger add (2^36 or more) adds with a compare-and-swap against the
//! bucket's count, and marks the counter instead of adding when it would reach 2^63. Both the
//! check and the larger add read the base, so they wait while a claim is settling.
//!
//! Min and max RT cannot be "based": each is one word holding the value and the low 16 bits of
//! its epoch, replaced when the tag is not the slot's epoch, and emptied by the claimer so
//! that a stale word cannot alias a later epoch.

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering, fence};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering, fence};

use crate::spin::backoff;

/// Pass, Block, Success, Exception, RT samples, RT sum.
pub(super) const COUNTERS: usize = 6;
pub(super) const RT_COUNT: usize = 4;
pub(super) const RT_SUM: usize = 5;

/// A bucket counts each counter exactly below this; at or past it, the counter reads
/// `u64::MAX` (saturated).
pub(super) const LIMIT: u64 = 1 << 63;
/// Adds below `2^FAST_BITS` are one atomic add, checked only when they cross a multiple of it.
const FAST_BITS: u32 = 36;
const FAST: u64 = 1 << FAST_BITS;

/// The low bit of a stamp: a claim has moved the stamp but not yet settled the bases.
const SETTLING: u64 = 1;
const TAG_BITS: u32 = 16;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
/// Min and max keep `rt + 1` in 48 bits: 0 is "none", all ones "saturated".
const EXTREME_SATURATED: u64 = (1 << (64 - TAG_BITS)) - 1;
/// The largest RT that min and max hold exactly: 78 hours.
const MAX_EXTREME_RT: u64 = EXTREME_SATURATED - 2;
/// The saturation word is `epoch << SAT_SHIFT`, then a bit per saturated counter.
const SAT_SHIFT: u32 = 6;
const SAT_MASK: u64 = (1 << SAT_SHIFT) - 1;
const _: () = assert!(COUNTERS <= SAT_SHIFT as usize);

/// A bucket of the ring; two cache lines, so that neighbouring slots never share one. An add
/// touches the first only (and the second, for the max RT).
#[repr(align(128))]
pub(super) struct Slot {
    /// `epoch << 1 | SETTLING?`.
    stamp: AtomicU64,
    /// Cumulative since the ring was built, wrapping.
    counts: [AtomicU64; COUNTERS],
    /// `(rt + 1) << 16 | epoch tag`, or a zero value for none.
    min_rt: AtomicU64,
    max_rt: AtomicU64,
    /// `counts` when the current epoch began.
    base: [AtomicU64; COUNTERS],
    /// `epoch << SAT_SHIFT | a bit per counter that reached `LIMIT` in that epoch`.
    saturated: AtomicU64,
}

/// A consistent read of one slot (of the epoch the reader wanted). A saturated figure is
/// `u64::MAX`.
#[derive(Clone, Copy, Debug)]
pub(super) struct SlotRead {
    pub(super) counts: [u64; COUNTERS],
    pub(super) min_rt: Option<u64>,
    pub(super) max_rt: Option<u64>,
}

impl Slot {
    pub(super) fn new(epoch: u64) -> Slot {
        Slot {
            stamp: AtomicU64::new(epoch << 1),
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            min_rt: AtomicU64::new(0),
            max_rt: AtomicU64::new(0),
            base: std::array::from_fn(|_| AtomicU64::new(0)),
            saturated: AtomicU64::new(epoch << SAT_SHIFT),
        }
    }

    /// Adds `n` to counter `k` if the slot holds `epoch` (settled or not); otherwise returns
    /// the epoch it holds.
    #[inline]
    pub(super) fn try_add(&self, epoch: u64, k: usize, n: u64) -> Result<(), u64> {
        let held = self.stamp.load(Ordering::Acquire) >> 1;
        if held == epoch {
            self.add_counter(k, n);
            Ok(())
        } else {
            Err(held)
        }
    }

    /// Adds an RT sample if the slot holds `epoch`; otherwise returns the epoch it holds.
    pub(super) fn try_add_rt(&self, epoch: u64, rt: u64) -> Result<(), u64> {
        let held = self.stamp.load(Ordering::Acquire) >> 1;
        if held != epoch {
            return Err(held);
        }
        self.add_counter(RT_COUNT, 1);
        self.add_counter(RT_SUM, rt);
        let stored = if rt <= MAX_EXTREME_RT {
            rt + 1
        } else {
            EXTREME_SATURATED
        };
        self.extreme(&self.min_rt, epoch, stored, |new, old| new < old);
        self.extreme(&self.max_rt, epoch, stored, |new, old| new > old);
        Ok(())
    }

    /// Adds `n` to counter `k`, in the epoch the slot holds; see the module's docs on
    /// saturation.
    #[inline]
    fn add_counter(&self, k: usize, n: u64) {
        if n >= FAST {
            self.add_large(k, n);
            return;
        }
        // Release: a reader that sees this add also sees the stamp it was made under, so it
        // cannot take an add of a newer epoch for one of the epoch it read.
        let before = self.counts[k].fetch_add(n, Ordering::Release);
        if (before ^ before.wrapping_add(n)) >> FAST_BITS != 0 {
            self.check_limit(k);
        }
    }

    /// After an add crossed a multiple of `FAST`: marks counter `k` saturated if the bucket's
    /// count has reached `LIMIT`.
    #[cold]
    #[inline(never)]
    fn check_limit(&self, k: usize) {
        let mut spins = 0_u32;
        loop {
            let stamp = self.settled_stamp(&mut spins);
            let base = self.base[k].load(Ordering::Relaxed);
            let count = self.counts[k].load(Ordering::Relaxed).wrapping_sub(base);
            fence(Ordering::Acquire);
            if self.stamp.load(Ordering::Relaxed) == stamp {
                if count >= LIMIT {
                    self.saturate(stamp >> 1, k);
                }
                return;
            }
        }
    }

    /// Adds `n >= FAST` to counter `k` with a compare-and-swap against the bucket's count, or
    /// marks the counter saturated instead if the count would reach `LIMIT`. Waits while a
    /// claim is settling (the base is not final before that).
    #[cold]
    #[inline(never)]
    fn add_large(&self, k: usize, n: u64) {
        let mut spins = 0_u32;
        loop {
            let stamp = self.settled_stamp(&mut spins);
            let epoch = stamp >> 1;
            let base = self.base[k].load(Ordering::Relaxed);
            let counted = self.counts[k].load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            let saturated = self.saturated.load(Ordering::Acquire);
            if self.stamp.load(Ordering::Relaxed) != stamp {
                continue;
            }
            if is_marked(saturated, epoch, k) {
                return;
            }
            if counted
                .wrapping_sub(base)
                .checked_add(n)
                .is_none_or(|sum| sum >= LIMIT)
            {
                self.saturate(epoch, k);
                return;
            }
            // If a claim took the snapshot before this lands, the add counts in the newer
            // epoch, whose count is no more than the one checked.
            if self.counts[k]
                .compare_exchange(
                    counted,
                    counted.wrapping_add(n),
                    Ordering::Release,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return;
            }
        }
    }

    /// Marks counter `k` saturated for `epoch`, if the slot still holds it.
    fn saturate(&self, epoch: u64, k: usize) {
        let tag = epoch << SAT_SHIFT;
        let bit = 1 << k;
        let mut word = self.saturated.load(Ordering::Relaxed);
        while word & !SAT_MASK == tag && word & bit == 0 {
            match self.saturated.compare_exchange_weak(
                word,
                word | bit,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(current) => word = current,
            }
        }
        // Release, on the counter: every later add to it is in this release sequence, so a
        // reader that sees such an add (past 2^64, say) also sees the mark.
        self.counts[k].fetch_add(0, Ordering::Release);
    }

    /// Moves the slot to `epoch` if it holds an older one. Returns when the slot holds `epoch`
    /// or a newer one (this thread's claim, or another's).
    pub(super) fn claim(&self, epoch: u64) {
        let mut spins = 0_u32;
        loop {
            let stamp = self.stamp.load(Ordering::Acquire);
            if stamp >> 1 >= epoch {
                return;
            }
            if stamp & SETTLING != 0 {
                // Another claim is settling; claims take turns, so each base is set once.
                backoff(&mut spins);
                continue;
            }
            let counts: [u64; COUNTERS] =
                std::array::from_fn(|k| self.counts[k].load(Ordering::Relaxed));
            let extremes = [
                self.min_rt.load(Ordering::Relaxed),
                self.max_rt.load(Ordering::Relaxed),
            ];
            // Release: the snapshot's loads come before any add made under the new stamp.
            if self
                .stamp
                .compare_exchange(
                    stamp,
                    epoch << 1 | SETTLING,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
            {
                self.settle(epoch, &counts, extremes);
                return;
            }
        }
    }

    fn settle(&self, epoch: u64, counts: &[u64; COUNTERS], extremes: [u64; 2]) {
        // Modulo 2^64, the counts of the epoch from here are exact whatever the old epoch
        // counted (saturated or not).
        for (base, &snap) in self.base.iter().zip(counts) {
            base.store(snap, Ordering::Relaxed);
        }
        // Empty the min and max unless they changed since the snapshot: a change came from an
        // add for this epoch, or from a late one for the old epoch, which counts here as its
        // other figures do. Emptied whatever their tag, so a word left from an epoch 2^16
        // epochs back cannot pass for this one's.
        for (word, snap) in [&self.min_rt, &self.max_rt].into_iter().zip(extremes) {
            let _ =
                word.compare_exchange(snap, epoch & TAG_MASK, Ordering::Release, Ordering::Relaxed);
        }
        // No mark of this epoch exists yet (marks are made under a settled stamp only); a late
        // mark of the old epoch fails its compare-and-swap against this store. Release: a
        // reader that sees this word sees the stamp that came before it.
        self.saturated.store(epoch << SAT_SHIFT, Ordering::Release);
        // Claims take turns: nothing else moves a settling stamp.
        self.stamp.store(epoch << 1, Ordering::Release);
    }

    /// Puts `stored` into a min or max word if it is `better` than what the word holds for
    /// `epoch`, or if the word holds another epoch's value (while the slot holds `epoch`).
    fn extreme(&self, word: &AtomicU64, epoch: u64, stored: u64, better: fn(u64, u64) -> bool) {
        let tag = epoch & TAG_MASK;
        let mut w = word.load(Ordering::Relaxed);
        loop {
            let old = w >> TAG_BITS;
            if w & TAG_MASK == tag && old != 0 && !better(stored, old) {
                return;
            }
            // Write only while the slot still holds our epoch: a late sample must not take
            // the word of a newer one.
            if self.stamp.load(Ordering::Acquire) >> 1 != epoch {
                return;
            }
            match word.compare_exchange_weak(
                w,
                stored << TAG_BITS | tag,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(current) => w = current,
            }
        }
    }

    /// The slot's epoch and counts, read consistently, if its epoch is `wanted` (checked
    /// first, so that a slot out of the window costs one load); waits while a claim is
    /// settling.
    pub(super) fn read_if(&self, wanted: impl Fn(u64) -> bool) -> Option<SlotRead> {
        let mut spins = 0_u32;
        loop {
            let stamp = self.settled_stamp(&mut spins);
            let epoch = stamp >> 1;
            if !wanted(epoch) {
                return None;
            }
            let counts: [u64; COUNTERS] = std::array::from_fn(|k| {
                let base = self.base[k].load(Ordering::Relaxed);
                self.counts[k].load(Ordering::Relaxed).wrapping_sub(base)
            });
            let (min, max) = (
                self.min_rt.load(Ordering::Relaxed),
                self.max_rt.load(Ordering::Relaxed),
            );
            // Everything above is read before the stamp is checked again (a seqlock's read);
            // the marks after the fence, so that a count seen past a mark shows it.
            fence(Ordering::Acquire);
            let saturated = self.saturated.load(Ordering::Acquire);
            if self.stamp.load(Ordering::Relaxed) == stamp {
                let extreme = |w: u64| {
                    let stored = w >> TAG_BITS;
                    (w & TAG_MASK == epoch & TAG_MASK && stored != 0).then(|| {
                        if stored == EXTREME_SATURATED {
                            u64::MAX
                        } else {
                            stored - 1
                        }
                    })
                };
                return Some(SlotRead {
                    counts: std::array::from_fn(|k| {
                        saturate_read(counts[k], is_marked(saturated, epoch, k))
                    }),
                    min_rt: extreme(min),
                    max_rt: extreme(max),
                });
            }
        }
    }

    /// Counter `k` of the slot, read consistently, if its epoch is `wanted`.
    pub(super) fn read_counter_if(&self, k: usize, wanted: impl Fn(u64) -> bool) -> Option<u64> {
        let mut spins = 0_u32;
        loop {
            let stamp = self.settled_stamp(&mut spins);
            if !wanted(stamp >> 1) {
                return None;
            }
            let base = self.base[k].load(Ordering::Relaxed);
            let count = self.counts[k].load(Ordering::Relaxed).wrapping_sub(base);
            fence(Ordering::Acquire);
            let saturated = self.saturated.load(Ordering::Acquire);
            if self.stamp.load(Ordering::Relaxed) == stamp {
                return Some(saturate_read(count, is_marked(saturated, stamp >> 1, k)));
            }
        }
    }

    /// The stamp, once no claim is settling it (the bases are final).
    fn settled_stamp(&self, spins: &mut u32) -> u64 {
        loop {
            let stamp = self.stamp.load(Ordering::Acquire);
            if stamp & SETTLING == 0 {
                return stamp;
            }
            backoff(spins);
        }
    }
}

/// Whether the saturation word marks counter `k` of `epoch`.
fn is_marked(word: u64, epoch: u64, k: usize) -> bool {
    word & !SAT_MASK == epoch << SAT_SHIFT && word >> k & 1 == 1
}

/// A bucket's count as read: `u64::MAX` from `LIMIT` on, or when marked (its true count may
/// have passed 2^64).
fn saturate_read(count: u64, marked: bool) -> u64 {
    if marked || count >= LIMIT {
        u64::MAX
    } else {
        count
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn count(slot: &Slot, k: usize) -> u64 {
        slot.read_counter_if(k, |_| true).unwrap()
    }

    /// Puts counter `k` of a fresh slot at `count`, over a base of `base`.
    fn slot_at(base: u64, count: u64) -> Slot {
        let slot = Slot::new(0);
        slot.base[0].store(base, Ordering::Relaxed);
        slot.counts[0].store(base.wrapping_add(count), Ordering::Relaxed);
        slot
    }

    #[test]
    fn a_small_add_crossing_a_multiple_of_two_to_the_36_marks_a_count_past_the_limit() {
        // Cumulative from 2^63 + 2^36 - 5 to 2^63 + 2^36 + 15: crosses a multiple of 2^36.
        let slot = slot_at(5, LIMIT + FAST - 10);
        assert!(!is_marked(slot.saturated.load(Ordering::Relaxed), 0, 0));
        slot.try_add(0, 0, 20).unwrap();
        assert!(is_marked(slot.saturated.load(Ordering::Relaxed), 0, 0));
        // Wrapped past 2^64 (as more small adds would): still saturated, because marked.
        slot.counts[0].store(5 + 3, Ordering::Relaxed);
        assert_eq!(count(&slot, 0), u64::MAX);
        // The other counters are not marked.
        assert!(!is_marked(slot.saturated.load(Ordering::Relaxed), 0, 1));
    }

    #[test]
    fn a_small_add_crossing_below_the_limit_marks_nothing() {
        let slot = slot_at(5, LIMIT - FAST - 10);
        slot.try_add(0, 0, 20).unwrap();
        assert!(!is_marked(slot.saturated.load(Ordering::Relaxed), 0, 0));
        assert_eq!(count(&slot, 0), LIMIT - FAST + 10);
    }

    #[test]
    fn a_large_add_that_would_reach_the_limit_marks_instead_of_adding() {
        let slot = slot_at(7, LIMIT - FAST);
        slot.try_add(0, 0, FAST - 1).unwrap();
        slot.try_add(0, 0, FAST).unwrap(); // would reach 2^63 - 1 + 2^36
        assert!(is_marked(slot.saturated.load(Ordering::Relaxed), 0, 0));
        // Not added: the counter is where the small add left it.
        let raw = slot.counts[0].load(Ordering::Relaxed).wrapping_sub(7);
        assert_eq!(raw, LIMIT - 1);
        assert_eq!(count(&slot, 0), u64::MAX);
    }

    #[test]
    fn a_claim_empties_the_marks_and_rebases_a_wrapped_counter() {
        let slot = slot_at(0, 0);
        slot.try_add(0, 0, u64::MAX).unwrap();
        slot.try_add(0, 0, 5).unwrap();
        assert_eq!(count(&slot, 0), u64::MAX);
        slot.claim(4);
        slot.try_add(4, 0, 2).unwrap();
        assert_eq!(slot.read_counter_if(0, |e| e == 4), Some(2));
        assert!(!is_marked(slot.saturated.load(Ordering::Relaxed), 4, 0));
    }

    #[test]
    fn marks_are_per_epoch() {
        let word = 3 << SAT_SHIFT | 0b10;
        assert!(is_marked(word, 3, 1));
        assert!(!is_marked(word, 3, 0));
        assert!(!is_marked(word, 4, 1));
        // The tag keeps the epoch's low 58 bits; epochs below 2^63 all fit that far.
        assert!(is_marked(
            (u64::MAX >> 1) << SAT_SHIFT | 1,
            u64::MAX >> 1,
            0
        ));
    }
}
