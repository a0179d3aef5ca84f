//! [`Limiter`] (one owner) and [`SharedLimiter`] (threads): the holders of one state.

use crate::limit::LimitError;
use crate::limit::algorithm::Algorithm;
use crate::limit::algorithm::sealed::Cell;
use crate::time::{Clock, Moment};

/// A rate limiter with one owner: `check(&mut self, now, cost)`, the fastest holder.
///
/// Give it the [`Algorithm`] to enforce: `Limiter<SlidingLog>` is exact, `Limiter<Gcra>` is
/// a token bucket with a burst, `Limiter<RuleSet>` checks several named rules at once (see the
/// [`limit`](crate::limit) overview). For threads, use [`SharedLimiter`]; for a limiter per
/// client, [`Keyed`](crate::Keyed).
///
/// # Example
///
/// ```
/// use slidewin::{Limiter, Moment};
/// use slidewin::limit::SlidingLog;
///
/// let mut limiter = Limiter::new(SlidingLog::new("3/10s".parse()?)?);
/// let admitted = (0..5).filter(|_| limiter.check(Moment::from_secs(1), 1).unwrap().allowed());
/// assert_eq!(admitted.count(), 3);
/// limiter.reset();
/// assert_eq!(limiter.peek(Moment::from_secs(1), 3)?.remaining(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Limiter<A: Algorithm> {
    pub(super) rules: A,
    pub(super) state: A::State,
}

impl<A: Algorithm> Limiter<A> {
    /// A limiter enforcing `algorithm`, with its full quota available.
    ///
    /// ```
    /// use slidewin::Limiter;
    /// use slidewin::limit::SlidingLog;
    ///
    /// let limiter = Limiter::new(SlidingLog::new("100/minute".parse()?)?);
    /// assert_eq!(limiter.algorithm().quota().limit(), 100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn new(algorithm: A) -> Limiter<A> {
        let state = algorithm.fresh();
        Limiter {
            rules: algorithm,
            state,
        }
    }

    /// The algorithm it enforces, with its quota.
    ///
    /// ```
    /// use slidewin::Limiter;
    /// use slidewin::limit::FixedWindow;
    ///
    /// let limiter = Limiter::new(FixedWindow::new("5/s".parse()?)?);
    /// assert_eq!(limiter.algorithm().quota().to_string(), "5 per 1s");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn algorithm(&self) -> &A {
        &self.rules
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
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::SlidingLog;
    ///
    /// let mut limiter = Limiter::new(SlidingLog::new("1/s".parse()?)?);
    /// assert!(limiter.check(Moment::ZERO, 1)?.allowed());
    /// assert!(!limiter.check(Moment::from_millis(999), 1)?.allowed());
    /// assert!(limiter.check(Moment::from_secs(1), 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check(&mut self, now: Moment, cost: u64) -> Result<A::Output, LimitError> {
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
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::SlidingLog;
    /// use slidewin::time::ManualClock;
    ///
    /// let clock = ManualClock::new(Moment::from_secs(5));
    /// let mut limiter = Limiter::new(SlidingLog::new("1/s".parse()?)?);
    /// assert!(limiter.check_now(&clock, 1)?.allowed());
    /// assert!(!limiter.check_now(&clock, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check_now(&mut self, clock: &impl Clock, cost: u64) -> Result<A::Output, LimitError> {
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
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::Gcra;
    ///
    /// let limiter = Limiter::new(Gcra::new("1/s".parse()?)?);
    /// assert!(limiter.peek(Moment::ZERO, 1)?.allowed());
    /// assert!(limiter.peek(Moment::ZERO, 1)?.allowed()); // nothing was consumed
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn peek(&self, now: Moment, cost: u64) -> Result<A::Output, LimitError> {
        self.rules.peek(&self.state, now, cost)
    }

    /// [`peek`](Limiter::peek) at `clock.now()`.
    ///
    /// # Errors
    ///
    /// As [`check`](Limiter::check).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::Limiter;
    /// use slidewin::limit::Gcra;
    /// use slidewin::time::MonotonicClock;
    ///
    /// let limiter = Limiter::new(Gcra::new("1/s".parse()?)?);
    /// assert_eq!(limiter.peek_now(&MonotonicClock, 1)?.remaining(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn peek_now(&self, clock: &impl Clock, cost: u64) -> Result<A::Output, LimitError> {
        self.peek(clock.now(), cost)
    }

    /// When the full quota is back if nothing more is admitted: from then on the limiter
    /// answers as a new one would. `None` if never (the end of the timeline comes first).
    ///
    /// ```
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::SlidingLog;
    ///
    /// let mut limiter = Limiter::new(SlidingLog::new("2/10s".parse()?)?);
    /// assert_eq!(limiter.idle_at(), Some(Moment::ZERO));
    /// limiter.check(Moment::from_secs(3), 1)?;
    /// assert_eq!(limiter.idle_at(), Some(Moment::from_secs(13))); // when 3 s leaves
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn idle_at(&self) -> Option<Moment> {
        self.rules.idle_at(&self.state)
    }

    /// Gives the full quota back, as if nothing had been admitted.
    ///
    /// ```
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::SlidingCounter;
    ///
    /// let mut limiter = Limiter::new(SlidingCounter::new("1/minute".parse()?)?);
    /// limiter.check(Moment::ZERO, 1)?;
    /// limiter.reset();
    /// assert!(limiter.check(Moment::ZERO, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reset(&mut self) {
        self.state = self.rules.fresh();
    }

    /// Gives back up to `units` held at `now`, the oldest first (a request in flight that
    /// ended); how many it gave back. Only [`Leases`](crate::limit::Leases) hold units that
    /// come back: for a rate, and for units whose leases have ended, it gives back nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::{Leases, SlidingLog};
    ///
    /// let mut in_flight = Limiter::new(Leases::new(1, Duration::from_secs(30))?);
    /// in_flight.check(Moment::ZERO, 1)?;
    /// assert_eq!(in_flight.release(Moment::from_secs(1), 5), 1); // what was held
    /// assert!(in_flight.check(Moment::from_secs(1), 1)?.allowed());
    ///
    /// let mut rate = Limiter::new(SlidingLog::new("1/s".parse()?)?);
    /// rate.check(Moment::ZERO, 1)?;
    /// assert_eq!(rate.release(Moment::ZERO, 1), 0); // spent stays spent
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release(&mut self, now: Moment, units: u64) -> u64 {
        self.rules.release(&mut self.state, now, units)
    }
}

