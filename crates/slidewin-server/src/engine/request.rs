//! What a caller sends and gets back: a request's descriptors and entries, the bounds a request
//! is held to, the answer per descriptor, and the errors that refuse a request.

use std::fmt;
use std::time::Duration;

use http::{HeaderName, HeaderValue};

use crate::config::Unit;

/// The bounds on one request; each one exceeded is refused with an error naming it. And what a
/// request may ask for itself: a limit override of its own, and for how long.
///
/// ```
/// use slidewin_server::{Bounds, Unit};
/// let bounds = Bounds::default();
/// assert_eq!(bounds.max_descriptors, 64);
/// assert!(bounds.request_overrides);
/// assert_eq!(bounds.max_override_unit, Unit::Day);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Descriptors in one request.
    pub max_descriptors: usize,
    /// Entries in one descriptor.
    pub max_entries: usize,
    /// Bytes in one entry's key or value.
    pub max_text_len: usize,
    /// Whether a descriptor's own `limit` (a request limit override, envoy's
    /// `RateLimitDescriptor.limit`) applies: `true` by default, as in envoy ratelimit, which
    /// always honours them. When `false`, an override is ignored (and counted): the config
    /// decides the descriptor as if it had none.
    pub request_overrides: bool,
    /// The longest unit a request limit override may have: [`Unit::Day`] by default. A longer
    /// one is refused for its descriptor (`OVER_LIMIT`, the reason as its `current_limit`'s
    /// name), since its counts would live as long as the unit.
    pub max_override_unit: Unit,
}

impl Bounds {
    /// The largest request body `POST /json` reads, and the largest gRPC message decoded.
    pub const MAX_BODY_BYTES: usize = 1 << 20;

    /// The most distinct limit overrides (domain, limit, unit) an engine holds at once: each is a
    /// store of its own, and requests choose them. Past it, stores with no live key make room; if
    /// none can, the descriptor that asks for another is refused.
    pub const MAX_OVERRIDES: usize = 256;
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            max_descriptors: 64,
            max_entries: 16,
            max_text_len: 1024,
            request_overrides: true,
            max_override_unit: Unit::Day,
        }
    }
}

/// A request to rate limit, as envoy's `RateLimitRequest` carries it.
///
/// ```
/// use slidewin_server::{Entry, RateLimitRequest, RequestDescriptor};
/// let request = RateLimitRequest::new("api", vec![RequestDescriptor::new(vec![Entry::new("client", "ann")])]);
/// assert_eq!(request.hits_addend, 0);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RateLimitRequest {
    /// The domain whose config applies.
    pub domain: String,
    /// The descriptors, each decided on its own.
    pub descriptors: Vec<RequestDescriptor>,
    /// The hits each descriptor adds; 0, protobuf's "unset", means 1.
    pub hits_addend: u64,
}

impl RateLimitRequest {
    /// `descriptors` in `domain`, one hit each.
    #[must_use]
    pub fn new(domain: &str, descriptors: Vec<RequestDescriptor>) -> RateLimitRequest {
        RateLimitRequest {
            domain: domain.to_owned(),
            descriptors,
            hits_addend: 0,
        }
    }
}

/// One descriptor: its entries, in order, and the hits it adds if it says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestDescriptor {
    /// The entries.
    pub entries: Vec<Entry>,
    /// The hits this descriptor adds, over the request's; `Some(0)` checks without counting.
    pub hits_addend: Option<u64>,
    /// A limit the caller sets for this descriptor, over the config's (envoy's
    /// `RateLimitDescriptor.limit`): its entries are counted under it, in the request's domain.
    pub limit: Option<LimitOverride>,
    /// The hits are given back rather than taken (envoy's `is_negative_hits`, sent when a
    /// request ends): its limit's [`leases`](slidewin::limit::Kind::Leases) release that many
    /// units, the oldest held first, and its rates give back nothing.
    pub is_negative_hits: bool,
}

/// A limit a request sets for one descriptor: `requests_per_unit` per `unit`, counted by a
/// sliding log up to [`Config::MAX_LOG_LIMIT`](crate::Config::MAX_LOG_LIMIT) and `sliding_counter` past it (0
/// denies every request, as in envoy ratelimit). Its unit is bounded by
/// [`Bounds::max_override_unit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LimitOverride {
    /// The limit.
    pub requests_per_unit: u32,
    /// Its span.
    pub unit: Unit,
}

impl RequestDescriptor {
    /// A descriptor of `entries`.
    #[must_use]
    pub fn new(entries: Vec<Entry>) -> RequestDescriptor {
        RequestDescriptor {
            entries,
            hits_addend: None,
            limit: None,
            is_negative_hits: false,
        }
    }
}

/// A key and its value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
}

impl Entry {
    /// `key` = `value`.
    #[must_use]
    pub fn new(key: &str, value: &str) -> Entry {
        Entry {
            key: key.to_owned(),
            value: value.to_owned(),
        }
    }
}

