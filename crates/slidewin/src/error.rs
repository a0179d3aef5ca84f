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
    /// A bucket length was zero.
    ZeroBucket,
    /// A bucket was longer than the window it divides.
    BucketLongerThanWindow {
        /// The bucket length that was given.
        bucket: Duration,
        /// The window that was given.
        window: Duration,
    },
    /// A window was not a whole number of buckets, so no set of buckets could cover exactly it.
    WindowNotMultipleOfBucket {
        /// The window that was given.
        window: Duration,
        /// The bucket length that was given.
        bucket: Duration,
    },
    /// A number of buckets (samples) was zero.
    ZeroSampleCount,
    /// A number of buckets was above what a structure allocates up front.
    TooManySamples {
        /// The number that was given.
        sample_count: u32,
        /// The largest number accepted.
        max: u32,
    },
    /// An interval did not split into `sample_count` buckets of a whole number of nanoseconds,
    /// at least 2 long.
    IntervalNotDivisible {
        /// The interval that was given.
        interval: Duration,
        /// The number of buckets it was to be split into.
        sample_count: u32,
    },
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
            ConfigError::ZeroBucket => {
                f.write_str("the bucket length must be longer than zero, got 0ns")
            }
            ConfigError::BucketLongerThanWindow { bucket, window } => write!(
                f,
                "the bucket length {bucket:?} is longer than the window {window:?}"
            ),
            ConfigError::WindowNotMultipleOfBucket { window, bucket } => write!(
                f,
                "the window {window:?} is not a whole number of buckets of {bucket:?}"
            ),
            ConfigError::ZeroSampleCount => f.write_str("sample_count must be at least 1, got 0"),
            ConfigError::TooManySamples { sample_count, max } => {
                write!(f, "sample_count must be at most {max}, got {sample_count}")
            }
            ConfigError::IntervalNotDivisible {
                interval,
                sample_count,
            } => write!(
                f,
                "the interval {interval:?} does not split into {sample_count} buckets of a whole \
                 number of nanoseconds (at least 2ns each)"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}
