//! Calendar periods: years, months, days (and time) between two dates or datetimes, on jiff.
//!
//! A [`Period`] counts months in the calendar, never as 30 days, and days as the calendar's
//! days, so a day across a daylight-saving change is one day. Where the start's day of month
//! is missing from the end's month (the 31st, February 29), [`MonthEnd`] says how to count:
//! `Clamp` (the default: what people mean by "a month after January 31") or `Strict` (jiff's
//! and Temporal's). For elapsed time on a timeline, use an [`Interval`](crate::Interval) of
//! [`Moment`](crate::Moment)s or [`jiff::Timestamp`]s instead.
//!
//! | type | pick it for |
//! |---|---|
//! | [`Period`] | the distance, its fields, and its text (`"26 years 5 months 13 days"`) |
//! | [`MonthEnd`] | the month-end convention: `Clamp` or `Strict` |
//! | [`Labels`] | the unit names of the text, for another language |
//! | [`PeriodError`] | two time zones, or a date out of jiff's range |
//!
//! # Example
//!
//! ```
//! use jiff::civil::date;
//! use slidewin::Period;
//! use slidewin::period::MonthEnd;
//!
//! let p = Period::between_dates(date(2000, 5, 15), date(2026, 10, 28), MonthEnd::Clamp)?;
//! assert_eq!(p.to_string(), "26 years 5 months 13 days"); // 30-day months say 26y 10m 2d
//! assert_eq!(p.humanize(2), "26 years 5 months");
//!
//! let (leap, after) = (date(2024, 2, 29), date(2025, 2, 28));
//! assert_eq!(Period::between_dates(leap, after, MonthEnd::Clamp)?.to_string(), "1 year");
//! assert_eq!(Period::between_dates(leap, after, MonthEnd::Strict)?.to_string(), "11 months 30 days");
//! # Ok::<(), slidewin::period::PeriodError>(())
//! ```
//!
//! The types are here; the calendar arithmetic behind the constructors is in `measure`, and
//! the text of `humanize` in `humanize`.

mod humanize;
mod measure;

pub use humanize::Labels;

use std::fmt;

use jiff::civil::{Date, DateTime};
use jiff::{Span, ZonedDateTime};

use measure::measure;

/// How a month is counted when the start's day of month does not exist in the end's month
/// (the 31st against a 30-day month, February 29 against a common year).
///
/// The world disagrees, so the choice is explicit:
///
/// | from → to | [`Clamp`](MonthEnd::Clamp) | [`Strict`](MonthEnd::Strict) |
/// |---|---|---|
/// | 2024-02-29 → 2025-02-28 | 1 year | 11 months 30 days |
/// | 2026-01-31 → 2026-02-28 | 1 month | 28 days |
/// | 2026-01-31 → 2026-03-01 | 1 month 1 day | 1 month 1 day |
/// | 2000-05-15 → 2026-10-28 | 26 years 5 months 13 days | the same |
///
/// They differ only when the start's day is past the end of the end's month (29–31).
///
/// # Example
///
/// ```
/// use jiff::civil::date;
/// use slidewin::period::MonthEnd;
/// use slidewin::Period;
///
/// let (leap, after) = (date(2024, 2, 29), date(2025, 2, 28));
/// assert_eq!(Period::between_dates(leap, after, MonthEnd::Clamp)?.to_string(), "1 year");
/// assert_eq!(
///     Period::between_dates(leap, after, MonthEnd::Strict)?.to_string(),
///     "11 months 30 days",
/// );
/// # Ok::<(), slidewin::period::PeriodError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MonthEnd {
    /// A month is whole when `start + n months`, with the day clamped to the last day of the
    /// target month, is not after `end`. January 31 → February 28 is one month, and
    /// 2024-02-29 → 2025-02-28 is one year. Facebook's rule (and Luxon's): what people mean
    /// by "one month after January 31" and by a leap-day birthday.
    #[default]
    Clamp,
    /// The day of month must be reached: January 31 → February 28 is 28 days, and
    /// 2024-02-29 → 2025-02-28 is 11 months 30 days. Temporal's and jiff's rule; the period is
    /// exactly jiff's `start.until((Unit::Year, end))`.
    Strict,
}

