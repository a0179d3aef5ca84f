//! The text of a [`CalendarQuota`] (`10000 per calendar month`, `500/calendar week from
//! sunday`), read by the quota's [`Reader`], with its errors.

use std::str::FromStr;

use jiff::civil::Weekday;

use super::{ParseQuotaError, Reader};
use crate::limit::calendar::weekday_name;
use crate::limit::{CalendarQuota, CalendarUnit};

impl FromStr for CalendarQuota {
    type Err = ParseQuotaError;

    /// Reads the grammar in the [`CalendarQuota`] docs: a limit, `per calendar` and a unit,
    /// and for a week an optional `from` and its first day. The quota is in UTC, from the
    /// unit's usual start.
    ///
    /// # Errors
    ///
    /// A [`ParseQuotaError`], quoting the text and giving the byte where it goes wrong.
    fn from_str(text: &str) -> Result<CalendarQuota, ParseQuotaError> {
        let mut reader = Reader { text, at: 0 };
        reader.spaces();
        let limit = reader.count("limit")?;
        reader.per()?;
        reader.keyword("calendar", "`calendar`, as in `10000 per calendar month`")?;
        reader.gap("`calendar`")?;
        let unit = reader.calendar_unit()?;
        let gap = reader.spaces();
        let mut start = None;
        if reader.peek().is_some() {
            let at = reader.at;
            if gap == 0
                || !reader
                    .word()
                    .is_some_and(|w| w.eq_ignore_ascii_case("from"))
            {
                reader.at = at;
                reader.end("` from WEEKDAY` (after `week`) or the end of the quota")?;
            }
            if unit != CalendarUnit::Week {
                return Err(reader.fail(
                    at,
                    format!(
                        "`from` names a week's first day, and a calendar {} has none; \
                         set a {}'s anchor in its own field",
                        unit.name(),
                        unit.name()
                    ),
                ));
            }
            reader.gap("`from`")?;
            start = Some(reader.weekday()?);
            reader.spaces();
            reader.end("the end of the quota")?;
        }
        let quota = CalendarQuota::new(limit, unit)
            .unwrap_or_else(|_| unreachable!("the reader refuses a limit of 0"));
        Ok(match start {
            Some(day) => quota
                .week_starts(day)
                .unwrap_or_else(|_| unreachable!("a week start only after `week`")),
            None => quota,
        })
    }
}

impl Reader<'_> {
    /// The word `word`, in any case, or an error saying `expected`.
    fn keyword(&mut self, word: &str, expected: &str) -> Result<(), ParseQuotaError> {
        let at = self.at;
        match self.word() {
            Some(w) if w.eq_ignore_ascii_case(word) => Ok(()),
            _ => {
                self.at = at;
                Err(self.fail(at, format!("expected {expected}, found {}", self.found())))
            }
        }
    }

    /// At least one space after `after`, and not the end.
    fn gap(&mut self, after: &str) -> Result<(), ParseQuotaError> {
        if self.spaces() == 0 || self.peek().is_none() {
            let found = self.found();
            return Err(self.fail(
                self.at,
                format!("expected a space and more after {after}, found {found}"),
            ));
        }
        Ok(())
    }

    /// `cunit`: `day`, `week`, `month` or `year`.
    fn calendar_unit(&mut self) -> Result<CalendarUnit, ParseQuotaError> {
        let at = self.at;
        let word = self.word().unwrap_or_default();
        CalendarUnit::ALL
            .into_iter()
            .find(|unit| unit.name().eq_ignore_ascii_case(word))
            .ok_or_else(|| {
                self.at = at;
                let found = self.found();
                self.fail(
                    at,
                    format!("expected day, week, month or year after `calendar`, found {found}"),
                )
            })
    }

    /// `weekday`: `monday` to `sunday`.
    fn weekday(&mut self) -> Result<Weekday, ParseQuotaError> {
        let at = self.at;
        let word = self.word().unwrap_or_default();
        let mut day = Weekday::Monday;
        for _ in 0..7 {
            if weekday_name(day).eq_ignore_ascii_case(word) {
                return Ok(day);
            }
            day = day.next();
        }
        self.at = at;
        let found = self.found();
        Err(self.fail(
            at,
            format!("expected a weekday (`monday` to `sunday`) after `from`, found {found}"),
        ))
    }
}
