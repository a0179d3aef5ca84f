//! A key's check and peek: find its state in its shard, or make one for a new key, which
//! takes a place under the cap and on the budget before its shard holds it.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::Ordering;

use hashbrown::Equivalent;

use super::Keyed;
use super::shard::{Shard, ShardLock, lock};
use crate::limit::algorithm::Algorithm;
use crate::limit::budget::OnBudget;
use crate::limit::{LimitError, Reservation};
use crate::time::{Clock, Moment};
use std::cmp::Reverse;

impl<K: Hash + Eq, A: Algorithm> Keyed<K, A> {
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
        self.check_in(index, hash, key, || key.to_owned(), || now, cost, Check)
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
        self.check_in(index, hash, key, || K::from(key), || now, cost, Check)
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
        self.check_in(
            index,
            hash,
            key,
            || key.to_owned(),
            || clock.now(),
            cost,
            Check,
        )
    }

    /// The check of `key` in its shard, `index`, at the time `now()` reads while the shard is
    /// locked, as `op` checks (or reserves); `owned` makes the key to keep when it is new.
    #[inline]
    #[allow(clippy::too_many_arguments)] // the key's three forms, the time, the cost, the op
    pub(super) fn check_in<Q, Op: Admit<A>>(
        &self,
        index: usize,
        hash: u64,
        key: &Q,
        owned: impl FnOnce() -> K,
        now: impl Fn() -> Moment,
        cost: u64,
        op: Op,
    ) -> Result<Op::Answer, LimitError>
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
                if let Some(answer) = self.check_before_shard(index, &now, cost, op) {
                    return answer;
                }
                continue; // in the shard just allocated
            };
            let mut shard = lock(cell);
            let now = now();
            self.sweep_if_due(cell, &mut shard, now);
            if let Some((_, state)) = shard.states.find_mut(hash, |(k, _)| key.equivalent(k)) {
                return match &self.budget {
                    None => op.admit(&self.rules, state, now, cost),
                    Some(budget) => self.check_on_budget(budget, state, now, cost, op),
                };
            }
            let mut state = self.rules.fresh();
            let decision = op.admit(&self.rules, &mut state, now, cost)?;
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
    fn check_on_budget<Op: Admit<A>>(
        &self,
        budget: &OnBudget<K>,
        state: &mut A::State,
        now: Moment,
        cost: u64,
        op: Op,
    ) -> Result<Op::Answer, LimitError> {
        let before = self.rules.heap_bytes(state);
        let growth = self.rules.growth_bytes(state, now);
        if growth > 0 && !budget.take(growth) {
            let peeked = self.rules.peek(state, now, cost)?;
            if !peeked.as_ref().allowed() {
                return Ok(Op::denied(peeked));
            }
            return Err(LimitError::MemoryFull {
                max_bytes: budget.shared.max_bytes(),
            });
        }
        let answer = op.admit(&self.rules, state, now, cost);
        budget.settle(before + growth, self.rules.heap_bytes(state));
        answer
    }

    /// A check of a new key in shard `index`, which holds none yet: the key's fresh state
    /// checked at `now()`. An answer that leaves the key idle, or an error, is the answer, with
    /// nothing allocated (a key idle is the same as a key never seen). Otherwise the shard is
    /// allocated, and `None` says to check there, from the start (at the cap the key may still
    /// be refused there, its shard kept: at worst every shard, as a limiter used to start with).
    #[cold]
    #[inline(never)]
    fn check_before_shard<Op: Admit<A>>(
        &self,
        index: usize,
        now: &impl Fn() -> Moment,
        cost: u64,
        op: Op,
    ) -> Option<Result<Op::Answer, LimitError>> {
        let now = now();
        let mut state = self.rules.fresh();
        let answer = op.admit(&self.rules, &mut state, now, cost);
        if answer.is_err() || self.deadline_of(&state, now).is_none() {
            return Some(answer);
        }
        self.cell_or_make(index);
        None
    }

    /// Puts a new key in `shard` (its place under the cap already taken), with its deadline.
    #[inline]
    pub(super) fn insert(
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
        self.peek_in(key, || now, cost)
    }

    /// [`peek`](Keyed::peek) by a key of another type that stands for a `K`, as
    /// [`check_equivalent`](Keyed::check_equivalent) looks one up.
    ///
    /// # Errors
    ///
    /// As [`peek`](Keyed::peek).
    ///
    /// ```
    /// use slidewin::{Keyed, Moment};
    /// use slidewin::limit::FixedWindow;
    ///
    /// let limiter = Keyed::<String, _>::new(FixedWindow::new("2/s".parse()?)?);
    /// limiter.check_equivalent("ann", Moment::ZERO, 2)?;
    /// assert!(!limiter.peek_equivalent("ann", Moment::ZERO, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn peek_equivalent<Q>(
        &self,
        key: &Q,
        now: Moment,
        cost: u64,
    ) -> Result<A::Output, LimitError>
    where
        Q: Hash + Equivalent<K> + ?Sized,
    {
        self.peek_in(key, || now, cost)
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
        self.peek_in(key, || clock.now(), cost)
    }

    /// [`Limiter::release`](crate::Limiter::release) for `key` (or a key it is
    /// [`Equivalent`] to): gives back up to `units` it holds at `now`, the oldest first; how
    /// many. A key not held gives back nothing.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Keyed, Moment};
    /// use slidewin::limit::Leases;
    ///
    /// let in_flight = Keyed::<String, _>::new(Leases::new(2, Duration::from_secs(30))?);
    /// in_flight.check("alice", Moment::ZERO, 2)?;
    /// assert_eq!(in_flight.release("bob", Moment::ZERO, 1), 0);
    /// assert_eq!(in_flight.release("alice", Moment::ZERO, 1), 1);
    /// assert_eq!(in_flight.check("alice", Moment::ZERO, 1)?.remaining(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release<Q>(&self, key: &Q, now: Moment, units: u64) -> u64
    where
        Q: Hash + Equivalent<K> + ?Sized,
    {
        self.give_back(key, |rules, state| rules.release(state, now, units))
    }

    /// What `give` gives back of `key`'s state, under its shard's lock; 0 for a key not held.
    pub(super) fn give_back<Q>(&self, key: &Q, give: impl FnOnce(&A, &mut A::State) -> u64) -> u64
    where
        Q: Hash + Equivalent<K> + ?Sized,
    {
        let (hash, index) = self.shard(key);
        let Some(cell) = self.cell(index) else {
            return 0;
        };
        let mut shard = lock(cell);
        let Some((_, state)) = shard.states.find_mut(hash, |(k, _)| key.equivalent(k)) else {
            return 0;
        };
        // A release may shrink the state's buffer: on a budget, what it holds is settled.
        let before = self.rules.heap_bytes(state);
        let given = give(&self.rules, state);
        if let Some(budget) = &self.budget {
            budget.settle(before, self.rules.heap_bytes(state));
        }
        given
    }

    /// The peek of `key` at the time `now()` reads, while holding its shard if it has one.
    fn peek_in<Q>(
        &self,
        key: &Q,
        now: impl FnOnce() -> Moment,
        cost: u64,
    ) -> Result<A::Output, LimitError>
    where
        Q: Hash + Equivalent<K> + ?Sized,
    {
        let (hash, index) = self.shard(key);
        let Some(cell) = self.cell(index) else {
            return self.rules.peek(&self.rules.fresh(), now(), cost);
        };
        let shard = lock(cell);
        let now = now();
        match shard.states.find(hash, |(k, _)| key.equivalent(k)) {
            Some((_, state)) => self.rules.peek(state, now, cost),
            None => self.rules.peek(&self.rules.fresh(), now, cost),
        }
    }
}

