//! [`Algorithm`], what a limiter enforces; sealed, with the machinery the holders use behind it.

use std::fmt;
use std::sync::{Mutex, PoisonError};

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering};

use crate::limit::{CachePadded, Decision, LimitError, Reservation};
use crate::time::Moment;

/// What a limiter enforces: one of the four algorithms for one quota
/// ([`SlidingLog`](crate::limit::SlidingLog), [`SlidingCounter`](crate::limit::SlidingCounter),
/// [`FixedWindow`](crate::limit::FixedWindow), [`Gcra`](crate::limit::Gcra)), or several named
/// rules checked together ([`RuleSet`](crate::limit::RuleSet)).
///
/// Hand one to a holder: [`Limiter`](crate::Limiter) (one owner),
/// [`SharedLimiter`](crate::SharedLimiter) (threads; lock-free for `Gcra` and `FixedWindow`) or
/// [`Keyed`](crate::Keyed) (a state per key). A check answers the algorithm's
/// `Output`: a [`Decision`], or for a `RuleSet` a [`Decisions`](crate::limit::Decisions), which
/// holds one per rule. Both are `AsRef<Decision>`, for code generic over the algorithm.
///
/// The trait is sealed, and the state each algorithm keeps is private to slidewin: a state can
/// only come from the algorithm's own checks, so no state can claim more than its quota allows.
///
/// # Example
///
/// ```
/// use slidewin::{Decision, Moment, SharedLimiter};
/// use slidewin::limit::{Algorithm, Gcra, SlidingLog};
///
/// fn admitted<A: Algorithm>(limiter: &SharedLimiter<A>, n: usize) -> usize {
///     (0..n)
///         .filter(|_| limiter.check(Moment::ZERO, 1).is_ok_and(|out| out.as_ref().allowed()))
///         .count()
/// }
///
/// assert_eq!(admitted(&SharedLimiter::new(SlidingLog::new("3/s".parse()?)?), 5), 3);
/// assert_eq!(admitted(&SharedLimiter::new(Gcra::new("2/s".parse()?)?), 5), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Algorithm: Enforce {}

/// The machinery behind [`Algorithm`]: out of reach outside the crate, so the trait is sealed
/// and the states are opaque.
pub(crate) mod sealed {
    use super::{Decision, LimitError, Moment, Reservation, fmt};

    // `pub` in a private module: nameable by the crate, by no one else (a sealed trait).
    #[allow(unreachable_pub)]
    pub trait Enforce: Clone + fmt::Debug + Send + Sync + 'static {
        /// What a check answers.
        type Output: Clone + fmt::Debug + AsRef<Decision>;
        /// What one limiter (or one key) remembers.
        type State: Clone + fmt::Debug + Send;
        /// Where a shared limiter keeps its state.
        type Cell: Cell<Self>;

        /// The state with the full quota available.
        fn fresh(&self) -> Self::State;

        /// What an admission records, found by [`prepare`](Enforce::prepare) and written by
        /// [`commit`](Enforce::commit): the state after it, or where in the state it goes.
        type Pending;

        /// A check's first half: the decision about `cost` at `now`, and what `commit` records
        /// if it admits. (A rule set decides all its rules before it records on any.)
        fn prepare(
            &self,
            state: &Self::State,
            now: Moment,
            cost: u64,
        ) -> Result<(Self::Output, Self::Pending), LimitError>;

        /// A check's second half, for an admitted cost above 0 only: records what `prepare`
        /// found, on the state it found it on.
        fn commit(state: &mut Self::State, pending: Self::Pending, cost: u64);

        /// Decides about `cost` at `now`, and consumes it from `state` when admitted: every
        /// algorithm's check, [`prepare`](Enforce::prepare) then
        /// [`commit`](Enforce::commit).
        #[inline(always)]
        fn check(
            &self,
            state: &mut Self::State,
            now: Moment,
            cost: u64,
        ) -> Result<Self::Output, LimitError> {
            let (output, pending) = self.prepare(state, now, cost)?;
            if cost > 0 && output.as_ref().allowed() {
                Self::commit(state, pending, cost);
            }
            Ok(output)
        }

        /// Decides as `check` would, consuming nothing: the decision
        /// [`prepare`](Enforce::prepare) finds.
        #[inline(always)]
        fn peek(
            &self,
            state: &Self::State,
            now: Moment,
            cost: u64,
        ) -> Result<Self::Output, LimitError> {
            Ok(self.prepare(state, now, cost)?.0)
        }

        /// When `state` is back at the full quota if nothing more is admitted: from then on,
        /// replacing it with `fresh()` would change no decision. `None`: never (the end of the
        /// timeline comes first).
        fn idle_at(&self, state: &Self::State) -> Option<Moment>;

        /// How long a keyed map waits between sweeps of a shard, in nanoseconds: the longest
        /// span, after which every state admitted before is idle again.
        fn sweep_every(&self) -> u64;

