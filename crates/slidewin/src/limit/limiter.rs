//! [`Algorithm`], the rules of a limiter apart from its state, and the limiters that hold the
//! state: [`Limiter`] (one owner), [`SharedLimiter`] (threads, behind a lock) and
//! [`AtomicLimiter`] (threads, lock-free, for state that fits one word).

use std::fmt;
use std::sync::{Mutex, PoisonError};

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering};

use crate::limit::{CachePadded, Decision, LimitError, Quota, QuotaError};
use crate::time::{Clock, Moment};

/// The rules of one rate-limiting algorithm for one quota, apart from the state they act on.
///
/// The split lets one set of rules serve one state ([`Limiter`]), a shared state
/// ([`SharedLimiter`], [`AtomicLimiter`]) or a state per key ([`Keyed`](crate::Keyed), where
/// only the small state is stored per key). Implemented by [`SlidingLog`](crate::SlidingLog),
/// [`SlidingCounter`](crate::SlidingCounter), [`FixedWindow`](crate::FixedWindow) and
/// [`Gcra`](crate::Gcra).
///
/// Every implementation takes the time as a parameter and copes with it going backwards
/// without ever admitting more than its guarantee.
///
/// # Example
///
/// ```
/// use slidewin::{Algorithm, Gcra, Moment};
///
/// let rules = Gcra::new("2/s".parse()?)?;
/// let mut state = rules.fresh();
/// assert!(rules.check(&mut state, Moment::ZERO, 2)?.allowed());
/// assert!(!rules.peek(&state, Moment::ZERO, 1)?.allowed());
/// assert!(rules.is_idle(&state, Moment::from_secs(1)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Algorithm: Clone + fmt::Debug + Send + Sync {
    /// What one limiter (or one key) remembers.
    type State: Clone + fmt::Debug + Send;

    /// The rules for `quota`.
    ///
    /// # Errors
    ///
    /// A [`QuotaError`] if the algorithm cannot work with the quota (a burst where it has
    /// none, a rate it cannot represent).
    fn new(quota: Quota) -> Result<Self, QuotaError>;

    /// The quota the rules enforce.
    fn quota(&self) -> Quota;

    /// The state of a limiter with its full quota available.
    fn fresh(&self) -> Self::State;

    /// Decides about `cost` at `now`, and consumes it from `state` when admitted.
    ///
    /// # Errors
    ///
    /// [`LimitError::CostTooHigh`] when `cost` could never be admitted.
    fn check(
        &self,
        state: &mut Self::State,
        now: Moment,
        cost: u64,
    ) -> Result<Decision, LimitError>;

    /// Decides as [`check`](Algorithm::check) would, without consuming anything.
    ///
    /// # Errors
    ///
    /// As [`check`](Algorithm::check).
    fn peek(&self, state: &Self::State, now: Moment, cost: u64) -> Result<Decision, LimitError>;

    /// When `state` is back at the full quota if nothing more is admitted: from then on,
    /// replacing it with [`fresh`](Algorithm::fresh) would change no decision. `None` if
    /// never (the end of the timeline comes first).
    ///
    /// ```
    /// use slidewin::{Algorithm, Moment, SlidingLog};
    /// let rules = SlidingLog::new("2/10s".parse()?)?;
    /// let mut state = rules.fresh();
    /// assert_eq!(rules.idle_at(&state), Some(Moment::ZERO));
    /// rules.check(&mut state, Moment::from_secs(3), 1)?;
    /// assert_eq!(rules.idle_at(&state), Some(Moment::from_secs(13))); // when 3 s leaves
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn idle_at(&self, state: &Self::State) -> Option<Moment>;

    /// Whether `state` is back at the full quota at `now`: at or after
    /// [`idle_at`](Algorithm::idle_at).
    ///
    /// ```
    /// use slidewin::{Algorithm, Gcra, Moment};
    /// let rules = Gcra::new("1/s".parse()?)?;
    /// let mut state = rules.fresh();
    /// rules.check(&mut state, Moment::ZERO, 1)?;
    /// assert!(!rules.is_idle(&state, Moment::from_millis(999)));
    /// assert!(rules.is_idle(&state, Moment::from_secs(1)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    fn is_idle(&self, state: &Self::State, now: Moment) -> bool {
        self.idle_at(state).is_some_and(|at| now >= at)
    }
}

