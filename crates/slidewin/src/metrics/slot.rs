//! One bucket of the ring, and the lock-free protocol that recycles it for a newer epoch.
//!
//! A slot holds one epoch (bucket number, `t / bucket_len`) at a time, in `stamp`. Its counters
//! are **never reset**: they count up for as long as the ring lives, and a `base` per counter
//! says where the current epoch began. A bucket's count is `counts - base`.
//!
//! Recycling the slot for a newer epoch `e` (a "claim"):
//!
//! 1. read every counter (the snapshot);
//! 2. compare-and-swap the stamp from what was read to `e`, marked *settling*;
//! 3. raise each `base` to the snapshot (only ever forwards);
//! 4. empty the min/max words (tagged with `e`), and clear the settling mark.
//!
//! An add for `e` adds only after it has seen the stamp at `e` (step 2), so after the snapshot:
//! it is counted in `e`, never erased, and never waits, even for a claim in progress. An add for
//! the old epoch that lands after the snapshot is counted in `e`, a fresher bucket. Nothing is
//! ever subtracted or stored over a count, so no add can vanish in a race; Sentinel instead
//! sets the new start and then zeroes the counters, erasing the adds of the new window that
//! land in between.
//!
//! Readers validate like a seqlock: stamp, counters, stamp again; they wait only while a claim
//! is settling (a few stores), since the bases are not final before that.
//!
//! Min and max RT cannot be "based": each is one word holding the value and the low 16 bits of
//! its epoch, replaced when the tag is not the slot's epoch, and emptied by the claimer so
//! that a stale word cannot alias a later epoch.

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering, fence};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering, fence};

/// Pass, Block, Success, Exception, RT samples, RT sum.
pub(super) const COUNTERS: usize = 6;
pub(super) const RT_COUNT: usize = 4;
pub(super) const RT_SUM: usize = 5;

/// The low bit of a stamp: a claim has moved the stamp but not yet settled the bases.
const SETTLING: u64 = 1;
const TAG_BITS: u32 = 16;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
/// Min and max keep `rt + 1` (0 is "none") in 48 bits: RTs up to 78 hours are exact.
pub(super) const MAX_EXTREME_RT: u64 = (1 << (64 - TAG_BITS)) - 2;

/// A bucket of the ring; two cache lines, so that neighbouring slots never share one.
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
}

/// A consistent read of one slot (of the epoch the reader wanted).
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
        }
    }

    /// Adds `n` to counter `k` if the slot holds `epoch` (settled or not); otherwise returns
    /// the epoch it holds.
    #[inline]
    pub(super) fn try_add(&self, epoch: u64, k: usize, n: u64) -> Result<(), u64> {
        let held = self.stamp.load(Ordering::Acquire) >> 1;
        if held == epoch {
            // Release: a reader that sees this add also sees the stamp it was made under, so
            // it cannot take an add of a newer epoch for one of the epoch it read.
            self.counts[k].fetch_add(n, Ordering::Release);
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
        self.counts[RT_COUNT].fetch_add(1, Ordering::Release);
        self.counts[RT_SUM].fetch_add(rt, Ordering::Release);
        let stored = rt.min(MAX_EXTREME_RT) + 1;
        self.extreme(&self.min_rt, epoch, stored, |new, old| new < old);
        self.extreme(&self.max_rt, epoch, stored, |new, old| new > old);
        Ok(())
    }

    /// Moves the slot to `epoch` if it holds an older one. Returns when the slot holds `epoch`
    /// or a newer one (this thread's claim, or another's).
    pub(super) fn claim(&self, epoch: u64) {
        loop {
            let stamp = self.stamp.load(Ordering::Acquire);
            if stamp >> 1 >= epoch {
                return;
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
        for (base, &snap) in self.base.iter().zip(counts) {
            // Only forwards (modulo 2^64): a claimer that stalled with an older snapshot, and
            // settles after a newer claim, changes nothing.
            let _ = base.fetch_update(Ordering::Release, Ordering::Relaxed, |b| {
                let ahead = snap.wrapping_sub(b);
                (ahead != 0 && ahead < 1 << 63).then_some(snap)
            });
        }
        // Empty the min and max unless they changed since the snapshot: a change came from an
        // add for this epoch, or from a late one for the old epoch, which counts here as its
        // other figures do. Emptied whatever their tag, so a word left from an epoch 2^16
        // epochs back cannot pass for this one's.
        for (word, snap) in [&self.min_rt, &self.max_rt].into_iter().zip(extremes) {
            let _ =
                word.compare_exchange(snap, epoch & TAG_MASK, Ordering::Release, Ordering::Relaxed);
        }
        // Fails only if a newer claim has already moved the stamp on: then it is that one's.
        let _ = self.stamp.compare_exchange(
            epoch << 1 | SETTLING,
            epoch << 1,
            Ordering::Release,
            Ordering::Relaxed,
        );
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
            // Everything above is read before the stamp is checked again (a seqlock's read).
            fence(Ordering::Acquire);
            if self.stamp.load(Ordering::Relaxed) == stamp {
                let extreme = |w: u64| {
                    (w & TAG_MASK == epoch & TAG_MASK && w >> TAG_BITS != 0)
                        .then(|| (w >> TAG_BITS) - 1)
                };
                return Some(SlotRead {
                    counts,
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
            if self.stamp.load(Ordering::Relaxed) == stamp {
                return Some(count);
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

/// Waits a little for another thread's few stores: spins first, then gives up the core.
fn backoff(spins: &mut u32) {
    *spins += 1;
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}
