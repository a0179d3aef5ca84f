//! [`Quota`]: how many per how long, from code or from text.
//!
//! The type, its display and its parse error are here; the notation it is read from is in
//! `parse` (the reader) and `unit` (the words of a span's units).

mod parse;
mod unit;

use std::fmt;
use std::time::Duration;

use crate::error::ConfigError;
use crate::time::duration_nanos;
use parse::shown;
use unit::Unit;

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
/// Two forms extend it elsewhere: a quota per calendar window, `10000 per calendar month`, is
/// a [`CalendarQuota`](crate::limit::CalendarQuota) (its grammar is there, with this one's
/// `count` and `ws`), and a configuration of `slidewin serve` adds a concurrency limit:
///
/// ```text
/// config_quota = quota | calendar | concurrent ;
/// concurrent   = ws, count, ws1, "concurrent", ws ;
/// ```
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
/// grammar and [`Quota::from_str`](std::str::FromStr::from_str) reads it back to the same
/// quota.
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
mod tests;
