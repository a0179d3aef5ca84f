//! [`Quota`]: how many per how long, from code or from text.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::ConfigError;
use crate::time::duration_nanos;

/// A limit per span: at most `limit` units of cost in any window of `span`, and for
/// [`Gcra`](crate::limit::Gcra) a `burst` (by default equal to the limit).
///
/// Build one in code, or parse the notation people already write in configuration files
/// (Python limits' `10/minute`, `10 per minute`, `10/5 seconds`), with an optional `burst N`:
///
/// | text | limit | span | burst |
/// |---|---|---|---|
/// | `100/minute`, `100 per minute`, `100/min`, `100/m`, `100 / Minutes` | 100 | 1 min | 100 |
/// | `10/s`, `10/sec`, `10 per second` | 10 | 1 s | 10 |
/// | `5 per 10 seconds`, `5/10s`, `5/PT10S` | 5 | 10 s | 5 |
/// | `1000/day`, `1000/d`, `1000/24h` | 1000 | 24 h | 1000 |
/// | `10/s burst 20` | 10 | 1 s | 20 |
/// | `3 per 1m 30s`, `3/90s`, `3/PT1M30S` | 3 | 90 s | 3 |
/// | `1000/µs`, `1000/us` | 1000 | 1 µs | 1000 |
///
/// # Grammar
///
/// The whole text must match `quota` (EBNF, ISO 14977):
///
/// ```text
/// quota  = ws, count, ( ws, "/", ws | ws1, "per", ws1 ), span,
///          [ ws1, "burst", ws1, count ], ws ;
/// span   = unit | part, { ws, part } | iso ;
/// part   = count, ws, unit ;
/// iso    = "P", [ count, "W" ], [ count, "D" ],
///          [ "T", [ count, "H" ], [ count, "M" ], [ count, "S" ] ] ;
/// count  = digit, { digit } ;
/// digit  = "0" | "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9" ;
/// ws     = { " " | "\t" } ;
/// ws1    = ( " " | "\t" ), ws ;
/// unit   = (* a name from the table below *) ;
/// ```
///
/// | unit | names |
/// |---|---|
/// | nanosecond | `ns`, `nsec`, `nsecs`, `nanosecond`, `nanoseconds` |
/// | microsecond | `us`, `usec`, `usecs`, the same with `µ` (U+00B5) or `μ` (U+03BC) for `u`, `microsecond`, `microseconds` |
/// | millisecond | `ms`, `msec`, `msecs`, `millisecond`, `milliseconds` |
/// | second | `s`, `sec`, `secs`, `second`, `seconds` |
/// | minute | `m`, `min`, `mins`, `minute`, `minutes` |
/// | hour | `h`, `hr`, `hrs`, `hour`, `hours` |
/// | day (24 hours) | `d`, `day`, `days` |
/// | week (7 days) | `w`, `wk`, `wks`, `week`, `weeks` |
///
/// and these rules, which the EBNF cannot say:
///
/// - Letters match in any case (`10 PER Second`, `pt90s`).
/// - Every count is at least 1 and at most `u64::MAX`: no limit, burst or part is zero.
/// - The parts of a span (`1m 30s`, `PT1M30S`) go from the largest unit to the smallest, each
///   unit once, and each part after the first is less than one of the next larger unit:
///   `1m 30s` and `1h 1m 30s`, not `1m 90s`, `1h 90s` or `1d 25h`. The first part may be as
///   large as needed (`90s`, `36h`). An `iso` span has at least one part, and a `T` is followed
///   by one.
/// - The span is at most `u64::MAX` nanoseconds, about 584 years.
///
/// Anything else is refused with a [`ParseQuotaError`], which quotes the text as typed and
/// gives the byte where it goes wrong: fractions (`1.5s`, `5,5s`; write `1500ms`), signs
/// (`+5s`, `-5s`), digit separators (`1_000`), months and years (they have no fixed length;
/// write days), and several quotas in one string (Python limits' `1/second; 10/minute`: parse
/// each on its own). [`Display`](fmt::Display) prints a quota back in this grammar.
///
/// The algorithms have bounds of their own, checked when one is built:
/// [`Gcra`](crate::limit::Gcra) admits at most one unit of cost per nanosecond, so it refuses
/// `18446744073709551615/ns` with [`ConfigError::Unrepresentable`], which the sliding log
/// takes.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::Quota;
///
/// let q: Quota = "10/s burst 20".parse()?;
/// assert_eq!((q.limit(), q.span(), q.burst()), (10, Duration::from_secs(1), 20));
/// assert_eq!(q, Quota::new(10, Duration::from_secs(1))?.with_burst(20)?);
/// assert_eq!("3 per 1m 30s".parse::<Quota>()?.to_string(), "3 per 1m 30s");
///
/// let err = "10/sburst20".parse::<Quota>().unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "the quota `10/sburst20` is not valid at byte 4: expected a space before `burst`"
/// );
/// let err = "100/Month".parse::<Quota>().unwrap_err();
/// assert!(err.to_string().contains("months and years have no fixed length"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Quota {
    limit: u64,
    /// Nanoseconds; never zero.
    span: u64,
    burst: u64,
}