/// The calendar distance between two dates, two civil datetimes or two zoned datetimes in the
/// same time zone: years, months, days, and for datetimes hours, minutes, seconds and
/// nanoseconds.
///
/// Months are counted in the calendar, never as 30 days: 2000-05-15 → 2026-10-28 is 26 years
/// 5 months 13 days (counting 30-day months gives 26 years 10 months 2 days). Months are always
/// added to the start in one step (January 31 + 2 months is March 31, while + 1 month + 1
/// month is March 28). Days are calendar days: across a daylight-saving change a day may be 23
/// or 25 hours, and the period still says 1 day (elapsed time is never divided by 86,400
/// seconds). [`MonthEnd`] chooses how a missing day of month counts.
///
/// # Sign
///
/// All fields share one sign, and a zero period has none: it is never negative and never
/// reads `-0` (half a second back is `-0.5 seconds`). When `end` is before `start` the
/// period is the negation of `period(end, start)`, under both conventions, so
/// `period(a, b) == -period(b, a)` always and a "3 years ago" reads the same as a "3 years
/// until". (Counting backwards from the start would not be symmetric under
/// [`MonthEnd::Clamp`]: from 2025-02-28 back to 2024-02-29 is 11 months 28 days, not the 1
/// year that the forward count gives. jiff's own `until` counts backwards for negative spans,
/// so [`MonthEnd::Strict`] equals jiff's `until` only when `start <= end`.)
///
/// For `start <= end`, the fields add back up under both conventions: `start` plus the
/// months (`years * 12 + months`, in one step), then the days, then the time, is `end`.
///
/// # Example
///
/// ```
/// use jiff::civil::date;
/// use slidewin::period::MonthEnd;
/// use slidewin::Period;
///
/// let p = Period::between_dates(date(2000, 5, 15), date(2026, 10, 28), MonthEnd::Clamp)?;
/// assert_eq!((p.years(), p.months(), p.days()), (26, 5, 13));
/// assert_eq!(p.to_string(), "26 years 5 months 13 days");
/// assert_eq!(p.humanize(2), "26 years 5 months");
///
/// let back = Period::between_dates(date(2026, 10, 28), date(2000, 5, 15), MonthEnd::Clamp)?;
/// assert_eq!(back, -p);
/// assert_eq!(back.to_string(), "-26 years 5 months 13 days");
/// # Ok::<(), slidewin::period::PeriodError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Period {
    years: i64,
    months: i64,
    days: i64,
    hours: i64,
    minutes: i64,
    seconds: i64,
    nanoseconds: i64,
    /// Measured between datetimes: a zero period reads "0 seconds", not "0 days".
    has_time: bool,
}

impl Period {
    /// The period from `start` to `end`, two dates.
    ///
    /// ```
    /// use jiff::civil::date;
    /// use slidewin::period::MonthEnd;
    /// use slidewin::Period;
    ///
    /// let p = Period::between_dates(date(2026, 1, 31), date(2026, 3, 1), MonthEnd::Clamp)?;
    /// assert_eq!(p.to_string(), "1 month 1 day");
    /// # Ok::<(), slidewin::period::PeriodError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// Only when an intermediate date falls outside jiff's range (years -9999 to 9999).
    pub fn between_dates(
        start: Date,
        end: Date,
        month_end: MonthEnd,
    ) -> Result<Period, PeriodError> {
        measure(&start, &end, month_end)
    }

    /// The period from `start` to `end`, two civil datetimes (no time zone: every day is 24
    /// hours).
    ///
    /// ```
    /// use jiff::civil::date;
    /// use slidewin::period::MonthEnd;
    /// use slidewin::Period;
    ///
    /// let start = date(2026, 1, 31).at(22, 0, 0, 0);
    /// let end = date(2026, 3, 1).at(6, 30, 0, 0);
    /// let p = Period::between_datetimes(start, end, MonthEnd::Clamp)?;
    /// assert_eq!(p.to_string(), "1 month 8 hours 30 minutes");
    /// # Ok::<(), slidewin::period::PeriodError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// Only when an intermediate datetime falls outside jiff's range.
    pub fn between_datetimes(
        start: DateTime,
        end: DateTime,
        month_end: MonthEnd,
    ) -> Result<Period, PeriodError> {
        measure(&start, &end, month_end)
    }