/// A rate limiter shared by threads: `check(&self, now, cost)`, `Send + Sync`.
///
/// Lock-free where the algorithm allows: [`Gcra`](crate::limit::Gcra) and
/// [`FixedWindow`](crate::limit::FixedWindow) keep their state in one word, and a check is a
/// load, the arithmetic and one compare-and-swap; [`SlidingLog`](crate::limit::SlidingLog),
/// [`SlidingCounter`](crate::limit::SlidingCounter) and [`RuleSet`](crate::limit::RuleSet)
/// keep theirs behind a mutex. The algorithm chooses; the API is the same.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use slidewin::{Moment, SharedLimiter};
/// use slidewin::limit::SlidingLog;
///
/// let limiter = Arc::new(SharedLimiter::new(SlidingLog::new("100/s".parse()?)?));
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
    pub(super) rules: A,
    pub(super) cell: A::Cell,
}

impl<A: Algorithm> SharedLimiter<A> {
    /// A shared limiter enforcing `algorithm`, with its full quota available.
    ///
    /// ```
    /// use slidewin::SharedLimiter;
    /// use slidewin::limit::Gcra;
    ///
    /// let limiter = SharedLimiter::new(Gcra::new("10/s burst 3".parse()?)?);
    /// assert_eq!(limiter.algorithm().quota().burst(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn new(algorithm: A) -> SharedLimiter<A> {
        let cell = A::Cell::new(&algorithm, algorithm.fresh());
        SharedLimiter {
            rules: algorithm,
            cell,
        }
    }

    /// The algorithm it enforces, with its quota.
    ///
    /// ```
    /// use slidewin::SharedLimiter;
    /// use slidewin::limit::SlidingLog;
    ///
    /// let limiter = SharedLimiter::new(SlidingLog::new("7/minute".parse()?)?);
    /// assert_eq!(limiter.algorithm().quota().limit(), 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn algorithm(&self) -> &A {
        &self.rules
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
    /// use slidewin::{Moment, SharedLimiter};
    /// use slidewin::limit::FixedWindow;
    ///
    /// let limiter = SharedLimiter::new(FixedWindow::new("2/s".parse()?)?);
    /// assert!(limiter.check(Moment::ZERO, 2)?.allowed());
    /// assert!(!limiter.check(Moment::from_millis(999), 1)?.allowed());
    /// assert!(limiter.check(Moment::from_secs(1), 1)?.allowed()); // a new window
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check(&self, now: Moment, cost: u64) -> Result<A::Output, LimitError> {
        self.cell.check(&self.rules, || now, cost)
    }

    /// [`check`](SharedLimiter::check) at `clock.now()`. Behind a mutex the clock is read
    /// while holding it, so that checks happen in the order of their times: with a clock that
    /// never goes back, the guarantee holds for the times the clock gave.
    ///
    /// # Errors
    ///
    /// As [`check`](SharedLimiter::check).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::SharedLimiter;
    /// use slidewin::limit::SlidingLog;
    /// use slidewin::time::MonotonicClock;
    ///
    /// let limiter = SharedLimiter::new(SlidingLog::new("1/minute".parse()?)?);
    /// assert!(limiter.check_now(&MonotonicClock, 1)?.allowed());
    /// assert!(!limiter.check_now(&MonotonicClock, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn check_now(&self, clock: &impl Clock, cost: u64) -> Result<A::Output, LimitError> {
        self.cell.check(&self.rules, || clock.now(), cost)
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
    /// use slidewin::{Moment, SharedLimiter};
    /// use slidewin::limit::SlidingLog;
    ///
    /// let limiter = SharedLimiter::new(SlidingLog::new("1/s".parse()?)?);
    /// assert!(limiter.peek(Moment::ZERO, 1)?.allowed());
    /// assert!(limiter.check(Moment::ZERO, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn peek(&self, now: Moment, cost: u64) -> Result<A::Output, LimitError> {
        self.cell.peek(&self.rules, || now, cost)
    }

    /// [`peek`](SharedLimiter::peek) at `clock.now()`.
    ///
    /// # Errors
    ///
    /// As [`check`](SharedLimiter::check).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::SharedLimiter;
    /// use slidewin::limit::Gcra;
    /// use slidewin::time::MonotonicClock;
    ///
    /// let limiter = SharedLimiter::new(Gcra::new("1/minute".parse()?)?);
    /// assert!(limiter.peek_now(&MonotonicClock, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn peek_now(&self, clock: &impl Clock, cost: u64) -> Result<A::Output, LimitError> {
        self.cell.peek(&self.rules, || clock.now(), cost)
    }

    /// Gives the full quota back.
    ///
    /// ```
    /// use slidewin::{Moment, SharedLimiter};
    /// use slidewin::limit::Gcra;
    ///
    /// let limiter = SharedLimiter::new(Gcra::new("1/s".parse()?)?);
    /// limiter.check(Moment::ZERO, 1)?;
    /// limiter.reset();
    /// assert!(limiter.check(Moment::ZERO, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reset(&self) {
        self.cell.set(&self.rules, self.rules.fresh());
    }

    /// [`Limiter::release`], under the cell's lock.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Moment, SharedLimiter};
    /// use slidewin::limit::Leases;
    ///
    /// let in_flight = SharedLimiter::new(Leases::new(1, Duration::from_secs(30))?);
    /// in_flight.check(Moment::ZERO, 1)?;
    /// assert_eq!(in_flight.release(Moment::from_secs(1), 1), 1);
    /// assert!(in_flight.check(Moment::from_secs(1), 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release(&self, now: Moment, units: u64) -> u64 {
        self.cell.release(&self.rules, now, units)
    }
}
