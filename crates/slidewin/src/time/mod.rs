//! The timeline: [`Moment`], and the clocks that supply it.
//!
//! Every structure of slidewin takes the time as a parameter at its lowest level
//! (`record(t, payload)`, `expire(now, handler)`, `check(now, cost)`), so that tests and
//! replays choose it; a [`Clock`] supplies it where you want "now".
//!
//! | type | pick it for |
//! |---|---|
//! | [`Moment`] | a point on a clock's timeline: whole nanoseconds (a `u64`) since its origin |
//! | [`Clock`] | anything that reads the time; the `_now` methods take a `&impl Clock` |
//! | [`MonotonicClock`] | windows and limits inside one process: it never goes back |
//! | [`SystemClock`] | Unix time, where moments must mean the same in other processes |
//! | [`UnixMonotonicClock`] | Unix time that never goes back: calendar quotas in a service |
//! | [`ManualClock`] | tests and replays: it moves only when told to |
//! | [`TimeRangeError`] | a `Duration`, `SystemTime` or `jiff::Timestamp` off the timeline |
//!
//! # Explicit time, or a clock
//!
//! A method whose name has no suffix takes the time as a parameter (`check(now, cost)`,
//! `record(t, payload)`, `stats(now)`). The same name ending in `_now` reads the time from a
//! clock instead: a `&impl Clock` you pass in memory (`check_now(&clock, cost)`), the Redis
//! server's `TIME` on Redis (`check_now(&rules, key, cost)`). Every method that takes the
//! current time has its `_now` twin; a time that is not "now" (where a window's statistics
//! start counting, an interval's ends, the time a `ManualClock` is set to) has none. In memory an explicit time is on the clock's own timeline (any
//! origin); on Redis it is on the Unix timeline (a `Moment` since 1970-01-01 UTC, taken at its
//! microsecond), because the server's clock is.
//!
//! ```
//! use std::time::Duration;
//! use slidewin::time::{Clock, ManualClock, Moment};
//! use slidewin::EventWindow;
//!
//! let clock = ManualClock::new(Moment::from_secs(100));
//! let mut logins = EventWindow::new(Duration::from_secs(10))?;
//! logins.record(Moment::from_secs(95), "ann"); // an explicit time
//! logins.record_now(&clock, "bob"); // the clock's: 100 s
//! clock.advance(Duration::from_secs(6));
//! assert_eq!(logins.count_in_now(&clock), 1); // (96 s, 106 s] holds bob only
//! assert_eq!(logins.count_in(clock.now()), 1); // the same, read by hand
//! # Ok::<(), slidewin::ConfigError>(())
//! ```
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use slidewin::time::{Clock, ManualClock, Moment};
//!
//! let clock = ManualClock::new(Moment::from_secs(100));
//! let deadline = clock.now() + Duration::from_secs(30);
//! clock.advance(Duration::from_secs(45));
//! assert_eq!(clock.now() - deadline, Duration::from_secs(15));
//!
//! // Unix time converts both ways, through `SystemTime` or `jiff::Timestamp`.
//! let ts: jiff::Timestamp = "2026-11-30T00:00:00Z".parse()?;
//! assert_eq!(Moment::try_from(ts)?, Moment::from_secs(1_795_996_800));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`Moment`] and its conversions are here; the clocks are in `clock`.

mod clock;

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use clock::{Clock, ManualClock, MonotonicClock, SystemClock, UnixMonotonicClock};

const NANOS_PER_SEC: u64 = 1_000_000_000;
const NANOS_PER_MILLI: u64 = 1_000_000;

/// A point on a clock's timeline: whole nanoseconds since the clock's origin.
///
/// A `u64` so that atomics and Redis can hold it; it spans 584 years from its origin. Moments are
/// comparable only when they come from the same timeline: [`SystemClock`] and the conversions
/// from [`SystemTime`] and [`jiff::Timestamp`] count from the Unix epoch; [`MonotonicClock`]
/// counts from the first time any `MonotonicClock` was read in this process; a [`ManualClock`]
/// counts from wherever the test puts it.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::Moment;
///
/// let t = Moment::from_secs(10);
/// assert_eq!(t + Duration::from_millis(500), Moment::from_millis(10_500));
/// assert_eq!(t.checked_sub(Duration::from_secs(11)), None);
/// assert_eq!(t.to_string(), "10s");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Moment(u64);

impl Moment {
    /// The origin of the timeline.
    pub const ZERO: Moment = Moment(0);
    /// The last representable moment, 584 years after the origin.
    pub const MAX: Moment = Moment(u64::MAX);

    /// The moment `nanos` nanoseconds after the origin.
    ///
    /// ```
    /// assert_eq!(slidewin::Moment::from_nanos(1_500).as_nanos(), 1_500);
    /// ```
    #[must_use]
    pub const fn from_nanos(nanos: u64) -> Moment {
        Moment(nanos)
    }