/// An [`Algorithm`] whose whole state fits one `u64`, so that [`AtomicLimiter`] can update it
/// with one compare-and-swap. Implemented by [`Gcra`](crate::Gcra) and
/// [`FixedWindow`](crate::FixedWindow).
///
/// # Example
///
/// ```
/// use slidewin::{Algorithm, AtomicAlgorithm, FixedWindow, Moment};
///
/// let rules = FixedWindow::new("3/s".parse()?)?;
/// let mut state = rules.fresh();
/// rules.check(&mut state, Moment::ZERO, 2)?;
/// assert_eq!(rules.unpack(rules.pack(&state)), state);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait AtomicAlgorithm: Algorithm {
    /// The state as one word.
    fn pack(&self, state: &Self::State) -> u64;
    /// The state back from its word.
    fn unpack(&self, word: u64) -> Self::State;
}

/// A rate limiter with one owner: `check(&mut self, now, cost)`.
///
/// Name the algorithm in the type: `Limiter<SlidingLog>` is exact, `Limiter<Gcra>` is a token
/// bucket with a burst, and so on (see the [`limit`](crate#rate-limits) overview).
///
/// # Example
///
/// ```
/// use slidewin::{Limiter, Moment, SlidingLog};
///
/// let mut limiter = Limiter::<SlidingLog>::new("3/10s".parse()?)?;
/// let admitted = (0..5).filter(|_| limiter.check(Moment::from_secs(1), 1).unwrap().allowed());
/// assert_eq!(admitted.count(), 3);
/// limiter.reset();
/// assert_eq!(limiter.peek(Moment::from_secs(1), 3)?.remaining(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Limiter<A: Algorithm> {
    rules: A,
    state: A::State,
}

