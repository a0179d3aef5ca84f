//! Errors, written by hand: each names the value that was refused.

use std::fmt;
use std::time::Duration;

/// A structure was configured with a value it cannot work with.
///
/// Returned at construction, before anything is built, so nothing is half-applied.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::{ConfigError, EventWindow};
///
/// let err = EventWindow::<()>::new(Duration::ZERO).unwrap_err();
/// assert_eq!(err, ConfigError::ZeroSpan);
/// assert_eq!(err.to_string(), "the span must be longer than zero, got 0ns");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A window's span was zero: no event could ever be inside it.
    ZeroSpan,
    /// A window's span does not fit the timeline (longer than 584 years).
    SpanTooLong {
        /// The span that was given.
        span: Duration,
    },
    /// A cap on the number of events was zero.
    ZeroMaxLen,
    /// A cap on the number of keys was zero.
    ZeroMaxKeys,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ZeroSpan => f.write_str("the span must be longer than zero, got 0ns"),
            ConfigError::SpanTooLong { span } => write!(
                f,
                "the span {span:?} is longer than the longest supported span \
                 (u64::MAX nanoseconds, about 584 years)"
            ),
            ConfigError::ZeroMaxLen => f.write_str("max_len must be at least 1, got 0"),
            ConfigError::ZeroMaxKeys => f.write_str("max_keys must be at least 1, got 0"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A time could not be placed on the [`Moment`](crate::Moment) timeline, which runs from its
/// origin (the Unix epoch, for conversions) for 584 years.
///
/// # Example
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use slidewin::Moment;
///
/// let err = Moment::try_from(UNIX_EPOCH - Duration::from_secs(1)).unwrap_err();
/// assert!(err.to_string().contains("before 1970"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeRangeError {
    value: String,
}

impl TimeRangeError {
    pub(crate) fn new(value: String) -> TimeRangeError {
        TimeRangeError { value }
    }
}

impl fmt::Display for TimeRangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is outside the Moment timeline (0 to u64::MAX nanoseconds from its origin)",
            self.value
        )
    }
}

impl std::error::Error for TimeRangeError {}