    /// The moment `millis` milliseconds after the origin.
    ///
    /// # Panics
    ///
    /// If `millis` is beyond [`Moment::MAX`] (more than 584 years). Use
    /// [`Moment::try_from`]`(Duration)` to get an error instead.
    ///
    /// ```
    /// assert_eq!(slidewin::Moment::from_millis(3).as_nanos(), 3_000_000);
    /// ```
    #[must_use]
    pub const fn from_millis(millis: u64) -> Moment {
        match millis.checked_mul(NANOS_PER_MILLI) {
            Some(nanos) => Moment(nanos),
            None => panic!("Moment::from_millis: more than 584 years of milliseconds"),
        }
    }

    /// The moment `secs` seconds after the origin.
    ///
    /// # Panics
    ///
    /// If `secs` is beyond [`Moment::MAX`] (more than 584 years). Use
    /// [`Moment::try_from`]`(Duration)` to get an error instead.
    ///
    /// ```
    /// assert_eq!(slidewin::Moment::from_secs(2).as_nanos(), 2_000_000_000);
    /// ```
    #[must_use]
    pub const fn from_secs(secs: u64) -> Moment {
        match secs.checked_mul(NANOS_PER_SEC) {
            Some(nanos) => Moment(nanos),
            None => panic!("Moment::from_secs: more than 584 years of seconds"),
        }
    }

    /// Nanoseconds since the origin.
    ///
    /// ```
    /// assert_eq!(slidewin::Moment::from_secs(1).as_nanos(), 1_000_000_000);
    /// ```
    #[must_use]
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time since the origin.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(slidewin::Moment::from_millis(1_500).since_origin(), Duration::from_millis(1_500));
    /// ```
    #[must_use]
    pub const fn since_origin(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// Seconds since the origin, as a float (for display and rates).
    ///
    /// ```
    /// assert_eq!(slidewin::Moment::from_millis(2_500).as_secs_f64(), 2.5);
    /// ```
    #[must_use]
    pub fn as_secs_f64(self) -> f64 {
        self.since_origin().as_secs_f64()
    }

    /// `self + d`, or `None` past [`Moment::MAX`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// assert_eq!(Moment::from_secs(1).checked_add(Duration::from_secs(1)), Some(Moment::from_secs(2)));
    /// assert_eq!(Moment::MAX.checked_add(Duration::from_nanos(1)), None);
    /// ```
    #[must_use]
    pub fn checked_add(self, d: Duration) -> Option<Moment> {
        let nanos = duration_nanos(d)?;
        self.0.checked_add(nanos).map(Moment)
    }

    /// `self - d`, or `None` before the origin.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// assert_eq!(Moment::from_secs(3).checked_sub(Duration::from_secs(1)), Some(Moment::from_secs(2)));
    /// assert_eq!(Moment::from_secs(3).checked_sub(Duration::from_secs(4)), None);
    /// ```
    #[must_use]
    pub fn checked_sub(self, d: Duration) -> Option<Moment> {
        let nanos = duration_nanos(d)?;
        self.0.checked_sub(nanos).map(Moment)
    }

    /// The time from `earlier` to `self`, or `None` if `earlier` is later than `self`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// let (a, b) = (Moment::from_secs(1), Moment::from_secs(3));
    /// assert_eq!(b.checked_duration_since(a), Some(Duration::from_secs(2)));
    /// assert_eq!(a.checked_duration_since(b), None);
    /// ```
    #[must_use]
    pub const fn checked_duration_since(self, earlier: Moment) -> Option<Duration> {
        match self.0.checked_sub(earlier.0) {
            Some(nanos) => Some(Duration::from_nanos(nanos)),
            None => None,
        }
    }

    /// The time from `earlier` to `self`, or zero if `earlier` is later than `self` (as
    /// [`Instant::saturating_duration_since`](std::time::Instant::saturating_duration_since)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// let (a, b) = (Moment::from_secs(1), Moment::from_secs(3));
    /// assert_eq!(b.saturating_duration_since(a), Duration::from_secs(2));
    /// assert_eq!(a.saturating_duration_since(b), Duration::ZERO);
    /// ```
    #[must_use]
    pub const fn saturating_duration_since(self, earlier: Moment) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

/// A duration in whole nanoseconds, if it fits a `u64` (584 years).
pub(crate) fn duration_nanos(d: Duration) -> Option<u64> {
    u64::try_from(d.as_nanos()).ok()
}

impl fmt::Debug for Moment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Moment({:?})", self.since_origin())
    }
}

/// Shows the time since the origin, as [`Duration`]'s `Debug` does: `1.5s`, `250ms`.
impl fmt::Display for Moment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.since_origin(), f)
    }
}

