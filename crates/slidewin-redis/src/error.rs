//! [`RedisError`]: what went wrong talking to Redis, said so that the caller can act.

use std::fmt;
use std::time::Duration;

use slidewin::LimitError;

/// A check that Redis could not answer, or that can never be admitted.
///
/// The kinds tell the caller what to do: [`Unavailable`](RedisError::Unavailable) and
/// [`Timeout`](RedisError::Timeout) pass (the connection recovers by itself when Redis is
/// back), [`Cluster`](RedisError::Cluster) passes when the cluster heals,
/// [`Limit`](RedisError::Limit) never does. A [`FailurePolicy`](crate::FailurePolicy) turns
/// the first three into a decision made without Redis.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin_redis::RedisError;
///
/// let err = RedisError::Timeout { after: Duration::from_millis(250) };
/// assert_eq!(err.to_string(), "Redis did not answer within 250ms");
/// assert!(err.is_transient());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedisError {
    /// Redis could not be reached, or the connection dropped.
    Unavailable {
        /// What the client library reported.
        detail: String,
    },
    /// Redis did not answer in time.
    Timeout {
        /// The timeout that passed.
        after: Duration,
    },
    /// The cluster cannot serve the key: a node lost, slots not covered, a failover under way.
    Cluster {
        /// What the cluster reported.
        detail: String,
    },
    /// Redis answered, but not as the scripts do: a server error, or a reply of the wrong shape.
    Reply {
        /// What came back.
        detail: String,
    },
    /// The request can never be admitted (a cost above the limit); Redis was not asked.
    Limit(LimitError),
    /// The limiter was set up with a value it cannot use: a URL that is not one, no cluster
    /// nodes, a zero timeout.
    Config {
        /// What is wrong, naming the value.
        detail: String,
    },
}

impl RedisError {
    /// Whether asking again later may succeed: [`Unavailable`](RedisError::Unavailable),
    /// [`Timeout`](RedisError::Timeout) and [`Cluster`](RedisError::Cluster).
    ///
    /// ```
    /// use slidewin::LimitError;
    /// use slidewin_redis::RedisError;
    /// let err = RedisError::Limit(LimitError::CostTooHigh { cost: 5, max: 3 });
    /// assert!(!err.is_transient());
    /// ```
    #[must_use]
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            RedisError::Unavailable { .. }
                | RedisError::Timeout { .. }
                | RedisError::Cluster { .. }
        )
    }

    /// Sorts an error of the client library into the kinds above.
    pub(crate) fn from_redis(err: &redis::RedisError) -> RedisError {
        let detail = err.to_string();
        if err.is_timeout() {
            RedisError::Timeout {
                after: Duration::ZERO,
            }
        } else if err.is_cluster_error() {
            RedisError::Cluster { detail }
        } else if err.is_connection_refusal() || err.is_io_error() || err.is_connection_dropped() {
            RedisError::Unavailable { detail }
        } else {
            RedisError::Reply { detail }
        }
    }
}

impl fmt::Display for RedisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisError::Unavailable { detail } => write!(f, "Redis is unavailable: {detail}"),
            RedisError::Timeout { after } if after.is_zero() => {
                f.write_str("Redis did not answer in time")
            }
            RedisError::Timeout { after } => write!(f, "Redis did not answer within {after:?}"),
            RedisError::Cluster { detail } => {
                write!(f, "the Redis cluster cannot serve the key: {detail}")
            }
            RedisError::Reply { detail } => write!(f, "Redis answered unexpectedly: {detail}"),
            RedisError::Limit(err) => err.fmt(f),
            RedisError::Config { detail } => write!(f, "cannot set up the Redis limiter: {detail}"),
        }
    }
}

impl std::error::Error for RedisError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RedisError::Limit(err) => Some(err),
            _ => None,
        }
    }
}

impl From<LimitError> for RedisError {
    fn from(err: LimitError) -> RedisError {
        RedisError::Limit(err)
    }
}
