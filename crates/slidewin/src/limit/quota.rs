//! [`Quota`]: how many per how long, from code or from text.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::time::duration_nanos;

/// A limit per span: at most `limit` units of cost in any window of `span`, and for
/// [`Gcra`](crate::Gcra) a `burst` (by default equal to the limit).
///
/// Build one in code, or parse the notation people already write in configuration files:
///
/// | text | limit | span | burst |
/// |---|---|---|---|
/// | `100/minute`, `100 per minute`, `100/min`, `100/m` | 100 | 1 min | 100 |
/// | `10/s`, `10/sec`, `10 per second` | 10 | 1 s | 10 |
/// | `5 per 10 seconds`, `5/10s` | 5 | 10 s | 5 |
/// | `1000/day`, `1000/d` | 1000 | 24 h | 1000 |
/// | `10/s burst 20` | 10 | 1 s | 20 |
/// | `3 per 1m 30s`, `3/PT90S` | 3 | 90 s | 3 |
///
/// The span is any duration jiff reads (`250ms`, `1h 30m`, ISO 8601's `PT90S`); a day is 24
/// hours and a week 7 days. Months and years are refused: they have no fixed length.
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
///
/// let err = "100/month".parse::<Quota>().unwrap_err();
/// assert!(err.to_string().contains("months and years have no fixed length"));
/// # Ok::<(), slidewin::QuotaError>(())
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
    /// [`QuotaError::ZeroLimit`], [`QuotaError::ZeroSpan`], or [`QuotaError::SpanTooLong`]
    /// for a span past 584 years.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Quota, QuotaError};
    ///
    /// let q = Quota::new(100, Duration::from_secs(60))?;
    /// assert_eq!(q.to_string(), "100 per 1m");
    /// assert_eq!(Quota::new(0, Duration::from_secs(1)), Err(QuotaError::ZeroLimit));
    /// # Ok::<(), QuotaError>(())
    /// ```
    pub fn new(limit: u64, span: Duration) -> Result<Quota, QuotaError> {
        if limit == 0 {
            return Err(QuotaError::ZeroLimit);
        }
        let nanos = duration_nanos(span).ok_or(QuotaError::SpanTooLong { span })?;
        if nanos == 0 {
            return Err(QuotaError::ZeroSpan);
        }
        Ok(Quota {
            limit,
            span: nanos,
            burst: limit,
        })
    }

    /// The same quota with another burst: how much cost [`Gcra`](crate::Gcra) admits at once
    /// after a quiet spell. The other algorithms refuse a burst that differs from the limit.
    ///
    /// # Errors
    ///
    /// [`QuotaError::ZeroBurst`].
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Quota;
    ///
    /// let q = Quota::new(10, Duration::from_secs(1))?.with_burst(1)?;
    /// assert_eq!(q.to_string(), "10 per 1s burst 1");
    /// # Ok::<(), slidewin::QuotaError>(())
    /// ```
    pub fn with_burst(self, burst: u64) -> Result<Quota, QuotaError> {
        if burst == 0 {
            return Err(QuotaError::ZeroBurst);
        }
        Ok(Quota { burst, ..self })
    }

    /// The most cost admitted in any window of the span.
    ///
    /// ```
    /// let q: slidewin::Quota = "5 per 10 seconds".parse()?;
    /// assert_eq!(q.limit(), 5);
    /// # Ok::<(), slidewin::QuotaError>(())
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
    /// # Ok::<(), slidewin::QuotaError>(())
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
    /// # Ok::<(), slidewin::QuotaError>(())
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
    pub(crate) fn without_burst(self, algorithm: &'static str) -> Result<Quota, QuotaError> {
        if self.burst == self.limit {
            Ok(self)
        } else {
            Err(QuotaError::BurstUnsupported {
                algorithm,
                quota: self,
            })
        }
    }
}

/// `100 per 1m`, with ` burst N` when the burst is not the limit; [`Quota::from_str`] reads it
/// back.
impl fmt::Display for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The span fits a u64 of nanoseconds and so an i64 of seconds: jiff's friendly format.
        let span = jiff::SignedDuration::try_from(self.span()).map_err(|_| fmt::Error)?;
        write!(f, "{} per {span:#}", self.limit)?;
        if self.burst != self.limit {
            write!(f, " burst {}", self.burst)?;
        }
        Ok(())
    }
}