        /// `state`, kept by `old` (the same algorithm for another quota: a limit changed by a
        /// reload), as a state of these rules at `now`, the time of the change; `None` when
        /// nothing of it is worth carrying, and the key starts fresh.
        ///
        /// The state carried never admits more than an exact limiter for the new quota would,
        /// given the history `state` still knows, and it keeps every invariant these rules'
        /// checks rely on (a count above the new limit is cut to what the checks can hold, or
        /// answered as a denial with nothing remaining). `now` may be before the state's own
        /// time (a clock gone back): the carry then only denies more.
        fn carry(&self, old: &Self, state: Self::State, now: Moment) -> Option<Self::State>;

        /// Gives back up to `units` of what `state` holds at `now`, the oldest first; how many
        /// it gave back. Only [`Leases`](crate::limit::Leases) hold what can be given back (a
        /// request that ended); a rate's admissions stay spent.
        #[inline]
        fn release(&self, state: &mut Self::State, now: Moment, units: u64) -> u64 {
            let _ = (state, now, units);
            0
        }

        /// The time an admission that [`prepare`](Enforce::prepare) found at `now` counts
        /// at: where a [`Reservation`] of it finds its place again. `now`, but for a clock
        /// gone back: a log counts at its newest admission, a window at its start.
        #[inline]
        fn counted_at(&self, pending: &Self::Pending, now: Moment) -> Moment {
            let _ = pending;
            now
        }

        /// A check of an `estimate` whose cost is settled later: the decision, and when it
        /// admits a cost above 0, the [`Reservation`] that [`settle`](Enforce::settle)
        /// changes.
        fn reserve(
            &self,
            state: &mut Self::State,
            now: Moment,
            estimate: u64,
        ) -> Result<(Self::Output, Option<Reservation>), LimitError> {
            let (output, pending) = self.prepare(state, now, estimate)?;
            // An estimate of 0 admits nothing to settle: a question, as a check of 0 is.
            if estimate == 0 || !output.as_ref().allowed() {
                return Ok((output, None));
            }
            let at = self.counted_at(&pending, now);
            Self::commit(state, pending, estimate);
            Ok((output, Some(Reservation::new(at, estimate))))
        }

        /// Changes the admission `reservation` made to `actual` units, where it was counted;
        /// whether anything held it still (a reservation whose window has passed changes
        /// nothing). The algorithms that keep no such place change nothing.
        #[inline]
        fn settle(&self, state: &mut Self::State, reservation: Reservation, actual: u64) -> bool {
            let _ = (state, reservation, actual);
            false
        }

        /// Whether `state` is back at the full quota at `now`.
        #[inline]
        fn is_idle(&self, state: &Self::State, now: Moment) -> bool {
            self.idle_at(state).is_some_and(|at| now >= at)
        }

        /// The bytes `state` holds on the heap (a keyed limiter's memory budget counts them):
        /// none, but for a sliding log's stamps.
        #[inline]
        fn heap_bytes(&self, state: &Self::State) -> usize {
            let _ = state;
            0
        }

        /// The most bytes one `check` of `state` at `now` may add to what it holds on the heap.
        #[inline]
        fn growth_bytes(&self, state: &Self::State, now: Moment) -> usize {
            let _ = (state, now);
            0
        }
    }

    /// A shared limiter's state, behind whatever lets threads share it.
    #[allow(unreachable_pub)]
    pub trait Cell<A: Enforce>: fmt::Debug + Send + Sync {
        /// A cell holding `state`.
        fn new(rules: &A, state: A::State) -> Self;
        /// A check at the time `now()` reads: read under the cell's lock, if it has one.
        fn check(
            &self,
            rules: &A,
            now: impl FnOnce() -> Moment,
            cost: u64,
        ) -> Result<A::Output, LimitError>;
        /// A peek at `now()`.
        fn peek(
            &self,
            rules: &A,
            now: impl FnOnce() -> Moment,
            cost: u64,
        ) -> Result<A::Output, LimitError>;
        /// Puts `state` in the cell.
        fn set(&self, rules: &A, state: A::State);
        /// A release of up to `units` at `now` ([`Enforce::release`]).
        fn release(&self, rules: &A, now: Moment, units: u64) -> u64;
        /// A reserve at `now()` ([`Enforce::reserve`]).
        fn reserve(
            &self,
            rules: &A,
            now: impl FnOnce() -> Moment,
            estimate: u64,
        ) -> Result<(A::Output, Option<Reservation>), LimitError>;
        /// A settle ([`Enforce::settle`]).
        fn settle(&self, rules: &A, reservation: Reservation, actual: u64) -> bool;
    }

    /// An algorithm whose whole state fits one word, for [`Word`](super::Word).
    #[allow(unreachable_pub)]
    pub trait OneWord: Enforce<Output = Decision> {
        /// The state as one word.
        fn pack(&self, state: &Self::State) -> u64;
        /// The state back from its word.
        fn unpack(&self, word: u64) -> Self::State;
    }
}

use sealed::{Cell, Enforce, OneWord};

/// A state behind a mutex, on cache lines of its own.
#[derive(Debug)]
#[allow(unreachable_pub)]
pub struct Locked<S>(CachePadded<Mutex<S>>);

