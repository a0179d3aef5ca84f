//! [`CalendarQuota`] and [`CalendarUnit`]: how many per calendar day, week, month or year, in
//! a time zone, from an anchor.

use std::fmt;

use jiff::civil::{DateTime, Weekday, date};
use jiff::tz::TimeZone;

use crate::error::ConfigError;
use crate::period::MonthEnd;

/// The unit of a [`CalendarQuota`]'s windows: a day, a week, a month or a year of the calendar,
/// in the quota's time zone. Written and read as `day`, `week`, `month` and `year`.
///
/// # Example
///
/// ```
/// use slidewin::limit::CalendarUnit;
///
/// assert_eq!(CalendarUnit::Month.name(), "month");
/// assert_eq!(CalendarUnit::ALL.len(), 4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CalendarUnit {
    /// From one midnight (or the anchor's time of day) to the next: 23, 24 or 25 hours
    /// across daylight-saving changes.
    Day,
    /// Seven calendar days from a week start (Monday by default, as in ISO 8601).
    Week,
    /// From a day of one month to the same day of the next (the 1st by default).
    Month,
    /// From a day of one year to the same day of the next (January 1 by default).
    Year,
}

impl CalendarUnit {
    /// Every unit, shortest first.
    ///
    /// ```
    /// use slidewin::limit::CalendarUnit;
    /// assert_eq!(CalendarUnit::ALL[0], CalendarUnit::Day);
    /// ```
    pub const ALL: [CalendarUnit; 4] = [
        CalendarUnit::Day,
        CalendarUnit::Week,
        CalendarUnit::Month,
        CalendarUnit::Year,
    ];

    /// Its name in a quota's text: `day`, `week`, `month` or `year`.
    ///
    /// ```
    /// assert_eq!(slidewin::limit::CalendarUnit::Year.name(), "year");
    /// ```
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            CalendarUnit::Day => "day",
            CalendarUnit::Week => "week",
            CalendarUnit::Month => "month",
            CalendarUnit::Year => "year",
        }
    }

    /// The longest a window of this unit is in a zone of ordinary rules, in nanoseconds: a day
    /// of 25 hours, a week, month or year holding one. A keyed map sweeps this often, and a
    /// rule reports it as its quota's span.
    pub(crate) const fn longest_nanos(self) -> u64 {
        const HOUR: u64 = 3_600_000_000_000;
        match self {
            CalendarUnit::Day => 25 * HOUR,
            CalendarUnit::Week => (7 * 24 + 1) * HOUR,
            CalendarUnit::Month => (31 * 24 + 1) * HOUR,
            CalendarUnit::Year => (366 * 24 + 1) * HOUR,
        }
    }
}