impl FromStr for Quota {
    type Err = QuotaError;

    /// Reads `LIMIT / SPAN` or `LIMIT per SPAN`, then an optional `burst N`. See [`Quota`].
    fn from_str(text: &str) -> Result<Quota, QuotaError> {
        let fail = |reason: String| QuotaError::Parse {
            input: text.to_string(),
            reason,
        };
        let lower = text.trim().to_ascii_lowercase();
        let (rate, burst) = match lower.split_once("burst") {
            Some((rate, burst)) => (rate.trim(), Some(burst.trim())),
            None => (lower.as_str(), None),
        };
        let (limit, span) = rate
            .split_once('/')
            .or_else(|| rate.split_once(" per "))
            .ok_or_else(|| {
                fail("expected `LIMIT/SPAN` or `LIMIT per SPAN`, as in `100/minute`".into())
            })?;
        let limit = parse_count(limit.trim(), "limit").map_err(fail)?;
        let span = parse_span(span.trim()).map_err(fail)?;
        let quota = Quota::new(limit, span)?;
        match burst {
            Some(burst) => quota.with_burst(parse_count(burst, "burst").map_err(fail)?),
            None => Ok(quota),
        }
    }
}

fn parse_count(text: &str, what: &str) -> Result<u64, String> {
    if text.is_empty() {
        return Err(format!("the {what} is missing"));
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("the {what} `{text}` is not a whole number"));
    }
    text.parse()
        .map_err(|_| format!("the {what} `{text}` does not fit in 64 bits"))
}

/// A span through jiff: `10 seconds`, `10s`, `1h 30m`, `PT90S`; a bare unit (`minute`) is one
/// of it. Days are 24 hours; months and years are refused.
fn parse_span(text: &str) -> Result<Duration, String> {
    if text.is_empty() {
        return Err("the span is missing".into());
    }
    let one_unit;
    let spelled = if text.starts_with(|c: char| c.is_ascii_alphabetic()) && !text.starts_with('p') {
        one_unit = format!("1 {text}");
        &one_unit
    } else {
        text
    };
    let span: jiff::Span = spelled
        .parse()
        .map_err(|e| format!("the span `{text}` is not a duration: {e}"))?;
    if span.get_months() != 0 || span.get_years() != 0 {
        return Err(format!(
            "the span `{text}`: months and years have no fixed length; write it in days"
        ));
    }
    let signed = span
        .to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .map_err(|e| format!("the span `{text}`: {e}"))?;
    Duration::try_from(signed).map_err(|_| format!("the span `{text}` is negative"))
}

/// A quota could not be built or parsed, or an algorithm cannot work with it. Each names the
/// value it refused.
///
/// # Example
///
/// ```
/// use slidewin::{Quota, QuotaError};
///
/// let err = "ten/minute".parse::<Quota>().unwrap_err();
/// assert!(matches!(err, QuotaError::Parse { .. }));
/// assert_eq!(
///     err.to_string(),
///     "cannot read the quota `ten/minute`: the limit `ten` is not a whole number"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuotaError {
    /// The limit was zero: nothing could ever be admitted.
    ZeroLimit,
    /// The span was zero.
    ZeroSpan,
    /// The span does not fit the timeline (longer than 584 years).
    SpanTooLong {
        /// The span that was given.
        span: Duration,
    },
    /// The burst was zero.
    ZeroBurst,
    /// The text is not a quota.
    Parse {
        /// The text that was given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A burst that differs from the limit was given to an algorithm that has none.
    BurstUnsupported {
        /// The algorithm.
        algorithm: &'static str,
        /// The quota that was given.
        quota: Quota,
    },
    /// The quota asks for more than the algorithm can represent, such as more than one unit
    /// of cost per nanosecond.
    Unrepresentable {
        /// The algorithm.
        algorithm: &'static str,
        /// The quota that was given.
        quota: Quota,
        /// What does not fit.
        reason: &'static str,
    },
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuotaError::ZeroLimit => f.write_str("the limit must be at least 1, got 0"),
            QuotaError::ZeroSpan => f.write_str("the span must be longer than zero, got 0ns"),
            QuotaError::SpanTooLong { span } => write!(
                f,
                "the span {span:?} is longer than the longest supported span \
                 (u64::MAX nanoseconds, about 584 years)"
            ),
            QuotaError::ZeroBurst => f.write_str("the burst must be at least 1, got 0"),
            QuotaError::Parse { input, reason } => {
                write!(f, "cannot read the quota `{input}`: {reason}")
            }
            QuotaError::BurstUnsupported { algorithm, quota } => write!(
                f,
                "{algorithm} has no burst, but the quota `{quota}` sets one; \
                 use Gcra, or leave the burst at the limit"
            ),
            QuotaError::Unrepresentable {
                algorithm,
                quota,
                reason,
            } => write!(
                f,
                "{algorithm} cannot represent the quota `{quota}`: {reason}"
            ),
        }
    }
}