impl Quota {
    /// At most `limit` units of cost per `span`; the burst is the limit.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroLimit`], [`ConfigError::ZeroSpan`], or [`ConfigError::SpanTooLong`]
    /// for a span past 584 years.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{ConfigError, Quota};
    ///
    /// let q = Quota::new(100, Duration::from_secs(60))?;
    /// assert_eq!(q.to_string(), "100 per 1m");
    /// assert_eq!(Quota::new(0, Duration::from_secs(1)), Err(ConfigError::ZeroLimit));
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn new(limit: u64, span: Duration) -> Result<Quota, ConfigError> {
        if limit == 0 {
            return Err(ConfigError::ZeroLimit);
        }
        let nanos = duration_nanos(span).ok_or(ConfigError::SpanTooLong { span })?;
        if nanos == 0 {
            return Err(ConfigError::ZeroSpan);
        }
        Ok(Quota {
            limit,
            span: nanos,
            burst: limit,
        })
    }

    /// The same quota with another burst: how much cost [`Gcra`](crate::limit::Gcra) admits at once
    /// after a quiet spell. The other algorithms refuse a burst that differs from the limit.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroBurst`].
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Quota;
    ///
    /// let q = Quota::new(10, Duration::from_secs(1))?.with_burst(1)?;
    /// assert_eq!(q.to_string(), "10 per 1s burst 1");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_burst(self, burst: u64) -> Result<Quota, ConfigError> {
        if burst == 0 {
            return Err(ConfigError::ZeroBurst);
        }
        Ok(Quota { burst, ..self })
    }

    /// The most cost admitted in any window of the span.
    ///
    /// ```
    /// let q: slidewin::Quota = "5 per 10 seconds".parse()?;
    /// assert_eq!(q.limit(), 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The span of the window.
    ///
    /// ```
    /// use std::time::Duration;
    /// let q: slidewin::Quota = "1000/day".parse()?;
    /// assert_eq!(q.span(), Duration::from_secs(86_400));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn span(&self) -> Duration {
        Duration::from_nanos(self.span)
    }

    /// The burst (the limit unless set with [`with_burst`](Quota::with_burst)).
    ///
    /// ```
    /// let q: slidewin::Quota = "10/s".parse()?;
    /// assert_eq!(q.burst(), 10);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// The span in nanoseconds, never zero.
    #[inline]
    pub(crate) fn span_nanos(&self) -> u64 {
        self.span
    }

    /// An error unless the burst is the limit: for the algorithms that have no burst.
    pub(crate) fn without_burst(self, algorithm: &'static str) -> Result<Quota, ConfigError> {
        if self.burst == self.limit {
            Ok(self)
        } else {
            Err(ConfigError::BurstUnsupported {
                algorithm,
                quota: self,
            })
        }
    }
}

/// `100 per 1m`, with ` burst N` when the burst is not the limit. The span is written in parts
/// from hours down to nanoseconds (`1m 30s`, `24h`, `1s 500ms`, `1µs`), so the text is in the
/// grammar and [`Quota::from_str`] reads it back to the same quota.
impl fmt::Display for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} per ", self.limit)?;
        let mut rest = self.span;
        let mut first = true;
        for unit in [
            Unit::Hour,
            Unit::Minute,
            Unit::Second,
            Unit::Millisecond,
            Unit::Microsecond,
            Unit::Nanosecond,
        ] {
            let n = rest / unit.nanos();
            rest %= unit.nanos();
            if n > 0 {
                let space = if first { "" } else { " " };
                write!(f, "{space}{n}{}", unit.symbol())?;
                first = false;
            }
        }
        if self.burst != self.limit {
            write!(f, " burst {}", self.burst)?;
        }
        Ok(())
    }
}

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