impl fmt::Display for CalendarUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// At most `limit` units of cost per window of the calendar: per calendar day, week, month or
/// year, in a time zone (UTC unless set), with an optional anchor (a billing cycle from the
/// 15th, a week from Sunday). [`Calendar`](crate::limit::Calendar) enforces it.
///
/// The windows are the calendar's, each `[start, end)` on the Unix timeline: the instant a
/// window starts belongs to it, not to the one before. A window starts at the anchor's time
/// of day, and
///
/// - for a day, every day;
/// - for a week, on the anchor's weekday (Monday, ISO 8601's, by default);
/// - for a month, on the anchor's day of month (the 1st by default);
/// - for a year, on the anchor's month and day (January 1 by default).
///
/// Where that day is missing from a month (a cycle from the 31st in April, from February 29
/// in 2025) the [`MonthEnd`] rule says where the window starts: `Clamp` (the default) on the
/// month's last day, `Strict` on the day after it (the 1st of the next month). Where the
/// start's time of day is missing from the zone's clock (skipped by a daylight-saving change)
/// or there twice, the window starts as RFC 5545 says: a missing time is pushed forward by the
/// gap, a repeated one is its first occurrence. So a calendar day in Paris is 23 hours in late
/// March and 25 in late October, and a day a zone skipped altogether (Samoa's 2011-12-30) is
/// a window of no length, which no instant falls in.
///
/// The core never looks a zone up by name: hand it a [`TimeZone`] (`TimeZone::get` reads
/// jiff's tz database).
///
/// # Text
///
/// [`FromStr`](std::str::FromStr) reads the limit, the unit and a week's start (the zone and
/// the anchor are set in code or in a configuration's fields):
///
/// ```text
/// calendar = ws, count, ( ws, "/", ws | ws1, "per", ws1 ), "calendar", ws1, cunit,
///            [ ws1, "from", ws1, weekday ], ws ;
/// cunit    = "day" | "week" | "month" | "year" ;
/// weekday  = "monday" | "tuesday" | "wednesday" | "thursday" | "friday" | "saturday"
///          | "sunday" ;
/// ```
///
/// with `count` and `ws` as in the [`Quota`](crate::Quota) grammar, letters in any case, and
/// `from` only after `week`. [`Display`](fmt::Display) writes that text, then the anchor and
/// the zone when they are not the defaults (`10000 per calendar month from 2026-01-15T00:00:00
/// in Europe/Paris`), which is for people: the text read back has neither.
///
/// # Example
///
/// ```
/// use jiff::civil::date;
/// use jiff::tz::TimeZone;
/// use slidewin::limit::{CalendarQuota, CalendarUnit};
///
/// let monthly: CalendarQuota = "10000 per calendar month".parse()?;
/// assert_eq!((monthly.limit(), monthly.unit()), (10000, CalendarUnit::Month));
///
/// // A billing cycle from the 15th, in Paris.
/// let billing = monthly
///     .in_zone(TimeZone::get("Europe/Paris")?)
///     .anchored(date(2026, 1, 15).at(0, 0, 0, 0));
/// assert_eq!(
///     billing.to_string(),
///     "10000 per calendar month from 2026-01-15T00:00:00 in Europe/Paris"
/// );
///
/// let weekly: CalendarQuota = "500 per calendar week from sunday".parse()?;
/// assert_eq!(weekly.anchor().weekday(), jiff::civil::Weekday::Sunday);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CalendarQuota {
    limit: u64,
    unit: CalendarUnit,
    zone: TimeZone,
    /// A civil datetime windows align to; any window's start serves.
    anchor: DateTime,
    month_end: MonthEnd,
}

/// A Monday at midnight: the default week's start, and the anchor `week_starts` moves from.
const MONDAY: DateTime = date(1970, 1, 5).at(0, 0, 0, 0);

impl CalendarQuota {
    /// At most `limit` per `unit` of the calendar, in UTC, from the unit's usual start
    /// (midnight, Monday, the 1st, January 1).
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroLimit`].
    ///
    /// ```
    /// use slidewin::limit::{CalendarQuota, CalendarUnit};
    /// let daily = CalendarQuota::new(1000, CalendarUnit::Day)?;
    /// assert_eq!(daily.to_string(), "1000 per calendar day");
    /// assert!(CalendarQuota::new(0, CalendarUnit::Day).is_err());
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    pub fn new(limit: u64, unit: CalendarUnit) -> Result<CalendarQuota, ConfigError> {
        if limit == 0 {
            return Err(ConfigError::ZeroLimit);
        }
        Ok(CalendarQuota {
            limit,
            unit,
            zone: TimeZone::UTC,
            anchor: default_anchor(unit),
            month_end: MonthEnd::Clamp,
        })
    }

