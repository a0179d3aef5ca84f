//! [`Refusal`]: why a request was turned away, and [`problem`], the default answer.

use std::fmt;
use std::time::Duration;

use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Response, StatusCode};
use serde_json::{Map, Value, json};
use slidewin::breaker::State;

use crate::fields::whole_seconds;

/// The problem type of the draft "`RateLimit` header fields for HTTP" for a request over its
/// quota.
pub const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";
/// The draft's problem type for a service that takes less than usual for now.
pub const TEMPORARY_REDUCED_CAPACITY: &str =
    "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";

/// Why a [`RateLimitLayer`](crate::RateLimitLayer), a
/// [`CircuitBreakerLayer`](crate::CircuitBreakerLayer) or a [`ShedLayer`](crate::ShedLayer)
/// turned a request away, for a handler that answers it ([`on_refusal`](crate::RateLimitLayerBuilder::on_refusal)).
///
/// ```
/// use http::StatusCode;
/// use slidewin_http::Refusal;
///
/// let refusal = Refusal::QuotaExceeded { policies: vec!["burst"], retry_after: None };
/// assert_eq!(refusal.status(), StatusCode::TOO_MANY_REQUESTS);
/// assert_eq!(refusal.to_string(), "over the quota of the policy `burst`");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal<'a> {
    /// Policies had no room for the request (`429`).
    QuotaExceeded {
        /// The policies that denied.
        policies: Vec<&'a str>,
        /// When every policy admits it, if nothing else is admitted meanwhile.
        retry_after: Option<Duration>,
    },
    /// The request costs more than policies ever admit at once: waiting will not help (`429`,
    /// with no `Retry-After`).
    CostTooHigh {
        /// The policies whose most at once is below the cost.
        policies: Vec<&'a str>,
        /// The request's cost.
        cost: u64,
        /// The most the limit admits at once.
        max: u64,
    },
    /// The memory backend holds its cap of keys and none is idle, so a new client must wait
    /// (`503`): the flood falls on new keys, never on clients being limited.
    KeysFull {
        /// The cap.
        cap: usize,
    },
    /// A limit selected the request but its key could not be found (`500`; see
    /// [`MissingKey`](crate::MissingKey)): a header the client did not send, or a server set
    /// up without the peer's address. A handler may answer the former with a `401`.
    MissingKey {
        /// The policies of the limit whose key is missing.
        policies: Vec<&'a str>,
        /// When the server's setup and not the client is the reason (an address key on a
        /// server that records no peer address), how to fix it; the default body says it.
        fix: Option<&'a str>,
    },
    /// The store could not decide (`503`): it is down and there is no failure policy, or the
    /// failure policy is closed.
    Unavailable {
        /// What failed, for logs: it may name internal addresses, so the default body leaves it
        /// out.
        detail: &'a str,
        /// When to try again, when the failure policy said.
        retry_after: Option<Duration>,
    },
    /// A [`CircuitBreakerLayer`](crate::CircuitBreakerLayer)'s breaker did not let the call
    /// through (`503`): open, forced open, or half-open with every probe out. The service
    /// behind it was not called.
    CircuitOpen {
        /// The breaker's state: [`Open`](State::Open), [`ForcedOpen`](State::ForcedOpen) or
        /// [`HalfOpen`](State::HalfOpen).
        state: State,
        /// When to try again: until the next probe while open, a second while half-open,
        /// none while forced open (see the layer's documentation).
        retry_after: Option<Duration>,
    },
    /// A [`ShedLayer`](crate::ShedLayer)'s adaptive limit had as many requests in flight as it
    /// admits (`503`, with no `Retry-After`: a place comes free within about one response
    /// time). The service behind it was not called.
    Shed {
        /// The limit then.
        limit: u32,
        /// The requests in flight then (more than the limit just after it was cut).
        in_flight: u64,
    },
}