/// `Moment + Duration`.
///
/// # Panics
///
/// Past [`Moment::MAX`], as `Instant + Duration` does; see [`Moment::checked_add`].
impl Add<Duration> for Moment {
    type Output = Moment;

    fn add(self, d: Duration) -> Moment {
        self.checked_add(d)
            .unwrap_or_else(|| panic!("{self:?} + {d:?} is past Moment::MAX"))
    }
}

impl AddAssign<Duration> for Moment {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

/// `Moment - Duration`.
///
/// # Panics
///
/// Before the origin, as `Instant - Duration` does; see [`Moment::checked_sub`].
impl Sub<Duration> for Moment {
    type Output = Moment;

    fn sub(self, d: Duration) -> Moment {
        self.checked_sub(d)
            .unwrap_or_else(|| panic!("{self:?} - {d:?} is before the origin"))
    }
}

impl SubAssign<Duration> for Moment {
    fn sub_assign(&mut self, d: Duration) {
        *self = *self - d;
    }
}

/// `later - earlier`, saturating at zero as `Instant - Instant` does; see
/// [`Moment::checked_duration_since`].
impl Sub<Moment> for Moment {
    type Output = Duration;

    fn sub(self, earlier: Moment) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

/// A moment `d` after the origin; an error past [`Moment::MAX`].
///
/// ```
/// use std::time::Duration;
/// use slidewin::Moment;
/// assert_eq!(Moment::try_from(Duration::from_secs(5)), Ok(Moment::from_secs(5)));
/// assert!(Moment::try_from(Duration::MAX).is_err());
/// ```
impl TryFrom<Duration> for Moment {
    type Error = TimeRangeError;

    fn try_from(d: Duration) -> Result<Moment, TimeRangeError> {
        duration_nanos(d)
            .map(Moment)
            .ok_or_else(|| TimeRangeError::new(format!("{d:?} after the origin")))
    }
}

/// The Unix time of `t`; an error before 1970 or after 2554.
///
/// ```
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
/// use slidewin::Moment;
/// let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
/// assert_eq!(Moment::try_from(t), Ok(Moment::from_secs(1_700_000_000)));
/// assert!(Moment::try_from(UNIX_EPOCH - Duration::from_secs(1)).is_err());
/// ```
impl TryFrom<SystemTime> for Moment {
    type Error = TimeRangeError;

    fn try_from(t: SystemTime) -> Result<Moment, TimeRangeError> {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => duration_nanos(d)
                .map(Moment)
                .ok_or_else(|| TimeRangeError::new(format!("{t:?} (after 2554)"))),
            Err(_) => Err(TimeRangeError::new(format!("{t:?} (before 1970)"))),
        }
    }
}

/// The Unix time of `ts`; an error before 1970 or after 2554.
///
/// ```
/// use slidewin::Moment;
/// let ts: jiff::Timestamp = "2026-11-30T00:00:00Z".parse()?;
/// let m = Moment::try_from(ts)?;
/// assert_eq!(m, Moment::from_secs(1_795_996_800));
/// assert_eq!(jiff::Timestamp::from(m), ts);
/// assert!(Moment::try_from("1969-12-31T23:59:59Z".parse::<jiff::Timestamp>()?).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl TryFrom<jiff::Timestamp> for Moment {
    type Error = TimeRangeError;

    fn try_from(ts: jiff::Timestamp) -> Result<Moment, TimeRangeError> {
        u64::try_from(ts.as_nanosecond())
            .map(Moment)
            .map_err(|_| TimeRangeError::new(ts.to_string()))
    }
}

/// The timestamp of a moment read as Unix time (as [`SystemClock`] gives).
impl From<Moment> for jiff::Timestamp {
    fn from(m: Moment) -> jiff::Timestamp {
        // 2554 is well inside jiff's range (years -9999 to 9999), so this cannot fail.
        jiff::Timestamp::from_nanosecond(i128::from(m.0))
            .expect("every Moment is within jiff's range")
    }
}

/// A time could not be placed on the [`Moment`] timeline, which runs from its origin (the Unix
/// epoch, for conversions) for 584 years.
///
/// # Example
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use slidewin::Moment;
///
/// let err = Moment::try_from(UNIX_EPOCH - Duration::from_secs(1)).unwrap_err();
/// assert!(err.to_string().contains("before 1970"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeRangeError {
    value: String,
}

impl TimeRangeError {
    pub(crate) fn new(value: String) -> TimeRangeError {
        TimeRangeError { value }
    }
}

impl fmt::Display for TimeRangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is outside the Moment timeline (0 to u64::MAX nanoseconds from its origin)",
            self.value
        )
    }
}

impl std::error::Error for TimeRangeError {}

#[cfg(test)]
mod tests;
