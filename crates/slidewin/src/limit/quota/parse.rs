//! The notation a [`Quota`] is read from (`100/minute`, `5 per 10 seconds`, `10/s burst 20`,
//! `5/PT10S`), read left to right by one [`Reader`], with errors that quote the text and point
//! at the byte refused.

use std::str::FromStr;

use super::unit::{Named, Unit, named};
use super::{ParseQuotaError, Quota};

mod calendar;

impl FromStr for Quota {
    type Err = ParseQuotaError;

    /// Reads the grammar in the [`Quota`] docs, and nothing else.
    ///
    /// # Errors
    ///
    /// A [`ParseQuotaError`], quoting the text and giving the byte where it goes wrong.
    fn from_str(text: &str) -> Result<Quota, ParseQuotaError> {
        let mut reader = Reader { text, at: 0 };
        reader.spaces();
        if reader.peek().is_none() {
            return Err(reader.fail(
                reader.at,
                "the quota is empty; write a limit and a span, as in `100/minute`".into(),
            ));
        }
        let limit = reader.count("limit")?;
        reader.per()?;
        let span = reader.span()?;
        let gap = reader.spaces();
        let mut burst = limit;
        if reader.peek().is_some() {
            let at = reader.at;
            match reader.word() {
                Some(word) if word.eq_ignore_ascii_case("burst") => {
                    if gap == 0 {
                        return Err(reader.fail(at, "expected a space before `burst`".into()));
                    }
                    let gap = reader.spaces();
                    if gap == 0 && reader.peek().is_some() {
                        return Err(reader.fail(reader.at, "expected a space after `burst`".into()));
                    }
                    burst = reader.count("burst")?;
                    reader.spaces();
                    reader.end("the end of the quota")?;
                }
                _ => {
                    reader.at = at;
                    reader.end("` burst N` or the end of the quota")?;
                }
            }
        }
        Ok(Quota { limit, span, burst })
    }
}

impl Quota {
    /// A span alone, in the grammar's `span` (`30 seconds`, `1m 30s`, `PT90S`, `minute`):
    /// what a [`Leases`](crate::limit::Leases) limit's lease is written as, say.
    ///
    /// # Errors
    ///
    /// A [`ParseQuotaError`] as for a quota, quoting the span.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Quota;
    /// assert_eq!(Quota::parse_span("1m 30s")?, Duration::from_secs(90));
    /// assert_eq!(Quota::parse_span(" 30 seconds ")?, Duration::from_secs(30));
    /// assert!(Quota::parse_span("30 seconds burst 2").is_err());
    /// # Ok::<(), slidewin::limit::ParseQuotaError>(())
    /// ```
    pub fn parse_span(text: &str) -> Result<std::time::Duration, ParseQuotaError> {
        let mut reader = Reader { text, at: 0 };
        reader.spaces();
        let span = reader.span()?;
        reader.spaces();
        reader.end("the end of the span")?;
        Ok(std::time::Duration::from_nanos(span))
    }
}

/// One part of a span as read: where it is in the text, its count (`None` past `u64::MAX`)
/// and its unit.
struct Part {
    start: usize,
    end: usize,
    count: Option<u64>,
    unit: Unit,
}

/// Reads the grammar left to right, one byte offset into the text as typed.
struct Reader<'a> {
    text: &'a str,
    at: usize,
}

/// How much of the text an error quotes, and how much of the part it points at.
const QUOTED_INPUT: usize = 256;
const QUOTED_PART: usize = 32;

impl<'a> Reader<'a> {
    fn fail(&self, at: usize, reason: String) -> ParseQuotaError {
        ParseQuotaError {
            input: cut(self.text, QUOTED_INPUT),
            at,
            reason,
        }
    }

    fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    /// Skips spaces and tabs; how many bytes it skipped.
    fn spaces(&mut self) -> usize {
        let n = self.rest().len() - self.rest().trim_start_matches([' ', '\t']).len();
        self.at += n;
        n
    }