    /// The same quota in the time zone `zone`.
    ///
    /// ```
    /// use jiff::tz::TimeZone;
    /// use slidewin::limit::{CalendarQuota, CalendarUnit};
    /// let q = CalendarQuota::new(5, CalendarUnit::Day)?.in_zone(TimeZone::get("Asia/Tokyo")?);
    /// assert_eq!(q.zone().iana_name(), Some("Asia/Tokyo"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn in_zone(self, zone: TimeZone) -> CalendarQuota {
        CalendarQuota { zone, ..self }
    }

    /// The same quota with its windows aligned to `anchor`, a civil datetime in the zone: a
    /// window starts at `anchor`, and every unit before and after it (months on its day of
    /// month, weeks on its weekday, years on its month and day, all at its time of day).
    ///
    /// ```
    /// use jiff::civil::date;
    /// use slidewin::limit::{CalendarQuota, CalendarUnit};
    /// let q = CalendarQuota::new(5, CalendarUnit::Day)?.anchored(date(2026, 1, 1).at(6, 0, 0, 0));
    /// assert_eq!(q.to_string(), "5 per calendar day from 2026-01-01T06:00:00"); // 6 am to 6 am
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn anchored(self, anchor: DateTime) -> CalendarQuota {
        CalendarQuota { anchor, ..self }
    }

    /// The same weekly quota with its weeks starting on `start`, at midnight.
    ///
    /// # Errors
    ///
    /// [`ConfigError::CalendarQuota`] for a unit other than a week.
    ///
    /// ```
    /// use jiff::civil::Weekday;
    /// use slidewin::limit::{CalendarQuota, CalendarUnit};
    /// let q = CalendarQuota::new(5, CalendarUnit::Week)?.week_starts(Weekday::Sunday)?;
    /// assert_eq!(q.to_string(), "5 per calendar week from sunday");
    /// assert!(CalendarQuota::new(5, CalendarUnit::Month)?.week_starts(Weekday::Sunday).is_err());
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    pub fn week_starts(self, start: Weekday) -> Result<CalendarQuota, ConfigError> {
        if self.unit != CalendarUnit::Week {
            return Err(ConfigError::CalendarQuota {
                reason: "a week start applies to a calendar week only",
            });
        }
        let days = i64::from(start.to_monday_zero_offset());
        Ok(self.anchored(MONDAY.saturating_add(jiff::Span::new().days(days))))
    }

    /// The same quota with `month_end` deciding where a window starts in a month that lacks
    /// the anchor's day.
    ///
    /// ```
    /// use jiff::civil::date;
    /// use slidewin::limit::{CalendarQuota, CalendarUnit};
    /// use slidewin::period::MonthEnd;
    /// let q = CalendarQuota::new(5, CalendarUnit::Month)?
    ///     .anchored(date(2026, 1, 31).at(0, 0, 0, 0))
    ///     .with_month_end(MonthEnd::Strict);
    /// assert_eq!(q.month_end(), MonthEnd::Strict);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn with_month_end(self, month_end: MonthEnd) -> CalendarQuota {
        CalendarQuota { month_end, ..self }
    }

    /// The most cost admitted in one window.
    ///
    /// ```
    /// let q: slidewin::limit::CalendarQuota = "7 per calendar year".parse()?;
    /// assert_eq!(q.limit(), 7);
    /// # Ok::<(), slidewin::limit::ParseQuotaError>(())
    /// ```
    #[must_use]
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The same quota with another limit (the windows unchanged).
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroLimit`].
    ///
    /// ```
    /// let q: slidewin::limit::CalendarQuota = "7 per calendar year".parse()?;
    /// assert_eq!(q.with_limit(9)?.to_string(), "9 per calendar year");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_limit(self, limit: u64) -> Result<CalendarQuota, ConfigError> {
        if limit == 0 {
            return Err(ConfigError::ZeroLimit);
        }
        Ok(CalendarQuota { limit, ..self })
    }

    /// The unit of its windows.
    ///
    /// ```
    /// use slidewin::limit::{CalendarQuota, CalendarUnit};
    /// let q: CalendarQuota = "7/calendar week".parse()?;
    /// assert_eq!(q.unit(), CalendarUnit::Week);
    /// # Ok::<(), slidewin::limit::ParseQuotaError>(())
    /// ```
    #[must_use]
    pub fn unit(&self) -> CalendarUnit {
        self.unit
    }

    /// The time zone its calendar is read in.
    ///
    /// ```
    /// let q: slidewin::limit::CalendarQuota = "7 per calendar day".parse()?;
    /// assert_eq!(q.zone(), &jiff::tz::TimeZone::UTC);
    /// # Ok::<(), slidewin::limit::ParseQuotaError>(())
    /// ```
    #[must_use]
    pub fn zone(&self) -> &TimeZone {
        &self.zone
    }

    /// The civil datetime its windows align to (for the defaults, a Monday midnight in 1970,
    /// which is also the start of a day; months and years default to the 1st and January 1).
    ///
    /// ```
    /// use jiff::civil::Weekday;
    /// let q: slidewin::limit::CalendarQuota = "7 per calendar week".parse()?;
    /// assert_eq!(q.anchor().weekday(), Weekday::Monday);
    /// # Ok::<(), slidewin::limit::ParseQuotaError>(())
    /// ```
    #[must_use]
    pub fn anchor(&self) -> DateTime {
        self.anchor
    }

    /// The rule for a month that lacks the anchor's day.
    ///
    /// ```
    /// use slidewin::period::MonthEnd;
    /// let q: slidewin::limit::CalendarQuota = "7 per calendar month".parse()?;
    /// assert_eq!(q.month_end(), MonthEnd::Clamp);
    /// # Ok::<(), slidewin::limit::ParseQuotaError>(())
    /// ```
    #[must_use]
    pub fn month_end(&self) -> MonthEnd {
        self.month_end
    }

    /// Whether `other` has the same windows (its limit may differ).
    pub(crate) fn same_windows(&self, other: &CalendarQuota) -> bool {
        self.unit == other.unit
            && self.zone == other.zone
            && phase(self.unit, self.anchor) == phase(other.unit, other.anchor)
            && self.month_end == other.month_end
    }
}