    /// The period from `start` to `end`, two zoned datetimes in the same time zone. Days are
    /// that zone's calendar days, so a day across a daylight-saving change counts as one day.
    ///
    /// ```
    /// use slidewin::period::MonthEnd;
    /// use slidewin::Period;
    ///
    /// // New York springs forward on 2024-03-10: this day is 23 hours long.
    /// let start: jiff::ZonedDateTime = "2024-03-09T21:00[America/New_York]".parse()?;
    /// let end: jiff::ZonedDateTime = "2024-03-10T21:00[America/New_York]".parse()?;
    /// assert_eq!(Period::between_zoned(&start, &end, MonthEnd::Clamp)?.to_string(), "1 day");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`PeriodError::DifferentTimeZones`] when the two are in different time zones (convert
    /// one with [`ZonedDateTime::with_time_zone`] first: which zone's calendar counts is the
    /// caller's choice), and [`PeriodError::OutOfRange`] when an intermediate datetime falls
    /// outside jiff's range.
    pub fn between_zoned(
        start: &ZonedDateTime,
        end: &ZonedDateTime,
        month_end: MonthEnd,
    ) -> Result<Period, PeriodError> {
        let different = || PeriodError::DifferentTimeZones {
            start: start.to_string(),
            end: end.to_string(),
        };
        let (a, b) = (start.time_zone(), end.time_zone());
        // The same IANA name is the common case and cheap to see; jiff's full comparison
        // (which also resolves aliases such as US/Eastern) costs about as much as the
        // measurement itself, so it runs only when the names differ or a measurement fails.
        let same_name = a.iana_name().is_some() && a.iana_name() == b.iana_name();
        if !same_name && a != b {
            return Err(different());
        }
        measure(start, end, month_end).map_err(|e| if a == b { e } else { different() })
    }

    /// Whole years.
    ///
    /// ```
    /// # use jiff::civil::date; use slidewin::period::MonthEnd; use slidewin::Period;
    /// let p = Period::between_dates(date(2024, 2, 29), date(2025, 2, 28), MonthEnd::Clamp)?;
    /// assert_eq!(p.years(), 1);
    /// # Ok::<(), slidewin::period::PeriodError>(())
    /// ```
    #[must_use]
    pub fn years(&self) -> i64 {
        self.years
    }

    /// Whole months after the years, -11 to 11.
    ///
    /// ```
    /// # use jiff::civil::date; use slidewin::period::MonthEnd; use slidewin::Period;
    /// let p = Period::between_dates(date(2024, 2, 29), date(2025, 2, 28), MonthEnd::Strict)?;
    /// assert_eq!(p.months(), 11);
    /// # Ok::<(), slidewin::period::PeriodError>(())
    /// ```
    #[must_use]
    pub fn months(&self) -> i64 {
        self.months
    }

    /// Calendar days after the months.
    ///
    /// ```
    /// # use jiff::civil::date; use slidewin::period::MonthEnd; use slidewin::Period;
    /// let p = Period::between_dates(date(2024, 2, 29), date(2025, 2, 28), MonthEnd::Strict)?;
    /// assert_eq!(p.days(), 30);
    /// # Ok::<(), slidewin::period::PeriodError>(())
    /// ```
    #[must_use]
    pub fn days(&self) -> i64 {
        self.days
    }

    /// Hours after the days (0 between dates). Usually below 24; up to 24 on a day that a
    /// daylight-saving change makes 25 hours long.
    ///
    /// ```
    /// # use jiff::civil::date; use slidewin::period::MonthEnd; use slidewin::Period;
    /// let p = Period::between_datetimes(date(2026, 1, 1).at(0, 0, 0, 0), date(2026, 1, 1).at(5, 0, 0, 0), MonthEnd::Clamp)?;
    /// assert_eq!(p.hours(), 5);
    /// # Ok::<(), slidewin::period::PeriodError>(())
    /// ```
    #[must_use]
    pub fn hours(&self) -> i64 {
        self.hours
    }

