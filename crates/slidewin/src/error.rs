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
    /// A bucket was longer than the span it divides.
    BucketLongerThanSpan {
        /// The bucket length that was given.
        bucket: Duration,
        /// The span that was given.
        span: Duration,
    },
    /// A span was not a whole number of buckets, so no set of buckets could cover exactly it.
    SpanNotMultipleOfBucket {
        /// The span that was given.
        span: Duration,
        /// The bucket length that was given.
        bucket: Duration,
    },
    /// A number of buckets was zero.
    ZeroBuckets,
    /// A number of buckets was above what a structure allocates up front.
    TooManyBuckets {
        /// The number that was given.
        buckets: u32,
        /// The largest number accepted.
        max: u32,
    },
    /// A span did not split into `buckets` buckets of a whole number of nanoseconds, at least
    /// 2 long.
    SpanNotDivisible {
        /// The span that was given.
        span: Duration,
        /// The number of buckets it was to be split into.
        buckets: u32,
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
            ConfigError::BucketLongerThanSpan { bucket, span } => write!(
                f,
                "the bucket length {bucket:?} is longer than the span {span:?}"
            ),
            ConfigError::SpanNotMultipleOfBucket { span, bucket } => write!(
                f,
                "the span {span:?} is not a whole number of buckets of {bucket:?}"
            ),
            ConfigError::ZeroBuckets => f.write_str("buckets must be at least 1, got 0"),
            ConfigError::TooManyBuckets { buckets, max } => {
                write!(f, "buckets must be at most {max}, got {buckets}")
            }
            ConfigError::SpanNotDivisible { span, buckets } => write!(
                f,
                "the span {span:?} does not split into {buckets} buckets of a whole number of \
                 nanoseconds (at least 2ns each)"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}