/// What of an anchor places `unit`'s windows: the time of day, and the weekday (weeks), the
/// day of month (months) or the month and day (years). Two anchors of one phase give the same
/// windows.
fn phase(unit: CalendarUnit, anchor: DateTime) -> (i8, i8, i8, jiff::civil::Time) {
    let (month, day) = (anchor.month(), anchor.day());
    let time = anchor.time();
    match unit {
        CalendarUnit::Day => (0, 0, 0, time),
        CalendarUnit::Week => (0, 0, anchor.weekday().to_monday_one_offset(), time),
        CalendarUnit::Month => (0, day, 0, time),
        CalendarUnit::Year => (month, day, 0, time),
    }
}

/// The usual start of `unit`'s windows: midnight, Monday, the 1st, January 1.
fn default_anchor(unit: CalendarUnit) -> DateTime {
    match unit {
        CalendarUnit::Day | CalendarUnit::Week => MONDAY,
        CalendarUnit::Month | CalendarUnit::Year => date(1970, 1, 1).at(0, 0, 0, 0),
    }
}

/// `10000 per calendar month`, then ` from sunday` for a week from another day than Monday
/// at midnight, or ` from ANCHOR` for another anchor than the default, then ` in ZONE` for
/// another zone than UTC.
impl fmt::Display for CalendarQuota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} per calendar {}", self.limit, self.unit)?;
        let midnight = self.anchor.time() == jiff::civil::Time::midnight();
        if self.unit == CalendarUnit::Week && midnight {
            let day = self.anchor.weekday();
            if day != Weekday::Monday {
                write!(f, " from {}", weekday_name(day))?;
            }
        } else if phase(self.unit, self.anchor) != phase(self.unit, default_anchor(self.unit)) {
            write!(f, " from {}", self.anchor)?;
        }
        if self.zone != TimeZone::UTC {
            match self.zone.iana_name() {
                Some(name) => write!(f, " in {name}")?,
                None => write!(f, " in {:?}", self.zone)?,
            }
        }
        if self.month_end != MonthEnd::Clamp {
            f.write_str(" (strict month ends)")?;
        }
        Ok(())
    }
}

/// The weekday's name in the grammar: `monday` to `sunday`.
pub(crate) fn weekday_name(day: Weekday) -> &'static str {
    match day {
        Weekday::Monday => "monday",
        Weekday::Tuesday => "tuesday",
        Weekday::Wednesday => "wednesday",
        Weekday::Thursday => "thursday",
        Weekday::Friday => "friday",
        Weekday::Saturday => "saturday",
        Weekday::Sunday => "sunday",
    }
}
