//! [`Reservation`]: an estimated cost admitted now, to be settled at its actual cost later.

use crate::limit::algorithm::Algorithm;
use crate::limit::algorithm::sealed::Cell;
use crate::limit::{LimitError, Limiter, SharedLimiter};
use crate::time::{Clock, Moment};

/// An admission of an estimated cost whose actual cost comes later (tokens a model will use,
/// bytes a response will hold): the time it was counted at, and its units. A holder's
/// `reserve` makes one; its `settle` changes the admission's units to the actual cost, in the
/// windows it was admitted in ([`Limiter::reserve`](crate::Limiter::reserve),
/// [`Limiter::settle`](crate::Limiter::settle)).
///
/// It is a plain value: every rule finds its own place from the time (a sliding log its stamp,
/// a window the window holding it, a token bucket needs none), so the same value settles a
/// [`RuleSet`](crate::limit::RuleSet) of any rules, in memory or on Redis, and can travel in a
/// response's extensions or across a network.
///
/// # Example
///
/// ```
/// use slidewin::{Limiter, Moment};
/// use slidewin::limit::{Gcra, Reservation};
///
/// let mut tokens = Limiter::new(Gcra::new("600/minute burst 100".parse()?)?);
/// let (decision, reserved) = tokens.reserve(Moment::from_secs(1), 40)?;
/// assert_eq!(decision.remaining(), 60);
/// assert_eq!(reserved, Some(Reservation::new(Moment::from_secs(1), 40)));
/// assert!(tokens.settle(reserved.unwrap(), 10)); // 30 of the 40 come back
/// assert_eq!(tokens.peek(Moment::from_secs(1), 0)?.remaining(), 90);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reservation {
    at: Moment,
    units: u64,
}

impl Reservation {
    /// The reservation of `units` counted at `at`, as a `reserve` returned it (kept as two
    /// numbers elsewhere: a header, a store's record).
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::limit::Reservation;
    /// let kept = Reservation::new(Moment::from_millis(1_500), 300);
    /// assert_eq!((kept.at(), kept.units()), (Moment::from_millis(1_500), 300));
    /// ```
    #[must_use]
    pub const fn new(at: Moment, units: u64) -> Reservation {
        Reservation { at, units }
    }

    /// Nothing reserved at `at`: a cost known only after the work, with no estimate admitted
    /// before it (a report such as envoy's `apply_on_stream_done` sends). Settled to `actual`,
    /// it counts `actual` at `at` whatever the limit, as an admission there would, beyond the
    /// limit as debt, bounded as every settle's; settled to 0 it changes nothing.
    ///
    /// ```
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::{FixedWindow, Reservation};
    /// let mut tokens = Limiter::new(FixedWindow::new("1000/minute".parse()?)?);
    /// assert!(tokens.settle(Reservation::unreserved(Moment::from_secs(5)), 400));
    /// assert_eq!(tokens.peek(Moment::from_secs(6), 0)?.remaining(), 600);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub const fn unreserved(at: Moment) -> Reservation {
        Reservation { at, units: 0 }
    }

    /// The time it was counted at: the request's, unless the clock went back (then the
    /// newest admission's, or the start of the window counted in, whichever is later).
    ///
    /// ```
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::SlidingLog;
    /// let mut tokens = Limiter::new(SlidingLog::new("1000/minute".parse()?)?);
    /// let (_, reserved) = tokens.reserve(Moment::from_secs(5), 200)?;
    /// assert_eq!(reserved.unwrap().at(), Moment::from_secs(5));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub const fn at(&self) -> Moment {
        self.at
    }

    /// The units it holds: the estimate, until it is settled.
    ///
    /// ```
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::SlidingLog;
    /// let mut tokens = Limiter::new(SlidingLog::new("1000/minute".parse()?)?);
    /// let (_, reserved) = tokens.reserve(Moment::ZERO, 200)?;
    /// assert_eq!(reserved.unwrap().units(), 200);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub const fn units(&self) -> u64 {
        self.units
    }

    /// The same admission once settled at `actual`: what to settle from if the cost changes
    /// again (a stream whose count grows), since a settle reads the units it changes from here.
    ///
    /// ```
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::SlidingLog;
    /// let mut bytes = Limiter::new(SlidingLog::new("100/s".parse()?)?);
    /// let (_, reserved) = bytes.reserve(Moment::ZERO, 10)?;
    /// let reserved = reserved.unwrap();
    /// bytes.settle(reserved, 30);
    /// bytes.settle(reserved.settled(30), 50); // 20 more, not 40
    /// assert_eq!(bytes.peek(Moment::ZERO, 0)?.remaining(), 50);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub const fn settled(self, actual: u64) -> Reservation {
        Reservation {
            units: actual,
            ..self
        }
    }
}