impl<A: Algorithm> Limiter<A> {
    /// A limiter for `quota`, with its full quota available.
    ///
    /// # Errors
    ///
    /// A [`QuotaError`] if the algorithm cannot work with the quota.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{Limiter, SlidingLog};
    /// let limiter = Limiter::<SlidingLog>::new("100/minute".parse()?)?;
    /// assert_eq!(limiter.quota().limit(), 100);
    /// assert!(Limiter::<SlidingLog>::new("10/s burst 20".parse()?).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(quota: Quota) -> Result<Limiter<A>, QuotaError> {
        Ok(Limiter::from_rules(A::new(quota)?))
    }

    /// A limiter with these rules, with its full quota available.
    ///
    /// ```
    /// use slidewin::{Algorithm, Gcra, Limiter};
    /// let limiter = Limiter::from_rules(Gcra::new("5/s".parse()?)?);
    /// assert_eq!(limiter.quota().burst(), 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_rules(rules: A) -> Limiter<A> {
        let state = rules.fresh();
        Limiter { rules, state }
    }

    /// The quota it enforces.
    ///
    /// ```
    /// use slidewin::{FixedWindow, Limiter};
    /// let limiter = Limiter::<FixedWindow>::new("5/s".parse()?)?;
    /// assert_eq!(limiter.quota().to_string(), "5 per 1s");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quota(&self) -> Quota {
        self.rules.quota()
    }

    /// Decides about `cost` at `now`, and consumes it when admitted. A denial consumes
    /// nothing.
    ///
    /// # Errors
    ///
    /// [`LimitError::CostTooHigh`] when `cost` could never be admitted.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{Limiter, Moment, SlidingLog};
    /// let mut limiter = Limiter::<SlidingLog>::new("1/s".parse()?)?;
    /// assert!(limiter.check(Moment::ZERO, 1)?.allowed());
    /// assert!(!limiter.check(Moment::from_millis(999), 1)?.allowed());
    /// assert!(limiter.check(Moment::from_secs(1), 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check(&mut self, now: Moment, cost: u64) -> Result<Decision, LimitError> {
        self.rules.check(&mut self.state, now, cost)
    }

    /// [`check`](Limiter::check) at `clock.now()`.
    ///
    /// # Errors
    ///
    /// As [`check`](Limiter::check).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Limiter, Moment, SlidingLog};
    /// let clock = ManualClock::new(Moment::from_secs(5));
    /// let mut limiter = Limiter::<SlidingLog>::new("1/s".parse()?)?;
    /// assert!(limiter.check_now(&clock, 1)?.allowed());
    /// assert!(!limiter.check_now(&clock, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check_now(&mut self, clock: &impl Clock, cost: u64) -> Result<Decision, LimitError> {
        self.check(clock.now(), cost)
    }

    /// Decides as [`check`](Limiter::check) would, without consuming anything.
    ///
    /// # Errors
    ///
    /// As [`check`](Limiter::check).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{Gcra, Limiter, Moment};
    /// let limiter = Limiter::<Gcra>::new("1/s".parse()?)?;
    /// assert!(limiter.peek(Moment::ZERO, 1)?.allowed());
    /// assert!(limiter.peek(Moment::ZERO, 1)?.allowed()); // nothing was consumed
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn peek(&self, now: Moment, cost: u64) -> Result<Decision, LimitError> {
        self.rules.peek(&self.state, now, cost)
    }

    /// Gives the full quota back, as if nothing had been admitted.
    ///
    /// ```
    /// use slidewin::{Limiter, Moment, SlidingCounter};
    /// let mut limiter = Limiter::<SlidingCounter>::new("1/minute".parse()?)?;
    /// limiter.check(Moment::ZERO, 1)?;
    /// limiter.reset();
    /// assert!(limiter.check(Moment::ZERO, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reset(&mut self) {
        self.state = self.rules.fresh();
    }
}

/// A rate limiter shared by threads, `check(&self, now, cost)`, its state behind a mutex. For
/// [`Gcra`](crate::Gcra) and [`FixedWindow`](crate::FixedWindow), [`AtomicLimiter`] needs no
/// lock.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use slidewin::{Moment, SharedLimiter, SlidingLog};
///
/// let limiter = Arc::new(SharedLimiter::<SlidingLog>::new("100/s".parse()?)?);
/// let threads: Vec<_> = (0..4)
///     .map(|_| {
///         let limiter = Arc::clone(&limiter);
///         std::thread::spawn(move || {
///             (0..50).filter(|_| limiter.check(Moment::ZERO, 1).unwrap().allowed()).count()
///         })
///     })
///     .collect();
/// let admitted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
/// assert_eq!(admitted, 100);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SharedLimiter<A: Algorithm> {
    rules: A,
    state: CachePadded<Mutex<A::State>>,
}