    /// Minutes after the hours.
    ///
    /// ```
    /// # use jiff::civil::date; use slidewin::period::MonthEnd; use slidewin::Period;
    /// let p = Period::between_datetimes(date(2026, 1, 1).at(0, 0, 0, 0), date(2026, 1, 1).at(0, 7, 0, 0), MonthEnd::Clamp)?;
    /// assert_eq!(p.minutes(), 7);
    /// # Ok::<(), slidewin::period::PeriodError>(())
    /// ```
    #[must_use]
    pub fn minutes(&self) -> i64 {
        self.minutes
    }

    /// Seconds after the minutes.
    ///
    /// ```
    /// # use jiff::civil::date; use slidewin::period::MonthEnd; use slidewin::Period;
    /// let p = Period::between_datetimes(date(2026, 1, 1).at(0, 0, 0, 0), date(2026, 1, 1).at(0, 0, 9, 0), MonthEnd::Clamp)?;
    /// assert_eq!(p.seconds(), 9);
    /// # Ok::<(), slidewin::period::PeriodError>(())
    /// ```
    #[must_use]
    pub fn seconds(&self) -> i64 {
        self.seconds
    }

    /// Nanoseconds after the seconds, below one second: [`humanize`](Period::humanize) writes
    /// them as the seconds' decimal fraction.
    ///
    /// ```
    /// # use jiff::civil::date; use slidewin::period::MonthEnd; use slidewin::Period;
    /// let p = Period::between_datetimes(date(2026, 1, 1).at(0, 0, 0, 0), date(2026, 1, 1).at(0, 0, 0, 500), MonthEnd::Clamp)?;
    /// assert_eq!(p.nanoseconds(), 500);
    /// # Ok::<(), slidewin::period::PeriodError>(())
    /// ```
    #[must_use]
    pub fn nanoseconds(&self) -> i64 {
        self.nanoseconds
    }

    /// `years * 12 + months`: the months added to the start in one step.
    ///
    /// ```
    /// # use jiff::civil::date; use slidewin::period::MonthEnd; use slidewin::Period;
    /// let p = Period::between_dates(date(2000, 5, 15), date(2026, 10, 28), MonthEnd::Clamp)?;
    /// assert_eq!(p.total_months(), 26 * 12 + 5);
    /// # Ok::<(), slidewin::period::PeriodError>(())
    /// ```
    #[must_use]
    pub fn total_months(&self) -> i64 {
        self.years * 12 + self.months
    }

    /// Whether every field is zero.
    ///
    /// ```
    /// # use jiff::civil::date; use slidewin::period::MonthEnd; use slidewin::Period;
    /// assert!(Period::between_dates(date(2026, 1, 1), date(2026, 1, 1), MonthEnd::Clamp)?.is_zero());
    /// # Ok::<(), slidewin::period::PeriodError>(())
    /// ```
    #[must_use]
    pub fn is_zero(&self) -> bool {
        self.fields().iter().all(|&f| f == 0) && self.nanoseconds == 0
    }

    /// Whether the period runs backwards (`end` was before `start`).
    ///
    /// ```
    /// # use jiff::civil::date; use slidewin::period::MonthEnd; use slidewin::Period;
    /// assert!(Period::between_dates(date(2026, 1, 2), date(2026, 1, 1), MonthEnd::Clamp)?.is_negative());
    /// # Ok::<(), slidewin::period::PeriodError>(())
    /// ```
    #[must_use]
    pub fn is_negative(&self) -> bool {
        self.fields().iter().any(|&f| f < 0) || self.nanoseconds < 0
    }