/// Costs known only after the work: an estimate reserved, then settled.
impl<A: Algorithm> Limiter<A> {
    /// [`check`](Limiter::check)s an `estimate` of a cost known only later (tokens a model will
    /// use, bytes a response will hold) and, when admitted, returns its [`Reservation`], for
    /// [`settle`](Limiter::settle) to change to the actual cost. A reservation never settled
    /// keeps its estimate; an estimate of 0 reserves nothing (`None`). A
    /// [`RuleSet`](crate::limit::RuleSet) reserves
    /// on every rule or on none.
    ///
    /// # Errors
    ///
    /// As [`check`](Limiter::check).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::SlidingLog;
    ///
    /// // 1000 tokens a minute: reserve 300, the answer used 450.
    /// let mut tokens = Limiter::new(SlidingLog::new("1000/minute".parse()?)?);
    /// let (decision, reserved) = tokens.reserve(Moment::from_secs(1), 300)?;
    /// assert_eq!(decision.remaining(), 700);
    /// assert!(tokens.settle(reserved.unwrap(), 450));
    /// assert_eq!(tokens.peek(Moment::from_secs(2), 0)?.remaining(), 550);
    ///
    /// // Over-use is debt: 700 more used than reserved leave no room until they leave.
    /// let (_, second) = tokens.reserve(Moment::from_secs(3), 500)?;
    /// tokens.settle(second.unwrap(), 1_200);
    /// let denied = tokens.check(Moment::from_secs(4), 1)?;
    /// assert_eq!(denied.retry_after(), Some(Duration::from_secs(59))); // the 1,200 of 3 s leave at 63 s
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve(
        &mut self,
        now: Moment,
        estimate: u64,
    ) -> Result<(A::Output, Option<Reservation>), LimitError> {
        self.rules.reserve(&mut self.state, now, estimate)
    }

    /// [`reserve`](Limiter::reserve) at `clock.now()`.
    ///
    /// # Errors
    ///
    /// As [`check`](Limiter::check).
    ///
    /// ```
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::SlidingCounter;
    /// use slidewin::time::ManualClock;
    ///
    /// let clock = ManualClock::new(Moment::from_secs(30));
    /// let mut bytes = Limiter::new(SlidingCounter::new("1000/minute".parse()?)?);
    /// let (_, reserved) = bytes.reserve_now(&clock, 200)?;
    /// assert_eq!(reserved.unwrap().at(), Moment::from_secs(30));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_now(
        &mut self,
        clock: &impl Clock,
        estimate: u64,
    ) -> Result<(A::Output, Option<Reservation>), LimitError> {
        self.reserve(clock.now(), estimate)
    }

    /// Changes `reservation`'s cost to `actual`, in place: in the windows it was admitted in,
    /// not the one current now. More than the room left is debt that delays later admissions
    /// (each algorithm's way: see [`Reservation`]); less gives units back. Whether anything
    /// changed: `false` once the reservation's windows have passed.
    ///
    /// Per algorithm: a [`SlidingLog`](crate::limit::SlidingLog) (and
    /// [`Leases`](crate::limit::Leases)) changes the units of the reservation's stamp, its
    /// debt bounded so that the log holds at most twice its limit (then at least one limit's
    /// worth must leave before anything is admitted: more would only be forgotten later, and
    /// Redis keeps a time per unit), and an instant settled to nothing is no admission any more;
    /// [`Gcra`](crate::limit::Gcra) moves its theoretical arrival time by the difference in
    /// emission intervals; [`FixedWindow`](crate::limit::FixedWindow) and
    /// [`SlidingCounter`](crate::limit::SlidingCounter) change the count of the window it was
    /// admitted in while they hold it, never above the limit (the window is then full).
    /// An [`unreserved`](Reservation::unreserved) reservation is a charge: `actual` counted
    /// at its time, whatever the limit, by the same bounds.
    ///
    /// ```
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::SlidingLog;
    ///
    /// let mut bytes = Limiter::new(SlidingLog::new("10000 per 10s".parse()?)?);
    /// let (_, reserved) = bytes.reserve(Moment::from_secs(1), 4_000)?;
    /// assert!(bytes.settle(reserved.unwrap(), 1_500)); // the response was smaller
    /// assert_eq!(bytes.peek(Moment::from_secs(1), 0)?.remaining(), 8_500);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle(&mut self, reservation: Reservation, actual: u64) -> bool {
        self.rules.settle(&mut self.state, reservation, actual)
    }
}

