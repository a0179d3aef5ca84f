//! A key's reserve and settle: a cost estimated before the work, settled after it.

use std::borrow::Borrow;
use std::hash::Hash;

use hashbrown::Equivalent;

use super::Keyed;
use super::check::{Charge, Reserve};
use super::shard::lock;
use crate::limit::algorithm::Algorithm;
use crate::limit::{LimitError, Reservation, SlidingLog};
use crate::time::{Clock, Moment};

impl<K: Hash + Eq, A: Algorithm> Keyed<K, A> {
    /// [`Limiter::reserve`](crate::Limiter::reserve) for `key`: [`check`](Keyed::check)s an
    /// `estimate` and, when admitted, answers the [`Reservation`] that
    /// [`settle`](Keyed::settle) changes to the actual cost. A new key is made, weighed and
    /// capped as a check makes it.
    ///
    /// # Errors
    ///
    /// As [`check`](Keyed::check).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{Keyed, Moment};
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    ///
    /// // An API key's tokens: 10,000 a minute and 100,000 a day.
    /// let tokens = Keyed::<String, _>::new(RuleSet::new([
    ///     Rule::new("minute", Kind::SlidingLog, "10000/minute".parse()?)?,
    ///     Rule::new("day", Kind::SlidingLog, "100000/day".parse()?)?,
    /// ])?);
    /// let (decisions, reserved) = tokens.reserve("key-1", Moment::from_secs(1), 2_000)?;
    /// assert_eq!(decisions.remaining(), 8_000);
    /// // The response used 3,500 tokens.
    /// assert!(tokens.settle("key-1", reserved.unwrap(), 3_500));
    /// assert_eq!(tokens.peek("key-1", Moment::from_secs(2), 0)?.remaining(), 6_500);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn reserve<Q>(
        &self,
        key: &Q,
        now: Moment,
        estimate: u64,
    ) -> Result<(A::Output, Option<Reservation>), LimitError>
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
            || now,
            estimate,
            Reserve,
        )
    }

    /// [`reserve`](Keyed::reserve) at `clock.now()`, read while holding the key's shard, as
    /// [`check_now`](Keyed::check_now) reads it.
    ///
    /// # Errors
    ///
    /// As [`check`](Keyed::check).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{Keyed, Moment};
    /// use slidewin::limit::FixedWindow;
    /// use slidewin::time::ManualClock;
    ///
    /// let clock = ManualClock::new(Moment::from_secs(61));
    /// let tokens = Keyed::<u32, _>::new(FixedWindow::new("1000/minute".parse()?)?);
    /// let (_, reserved) = tokens.reserve_now(&7, &clock, 500)?;
    /// assert_eq!(reserved.unwrap().at(), Moment::from_secs(61));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn reserve_now<Q>(
        &self,
        key: &Q,
        clock: &impl Clock,
        estimate: u64,
    ) -> Result<(A::Output, Option<Reservation>), LimitError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let (hash, index) = self.shard(key);
        let now = || clock.now();
        self.check_in(index, hash, key, || key.to_owned(), now, estimate, Reserve)
    }

    /// [`reserve`](Keyed::reserve) by a key of another type that stands for a `K`, as
    /// [`check_equivalent`](Keyed::check_equivalent) looks one up.
    ///
    /// # Errors
    ///
    /// As [`check`](Keyed::check).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{Keyed, Moment};
    /// use slidewin::limit::SlidingLog;
    ///
    /// let bytes = Keyed::<String, _>::new(SlidingLog::new("1000/s".parse()?)?);
    /// let (_, reserved) = bytes.reserve_equivalent("ann", Moment::ZERO, 300)?;
    /// assert!(bytes.settle("ann", reserved.unwrap(), 200));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn reserve_equivalent<'q, Q>(
        &self,
        key: &'q Q,
        now: Moment,
        estimate: u64,
    ) -> Result<(A::Output, Option<Reservation>), LimitError>
    where
        Q: Hash + Equivalent<K> + ?Sized,
        K: From<&'q Q>,
    {
        let (hash, index) = self.shard(key);
        self.check_in(index, hash, key, || K::from(key), || now, estimate, Reserve)
    }

    /// [`Limiter::settle`](crate::Limiter::settle) for `key` (or a key it is
    /// [`Equivalent`] to): changes the admission `reservation` made to `actual` units, in the
    /// windows it was admitted in; whether anything changed. A key no longer held (gone idle:
    /// every window it was admitted in has passed) changes nothing.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{Keyed, Moment};
    /// use slidewin::limit::SlidingLog;
    ///
    /// let bytes = Keyed::<String, _>::new(SlidingLog::new("1000/s".parse()?)?);
    /// let (_, reserved) = bytes.reserve("alice", Moment::ZERO, 600)?;
    /// let reserved = reserved.unwrap();
    /// assert!(!bytes.settle("bob", reserved, 100)); // not bob's
    /// assert!(bytes.settle("alice", reserved, 100));
    /// assert_eq!(bytes.peek("alice", Moment::ZERO, 0)?.remaining(), 900);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle<Q>(&self, key: &Q, reservation: Reservation, actual: u64) -> bool
    where
        Q: Hash + Equivalent<K> + ?Sized,
    {
        let (hash, index) = self.shard(key);
        let Some(cell) = self.cell(index) else {
            return false;
        };
        let mut shard = lock(cell);
        let Some((_, state)) = shard.states.find_mut(hash, |(k, _)| key.equivalent(k)) else {
            return false;
        };
        // A settle changes units in place, never a buffer's size; on a budget, what the state
        // holds is settled all the same, as a release's is, should that change.
        let before = self.rules.heap_bytes(state);
        let changed = self.rules.settle(state, reservation, actual);
        if let Some(budget) = &self.budget {
            budget.settle(before, self.rules.heap_bytes(state));
        }
        changed
    }

    /// Counts `units` of `key` at `now` whatever the limit: a cost reported after the work
    /// with nothing reserved before it (envoy's `apply_on_stream_done` reports, a bill), a
    /// [`settle`](Keyed::settle) of [`Reservation::unreserved`]. Beyond the limit it is debt,
    /// bounded as a settle's; a new key is made, weighed and capped as a check makes it. It
    /// answers the key after the charge, as a question of 0 would ([`peek`](Keyed::peek)):
    /// denied while in debt.
    ///
    /// # Errors
    ///
    /// [`LimitError::KeysFull`] and [`LimitError::MemoryFull`] as [`check`](Keyed::check)
    /// (then nothing is counted).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{Keyed, Moment};
    /// use slidewin::limit::SlidingLog;
    ///
    /// // A model's tokens, counted once the answer says how many it used.
    /// let tokens = Keyed::<String, _>::new(SlidingLog::new("1000/minute".parse()?)?);
    /// assert_eq!(tokens.charge_equivalent("ann", Moment::from_secs(1), 700)?.remaining(), 300);
    /// let owed = tokens.charge_equivalent("ann", Moment::from_secs(2), 500)?;
    /// assert!(!owed.allowed()); // 200 over: denied until the 700 leave, at 61 s
    /// assert!(tokens.peek("ann", Moment::from_secs(61), 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn charge_equivalent<'q, Q>(
        &self,
        key: &'q Q,
        now: Moment,
        units: u64,
    ) -> Result<A::Output, LimitError>
    where
        Q: Hash + Equivalent<K> + ?Sized,
        K: From<&'q Q>,
    {
        let (hash, index) = self.shard(key);
        self.check_in(index, hash, key, || K::from(key), || now, units, Charge)
    }
}