    /// The period as a [`jiff::Span`], with the same fields (nanoseconds as nanoseconds).
    ///
    /// Adding it to the start with jiff reproduces the end under [`MonthEnd::Strict`]; under
    /// [`MonthEnd::Clamp`] as well, since jiff also adds months first, clamping the day.
    ///
    /// ```
    /// # use jiff::civil::date; use slidewin::period::MonthEnd; use slidewin::Period;
    /// let (a, b) = (date(2024, 2, 29), date(2025, 2, 28));
    /// let p = Period::between_dates(a, b, MonthEnd::Clamp)?;
    /// assert_eq!(a.checked_add(p.to_span()).unwrap(), b);
    /// # Ok::<(), slidewin::period::PeriodError>(())
    /// ```
    #[must_use]
    pub fn to_span(&self) -> Span {
        // Every field is within jiff's limits: it came out of jiff's own ranges.
        Span::new()
            .years(self.years)
            .months(self.months)
            .days(self.days)
            .hours(self.hours)
            .minutes(self.minutes)
            .seconds(self.seconds)
            .nanoseconds(self.nanoseconds)
    }

    /// The largest units first, at most `units` of them (0 counts as 1: the text always names
    /// a unit), in English: `"3 years 2 months"`, `"13 days"`, `"1 minute 30.25 seconds"`.
    /// See [`humanize_with`](Period::humanize_with).
    ///
    /// ```
    /// # use jiff::civil::date; use slidewin::period::MonthEnd; use slidewin::Period;
    /// let p = Period::between_dates(date(2023, 1, 10), date(2026, 3, 25), MonthEnd::Clamp)?;
    /// assert_eq!(p.humanize(2), "3 years 2 months");
    /// assert_eq!(p.humanize(1), "3 years");
    /// assert_eq!(p.humanize(9), "3 years 2 months 15 days");
    ///
    /// let t = date(2026, 1, 1).at(10, 0, 0, 0);
    /// let p = Period::between_datetimes(t, date(2026, 1, 1).at(9, 59, 59, 500_000_000), MonthEnd::Clamp)?;
    /// assert_eq!(p.humanize(2), "-0.5 seconds");
    /// # Ok::<(), slidewin::period::PeriodError>(())
    /// ```
    #[must_use]
    pub fn humanize(&self, units: usize) -> String {
        self.humanize_with(&Labels::ENGLISH, units)
    }

    /// The largest units first, at most `units` of them (0 counts as 1), with the given
    /// labels.
    ///
    /// The window of `units` units starts at the largest non-zero unit and runs down through
    /// consecutive units (year, month, day, hour, minute, second); zero units inside it are
    /// left out, and smaller units are dropped (truncated, not rounded). So 3 years 0 months
    /// 5 days in 2 units is `"3 years"`: days do not stand in for the missing months. A zero
    /// period reads `"0 days"` (or `"0 seconds"` between datetimes), never with a sign; a
    /// negative one is written once with a leading `-`.
    ///
    /// A fraction of a second belongs to the seconds: `"30.25 seconds"`, `"0.5 seconds"`
    /// (never `"0 seconds"` for a period that is not zero), all nine digits when needed
    /// (`"0.000000001 seconds"`), trailing zeros left out, with a `.` and the plural label.
    /// When the seconds fall outside the window the fraction goes with them.
    ///
    /// ```
    /// # use jiff::civil::date; use slidewin::period::{Labels, MonthEnd}; use slidewin::Period;
    /// let vietnamese = Labels::new([
    ///     ("năm", "năm"),
    ///     ("tháng", "tháng"),
    ///     ("ngày", "ngày"),
    ///     ("giờ", "giờ"),
    ///     ("phút", "phút"),
    ///     ("giây", "giây"),
    /// ]);
    /// let p = Period::between_dates(date(2023, 1, 10), date(2026, 3, 25), MonthEnd::Clamp)?;
    /// assert_eq!(p.humanize_with(&vietnamese, 2), "3 năm 2 tháng");
    /// # Ok::<(), slidewin::period::PeriodError>(())
    /// ```
    #[must_use]
    pub fn humanize_with(&self, labels: &Labels<'_>, units: usize) -> String {
        let fields = self.fields();
        // The seconds' place holds the nanoseconds too: half a second is not zero seconds.
        let nonzero = |unit: usize, value: i64| value != 0 || (unit == 5 && self.nanoseconds != 0);
        let mut out = String::new();
        let Some(first) = fields.iter().enumerate().position(|(u, &f)| nonzero(u, f)) else {
            // Zero is never negative, so it never reads "-0".
            let unit = if self.has_time { 5 } else { 2 };
            labels.write(&mut out, 0, unit);
            return out;
        };
        if self.is_negative() {
            out.push('-');
        }
        let mut wrote = false;
        for (unit, &value) in fields.iter().enumerate().skip(first).take(units.max(1)) {
            if !nonzero(unit, value) {
                continue;
            }
            if wrote {
                out.push(' ');
            }
            if unit == 5 && self.nanoseconds != 0 {
                labels.write_seconds(
                    &mut out,
                    value.unsigned_abs(),
                    self.nanoseconds.unsigned_abs(),
                );
            } else {
                labels.write(&mut out, value.unsigned_abs(), unit);
            }
            wrote = true;
        }
        out
    }