/// The units of a span, smallest first (their order is the order of their sizes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Unit {
    Nanosecond,
    Microsecond,
    Millisecond,
    Second,
    Minute,
    Hour,
    Day,
    Week,
}

impl Unit {
    fn nanos(self) -> u64 {
        match self {
            Unit::Nanosecond => 1,
            Unit::Microsecond => 1_000,
            Unit::Millisecond => 1_000_000,
            Unit::Second => 1_000_000_000,
            Unit::Minute => 60_000_000_000,
            Unit::Hour => 3_600_000_000_000,
            Unit::Day => 86_400_000_000_000,
            Unit::Week => 604_800_000_000_000,
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            Unit::Nanosecond => "ns",
            Unit::Microsecond => "µs",
            Unit::Millisecond => "ms",
            Unit::Second => "s",
            Unit::Minute => "m",
            Unit::Hour => "h",
            Unit::Day => "d",
            Unit::Week => "w",
        }
    }

    /// The next larger unit, which a later part of a span must stay below.
    fn larger(self) -> Option<Unit> {
        match self {
            Unit::Nanosecond => Some(Unit::Microsecond),
            Unit::Microsecond => Some(Unit::Millisecond),
            Unit::Millisecond => Some(Unit::Second),
            Unit::Second => Some(Unit::Minute),
            Unit::Minute => Some(Unit::Hour),
            Unit::Hour => Some(Unit::Day),
            Unit::Day => Some(Unit::Week),
            Unit::Week => None,
        }
    }
}

/// What a word of letters names: a unit, months or years (refused), or nothing.
enum Named {
    Unit(Unit),
    Calendar(&'static str),
    Nothing,
}

/// The unit table of the [`Quota`] docs. Both micro signs are there: the micro sign U+00B5
/// (what jiff and `Duration`'s `Debug` print) and the Greek mu U+03BC (what keyboards type).
fn named(word: &str) -> Named {
    const UNITS: &[(&str, Unit)] = &[
        ("ns", Unit::Nanosecond),
        ("nsec", Unit::Nanosecond),
        ("nsecs", Unit::Nanosecond),
        ("nanosecond", Unit::Nanosecond),
        ("nanoseconds", Unit::Nanosecond),
        ("us", Unit::Microsecond),
        ("usec", Unit::Microsecond),
        ("usecs", Unit::Microsecond),
        ("\u{b5}s", Unit::Microsecond),
        ("\u{b5}sec", Unit::Microsecond),
        ("\u{b5}secs", Unit::Microsecond),
        ("\u{3bc}s", Unit::Microsecond),
        ("\u{3bc}sec", Unit::Microsecond),
        ("\u{3bc}secs", Unit::Microsecond),
        ("microsecond", Unit::Microsecond),
        ("microseconds", Unit::Microsecond),
        ("ms", Unit::Millisecond),
        ("msec", Unit::Millisecond),
        ("msecs", Unit::Millisecond),
        ("millisecond", Unit::Millisecond),
        ("milliseconds", Unit::Millisecond),
        ("s", Unit::Second),
        ("sec", Unit::Second),
        ("secs", Unit::Second),
        ("second", Unit::Second),
        ("seconds", Unit::Second),
        ("m", Unit::Minute),
        ("min", Unit::Minute),
        ("mins", Unit::Minute),
        ("minute", Unit::Minute),
        ("minutes", Unit::Minute),
        ("h", Unit::Hour),
        ("hr", Unit::Hour),
        ("hrs", Unit::Hour),
        ("hour", Unit::Hour),
        ("hours", Unit::Hour),
        ("d", Unit::Day),
        ("day", Unit::Day),
        ("days", Unit::Day),
        ("w", Unit::Week),
        ("wk", Unit::Week),
        ("wks", Unit::Week),
        ("week", Unit::Week),
        ("weeks", Unit::Week),
    ];
    const CALENDAR: &[(&str, &str)] = &[
        ("mo", "months"),
        ("mos", "months"),
        ("month", "months"),
        ("months", "months"),
        ("y", "years"),
        ("yr", "years"),
        ("yrs", "years"),
        ("year", "years"),
        ("years", "years"),
    ];
    if let Some(&(_, unit)) = UNITS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(word))
    {
        Named::Unit(unit)
    } else if let Some(&(_, what)) = CALENDAR
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(word))
    {
        Named::Calendar(what)
    } else {
        Named::Nothing
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
fn cut(text: &str, max: usize) -> String {
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
fn shown(text: &str) -> String {
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

/// A text that is not a quota: where it goes wrong and why (see the grammar in the [`Quota`]
/// docs). A quota whose numbers a structure refuses is a [`ConfigError`] instead.
///
/// # Example
///
/// ```
/// use slidewin::Quota;
///
/// let err = "ten/minute".parse::<Quota>().unwrap_err();
/// assert_eq!(err.at(), 0);
/// assert_eq!(
///     err.to_string(),
///     "the quota `ten/minute` is not valid at byte 0: expected the limit, a whole number, \
///      found `ten`"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseQuotaError {
    /// The text as typed, cut to its first 256 bytes (then ending in `…`).
    input: String,
    /// The byte offset in the text of the part refused.
    at: usize,
    /// What is wrong there.
    reason: String,
}

impl ParseQuotaError {
    /// The text as typed, cut to its first 256 bytes (then ending in `…`).
    ///
    /// ```
    /// let err = "5 per fortnight".parse::<slidewin::Quota>().unwrap_err();
    /// assert_eq!(err.input(), "5 per fortnight");
    /// ```
    #[must_use]
    pub fn input(&self) -> &str {
        &self.input
    }

    /// The byte offset in the text of the part refused.
    ///
    /// ```
    /// let err = "5 per fortnight".parse::<slidewin::Quota>().unwrap_err();
    /// assert_eq!(err.at(), 6);
    /// ```
    #[must_use]
    pub fn at(&self) -> usize {
        self.at
    }

    /// What is wrong there.
    ///
    /// ```
    /// let err = "0/s".parse::<slidewin::Quota>().unwrap_err();
    /// assert!(err.reason().contains("at least 1"), "{}", err.reason());
    /// ```
    #[must_use]
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for ParseQuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let input = shown(&self.input);
        write!(
            f,
            "the quota `{input}` is not valid at byte {}: {}",
            self.at, self.reason
        )
    }
}

impl std::error::Error for ParseQuotaError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str) -> Quota {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn quota(limit: u64, secs: u64) -> Quota {
        Quota::new(limit, Duration::from_secs(secs)).unwrap()
    }