impl Refusal<'_> {
    /// The status code the default answer has.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::QuotaExceeded { .. } | Refusal::CostTooHigh { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            Refusal::KeysFull { .. }
            | Refusal::Unavailable { .. }
            | Refusal::CircuitOpen { .. }
            | Refusal::Shed { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Refusal::MissingKey { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl fmt::Display for Refusal<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::QuotaExceeded { policies, .. } => {
                write!(f, "over the quota of the polic")?;
                list(f, policies)
            }
            Refusal::CostTooHigh {
                policies,
                cost,
                max,
            } => {
                write!(
                    f,
                    "a cost of {cost} is more than {max}, the most admitted at once by the polic"
                )?;
                list(f, policies)
            }
            Refusal::KeysFull { cap } => write!(
                f,
                "the limiter tracks its cap of {cap} clients, none idle; new clients must wait"
            ),
            Refusal::MissingKey { policies, fix } => {
                write!(f, "the request has no key for the polic")?;
                list(f, policies)?;
                match fix {
                    Some(fix) => write!(f, ": {fix}"),
                    None => Ok(()),
                }
            }
            Refusal::Unavailable { .. } => f.write_str("the rate limiter's store is unavailable"),
            Refusal::CircuitOpen { state, .. } => write!(
                f,
                "the circuit breaker is {state}: the service behind it is not being called"
            ),
            Refusal::Shed { limit, in_flight } => write!(
                f,
                "load shed: {in_flight} requests in flight, at the adaptive limit of {limit}"
            ),
        }
    }
}

/// The end of "polic…": "y" and one name, or "ies" and the names, each in backticks.
fn list(f: &mut fmt::Formatter<'_>, policies: &[&str]) -> fmt::Result {
    f.write_str(if policies.len() == 1 { "y " } else { "ies " })?;
    for (i, name) in policies.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "`{name}`")?;
    }
    Ok(())
}

/// The default answer to a refusal: an `application/problem+json` body (RFC 9457).
///
/// - Over a quota: the draft's `quota-exceeded` type, with its `violated-policies` member and
///   a `retry-after` in whole seconds, rounded up.
/// - A cost too high: the same type, without `retry-after`.
/// - Keys full: the draft's `temporary-reduced-capacity` type.
/// - A circuit breaker not letting the call through: the same type, with a `retry-after` in
///   whole seconds, rounded up, when there is one.
/// - A request shed at an adaptive concurrency limit: the same type, without `retry-after`.
/// - A missing key, an unavailable store: `about:blank` with the status's title; the store's
///   error is not shown to the client.
///
/// ```
/// use slidewin_http::{Refusal, problem};
///
/// let refusal = Refusal::QuotaExceeded {
///     policies: vec!["hourly"],
///     retry_after: Some(std::time::Duration::from_millis(1_500)),
/// };
/// let response = problem(&refusal);
/// assert_eq!(response.status(), 429);
/// assert_eq!(response.headers()["content-type"], "application/problem+json");
/// let body: serde_json::Value = serde_json::from_str(response.body())?;
/// assert_eq!(body["type"], "https://iana.org/assignments/http-problem-types#quota-exceeded");
/// assert_eq!(body["violated-policies"][0], "hourly");
/// assert_eq!(body["retry-after"], 2);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[must_use]
pub fn problem(refusal: &Refusal<'_>) -> Response<String> {
    let status = refusal.status();
    let mut body = Map::new();
    let type_ = match refusal {
        Refusal::QuotaExceeded { .. } | Refusal::CostTooHigh { .. } => QUOTA_EXCEEDED,
        Refusal::KeysFull { .. } | Refusal::CircuitOpen { .. } | Refusal::Shed { .. } => {
            TEMPORARY_REDUCED_CAPACITY
        }
        Refusal::MissingKey { .. } | Refusal::Unavailable { .. } => "about:blank",
    };
    body.insert("type".into(), json!(type_));
    let title = match refusal {
        Refusal::QuotaExceeded { .. } | Refusal::CostTooHigh { .. } => "Quota exceeded",
        Refusal::KeysFull { .. } | Refusal::CircuitOpen { .. } | Refusal::Shed { .. } => {
            "Temporarily reduced capacity"
        }
        _ => status.canonical_reason().unwrap_or("Error"),
    };
    body.insert("title".into(), json!(title));
    body.insert("status".into(), json!(status.as_u16()));
    body.insert("detail".into(), json!(refusal.to_string()));
    match refusal {
        Refusal::QuotaExceeded {
            policies,
            retry_after,
        } => {
            body.insert("violated-policies".into(), json!(policies));
            if let Some(wait) = retry_after {
                body.insert("retry-after".into(), json!(whole_seconds(*wait)));
            }
        }
        Refusal::CircuitOpen {
            retry_after: Some(wait),
            ..
        } => {
            body.insert("retry-after".into(), json!(whole_seconds(*wait)));
        }
        Refusal::CostTooHigh { policies, .. } => {
            body.insert("violated-policies".into(), json!(policies));
        }
        _ => {}
    }
    let mut response = Response::new(Value::Object(body).to_string());
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}