    /// Years, months, days, hours, minutes, seconds: the units [`Labels`] names, in order.
    fn fields(&self) -> [i64; 6] {
        [
            self.years,
            self.months,
            self.days,
            self.hours,
            self.minutes,
            self.seconds,
        ]
    }

    fn from_span(span: &Span, has_time: bool) -> Period {
        Period {
            years: i64::from(span.get_years()),
            // jiff puts whole years into years when the largest unit is a year, so months
            // stay within -11..=11; a month count comes in as months alone.
            months: i64::from(span.get_months()),
            days: i64::from(span.get_days()),
            hours: i64::from(span.get_hours()),
            minutes: span.get_minutes(),
            seconds: span.get_seconds(),
            nanoseconds: span.get_milliseconds() * 1_000_000
                + span.get_microseconds() * 1_000
                + span.get_nanoseconds(),
            has_time,
        }
    }
}

/// The period with every field negated.
impl std::ops::Neg for Period {
    type Output = Period;

    fn neg(self) -> Period {
        Period {
            years: -self.years,
            months: -self.months,
            days: -self.days,
            hours: -self.hours,
            minutes: -self.minutes,
            seconds: -self.seconds,
            nanoseconds: -self.nanoseconds,
            has_time: self.has_time,
        }
    }
}

/// Every non-zero unit, largest first, in English: `"26 years 5 months 13 days"`.
impl fmt::Display for Period {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.humanize(6))
    }
}

/// A period could not be measured. Names the values.
///
/// # Example
///
/// ```
/// use slidewin::period::{MonthEnd, PeriodError};
/// use slidewin::Period;
///
/// let ny: jiff::ZonedDateTime = "2024-03-09T21:00[America/New_York]".parse()?;
/// let paris: jiff::ZonedDateTime = "2024-03-10T21:00[Europe/Paris]".parse()?;
/// let err = Period::between_zoned(&ny, &paris, MonthEnd::Clamp).unwrap_err();
/// assert!(matches!(err, PeriodError::DifferentTimeZones { .. }));
/// assert!(err.to_string().contains("America/New_York") && err.to_string().contains("Europe/Paris"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeriodError {
    /// The two zoned datetimes are in different time zones, so "a day" is not one thing.
    DifferentTimeZones {
        /// The start, as given.
        start: String,
        /// The end, as given.
        end: String,
    },
    /// An intermediate date or datetime fell outside jiff's range (years -9999 to 9999).
    OutOfRange {
        /// The start, as given.
        start: String,
        /// The end, as given.
        end: String,
        /// jiff's explanation.
        reason: String,
    },
}

impl fmt::Display for PeriodError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeriodError::DifferentTimeZones { start, end } => write!(
                f,
                "the start {start} and the end {end} are in different time zones; \
                 convert one to the other's zone first"
            ),
            PeriodError::OutOfRange { start, end, reason } => write!(
                f,
                "the period from {start} to {end} leaves the supported range of dates: {reason}"
            ),
        }
    }
}

impl std::error::Error for PeriodError {}
