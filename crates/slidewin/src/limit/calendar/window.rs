//! Where a [`CalendarQuota`]'s windows start and end on the Unix timeline: the calendar
//! arithmetic, on jiff, behind [`CalendarQuota::window`].

use jiff::Timestamp;
use jiff::civil::{Date, DateTime};

use super::{CalendarQuota, CalendarUnit};
use crate::period::MonthEnd;
use crate::time::Moment;

/// One window of a [`CalendarQuota`]: `[start, end)` on the Unix timeline, the calendar's
/// day, week, month or year in the quota's zone.
///
/// # Example
///
/// ```
/// use jiff::Timestamp;
/// use jiff::tz::TimeZone;
/// use slidewin::Moment;
/// use slidewin::limit::CalendarQuota;
///
/// let paris: CalendarQuota = "100 per calendar day".parse()?;
/// let paris = paris.in_zone(TimeZone::get("Europe/Paris")?);
/// let now = Moment::try_from("2026-03-29T12:00:00Z".parse::<Timestamp>()?)?;
/// let day = paris.window(now);
/// assert_eq!(Timestamp::from(day.start()).to_string(), "2026-03-28T23:00:00Z");
/// assert_eq!(Timestamp::from(day.end()).to_string(), "2026-03-29T22:00:00Z"); // 23 hours
/// assert!(day.contains(now));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CalendarWindow {
    start: u64,
    end: u64,
}

impl CalendarWindow {
    /// The first instant in the window (the Unix epoch for a window that starts before it).
    ///
    /// ```
    /// use slidewin::Moment;
    /// let q: slidewin::limit::CalendarQuota = "1 per calendar day".parse()?;
    /// assert_eq!(q.window(Moment::from_secs(90_000)).start(), Moment::from_secs(86_400));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn start(&self) -> Moment {
        Moment::from_nanos(self.start)
    }

    /// The first instant after the window: the next window's start. For the window that
    /// holds the end of the timeline (2554), [`Moment::MAX`], which the window then holds too.
    ///
    /// ```
    /// use slidewin::Moment;
    /// let q: slidewin::limit::CalendarQuota = "1 per calendar day".parse()?;
    /// assert_eq!(q.window(Moment::from_secs(90_000)).end(), Moment::from_secs(172_800));
    /// assert_eq!(q.window(Moment::MAX).end(), Moment::MAX);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn end(&self) -> Moment {
        Moment::from_nanos(self.end)
    }

    /// Whether `t` is in the window: `start <= t < end` (and `t` at the end of the timeline,
    /// for the last window).
    ///
    /// ```
    /// use slidewin::Moment;
    /// let q: slidewin::limit::CalendarQuota = "1 per calendar day".parse()?;
    /// let day = q.window(Moment::from_secs(90_000));
    /// assert!(day.contains(Moment::from_secs(86_400)));
    /// assert!(!day.contains(Moment::from_secs(172_800))); // the next day's first instant
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn contains(&self, t: Moment) -> bool {
        let t = t.as_nanos();
        self.start <= t && (t < self.end || self.end == u64::MAX)
    }

    pub(crate) fn start_nanos(&self) -> u64 {
        self.start
    }

    pub(crate) fn end_nanos(&self) -> u64 {
        self.end
    }
}

