//! [`HttpConfigError`]: a value the HTTP layer cannot use, named.

use std::fmt;

/// A value that cannot be used, naming it.
///
/// ```
/// use slidewin_http::{HttpConfigError, ForwardedHeader, TrustedProxies};
/// let err = TrustedProxies::new(["not a network"], ForwardedHeader::XForwardedFor).unwrap_err();
/// assert_eq!(err, HttpConfigError::BadNetwork { text: "not a network".into() });
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpConfigError {
    /// A rule's number is larger than a structured field's Integer holds (fifteen digits).
    NotRepresentable {
        /// The rule's name.
        rule: String,
        /// Which number: `limit` or `burst`.
        what: &'static str,
        /// The number.
        value: u64,
    },
    /// A trusted proxy's network is neither a CIDR block nor an address.
    BadNetwork {
        /// What was given, cut to 64 bytes.
        text: String,
    },
    /// More trusted networks than a list holds.
    TooManyNetworks {
        /// The most a list holds.
        max: usize,
    },
    /// Two policies of one layer have the same name: their counts would be one on Redis, and
    /// their headers could not be told apart.
    DuplicatePolicy {
        /// The name.
        name: String,
    },
    /// A shadow policy named that is not one of its limit's.
    UnknownPolicy {
        /// The name given.
        name: String,
    },
    /// A rule of an [`InFlightLayer`](crate::InFlightLayer)'s limit that is not
    /// [`Kind::Leases`](slidewin::limit::Kind::Leases): its units would never come back.
    NotLeases {
        /// The rule's name.
        rule: String,
    },
    /// A [`Kind::Leases`](slidewin::limit::Kind::Leases) rule in a
    /// [`RateLimitLayer`](crate::RateLimitLayer), which never gives units back: it belongs in an
    /// [`InFlightLayer`](crate::InFlightLayer).
    LeasesNotReleased {
        /// The rule's name.
        rule: String,
    },
    /// A [`PartitionKeys`](crate::PartitionKeys) secret shorter than its bound.
    ShortSecret {
        /// The secret's length, in bytes.
        len: usize,
        /// The shortest taken.
        min: usize,
    },
    /// The system's random source gave no bytes for a secret.
    NoRandom,
    /// A quota unit a limit's rule cannot be counted in: `concurrent-requests` on a rate, or
    /// another unit on a [`Kind::Leases`](slidewin::limit::Kind::Leases) rule.
    QuotaUnit {
        /// The rule's name.
        rule: String,
        /// The unit asked for.
        unit: &'static str,
    },
    /// A value the core library or the backend refused: a metrics window, a cap of zero
    /// keys, a rule Redis cannot count.
    Limit(slidewin::ConfigError),
}

impl From<slidewin::ConfigError> for HttpConfigError {
    fn from(err: slidewin::ConfigError) -> HttpConfigError {
        HttpConfigError::Limit(err)
    }
}

impl fmt::Display for HttpConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpConfigError::NotRepresentable { rule, what, value } => write!(
                f,
                "the rule `{rule}` has a {what} of {value}, larger than the RateLimit header \
                 fields can carry (999999999999999 at most)"
            ),
            HttpConfigError::BadNetwork { text } => write!(
                f,
                "the trusted proxy network `{text}` is neither a CIDR block (10.0.0.0/8) nor an \
                 address"
            ),
            HttpConfigError::TooManyNetworks { max } => {
                write!(f, "more than {max} trusted proxy networks were given")
            }
            HttpConfigError::DuplicatePolicy { name } => write!(
                f,
                "two policies of the layer are named `{name}`; each needs a name of its own"
            ),
            HttpConfigError::UnknownPolicy { name } => {
                write!(
                    f,
                    "`{name}` is not a policy of this limit, so it cannot be shadowed"
                )
            }
            HttpConfigError::NotLeases { rule } => write!(
                f,
                "the rule `{rule}` is not `leases`: an in-flight limit holds only units that \
                 come back (put rates in a RateLimitLayer)"
            ),
            HttpConfigError::LeasesNotReleased { rule } => write!(
                f,
                "the rule `{rule}` is `leases`, whose units come back when a response ends: put \
                 it in an InFlightLayer (a RateLimitLayer never gives units back)"
            ),
            HttpConfigError::ShortSecret { len, min } => write!(
                f,
                "the partition key secret is {len} bytes; at least {min} are needed"
            ),
            HttpConfigError::NoRandom => {
                f.write_str("the system's random source gave no bytes for a secret")
            }
            HttpConfigError::QuotaUnit { rule, unit } => write!(
                f,
                "the rule `{rule}` cannot be counted in `{unit}`: `concurrent-requests` is the \
                 unit of leases alone, and leases count nothing else"
            ),
            HttpConfigError::Limit(err) => err.fmt(f),
        }
    }
}

impl std::error::Error for HttpConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HttpConfigError::Limit(err) => Some(err),
            _ => None,
        }
    }
}
