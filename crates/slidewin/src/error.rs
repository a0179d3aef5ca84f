//! Errors, written by hand: each names the value that was refused.

use std::fmt;
use std::time::Duration;

use crate::limit::Quota;

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
    /// A rate limit of zero: nothing could ever be admitted.
    ZeroLimit,
    /// A burst of zero.
    ZeroBurst,
    /// A burst that differs from the limit, given to an algorithm that has none.
    BurstUnsupported {
        /// The algorithm.
        algorithm: &'static str,
        /// The quota that was given.
        quota: Quota,
    },
    /// A quota the algorithm cannot represent, such as more than one unit of cost per
    /// nanosecond for a token bucket.
    Unrepresentable {
        /// The algorithm (and where it runs, for another backend).
        algorithm: &'static str,
        /// The quota that was given.
        quota: Quota,
        /// What does not fit.
        reason: &'static str,
    },
    /// An algorithm's name that is not one of the four.
    UnknownAlgorithm {
        /// The name that was given, cut to 64 bytes.
        name: String,
    },
    /// A rule set was given no rules.
    NoRules,
    /// A rule set was given more rules than it holds.
    TooManyRules {
        /// How many were given.
        count: usize,
        /// The most a set holds.
        max: usize,
    },
    /// Two rules of one set share a name, so their states could not be told apart.
    DuplicateRule {
        /// The name given twice.
        name: String,
    },
    /// A rule's name is not one a rule can have.
    BadRuleName {
        /// The name that was given, cut to 64 bytes.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A debounce's wait was zero: there would be no window to merge calls in.
    ZeroWait,
    /// A debounce's wait or max wait does not fit the timeline (longer than 584 years).
    WaitTooLong {
        /// The duration that was given.
        wait: Duration,
    },
    /// A debounce's `max_wait` was shorter than its `wait` (lodash's `debounce` silently raises
    /// it to `wait`).
    MaxWaitShorterThanWait {
        /// The max wait that was given.
        max_wait: Duration,
        /// The wait that was given.
        wait: Duration,
    },
    /// A debounce's `leading` and `trailing` were both false: no call would ever run.
    NoEdge,
    /// A rule was asked to give units back ([`Rule::with_refunds`](crate::limit::Rule::with_refunds))
    /// by an algorithm that cannot say which units a request was counted in.
    RefundUnsupported {
        /// The algorithm's name.
        algorithm: &'static str,
    },
    /// A calendar quota was asked for what it cannot be (a week start on a month), or a
    /// calendar rule was built without one.
    CalendarQuota {
        /// What is wrong.
        reason: &'static str,
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
            ConfigError::ZeroLimit => f.write_str("the limit must be at least 1, got 0"),
            ConfigError::ZeroBurst => f.write_str("the burst must be at least 1, got 0"),
            ConfigError::BurstUnsupported { algorithm, quota } => write!(
                f,
                "{algorithm} has no burst, but the quota `{quota}` sets one; \
                 use Gcra, or leave the burst at the limit"
            ),
            ConfigError::Unrepresentable {
                algorithm,
                quota,
                reason,
            } => write!(
                f,
                "{algorithm} cannot represent the quota `{quota}`: {reason}"
            ),
            ConfigError::UnknownAlgorithm { name } => write!(
                f,
                "`{}` is not an algorithm; expected sliding_log, sliding_counter, fixed_window, \
                 gcra, leases or calendar",
                name.escape_debug()
            ),
            ConfigError::NoRules => f.write_str("a rule set needs at least one rule, got none"),
            ConfigError::TooManyRules { count, max } => {
                write!(f, "a rule set holds at most {max} rules, got {count}")
            }
            ConfigError::DuplicateRule { name } => {
                write!(
                    f,
                    "two rules of one set are named `{name}`; each needs a name of its own"
                )
            }
            ConfigError::BadRuleName { name, reason } => {
                write!(
                    f,
                    "the rule name `{}` is not valid: {reason}",
                    name.escape_debug()
                )
            }
            ConfigError::ZeroWait => f.write_str("the wait must be longer than zero, got 0ns"),
            ConfigError::WaitTooLong { wait } => write!(
                f,
                "the wait {wait:?} is longer than the longest supported wait \
                 (u64::MAX nanoseconds, about 584 years)"
            ),
            ConfigError::MaxWaitShorterThanWait { max_wait, wait } => write!(
                f,
                "max_wait must be at least wait: got max_wait {max_wait:?} and wait {wait:?}"
            ),
            ConfigError::NoEdge => f.write_str(
                "leading and trailing are both false: no call would ever run; set one of them",
            ),
            ConfigError::RefundUnsupported { algorithm } => write!(
                f,
                "{algorithm} cannot give units back: it does not know which window or refill \
                 a request was counted in; only sliding_log refunds (its oldest units)"
            ),
            ConfigError::CalendarQuota { reason } => write!(f, "calendar quota: {reason}"),
        }
    }
}

impl std::error::Error for ConfigError {}