    #[test]
    fn the_notations_people_write() {
        for (text, expected) in [
            ("100/minute", quota(100, 60)),
            ("100 / minute", quota(100, 60)),
            ("100 per minute", quota(100, 60)),
            ("100/min", quota(100, 60)),
            ("100/m", quota(100, 60)),
            ("100/Minutes", quota(100, 60)),
            ("10/s", quota(10, 1)),
            ("10/sec", quota(10, 1)),
            ("10/second", quota(10, 1)),
            ("10 Per Second", quota(10, 1)),
            ("1/SECOND", quota(1, 1)),
            ("5 per 10 seconds", quota(5, 10)),
            ("5/10s", quota(5, 10)),
            ("5/10 s", quota(5, 10)),
            ("1000/day", quota(1000, 86_400)),
            ("1000/d", quota(1000, 86_400)),
            ("7/week", quota(7, 7 * 86_400)),
            ("60/hour", quota(60, 3_600)),
            ("60/h", quota(60, 3_600)),
            ("3 per 1m 30s", quota(3, 90)),
            ("3/1m30s", quota(3, 90)),
            ("3/PT90S", quota(3, 90)),
            ("3/pt1m30s", quota(3, 90)),
            ("3/P1D", quota(3, 86_400)),
            ("3/P1W1DT1H", quota(3, 8 * 86_400 + 3_600)),
            ("10/s burst 20", quota(10, 1).with_burst(20).unwrap()),
            ("10/s BURST 1", quota(10, 1).with_burst(1).unwrap()),
            ("  10/s burst 1\t", quota(10, 1).with_burst(1).unwrap()),
        ] {
            assert_eq!(q(text), expected, "{text}");
        }
        assert_eq!(
            q("4/250ms"),
            Quota::new(4, Duration::from_millis(250)).unwrap()
        );
        assert_eq!(q("1/ns").span_nanos(), 1);
        assert_eq!(q("1/18446744073709551615ns").span_nanos(), u64::MAX);
    }

    #[test]
    fn display_reads_back() {
        for text in [
            "100/minute",
            "5 per 10 seconds",
            "10/s burst 20",
            "3/PT90S",
            "4/250ms",
            "1/1d",
            "1/1s 500ms 3us 2ns",
            "1/18446744073709551615ns",
        ] {
            let quota = q(text);
            assert_eq!(q(&quota.to_string()), quota, "{text} -> {quota}");
        }
        assert_eq!(q("5 per 10 seconds").to_string(), "5 per 10s");
        assert_eq!(q("1000/day").to_string(), "1000 per 24h");
        assert_eq!(q("3/PT90S").to_string(), "3 per 1m 30s");
        assert_eq!(q("1/1500us").to_string(), "1 per 1ms 500µs");
        assert_eq!(q("10/s burst 2").to_string(), "10 per 1s burst 2");
    }

