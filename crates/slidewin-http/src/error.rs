//! [`ConfigError`]: a value the HTTP layer cannot use, named.

use std::fmt;

/// A value that cannot be used, naming it.
///
/// ```
/// use slidewin_http::{ConfigError, ForwardedHeader, TrustedProxies};
/// let err = TrustedProxies::new(["not a network"], ForwardedHeader::XForwardedFor).unwrap_err();
/// assert_eq!(err, ConfigError::BadNetwork { text: "not a network".into() });
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
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
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::NotRepresentable { rule, what, value } => write!(
                f,
                "the rule `{rule}` has a {what} of {value}, larger than the RateLimit header \
                 fields can carry (999999999999999 at most)"
            ),
            ConfigError::BadNetwork { text } => write!(
                f,
                "the trusted proxy network `{text}` is neither a CIDR block (10.0.0.0/8) nor an \
                 address"
            ),
            ConfigError::TooManyNetworks { max } => {
                write!(f, "more than {max} trusted proxy networks were given")
            }
        }
    }
}

impl std::error::Error for ConfigError {}
