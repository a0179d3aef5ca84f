//! Labels for writing a `Period` in words.

use std::fmt::Write as _;

/// The words for year, month, day, hour, minute and second, singular and plural, used by
/// [`Period::humanize_with`](crate::Period::humanize_with).
///
/// Replace them for another language; a language without plural forms gives the same word
/// twice.
///
/// # Example
///
/// ```
/// use jiff::civil::date;
/// use slidewin::period::{Labels, MonthEnd};
/// use slidewin::Period;
///
/// let french = Labels::new([
///     ("an", "ans"),
///     ("mois", "mois"),
///     ("jour", "jours"),
///     ("heure", "heures"),
///     ("minute", "minutes"),
///     ("seconde", "secondes"),
/// ]);
/// let p = Period::between_dates(date(2024, 1, 1), date(2025, 2, 2), MonthEnd::Clamp)?;
/// assert_eq!(p.humanize_with(&french, 3), "1 an 1 mois 1 jour");
/// assert_eq!(p.humanize_with(&Labels::ENGLISH, 3), "1 year 1 month 1 day");
/// # Ok::<(), slidewin::period::PeriodError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Labels<'a> {
    names: [(&'a str, &'a str); 6],
}

impl Labels<'static> {
    /// English: `"1 year"`, `"2 years"`, … `"1 second"`.
    ///
    /// ```
    /// assert_eq!(slidewin::period::Labels::ENGLISH.name(2, 3), "days");
    /// ```
    pub const ENGLISH: Labels<'static> = Labels::new([
        ("year", "years"),
        ("month", "months"),
        ("day", "days"),
        ("hour", "hours"),
        ("minute", "minutes"),
        ("second", "seconds"),
    ]);
}

impl<'a> Labels<'a> {
    /// Labels from `(singular, plural)` pairs for year, month, day, hour, minute, second, in
    /// that order.
    ///
    /// ```
    /// use slidewin::period::Labels;
    /// let short = Labels::new([("y", "y"), ("mo", "mo"), ("d", "d"), ("h", "h"), ("min", "min"), ("s", "s")]);
    /// assert_eq!(short.name(1, 1), "mo");
    /// ```
    #[must_use]
    pub const fn new(names: [(&'a str, &'a str); 6]) -> Labels<'a> {
        Labels { names }
    }

    /// The word for `value` of the unit at `unit` (0 = year … 5 = second): singular for 1,
    /// plural otherwise (0 days, 2 days); seconds with a fraction (1.5 seconds) take the
    /// plural too. A `unit` past 5 reads as seconds.
    ///
    /// ```
    /// use slidewin::period::Labels;
    /// assert_eq!(Labels::ENGLISH.name(0, 1), "year");
    /// assert_eq!(Labels::ENGLISH.name(0, 0), "years");
    /// ```
    #[must_use]
    pub fn name(&self, unit: usize, value: u64) -> &'a str {
        let (one, many) = self.names[unit.min(5)];
        if value == 1 { one } else { many }
    }

    /// Appends `"{value} {name}"`.
    pub(crate) fn write(&self, out: &mut String, value: u64, unit: usize) {
        // Writing to a String cannot fail.
        let _ = write!(out, "{value} {}", self.name(unit, value));
    }

    /// Appends `"{seconds}.{fraction} {plural}"`: the nanoseconds (below 10⁹) as decimal
    /// digits, trailing zeros left out, and the plural, since a fraction is not one.
    pub(crate) fn write_seconds(&self, out: &mut String, seconds: u64, nanoseconds: u64) {
        let fraction = format!("{nanoseconds:09}");
        let (_, many) = self.names[5];
        // Writing to a String cannot fail.
        let _ = write!(out, "{seconds}.{} {many}", fraction.trim_end_matches('0'));
    }
}

impl Default for Labels<'static> {
    fn default() -> Labels<'static> {
        Labels::ENGLISH
    }
}