impl<A: Algorithm> SharedLimiter<A> {
    /// A shared limiter for `quota`, with its full quota available.
    ///
    /// # Errors
    ///
    /// A [`QuotaError`] if the algorithm cannot work with the quota.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{SharedLimiter, SlidingCounter};
    /// let limiter = SharedLimiter::<SlidingCounter>::new("10/s".parse()?)?;
    /// assert_eq!(limiter.quota().limit(), 10);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(quota: Quota) -> Result<SharedLimiter<A>, QuotaError> {
        let rules = A::new(quota)?;
        let state = CachePadded(Mutex::new(rules.fresh()));
        Ok(SharedLimiter { rules, state })
    }

    /// The quota it enforces.
    ///
    /// ```
    /// use slidewin::{SharedLimiter, SlidingLog};
    /// let limiter = SharedLimiter::<SlidingLog>::new("7/minute".parse()?)?;
    /// assert_eq!(limiter.quota().limit(), 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quota(&self) -> Quota {
        self.rules.quota()
    }

    /// Decides about `cost` at `now`, and consumes it when admitted.
    ///
    /// # Errors
    ///
    /// [`LimitError::CostTooHigh`] when `cost` could never be admitted.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{Moment, SharedLimiter, SlidingLog};
    /// let limiter = SharedLimiter::<SlidingLog>::new("1/s".parse()?)?;
    /// assert!(limiter.check(Moment::ZERO, 1)?.allowed());
    /// assert!(!limiter.check(Moment::ZERO, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check(&self, now: Moment, cost: u64) -> Result<Decision, LimitError> {
        let mut state = self.state.0.lock().unwrap_or_else(PoisonError::into_inner);
        self.rules.check(&mut state, now, cost)
    }

    /// [`check`](SharedLimiter::check) at `clock.now()`, read while holding the lock: the
    /// checks then happen in the order of their times, so with a clock that never goes back
    /// the guarantee holds for the times the clock gave, not only the limiter's own.
    ///
    /// # Errors
    ///
    /// As [`check`](SharedLimiter::check).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::time::MonotonicClock;
    /// use slidewin::{SharedLimiter, SlidingLog};
    /// let limiter = SharedLimiter::<SlidingLog>::new("1/minute".parse()?)?;
    /// assert!(limiter.check_now(&MonotonicClock, 1)?.allowed());
    /// assert!(!limiter.check_now(&MonotonicClock, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check_now(&self, clock: &impl Clock, cost: u64) -> Result<Decision, LimitError> {
        let mut state = self.state.0.lock().unwrap_or_else(PoisonError::into_inner);
        self.rules.check(&mut state, clock.now(), cost)
    }

    /// Decides as [`check`](SharedLimiter::check) would, without consuming anything.
    ///
    /// # Errors
    ///
    /// As [`check`](SharedLimiter::check).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{Moment, SharedLimiter, SlidingLog};
    /// let limiter = SharedLimiter::<SlidingLog>::new("1/s".parse()?)?;
    /// assert!(limiter.peek(Moment::ZERO, 1)?.allowed());
    /// assert!(limiter.check(Moment::ZERO, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn peek(&self, now: Moment, cost: u64) -> Result<Decision, LimitError> {
        let state = self.state.0.lock().unwrap_or_else(PoisonError::into_inner);
        self.rules.peek(&state, now, cost)
    }

    /// Gives the full quota back.
    ///
    /// ```
    /// use slidewin::{Moment, SharedLimiter, SlidingLog};
    /// let limiter = SharedLimiter::<SlidingLog>::new("1/s".parse()?)?;
    /// limiter.check(Moment::ZERO, 1)?;
    /// limiter.reset();
    /// assert!(limiter.check(Moment::ZERO, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reset(&self) {
        // A panic while the lock was held cannot leave a half-updated state: the algorithms
        // compute the new state before writing it. So a poisoned lock is still usable.
        *self.state.0.lock().unwrap_or_else(PoisonError::into_inner) = self.rules.fresh();
    }
}

/// A lock-free rate limiter shared by threads, for algorithms whose state fits one word
/// ([`Gcra`](crate::Gcra), [`FixedWindow`](crate::FixedWindow)): each check is a load, the
/// algorithm's arithmetic, and one compare-and-swap, retried if another thread got there first.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use slidewin::{AtomicLimiter, Gcra, Moment};
///
/// let limiter = Arc::new(AtomicLimiter::<Gcra>::new("10/s".parse()?)?);
/// let threads: Vec<_> = (0..2)
///     .map(|_| {
///         let limiter = Arc::clone(&limiter);
///         std::thread::spawn(move || {
///             (0..20).filter(|_| limiter.check(Moment::ZERO, 1).unwrap().allowed()).count()
///         })
///     })
///     .collect();
/// let admitted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
/// assert_eq!(admitted, 10); // the burst, exactly
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct AtomicLimiter<A: AtomicAlgorithm> {
    rules: A,
    state: CachePadded<AtomicU64>,
}