/// The key `owned` makes, once: a new key's is made to be weighed, or when it is put in.
fn make<K>(owned: &mut Option<impl FnOnce() -> K>) -> K {
    match owned.take() {
        Some(owned) => owned(),
        None => unreachable!("a new key is made once, and kept until it is put in"),
    }
}

/// What a key's check does with its state: a plain check, or a reserve (which also answers
/// the reservation it made). One path finds, makes and weighs the key for both.
pub(super) trait Admit<A: Algorithm>: Copy {
    /// What it answers.
    type Answer;
    /// Decides about `cost` at `now`, and records it on `state` when admitted.
    fn admit(
        self,
        rules: &A,
        state: &mut A::State,
        now: Moment,
        cost: u64,
    ) -> Result<Self::Answer, LimitError>;
    /// The answer for a denial found by a peek (no memory left to record anything in).
    fn denied(output: A::Output) -> Self::Answer;
}

/// [`Keyed::check`]'s way: the algorithm's check.
#[derive(Clone, Copy, Debug)]
pub(super) struct Check;

impl<A: Algorithm> Admit<A> for Check {
    type Answer = A::Output;

    #[inline(always)]
    fn admit(
        self,
        rules: &A,
        state: &mut A::State,
        now: Moment,
        cost: u64,
    ) -> Result<A::Output, LimitError> {
        rules.check(state, now, cost)
    }

    #[inline(always)]
    fn denied(output: A::Output) -> A::Output {
        output
    }
}

/// [`Keyed::reserve`]'s way: the algorithm's reserve.
#[derive(Clone, Copy, Debug)]
pub(super) struct Reserve;

impl<A: Algorithm> Admit<A> for Reserve {
    type Answer = (A::Output, Option<Reservation>);

    #[inline]
    fn admit(
        self,
        rules: &A,
        state: &mut A::State,
        now: Moment,
        estimate: u64,
    ) -> Result<Self::Answer, LimitError> {
        rules.reserve(state, now, estimate)
    }

    fn denied(output: A::Output) -> Self::Answer {
        (output, None)
    }
}

/// [`Keyed::charge`]'s way: the units counted whatever the limit (an unreserved settle), then
/// the key answered as a question of 0 would be.
#[derive(Clone, Copy, Debug)]
pub(super) struct Charge;

impl<A: Algorithm> Admit<A> for Charge {
    type Answer = A::Output;

    #[inline]
    fn admit(
        self,
        rules: &A,
        state: &mut A::State,
        now: Moment,
        units: u64,
    ) -> Result<A::Output, LimitError> {
        rules.settle(state, Reservation::unreserved(now), units);
        rules.peek(state, now, 0)
    }

    fn denied(output: A::Output) -> A::Output {
        output
    }
}