impl<A: Enforce> Cell<A> for Locked<A::State> {
    fn new(_: &A, state: A::State) -> Self {
        Locked(CachePadded(Mutex::new(state)))
    }

    #[inline]
    fn check(
        &self,
        rules: &A,
        now: impl FnOnce() -> Moment,
        cost: u64,
    ) -> Result<A::Output, LimitError> {
        // The algorithms compute a new state before writing it, so a lock poisoned by a panic
        // elsewhere still guards a whole state.
        let mut state = self.0.0.lock().unwrap_or_else(PoisonError::into_inner);
        rules.check(&mut state, now(), cost)
    }

    #[inline]
    fn peek(
        &self,
        rules: &A,
        now: impl FnOnce() -> Moment,
        cost: u64,
    ) -> Result<A::Output, LimitError> {
        let state = self.0.0.lock().unwrap_or_else(PoisonError::into_inner);
        rules.peek(&state, now(), cost)
    }

    fn set(&self, _: &A, state: A::State) {
        *self.0.0.lock().unwrap_or_else(PoisonError::into_inner) = state;
    }

    fn release(&self, rules: &A, now: Moment, units: u64) -> u64 {
        let mut state = self.0.0.lock().unwrap_or_else(PoisonError::into_inner);
        rules.release(&mut state, now, units)
    }

    fn reserve(
        &self,
        rules: &A,
        now: impl FnOnce() -> Moment,
        estimate: u64,
    ) -> Result<(A::Output, Option<Reservation>), LimitError> {
        let mut state = self.0.0.lock().unwrap_or_else(PoisonError::into_inner);
        rules.reserve(&mut state, now(), estimate)
    }

    fn settle(&self, rules: &A, reservation: Reservation, actual: u64) -> bool {
        let mut state = self.0.0.lock().unwrap_or_else(PoisonError::into_inner);
        rules.settle(&mut state, reservation, actual)
    }
}

/// A state packed into one atomic word: a check is a load, the arithmetic, and one
/// compare-and-swap, retried if another thread got there first.
#[derive(Debug)]
#[allow(unreachable_pub)]
pub struct Word(CachePadded<AtomicU64>);

impl<A: OneWord> Cell<A> for Word {
    fn new(rules: &A, state: A::State) -> Self {
        Word(CachePadded(AtomicU64::new(rules.pack(&state))))
    }

    #[inline]
    fn check(
        &self,
        rules: &A,
        now: impl FnOnce() -> Moment,
        cost: u64,
    ) -> Result<Decision, LimitError> {
        let now = now();
        // Acquire/Release pair the state words: a thread that reads a word sees it whole.
        let mut word = self.0.0.load(Ordering::Acquire);
        loop {
            let mut state = rules.unpack(word);
            let decision = rules.check(&mut state, now, cost)?;
            if !decision.allowed() {
                return Ok(decision);
            }
            let next = rules.pack(&state);
            match self
                .0
                .0
                .compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(decision),
                Err(current) => word = current,
            }
        }
    }

    #[inline]
    fn peek(
        &self,
        rules: &A,
        now: impl FnOnce() -> Moment,
        cost: u64,
    ) -> Result<Decision, LimitError> {
        let state = rules.unpack(self.0.0.load(Ordering::Acquire));
        rules.peek(&state, now(), cost)
    }

    fn set(&self, rules: &A, state: A::State) {
        self.0.0.store(rules.pack(&state), Ordering::Release);
    }

    // No one-word algorithm holds what can be given back: nothing to write.
    fn release(&self, rules: &A, now: Moment, units: u64) -> u64 {
        let mut state = rules.unpack(self.0.0.load(Ordering::Acquire));
        rules.release(&mut state, now, units)
    }

    fn reserve(
        &self,
        rules: &A,
        now: impl FnOnce() -> Moment,
        estimate: u64,
    ) -> Result<(Decision, Option<Reservation>), LimitError> {
        let now = now();
        let mut word = self.0.0.load(Ordering::Acquire);
        loop {
            let mut state = rules.unpack(word);
            let (decision, reserved) = rules.reserve(&mut state, now, estimate)?;
            if reserved.is_none() {
                return Ok((decision, None)); // nothing recorded: nothing to write
            }
            match self.swap(word, rules.pack(&state)) {
                Ok(()) => return Ok((decision, reserved)),
                Err(current) => word = current,
            }
        }
    }

    fn settle(&self, rules: &A, reservation: Reservation, actual: u64) -> bool {
        let mut word = self.0.0.load(Ordering::Acquire);
        loop {
            let mut state = rules.unpack(word);
            if !rules.settle(&mut state, reservation, actual) {
                return false;
            }
            match self.swap(word, rules.pack(&state)) {
                Ok(()) => return true,
                Err(current) => word = current,
            }
        }
    }
}

impl Word {
    /// Writes `next` if the word is still `word`; else the word found.
    #[inline]
    fn swap(&self, word: u64, next: u64) -> Result<(), u64> {
        self.0
            .0
            .compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Acquire)
            .map(drop)
    }
}