    #[test]
    fn bad_quotas_are_errors_quoting_the_text_at_the_byte_refused() {
        for (text, at, needle) in [
            ("", 0, "the quota is empty"),
            (
                "100",
                3,
                "expected `/` or `per` after the limit, found the end",
            ),
            (
                "ten/minute",
                0,
                "expected the limit, a whole number, found `ten`",
            ),
            (
                "-5/minute",
                0,
                "expected the limit, a whole number, found `-`",
            ),
            (
                "/minute",
                0,
                "expected the limit, a whole number, found `/`",
            ),
            (
                "100/",
                4,
                "expected the span (`minute`, `10 seconds` or `PT90S`), found the end",
            ),
            ("0/s", 0, "the limit `0` must be at least 1"),
            ("5 per 0s", 6, "the span `0s` is zero"),
            ("5/s burst 0", 10, "the burst `0` must be at least 1"),
            ("99999999999999999999/s", 0, "does not fit in 64 bits"),
            (
                "1/18446744073709551616ns",
                2,
                "is longer than the longest span",
            ),
            ("100/month", 4, "months and years have no fixed length"),
            ("100/2 years", 4, "`2 years` is in years"),
            ("100/fortnight", 4, "`fortnight` is not a unit of time"),
            ("100/-5s", 4, "found `-`"),
            (
                "10/s burst",
                10,
                "expected the burst, a whole number, found the end",
            ),
            (
                "10/s burst many",
                11,
                "expected the burst, a whole number, found `many`",
            ),
            (
                "10/s bursts 2",
                5,
                "expected ` burst N` or the end of the quota, found `bursts`",
            ),
            (
                "10/s burst 2 x",
                13,
                "expected the end of the quota, found `x`",
            ),
            (
                "10/s; 5/m",
                4,
                "a quota string holds one quota; `;` separates several",
            ),
            ("10 per", 6, "expected the span after `per`, found the end"),
            ("10per s", 2, "expected a space before `per`"),
            ("10 pers", 6, "expected a space after `per`"),
            (
                "1/P",
                3,
                "expected a number or `T` after `P`, found the end",
            ),
            ("1/Pizza", 2, "`Pizza` is not a unit of time"),
            ("1/PT", 4, "expected a number after `T`, found the end"),
            ("1/P5", 4, "expected W or D after `5`, found the end"),
            ("1/PT5X", 5, "expected H, M or S after `5`, found `X`"),
            ("1/1h 1h", 5, "`1h` comes after `1h`"),
            ("1/1m 90s", 5, "`90s` is not less than 1m"),
            ("1/1m 0s", 5, "the part `0s` is zero"),
            ("1/1.5s", 3, "`1.5` is not a whole number"),
            ("1/5", 3, "expected a unit after `5`, found the end"),
            (
                "1/s\n",
                3,
                "expected ` burst N` or the end of the quota, found `\\n`",
            ),
        ] {
            let err = text.parse::<Quota>().unwrap_err();
            let got = err.at();
            let message = err.to_string();
            assert_eq!(got, at, "{text:?}: {message}");
            assert!(message.contains(needle), "{text:?}: {message}");
            let quoted = format!("the quota `{}` is not valid at byte {at}: ", shown(text));
            assert!(message.starts_with(&quoted), "{text:?}: {message}");
        }
        assert_eq!(
            Quota::new(1, Duration::MAX),
            Err(ConfigError::SpanTooLong {
                span: Duration::MAX
            })
        );
    }

    #[test]
    fn a_long_text_is_quoted_cut() {
        let text = format!("1/s burst 2 {}", "x".repeat(10_000));
        let message = text.parse::<Quota>().unwrap_err().to_string();
        assert!(message.len() < 500, "{}", message.len());
        assert!(
            message.contains(&format!("`1/s burst 2 {}…`", "x".repeat(244))),
            "{message}"
        );
        assert!(
            message.ends_with(&format!("found `{}…`", "x".repeat(32))),
            "{message}"
        );
        assert_eq!(cut("aµb", 2), "a…"); // never inside a character
    }
}