impl CalendarQuota {
    /// The window that holds `now` (read as Unix time): the one whose start is the latest
    /// not after `now`.
    ///
    /// ```
    /// use jiff::Timestamp;
    /// use jiff::civil::date;
    /// use slidewin::Moment;
    /// use slidewin::limit::CalendarQuota;
    ///
    /// let cycle: CalendarQuota = "1 per calendar month".parse()?;
    /// let cycle = cycle.anchored(date(2026, 1, 31).at(0, 0, 0, 0)); // from the 31st
    /// let feb = cycle.window(Moment::try_from("2026-03-01T00:00:00Z".parse::<Timestamp>()?)?);
    /// // February has no 31st: that month's cycle starts on its last day.
    /// assert_eq!(Timestamp::from(feb.start()).to_string(), "2026-02-28T00:00:00Z");
    /// assert_eq!(Timestamp::from(feb.end()).to_string(), "2026-03-31T00:00:00Z");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn window(&self, now: Moment) -> CalendarWindow {
        let now_nanos = now.as_nanos();
        let civil = self.zone().to_datetime(Timestamp::from(now));
        let mut k = self.index_near(civil);
        // The estimate is off by one at most (a time of day before the anchor's, a zone's
        // shift): walk to the last start not after `now`. Starts never decrease with `k`.
        let mut start = self.start_nanos(k, 0);
        while start > now_nanos {
            k -= 1;
            start = self.start_nanos(k, 0);
        }
        loop {
            let end = self.start_nanos(k + 1, u64::MAX);
            // A window of no length (a day the zone skipped) is walked past; the window
            // that reaches past the timeline's end holds the rest of it.
            if end > now_nanos || end == u64::MAX {
                return CalendarWindow { start, end };
            }
            k += 1;
            start = end;
        }
    }

    /// The index (from the anchor's window, 0) of the window near `civil`, a time in the zone.
    fn index_near(&self, civil: DateTime) -> i64 {
        let anchor = self.anchor();
        let months = |d: DateTime| i64::from(d.year()) * 12 + i64::from(d.month()) - 1;
        match self.unit() {
            CalendarUnit::Day => days_between(anchor.date(), civil.date()),
            CalendarUnit::Week => days_between(anchor.date(), civil.date()).div_euclid(7),
            CalendarUnit::Month => months(civil) - months(anchor),
            CalendarUnit::Year => i64::from(civil.year()) - i64::from(anchor.year()),
        }
    }

    /// The start of window `k` as Unix nanoseconds: clamped to the timeline, `outside` where
    /// the civil start is past jiff's range (years -9999 to 9999).
    fn start_nanos(&self, k: i64, outside: u64) -> u64 {
        let Some(civil) = self.civil_start(k) else {
            return outside;
        };
        // A time the clock skipped or showed twice: RFC 5545's choice (`compatible`).
        match self.zone().to_ambiguous_timestamp(civil).compatible() {
            Ok(ts) => {
                let nanos = ts.as_nanosecond().max(0);
                u64::try_from(nanos).unwrap_or(u64::MAX)
            }
            Err(_) => outside,
        }
    }

    /// The civil datetime window `k` starts at; `None` past jiff's range.
    fn civil_start(&self, k: i64) -> Option<DateTime> {
        let anchor = self.anchor();
        let time = anchor.time();
        let day = match self.unit() {
            CalendarUnit::Day => add_days(anchor.date(), k)?,
            CalendarUnit::Week => add_days(anchor.date(), k.checked_mul(7)?)?,
            CalendarUnit::Month => {
                let month0 = i64::from(anchor.year()) * 12 + i64::from(anchor.month()) - 1;
                let month0 = month0.checked_add(k)?;
                let (year, month) = (month0.div_euclid(12), month0.rem_euclid(12) + 1);
                self.on_day(year, month, anchor.day())?
            }
            CalendarUnit::Year => {
                let year = i64::from(anchor.year()).checked_add(k)?;
                self.on_day(year, i64::from(anchor.month()), anchor.day())?
            }
        };
        Some(day.to_datetime(time))
    }

    /// `day` of the month, or where [`MonthEnd`] puts it when the month is shorter.
    fn on_day(&self, year: i64, month: i64, day: i8) -> Option<Date> {
        let first = Date::new(i16::try_from(year).ok()?, i8::try_from(month).ok()?, 1).ok()?;
        let last = first.days_in_month();
        if day <= last {
            return first.with().day(day).build().ok();
        }
        match self.month_end() {
            MonthEnd::Clamp => Some(first.last_of_month()),
            MonthEnd::Strict => first.last_of_month().tomorrow().ok(),
        }
    }
}

/// Whole days from `from` to `to` (negative when `to` is earlier).
fn days_between(from: Date, to: Date) -> i64 {
    // Civil dates: every day is 86,400 seconds here, whatever a zone does.
    from.duration_until(to).as_secs().div_euclid(86_400)
}

/// `date` plus `days`; `None` past jiff's range.
fn add_days(date: Date, days: i64) -> Option<Date> {
    date.checked_add(jiff::SignedDuration::from_hours(days.checked_mul(24)?))
        .ok()
}
