//! The measurement behind [`Period`]'s constructors: the whole months from the start that fit
//! (under either [`MonthEnd`] convention), then the calendar days and time from there, for
//! dates, civil datetimes and zoned datetimes alike.

use std::fmt;

use jiff::civil::{Date, DateTime};
use jiff::{Span, Unit, ZonedDateTime};

use super::{MonthEnd, Period, PeriodError};

/// What the measurement needs of a date, a civil datetime or a zoned datetime.
pub(super) trait Point: Sized + fmt::Display {
    const HAS_TIME: bool;
    /// `year * 12 + month - 1`: months since year 0, to guess the whole months between two.
    fn month_index(&self) -> i64;
    /// The point `n` months later, the day clamped to the target month's last day (jiff's
    /// arithmetic clamps; for zoned datetimes it then resolves a gap or fold as jiff does).
    fn plus_months(&self, n: i64) -> Result<Self, jiff::Error>;
    /// Whether `self` is at or before `other` (on the timeline, for zoned datetimes).
    fn not_after(&self, other: &Self) -> bool;
    /// jiff's difference with the given largest unit.
    fn until(&self, largest: Unit, other: &Self) -> Result<Span, jiff::Error>;
}

impl Point for Date {
    const HAS_TIME: bool = false;
    fn month_index(&self) -> i64 {
        i64::from(self.year()) * 12 + i64::from(self.month()) - 1
    }
    fn plus_months(&self, n: i64) -> Result<Date, jiff::Error> {
        self.checked_add(months_span(n)?)
    }
    fn not_after(&self, other: &Date) -> bool {
        self <= other
    }
    fn until(&self, largest: Unit, other: &Date) -> Result<Span, jiff::Error> {
        Date::until(*self, (largest, *other))
    }
}

impl Point for DateTime {
    const HAS_TIME: bool = true;
    fn month_index(&self) -> i64 {
        i64::from(self.year()) * 12 + i64::from(self.month()) - 1
    }
    fn plus_months(&self, n: i64) -> Result<DateTime, jiff::Error> {
        self.checked_add(months_span(n)?)
    }
    fn not_after(&self, other: &DateTime) -> bool {
        self <= other
    }
    fn until(&self, largest: Unit, other: &DateTime) -> Result<Span, jiff::Error> {
        DateTime::until(*self, (largest, *other))
    }
}

impl Point for ZonedDateTime {
    const HAS_TIME: bool = true;
    fn month_index(&self) -> i64 {
        i64::from(self.year()) * 12 + i64::from(self.month()) - 1
    }
    fn plus_months(&self, n: i64) -> Result<ZonedDateTime, jiff::Error> {
        self.checked_add(months_span(n)?)
    }
    fn not_after(&self, other: &ZonedDateTime) -> bool {
        self.timestamp() <= other.timestamp()
    }
    fn until(&self, largest: Unit, other: &ZonedDateTime) -> Result<Span, jiff::Error> {
        ZonedDateTime::until(self, (largest, other))
    }
}

/// `n` months as years and months: a span of months alone stops at 239,976, short of the
/// distance between jiff's first and last dates. jiff adds a span's years and months in one
/// step, so this is still one addition of `n` months.
fn months_span(n: i64) -> Result<Span, jiff::Error> {
    Span::new().try_years(n / 12)?.try_months(n % 12)
}

pub(super) fn measure<P: Point>(
    start: &P,
    end: &P,
    month_end: MonthEnd,
) -> Result<Period, PeriodError> {
    let out_of_range = |e: jiff::Error| PeriodError::OutOfRange {
        start: start.to_string(),
        end: end.to_string(),
        reason: e.to_string(),
    };
    if end.not_after(start) && !start.not_after(end) {
        // Negative: the negation of the forward period (see the type's docs).
        return measure(end, start, month_end).map(|p| -p);
    }
    match month_end {
        MonthEnd::Strict => start
            .until(Unit::Year, end)
            .map(|span| Period::from_span(&span, P::HAS_TIME))
            .map_err(out_of_range),
        MonthEnd::Clamp => clamp_forward(start, end).map_err(out_of_range),
    }
}

/// Under [`MonthEnd::Clamp`], for `start <= end`: the most months `n` with
/// `start + n months <= end`, then the calendar days and time from there.
fn clamp_forward<P: Point>(start: &P, end: &P) -> Result<Period, jiff::Error> {
    // `start + n` months lands in the month `n` after the start's, so the difference of the
    // month indexes is an upper bound that at most one step back fixes (the target month is
    // the end's month, and any earlier month is before the end). The loop, rather than one
    // step, guards a gap in a time zone pushing a datetime over a month boundary.
    let mut n = end.month_index() - start.month_index();
    let mut anchor = start.plus_months(n)?;
    while n > 0 && !anchor.not_after(end) {
        n -= 1;
        anchor = start.plus_months(n)?;
    }
    let rest = anchor.until(Unit::Day, end)?;
    let mut period = Period::from_span(&rest, P::HAS_TIME);
    period.years = n / 12;
    period.months = n % 12;
    Ok(period)
}