impl<A: Algorithm> SharedLimiter<A> {
    /// [`Limiter::reserve`], under the cell's lock, or as one compare-and-swap for the
    /// one-word algorithms.
    ///
    /// # Errors
    ///
    /// As [`check`](SharedLimiter::check).
    ///
    /// ```
    /// use slidewin::{Moment, SharedLimiter};
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    ///
    /// // Tokens per minute AND per day: a reservation on both, or on neither.
    /// let tokens = SharedLimiter::new(RuleSet::new([
    ///     Rule::new("minute", Kind::SlidingLog, "1000/minute".parse()?)?,
    ///     Rule::new("day", Kind::SlidingLog, "1500/day".parse()?)?,
    /// ])?);
    /// let (decisions, reserved) = tokens.reserve(Moment::from_secs(1), 800)?;
    /// assert_eq!(decisions.remaining(), 200); // the binding rule: the minute's
    /// assert!(tokens.settle(reserved.unwrap(), 1_200)); // debt on both rules
    /// let (denied, none) = tokens.reserve(Moment::from_secs(120), 400)?;
    /// assert_eq!((denied.allowed(), none), (false, None)); // the day has 300 left
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve(
        &self,
        now: Moment,
        estimate: u64,
    ) -> Result<(A::Output, Option<Reservation>), LimitError> {
        self.cell.reserve(&self.rules, || now, estimate)
    }

    /// [`reserve`](SharedLimiter::reserve) at `clock.now()`, read while holding the cell's
    /// lock if it has one.
    ///
    /// # Errors
    ///
    /// As [`check`](SharedLimiter::check).
    ///
    /// ```
    /// use slidewin::{Moment, SharedLimiter};
    /// use slidewin::limit::Gcra;
    /// use slidewin::time::ManualClock;
    ///
    /// let clock = ManualClock::new(Moment::from_secs(1));
    /// let tokens = SharedLimiter::new(Gcra::new("100/s".parse()?)?);
    /// let (_, reserved) = tokens.reserve_now(&clock, 10)?;
    /// assert_eq!(reserved.unwrap().at(), Moment::from_secs(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reserve_now(
        &self,
        clock: &impl Clock,
        estimate: u64,
    ) -> Result<(A::Output, Option<Reservation>), LimitError> {
        self.cell.reserve(&self.rules, || clock.now(), estimate)
    }

    /// [`Limiter::settle`], under the cell's lock, or as one compare-and-swap for the
    /// one-word algorithms.
    ///
    /// ```
    /// use slidewin::{Moment, SharedLimiter};
    /// use slidewin::limit::FixedWindow;
    ///
    /// let bytes = SharedLimiter::new(FixedWindow::new("1000/s".parse()?)?);
    /// let (_, reserved) = bytes.reserve(Moment::ZERO, 600)?;
    /// assert!(bytes.settle(reserved.unwrap(), 100));
    /// assert_eq!(bytes.peek(Moment::ZERO, 0)?.remaining(), 900);
    /// // Its window has ended: nothing to change.
    /// bytes.check(Moment::from_secs(1), 1)?;
    /// assert!(!bytes.settle(reserved.unwrap(), 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle(&self, reservation: Reservation, actual: u64) -> bool {
        self.cell.settle(&self.rules, reservation, actual)
    }
}
