//! [`RedisError`]: what went wrong talking to Redis, said so that the caller can act.

use std::fmt;
use std::time::Duration;

use slidewin::Moment;
use slidewin::limit::LimitError;

/// A check that Redis could not answer, or that can never be admitted.
///
/// The kinds tell the caller what to do: [`Unavailable`](RedisError::Unavailable) and
/// [`Timeout`](RedisError::Timeout) pass (the connection recovers by itself when Redis is
/// back), [`Cluster`](RedisError::Cluster) passes when the cluster heals,
/// [`Limit`](RedisError::Limit) never does. A [`FailurePolicy`](crate::FailurePolicy) turns
/// the others into a decision made without Redis. The first three open the limiter's circuit
/// (see [`RedisLimiter`](crate::RedisLimiter#when-redis-is-down)): until Redis answers again,
/// checks answer at once, without asking it.
///
/// An error that comes from a connection names where: the Redis URL (its password hidden) or
/// the cluster node's `host:port`.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin_redis::RedisError;
///
/// let err = RedisError::Timeout {
///     at: "redis://10.0.0.7:6379/".to_string(),
///     after: Duration::from_millis(250),
/// };
/// assert_eq!(err.to_string(), "Redis at redis://10.0.0.7:6379/ did not answer within 250ms");
/// assert!(err.is_transient());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedisError {
    /// Redis could not be reached, or the connection dropped; or, while the limiter's circuit
    /// is open, it was not asked (the detail says so, and when it will be tried again).
    Unavailable {
        /// Where: the Redis URL (its password hidden), a cluster node's `host:port`, or the
        /// cluster's URLs while its nodes are not known.
        at: String,
        /// What the client library reported.
        detail: String,
    },
    /// Redis did not answer in time.
    Timeout {
        /// Where, as in [`Unavailable`](RedisError::Unavailable).
        at: String,
        /// The timeout that passed.
        after: Duration,
    },
    /// The cluster cannot serve the key: a node lost, slots not covered, a failover under way.
    Cluster {
        /// Where, as in [`Unavailable`](RedisError::Unavailable).
        at: String,
        /// What the cluster reported.
        detail: String,
    },
    /// Redis answered, but not as the scripts do: a server error, or a reply of the wrong shape.
    Reply {
        /// Where, as in [`Unavailable`](RedisError::Unavailable).
        at: String,
        /// What came back.
        detail: String,
    },
    /// The request can never be admitted (a cost above the limit); Redis was not asked.
    Limit(LimitError),
    /// An explicit time past [`RedisLimiter::MAX_TIME`](crate::RedisLimiter::MAX_TIME), where
    /// the script's arithmetic would stop being exact; Redis was not asked.
    TimeOutOfRange {
        /// The time that was given.
        now: Moment,
    },
    /// A [`Kind::Calendar`](slidewin::limit::Kind::Calendar) check at the Redis server's time
    /// whose window, dated by this client's clock (Redis cannot date calendar windows), does
    /// not hold the server's time: the clocks disagree, across a window's boundary. Nothing was
    /// counted. (The limiter has already asked once more, in the window of the server's time.)
    ClockSkew {
        /// Where, as in [`Unavailable`](RedisError::Unavailable).
        at: String,
        /// The server's time (`TIME`).
        redis: Moment,
        /// This client's time, which dated the window.
        client: Moment,
    },
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
    /// use slidewin::limit::LimitError;
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

    /// Sorts an error of the client library, met at `at`, into the kinds above.
    pub(crate) fn from_redis(err: &redis::RedisError, at: String) -> RedisError {
        let detail = err.to_string();
        if err.is_timeout() {
            RedisError::Timeout {
                at,
                after: Duration::ZERO,
            }
        } else if err.is_cluster_error() {
            RedisError::Cluster { at, detail }
        } else if err.is_connection_refusal() || err.is_io_error() || err.is_connection_dropped() {
            RedisError::Unavailable { at, detail }
        } else {
            RedisError::Reply { at, detail }
        }
    }

    /// What went wrong, without where: the end of the message.
    pub(crate) fn reason(&self) -> String {
        match self {
            RedisError::Unavailable { detail, .. } => detail.clone(),
            RedisError::Timeout { after, .. } if after.is_zero() => "no answer in time".into(),
            RedisError::Timeout { after, .. } => format!("no answer within {after:?}"),
            RedisError::Cluster { detail, .. } => format!("the key cannot be served: {detail}"),
            RedisError::Reply { detail, .. } => format!("an unexpected answer: {detail}"),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for RedisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisError::Unavailable { at, detail } => {
                write!(f, "Redis at {at} is unavailable: {detail}")
            }
            RedisError::Timeout { at, after } if after.is_zero() => {
                write!(f, "Redis at {at} did not answer in time")
            }
            RedisError::Timeout { at, after } => {
                write!(f, "Redis at {at} did not answer within {after:?}")
            }
            RedisError::Cluster { at, detail } => {
                write!(
                    f,
                    "the Redis cluster cannot serve the key at {at}: {detail}"
                )
            }
            RedisError::Reply { at, detail } => {
                write!(f, "Redis at {at} answered unexpectedly: {detail}")
            }
            RedisError::Limit(err) => err.fmt(f),
            RedisError::TimeOutOfRange { now } => write!(
                f,
                "the time {now} is past the last one Redis counts exactly, {} \
                 (2^52 microseconds of Unix time)",
                crate::RedisLimiter::MAX_TIME
            ),
            RedisError::ClockSkew { at, redis, client } => write!(
                f,
                "Redis at {at} reads the time {} and this client {}: the calendar \
                 window dated by the client's clock does not hold Redis's time, so nothing was \
                 counted (the clocks disagree across a window's boundary)",
                jiff::Timestamp::from(*redis),
                jiff::Timestamp::from(*client),
            ),
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

/// The most bytes of a value a message quotes.
const QUOTED: usize = 200;

/// `text` as a message quotes it: whole when short, else its first [`QUOTED`] bytes (cut at a
/// character) and how long it was.
pub(crate) fn quote(text: &str) -> String {
    if text.len() <= QUOTED {
        return text.to_string();
    }
    let mut end = QUOTED;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &text[..end], text.len())
}

/// A Redis URL as messages show it: the password (after the user name, or in a `pass=` or
/// `password=` query parameter) replaced by `***`, and cut as [`quote`] cuts.
///
/// Everything before the last `@` is taken for the user and password, so that a password
/// holding an `@` is hidden whole; a user name alone is shown (it is no credential without a
/// password).
pub(crate) fn redact(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(at) => url.split_at(at + 3),
        None => ("", url),
    };
    let mut shown = String::with_capacity(url.len());
    shown.push_str(scheme);
    let rest = match rest.rfind('@') {
        Some(at) => {
            let (userinfo, host) = (&rest[..at], &rest[at..]);
            match userinfo.split_once(':') {
                Some((user, _)) => {
                    shown.push_str(user);
                    shown.push_str(":***");
                }
                None => shown.push_str(userinfo),
            }
            host
        }
        None => rest,
    };
    match rest.split_once('?') {
        Some((path, query)) => {
            shown.push_str(path);
            shown.push('?');
            for (i, pair) in query.split('&').enumerate() {
                if i > 0 {
                    shown.push('&');
                }
                match pair.split_once('=') {
                    Some((name, _)) if matches!(name, "pass" | "password") => {
                        shown.push_str(name);
                        shown.push_str("=***");
                    }
                    _ => shown.push_str(pair),
                }
            }
        }
        None => shown.push_str(rest),
    }
    quote(&shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_shown_in_a_message_hides_its_password() {
        for (url, shown) in [
            ("redis://127.0.0.1:6379/", "redis://127.0.0.1:6379/"),
            (
                "redis://user:hunter2@cache:6379/0",
                "redis://user:***@cache:6379/0",
            ),
            ("redis://:hunter2@cache/", "redis://:***@cache/"),
            ("rediss://u:p@ss@w0rd@cache/", "rediss://u:***@cache/"),
            ("redis://alice@cache/", "redis://alice@cache/"),
            (
                "redis+unix:///run/redis.sock?db=1&pass=hunter2&user=bob",
                "redis+unix:///run/redis.sock?db=1&pass=***&user=bob",
            ),
            ("cache:6379", "cache:6379"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
        }
    }

    #[test]
    fn a_long_value_is_quoted_cut_to_two_hundred_bytes() {
        let long = "é".repeat(150);
        let quoted = quote(&long);
        assert_eq!(quoted, format!("{}... (300 bytes)", "é".repeat(100)));
        assert_eq!(quote("short"), "short");
        // Cut between the bytes of a character: the character goes whole or not at all.
        let odd = format!("x{}", "é".repeat(150));
        assert_eq!(quote(&odd), format!("x{}... (301 bytes)", "é".repeat(99)));
    }
}