impl std::error::Error for QuotaError {}

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
            ("10/s", quota(10, 1)),
            ("10/sec", quota(10, 1)),
            ("10/second", quota(10, 1)),
            ("10 Per Second", quota(10, 1)),
            ("5 per 10 seconds", quota(5, 10)),
            ("5/10s", quota(5, 10)),
            ("1000/day", quota(1000, 86_400)),
            ("1000/d", quota(1000, 86_400)),
            ("7/week", quota(7, 7 * 86_400)),
            ("60/hour", quota(60, 3_600)),
            ("60/h", quota(60, 3_600)),
            ("3 per 1m 30s", quota(3, 90)),
            ("3/PT90S", quota(3, 90)),
            ("10/s burst 20", quota(10, 1).with_burst(20).unwrap()),
            ("10/s BURST 1", quota(10, 1).with_burst(1).unwrap()),
        ] {
            assert_eq!(q(text), expected, "{text}");
        }
        assert_eq!(
            q("4/250ms"),
            Quota::new(4, Duration::from_millis(250)).unwrap()
        );
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
        ] {
            let quota = q(text);
            assert_eq!(q(&quota.to_string()), quota, "{text} -> {quota}");
        }
        assert_eq!(q("5 per 10 seconds").to_string(), "5 per 10s");
        assert_eq!(q("1000/day").to_string(), "1000 per 24h");
    }

    #[test]
    fn bad_quotas_are_errors_naming_the_value() {
        assert_eq!("0/s".parse::<Quota>(), Err(QuotaError::ZeroLimit));
        assert_eq!("5 per 0s".parse::<Quota>(), Err(QuotaError::ZeroSpan));
        assert_eq!("5/s burst 0".parse::<Quota>(), Err(QuotaError::ZeroBurst));
        for (text, needle) in [
            ("", "expected `LIMIT/SPAN`"),
            ("100", "expected `LIMIT/SPAN`"),
            ("ten/minute", "the limit `ten` is not a whole number"),
            ("-5/minute", "the limit `-5` is not a whole number"),
            ("/minute", "the limit is missing"),
            ("100/", "the span is missing"),
            (
                "99999999999999999999/s",
                "`99999999999999999999` does not fit in 64 bits",
            ),
            ("100/month", "months and years have no fixed length"),
            ("100/2 years", "months and years have no fixed length"),
            ("100/fortnight", "the span `fortnight` is not a duration"),
            ("100/-5s", "the span `-5s` is negative"),
            ("10/s burst", "the burst is missing"),
            ("10/s burst many", "the burst `many` is not a whole number"),
        ] {
            let err = text.parse::<Quota>().unwrap_err();
            let message = err.to_string();
            assert!(message.contains(needle), "{text:?}: {message}");
            assert!(
                message.contains(&format!("`{text}`")),
                "{text:?}: {message}"
            );
        }
        assert_eq!(
            Quota::new(1, Duration::MAX),
            Err(QuotaError::SpanTooLong {
                span: Duration::MAX
            })
        );
    }
}