impl<K: Hash + Eq> Keyed<K, SlidingLog> {
    /// Gives back up to `units` of `key`'s oldest units in the window at `now`, as a rule built
    /// [`with_refunds`](crate::limit::Rule::with_refunds) does in a rule set: a request charged
    /// more than it cost, corrected without naming its admission. How many it gave back; a key
    /// not held gives back nothing. See `with_refunds` for why the oldest are the safe ones.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::limit::SlidingLog;
    /// use slidewin::{Keyed, Moment};
    ///
    /// let tokens = Keyed::<String, _>::new(SlidingLog::new("100/minute".parse()?)?);
    /// tokens.check("ann", Moment::ZERO, 100)?;
    /// assert_eq!(tokens.refund("ann", Moment::from_secs(1), 60), 60);
    /// assert_eq!(tokens.refund("bob", Moment::from_secs(1), 60), 0);
    /// assert_eq!(tokens.peek("ann", Moment::from_secs(1), 0)?.remaining(), 60);
    /// // `release` is a rate's: its admissions stay spent.
    /// assert_eq!(tokens.release("ann", Moment::from_secs(1), 10), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn refund<Q>(&self, key: &Q, now: Moment, units: u64) -> u64
    where
        Q: Hash + Equivalent<K> + ?Sized,
    {
        self.give_back(key, |log, state| log.release_oldest(state, now, units))
    }
}
