//! [`Clock`], where "now" comes from at the convenience level, and the three clocks:
//! [`MonotonicClock`], [`SystemClock`] and [`ManualClock`] (for tests).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use super::{Moment, duration_nanos};

/// A source of [`Moment`]s.
///
/// Structures take time explicitly at their lowest level; a `Clock` supplies it where a
/// convenience wrapper reads "now". Implemented by [`MonotonicClock`], [`SystemClock`],
/// [`ManualClock`], and by references, `Box` and `Arc` of any clock.
///
/// # Example
///
/// ```
/// use slidewin::time::ManualClock;
/// use slidewin::{Clock, Moment};
///
/// fn stamp(clock: &impl Clock) -> Moment {
///     clock.now()
/// }
///
/// let clock = ManualClock::new(Moment::from_secs(7));
/// assert_eq!(stamp(&clock), Moment::from_secs(7));
/// ```
pub trait Clock {
    /// The current moment on this clock's timeline.
    fn now(&self) -> Moment;
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Moment {
        (**self).now()
    }
}

impl<C: Clock + ?Sized> Clock for Box<C> {
    fn now(&self) -> Moment {
        (**self).now()
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Moment {
        (**self).now()
    }
}

/// A clock that never goes back, on [`Instant`].
///
/// Every `MonotonicClock` in a process shares one origin (the first time any of them was read),
/// so their moments compare with each other. Use it for windows and limits inside one process;
/// use [`SystemClock`] when moments must mean the same thing in other processes.
///
/// # Example
///
/// ```
/// use slidewin::time::MonotonicClock;
/// use slidewin::Clock;
///
/// let clock = MonotonicClock;
/// let a = clock.now();
/// let b = MonotonicClock.now();
/// assert!(b >= a);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MonotonicClock;

impl Clock for MonotonicClock {
    fn now(&self) -> Moment {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        let origin = *ORIGIN.get_or_init(Instant::now);
        // A process would have to run for 584 years to saturate.
        Moment(duration_nanos(origin.elapsed()).unwrap_or(u64::MAX))
    }
}

/// Wall-clock time since the Unix epoch, on [`SystemTime`]. It can go back (NTP, an operator).
///
/// Use it where moments cross processes (a shared log, Redis keys with explicit time). A system
/// clock set before 1970 reads as [`Moment::ZERO`].
///
/// # Example
///
/// ```
/// use slidewin::time::SystemClock;
/// use slidewin::{Clock, Moment};
///
/// let now = SystemClock.now();
/// assert!(now > Moment::from_secs(1_600_000_000)); // after September 2020
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Moment {
        Moment::try_from(SystemTime::now()).unwrap_or(Moment::ZERO)
    }
}

/// Unix time that never goes back: the system clock read once, at the first read of any
/// `UnixMonotonicClock` in the process, plus the [`Instant`] time elapsed since.
///
/// Use it where moments must be Unix time (a [`Calendar`](crate::limit::Calendar) quota's
/// windows are dated on that timeline) and a clock stepped back (NTP, an operator) must not
/// move them: the checks see a steady clock, on the calendar's dates. It follows a system clock
/// that changes after its first read only as far as the monotonic clock does, so over a long
/// run it may drift from the wall clock by the machine clock's error (parts per million: about a
/// second in a few weeks), which moves a calendar boundary by as much.
///
/// # Example
///
/// ```
/// use slidewin::time::UnixMonotonicClock;
/// use slidewin::{Clock, Moment};
///
/// let a = UnixMonotonicClock.now();
/// assert!(a > Moment::from_secs(1_600_000_000)); // Unix time: after September 2020
/// assert!(UnixMonotonicClock.now() >= a); // and it never goes back
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnixMonotonicClock;

impl Clock for UnixMonotonicClock {
    fn now(&self) -> Moment {
        static ORIGIN: OnceLock<(Instant, Moment)> = OnceLock::new();
        let (start, unix) = *ORIGIN.get_or_init(|| (Instant::now(), SystemClock.now()));
        let elapsed = duration_nanos(start.elapsed()).unwrap_or(u64::MAX);
        Moment(unix.0.saturating_add(elapsed))
    }
}

/// A clock that moves only when told to: for tests and replays.
///
/// Clones share one time, so a test can keep a handle while the structure under test holds
/// another. It may be [`set`](ManualClock::set) backwards, to test that case.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::time::ManualClock;
/// use slidewin::{Clock, Moment};
///
/// let clock = ManualClock::new(Moment::ZERO);
/// let shared = clock.clone();
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(shared.now(), Moment::from_secs(5));
/// shared.set(Moment::from_secs(1)); // back in time
/// assert_eq!(clock.now(), Moment::from_secs(1));
/// ```
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading `start`.
    ///
    /// ```
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Clock, Moment};
    /// assert_eq!(ManualClock::new(Moment::from_secs(3)).now(), Moment::from_secs(3));
    /// ```
    #[must_use]
    pub fn new(start: Moment) -> ManualClock {
        ManualClock {
            nanos: Arc::new(AtomicU64::new(start.0)),
        }
    }

    /// Moves the clock to `t`, forwards or backwards.
    ///
    /// ```
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Clock, Moment};
    /// let clock = ManualClock::default();
    /// clock.set(Moment::from_millis(250));
    /// assert_eq!(clock.now(), Moment::from_millis(250));
    /// ```
    pub fn set(&self, t: Moment) {
        self.nanos.store(t.0, Ordering::SeqCst);
    }

    /// Moves the clock forward by `d` and returns the new time.
    ///
    /// # Panics
    ///
    /// Past [`Moment::MAX`]; see [`ManualClock::checked_advance`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::time::ManualClock;
    /// use slidewin::Moment;
    /// let clock = ManualClock::default();
    /// assert_eq!(clock.advance(Duration::from_secs(2)), Moment::from_secs(2));
    /// ```
    pub fn advance(&self, d: Duration) -> Moment {
        self.checked_advance(d)
            .unwrap_or_else(|| panic!("ManualClock::advance({d:?}) goes past Moment::MAX"))
    }

    /// Moves the clock forward by `d` and returns the new time, or leaves it and returns `None`
    /// if that would pass [`Moment::MAX`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{Clock, Moment};
    /// let clock = ManualClock::new(Moment::MAX);
    /// assert_eq!(clock.checked_advance(Duration::from_nanos(1)), None);
    /// assert_eq!(clock.now(), Moment::MAX);
    /// ```
    pub fn checked_advance(&self, d: Duration) -> Option<Moment> {
        let step = duration_nanos(d)?;
        self.nanos
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_add(step))
            .ok()
            .map(|old| Moment(old + step))
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Moment {
        Moment(self.nanos.load(Ordering::SeqCst))
    }
}