impl<A: AtomicAlgorithm> AtomicLimiter<A> {
    /// A lock-free limiter for `quota`, with its full quota available.
    ///
    /// # Errors
    ///
    /// A [`QuotaError`] if the algorithm cannot work with the quota.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{AtomicLimiter, FixedWindow};
    /// let limiter = AtomicLimiter::<FixedWindow>::new("100/minute".parse()?)?;
    /// assert_eq!(limiter.quota().limit(), 100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(quota: Quota) -> Result<AtomicLimiter<A>, QuotaError> {
        let rules = A::new(quota)?;
        let state = CachePadded(AtomicU64::new(rules.pack(&rules.fresh())));
        Ok(AtomicLimiter { rules, state })
    }

    /// The quota it enforces.
    ///
    /// ```
    /// use slidewin::{AtomicLimiter, Gcra};
    /// let limiter = AtomicLimiter::<Gcra>::new("10/s burst 3".parse()?)?;
    /// assert_eq!(limiter.quota().burst(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quota(&self) -> Quota {
        self.rules.quota()
    }

    /// Decides about `cost` at `now`, and consumes it when admitted.
    ///
    /// # Errors
    ///
    /// [`LimitError::CostTooHigh`] when `cost` could never be admitted.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{AtomicLimiter, FixedWindow, Moment};
    /// let limiter = AtomicLimiter::<FixedWindow>::new("2/s".parse()?)?;
    /// assert!(limiter.check(Moment::ZERO, 2)?.allowed());
    /// assert!(!limiter.check(Moment::from_millis(999), 1)?.allowed());
    /// assert!(limiter.check(Moment::from_secs(1), 1)?.allowed()); // a new window
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check(&self, now: Moment, cost: u64) -> Result<Decision, LimitError> {
        // Acquire/Release pair the state words: a thread that reads a word sees it whole.
        let mut word = self.state.0.load(Ordering::Acquire);
        loop {
            let mut state = self.rules.unpack(word);
            let decision = self.rules.check(&mut state, now, cost)?;
            if !decision.allowed() {
                return Ok(decision);
            }
            let next = self.rules.pack(&state);
            match self.state.0.compare_exchange_weak(
                word,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(decision),
                Err(current) => word = current,
            }
        }
    }

    /// [`check`](AtomicLimiter::check) at `clock.now()`.
    ///
    /// # Errors
    ///
    /// As [`check`](AtomicLimiter::check).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::time::MonotonicClock;
    /// use slidewin::{AtomicLimiter, Gcra};
    /// let limiter = AtomicLimiter::<Gcra>::new("1/minute".parse()?)?;
    /// assert!(limiter.check_now(&MonotonicClock, 1)?.allowed());
    /// assert!(!limiter.check_now(&MonotonicClock, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check_now(&self, clock: &impl Clock, cost: u64) -> Result<Decision, LimitError> {
        self.check(clock.now(), cost)
    }

    /// Decides as [`check`](AtomicLimiter::check) would, without consuming anything.
    ///
    /// # Errors
    ///
    /// As [`check`](AtomicLimiter::check).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::{AtomicLimiter, Gcra, Moment};
    /// let limiter = AtomicLimiter::<Gcra>::new("1/s".parse()?)?;
    /// assert!(limiter.peek(Moment::ZERO, 1)?.allowed());
    /// assert!(limiter.check(Moment::ZERO, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn peek(&self, now: Moment, cost: u64) -> Result<Decision, LimitError> {
        let state = self.rules.unpack(self.state.0.load(Ordering::Acquire));
        self.rules.peek(&state, now, cost)
    }

    /// Gives the full quota back.
    ///
    /// ```
    /// use slidewin::{AtomicLimiter, Gcra, Moment};
    /// let limiter = AtomicLimiter::<Gcra>::new("1/s".parse()?)?;
    /// limiter.check(Moment::ZERO, 1)?;
    /// limiter.reset();
    /// assert!(limiter.check(Moment::ZERO, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reset(&self) {
        self.state
            .0
            .store(self.rules.pack(&self.rules.fresh()), Ordering::Release);
    }
}