    fn take_while(&mut self, keep: impl Fn(char) -> bool) -> Option<&'a str> {
        let rest = self.rest();
        let n = rest.find(|c| !keep(c)).unwrap_or(rest.len());
        self.at += n;
        (n > 0).then(|| &rest[..n])
    }

    fn digits(&mut self) -> Option<&'a str> {
        self.take_while(|c| c.is_ascii_digit())
    }

    /// A run of letters: a unit, `per` or `burst`.
    fn word(&mut self) -> Option<&'a str> {
        self.take_while(is_letter)
    }

    /// What is at `at`, for an error: a word, a number, one character, or the end.
    fn found(&self) -> String {
        let rest = self.rest();
        let Some(c) = rest.chars().next() else {
            return "the end".into();
        };
        let n = if is_letter(c) {
            rest.find(|c| !is_letter(c)).unwrap_or(rest.len())
        } else if c.is_ascii_digit() {
            rest.find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len())
        } else {
            c.len_utf8()
        };
        format!("`{}`", shown(&cut(&rest[..n], QUOTED_PART)))
    }

    /// An error unless the text ends here (`expected` says what else could come).
    fn end(&self, expected: &str) -> Result<(), ParseQuotaError> {
        match self.peek() {
            None => Ok(()),
            Some(c @ (',' | ';' | '|')) => Err(self.fail(
                self.at,
                format!(
                    "a quota string holds one quota; `{c}` separates several in Python \
                     limits' notation: parse each on its own"
                ),
            )),
            Some(_) => Err(self.fail(
                self.at,
                format!("expected {expected}, found {}", self.found()),
            )),
        }
    }

    /// `count`: the limit or the burst.
    fn count(&mut self, what: &str) -> Result<u64, ParseQuotaError> {
        let at = self.at;
        let Some(digits) = self.digits() else {
            return Err(self.fail(
                at,
                format!(
                    "expected the {what}, a whole number, found {}",
                    self.found()
                ),
            ));
        };
        match digits.parse::<u64>() {
            Ok(0) => Err(self.fail(at, format!("the {what} `{digits}` must be at least 1"))),
            Ok(n) => Ok(n),
            Err(_) => Err(self.fail(
                at,
                format!(
                    "the {what} `{}` does not fit in 64 bits (the most is {})",
                    cut(digits, QUOTED_PART),
                    u64::MAX
                ),
            )),
        }
    }

    /// `ws, "/", ws | ws1, "per", ws1`.
    fn per(&mut self) -> Result<(), ParseQuotaError> {
        let gap = self.spaces();
        if self.peek() == Some('/') {
            self.at += 1;
            self.spaces();
            return Ok(());
        }
        let at = self.at;
        let word = self.word();
        match word {
            Some(word) if word.eq_ignore_ascii_case("per") => {
                if gap == 0 {
                    return Err(self.fail(at, "expected a space before `per`".into()));
                }
                if self.peek().is_none() {
                    return Err(self.fail(
                        self.at,
                        "expected the span after `per`, found the end".into(),
                    ));
                }
                if self.spaces() == 0 {
                    return Err(self.fail(self.at, "expected a space after `per`".into()));
                }
                Ok(())
            }
            Some(word) if word.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("per")) => {
                Err(self.fail(at + 3, "expected a space after `per`".into()))
            }
            _ => {
                self.at = at;
                Err(self.fail(
                    at,
                    format!(
                        "expected `/` or `per` after the limit, found {}",
                        self.found()
                    ),
                ))
            }
        }
    }

    /// `span`, in nanoseconds.
    fn span(&mut self) -> Result<u64, ParseQuotaError> {
        let start = self.at;
        let mut chars = self.rest().chars();
        match (chars.next(), chars.next()) {
            (Some(c), _) if c.is_ascii_digit() => {
                let mut parts = vec![self.part()?];
                loop {
                    let before = self.at;
                    self.spaces();
                    if !self.peek().is_some_and(|c| c.is_ascii_digit()) {
                        self.at = before;
                        break;
                    }
                    parts.push(self.part()?);
                }
                self.total(start, &parts)
            }
            // No unit starts with a `P`: it starts `iso`, unless a word follows (`Pizza`).
            (Some('p' | 'P'), next)
                if !next.is_some_and(|c| is_letter(c) && c != 't' && c != 'T') =>
            {
                self.iso(start)
            }
            (Some(c), _) if is_letter(c) => {
                let word = self.word().unwrap_or_default();
                Ok(self.unit(start, word, word)?.nanos())
            }
            _ => Err(self.fail(
                start,
                format!(
                    "expected the span (`minute`, `10 seconds` or `PT90S`), found {}",
                    self.found()
                ),
            )),
        }
    }

    /// The unit a word names; `part` is the part it ends, for the error about months.
    fn unit(&self, start: usize, part: &str, word: &str) -> Result<Unit, ParseQuotaError> {
        let word_at = start + part.len() - word.len();
        match named(word) {
            Named::Unit(unit) => Ok(unit),
            Named::Calendar(what) => Err(self.calendar(start, part, what)),
            Named::Nothing if word.eq_ignore_ascii_case("calendar") => Err(self.fail(
                word_at,
                "`calendar` starts a calendar quota (`10000 per calendar month`), whose \
                 windows have no fixed span: read it as a `CalendarQuota`"
                    .into(),
            )),
            Named::Nothing => {
                // `10/sburst20`: a unit with `burst` glued on.
                let glued = word.len().checked_sub(5).filter(|&n| {
                    word.is_char_boundary(n)
                        && word[n..].eq_ignore_ascii_case("burst")
                        && !matches!(named(&word[..n]), Named::Nothing)
                });
                if let Some(n) = glued {
                    return Err(self.fail(word_at + n, "expected a space before `burst`".into()));
                }
                Err(self.fail(
                    word_at,
                    format!(
                        "`{}` is not a unit of time; use ns, us (µs), ms, s, m, h, d or w, \
                         or a name such as `seconds`",
                        shown(&cut(word, QUOTED_PART))
                    ),
                ))
            }
        }
    }

    fn calendar(&self, start: usize, part: &str, what: &str) -> ParseQuotaError {
        self.fail(
            start,
            format!(
                "`{}` is in {what}, and months and years have no fixed length: write the \
                 span in days, as in `30d`",
                shown(&cut(part, QUOTED_PART))
            ),
        )
    }

    /// `part = count, ws, unit`, where a `count` starts.
    fn part(&mut self) -> Result<Part, ParseQuotaError> {
        let start = self.at;
        let digits = self.digits().unwrap_or_default();
        self.no_fraction(start)?;
        self.spaces();
        let word_at = self.at;
        let Some(word) = self.word() else {
            return Err(self.fail(
                word_at,
                format!(
                    "expected a unit after `{}`, found {}",
                    cut(digits, QUOTED_PART),
                    self.found()
                ),
            ));
        };
        let unit = self.unit(start, &self.text[start..self.at], word)?;
        Ok(Part {
            start,
            end: self.at,
            count: digits.parse().ok(),
            unit,
        })
    }

    /// `1.5s`, `5,5s`, `PT1.5S`: spans are whole numbers of their units. `start` is where the
    /// number before `at` starts.
    fn no_fraction(&self, start: usize) -> Result<(), ParseQuotaError> {
        let mut after = self.rest().chars();
        let (Some('.' | ','), Some(next)) = (after.next(), after.next()) else {
            return Ok(());
        };
        if !next.is_ascii_digit() {
            return Ok(());
        }
        let digits = self.text[self.at + 1..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(self.text.len() - self.at - 1);
        let fraction = &self.text[start..self.at + 1 + digits];
        Err(self.fail(
            self.at,
            format!(
                "`{}` is not a whole number: write the span in a smaller unit, as in `1500ms` \
                 for 1.5 seconds",
                cut(fraction, QUOTED_PART)
            ),
        ))
    }

    /// `iso`, where its `P` starts: its parts are checked as the parts of any span.
    fn iso(&mut self, start: usize) -> Result<u64, ParseQuotaError> {
        self.at += 1;
        let mut parts = Vec::new();
        let mut time = false;
        loop {
            match self.peek() {
                Some('t' | 'T') if !time => {
                    self.at += 1;
                    time = true;
                    if !self.peek().is_some_and(|c| c.is_ascii_digit()) {
                        return Err(self.fail(
                            self.at,
                            format!("expected a number after `T`, found {}", self.found()),
                        ));
                    }
                }
                Some(c) if c.is_ascii_digit() => {
                    let part_at = self.at;
                    let digits = self.digits().unwrap_or_default();
                    self.no_fraction(part_at)?;
                    let designator = self.peek().map(|c| c.to_ascii_uppercase());
                    let unit = match (time, designator) {
                        (false, Some('W')) => Unit::Week,
                        (false, Some('D')) => Unit::Day,
                        (true, Some('H')) => Unit::Hour,
                        (true, Some('M')) => Unit::Minute,
                        (true, Some('S')) => Unit::Second,
                        (false, Some(c @ ('Y' | 'M'))) => {
                            let part = &self.text[part_at..self.at + 1];
                            let what = if c == 'Y' { "years" } else { "months" };
                            return Err(self.calendar(part_at, part, what));
                        }
                        _ => {
                            let designators = if time { "H, M or S" } else { "W or D" };
                            return Err(self.fail(
                                self.at,
                                format!(
                                    "expected {designators} after `{}`, found {}",
                                    cut(digits, QUOTED_PART),
                                    self.found()
                                ),
                            ));
                        }
                    };
                    self.at += 1;
                    parts.push(Part {
                        start: part_at,
                        end: self.at,
                        count: digits.parse().ok(),
                        unit,
                    });
                }
                _ => break,
            }
        }
        if parts.is_empty() {
            return Err(self.fail(
                self.at,
                format!("expected a number or `T` after `P`, found {}", self.found()),
            ));
        }
        self.total(start, &parts)
    }

    /// The span the parts add up to, in nanoseconds, after the rules the EBNF cannot say.
    fn total(&self, start: usize, parts: &[Part]) -> Result<u64, ParseQuotaError> {
        let text = |part: &Part| shown(&cut(&self.text[part.start..part.end], QUOTED_PART));
        let mut total: u128 = 0;
        for (i, part) in parts.iter().enumerate() {
            let nanos = part
                .count
                .map_or(u128::MAX, |n| u128::from(n) * u128::from(part.unit.nanos()));
            if part.count == Some(0) {
                let reason = if parts.len() == 1 {
                    format!("the span `{}` is zero; it must be at least 1ns", text(part))
                } else {
                    format!("the part `{}` is zero; leave it out", text(part))
                };
                return Err(self.fail(part.start, reason));
            }
            if let Some(previous) = i.checked_sub(1).map(|i| &parts[i]) {
                if part.unit >= previous.unit {
                    return Err(self.fail(
                        part.start,
                        format!(
                            "`{}` comes after `{}`: the parts of a span go from the largest \
                             unit to the smallest, each unit once",
                            text(part),
                            text(previous)
                        ),
                    ));
                }
                if let Some(larger) = part.unit.larger() {
                    if nanos >= u128::from(larger.nanos()) {
                        return Err(self.fail(
                            part.start,
                            format!(
                                "`{}` is not less than 1{}: each part after the first is \
                                 less than one of the next larger unit, as in `1h 30m`",
                                text(part),
                                larger.symbol()
                            ),
                        ));
                    }
                }
            }
            total = total.saturating_add(nanos);
        }
        let end = parts.last().map_or(start, |part| part.end);
        u64::try_from(total).map_err(|_| {
            self.fail(
                start,
                format!(
                    "the span `{}` is longer than the longest span, {}ns (about 584 years)",
                    shown(&cut(&self.text[start..end], QUOTED_PART)),
                    u64::MAX
                ),
            )
        })
    }
}

fn is_letter(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '\u{b5}' || c == '\u{3bc}'
}

/// `text`, cut to at most `max` bytes at a character boundary, ending in `…` when cut.
pub(super) fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// `text` as typed, with control characters (a tab, a newline) escaped so that a message
/// stays on one line.
pub(super) fn shown(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