/// OK or over the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// Admitted.
    Ok,
    /// Over the limit.
    OverLimit,
}

/// The limit that decided a descriptor, as envoy reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurrentLimit {
    /// The limit's name: its config `name`, or its rule's name.
    pub name: String,
    /// Its requests per unit (the limit, for a span that is no unit).
    pub requests_per_unit: u32,
    /// The unit, where the span is exactly one.
    pub unit: Option<Unit>,
}

/// What was decided for one descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescriptorStatus {
    /// Its code.
    pub code: Code,
    /// The limit that applied (the binding one of a list); none when no limit matched.
    pub current_limit: Option<CurrentLimit>,
    /// What is left of it.
    pub limit_remaining: u32,
    /// When it is back to full.
    pub duration_until_reset: Option<Duration>,
}

/// The answer to a [`RateLimitRequest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateLimitResponse {
    /// Over the limit when any descriptor is (quota mode aside).
    pub overall_code: Code,
    /// One per descriptor, in order.
    pub statuses: Vec<DescriptorStatus>,
    /// `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers), and
    /// `Retry-After` when over the limit.
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// A request refused before any check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// The domain is empty.
    EmptyDomain,
    /// No descriptor.
    NoDescriptors,
    /// More descriptors than [`Bounds::max_descriptors`].
    TooManyDescriptors {
        /// How many came.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// A descriptor with no entry.
    EmptyDescriptor {
        /// Its index.
        descriptor: usize,
    },
    /// More entries than [`Bounds::max_entries`].
    TooManyEntries {
        /// The descriptor's index.
        descriptor: usize,
        /// How many came.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// A key or value longer than [`Bounds::max_text_len`].
    TextTooLong {
        /// The descriptor's index.
        descriptor: usize,
        /// `key` or `value`.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// A domain longer than [`Bounds::max_text_len`].
    DomainTooLong {
        /// Its length in bytes.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// The store could not answer, and no failure policy answered for it.
    Unavailable {
        /// What failed.
        detail: String,
    },
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::EmptyDomain => f.write_str("rate limit domain must not be empty"),
            RequestError::NoDescriptors => {
                f.write_str("rate limit descriptor list must not be empty")
            }
            RequestError::TooManyDescriptors { count, max } => write!(
                f,
                "{count} descriptors in one request: at most {max} (max_descriptors)"
            ),
            RequestError::EmptyDescriptor { descriptor } => {
                write!(f, "descriptor {descriptor} has no entries")
            }
            RequestError::TooManyEntries {
                descriptor,
                count,
                max,
            } => write!(
                f,
                "descriptor {descriptor} has {count} entries: at most {max} (max_entries)"
            ),
            RequestError::TextTooLong {
                descriptor,
                what,
                len,
                max,
            } => write!(
                f,
                "descriptor {descriptor} has a {what} of {len} bytes: at most {max} (max_text_len)"
            ),
            RequestError::DomainTooLong { len, max } => {
                write!(f, "the domain is {len} bytes: at most {max} (max_text_len)")
            }
            RequestError::Unavailable { detail } => {
                write!(f, "the rate limit store could not answer: {detail}")
            }
        }
    }
}

impl std::error::Error for RequestError {}

impl RequestError {
    /// A mistake of the caller's (an `INVALID_ARGUMENT` or 400), not of the service.
    #[must_use]
    pub fn is_invalid_argument(&self) -> bool {
        !matches!(self, RequestError::Unavailable { .. })
    }
}

impl RateLimitRequest {
    /// The first bound this request exceeds, as its error.
    pub(super) fn validate(&self, bounds: &Bounds) -> Result<(), RequestError> {
        let request = self;
        if request.domain.is_empty() {
            return Err(RequestError::EmptyDomain);
        }
        if request.descriptors.is_empty() {
            return Err(RequestError::NoDescriptors);
        }
        if request.descriptors.len() > bounds.max_descriptors {
            return Err(RequestError::TooManyDescriptors {
                count: request.descriptors.len(),
                max: bounds.max_descriptors,
            });
        }
        if request.domain.len() > bounds.max_text_len {
            return Err(RequestError::DomainTooLong {
                len: request.domain.len(),
                max: bounds.max_text_len,
            });
        }
        for (i, descriptor) in request.descriptors.iter().enumerate() {
            if descriptor.entries.is_empty() {
                return Err(RequestError::EmptyDescriptor { descriptor: i });
            }
            if descriptor.entries.len() > bounds.max_entries {
                return Err(RequestError::TooManyEntries {
                    descriptor: i,
                    count: descriptor.entries.len(),
                    max: bounds.max_entries,
                });
            }
            for entry in &descriptor.entries {
                for (what, text) in [("key", &entry.key), ("value", &entry.value)] {
                    if text.len() > bounds.max_text_len {
                        return Err(RequestError::TextTooLong {
                            descriptor: i,
                            what,
                            len: text.len(),
                            max: bounds.max_text_len,
                        });
                    }
                }
            }
        }
        Ok(())
    }
}
