//! [`InFlightLayer`]: concurrency limits ([`Leases`](slidewin::limit::Leases)) held for as long
//! as a response is, from the check that admits a request until its response body ends or is
//! dropped.

mod body;
mod service;

use std::fmt;
use std::sync::Arc;

use http::Response;
use http::header::{HeaderMap, RETRY_AFTER};
use http::request::Parts;
use slidewin::limit::Kind;
use slidewin_store::{Backend, BackendError, Checked};

pub use body::InFlightBody;
pub use service::InFlight;

use crate::MissingKey;
use crate::clock::TscClock;
use crate::error::HttpConfigError;
use crate::fields::{RATELIMIT, RATELIMIT_POLICY, RateLimitFields, retry_after};
use crate::limit::{Extracted, Limit};
use crate::refusal::{Refusal, problem};

/// A tower [`Layer`](tower::Layer) that holds each request under a concurrency limit while it
/// is in flight: at most N per key, each unit taken by the check that admits the request and
/// given back when its response body ends, when the body or the response future is dropped
/// (the client went away), or, if none of that ever happens (a process killed mid-request, a
/// release lost on the way to Redis), when its lease ends. So no request holds a unit longer
/// than its lease, and nothing leaks.
///
/// Its limits hold [`Kind::Leases`] rules only; put rates in a
/// [`RateLimitLayer`](crate::RateLimitLayer) outside it. A refused request gets `429` with the
/// `RateLimit-Policy` (`qu="concurrent-requests"`), `RateLimit` and `Retry-After` fields (the
/// wait until the oldest lease ends if none is released first); an admitted one, the fields on
/// its response. Its response body is [`InFlightBody`], which axum takes as any body.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use axum::{Router, routing::get};
/// use slidewin::limit::{Kind, Rule, RuleSet};
/// use slidewin_http::{InFlightLayer, Key, Limit, Memory};
///
/// let in_flight = Rule::new("in_flight", Kind::Leases, "2 per 30s".parse()?)?;
/// let layer = InFlightLayer::new(
///     Memory::new(),
///     [Limit::new(RuleSet::from(in_flight)).key(Key::header(http::HeaderName::from_static("x-api-key")))],
/// )?;
/// let app: Router = Router::new().route("/", get(|| async { "ok" })).layer(layer);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct InFlightLayer<B: Backend, C = TscClock> {
    pub(crate) shared: Arc<Shared<B, C>>,
}

impl<B: Backend, C> Clone for InFlightLayer<B, C> {
    fn clone(&self) -> Self {
        InFlightLayer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<B: Backend, C> fmt::Debug for InFlightLayer<B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InFlightLayer")
            .field("limits", &self.shared.limits.len())
            .finish_non_exhaustive()
    }
}

/// What every service of a layer shares.
pub(crate) struct Shared<B: Backend, C> {
    pub(crate) backend: B,
    pub(crate) clock: C,
    pub(crate) limits: Vec<Armed<B::Store>>,
}

/// A limit, its store and its fields.
pub(crate) struct Armed<S> {
    limit: Limit,
    pub(crate) store: S,
    fields: RateLimitFields,
}

impl<B: Backend> InFlightLayer<B> {
    /// A layer of `limits`, tried in order (the first that selects a request holds it), on
    /// `backend`, its time on a [`TscClock`].
    ///
    /// # Errors
    ///
    /// [`HttpConfigError::NotLeases`] for a limit with another kind of rule; what the backend
    /// or the fields cannot take.
    pub fn new(
        backend: B,
        limits: impl IntoIterator<Item = Limit>,
    ) -> Result<InFlightLayer<B>, HttpConfigError> {
        InFlightLayer::with_clock(backend, TscClock::new(), limits)
    }
}

impl<B: Backend, C> InFlightLayer<B, C> {
    /// [`new`](InFlightLayer::new), its time on `clock` (tests: one on tokio's paused time).
    ///
    /// # Errors
    ///
    /// As [`new`](InFlightLayer::new).
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin::time::ManualClock;
    /// use slidewin_http::{HttpConfigError, InFlightLayer, Limit, Memory};
    ///
    /// let rate = Rule::new("rate", Kind::SlidingLog, "5/s".parse()?)?;
    /// let err = InFlightLayer::with_clock(Memory::new(), ManualClock::default(), [Limit::new(RuleSet::from(rate))])
    ///     .unwrap_err();
    /// assert_eq!(err, HttpConfigError::NotLeases { rule: "rate".into() });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_clock(
        backend: B,
        clock: C,
        limits: impl IntoIterator<Item = Limit>,
    ) -> Result<InFlightLayer<B, C>, HttpConfigError> {
        let mut armed = Vec::new();
        for limit in limits {
            let rules = limit.rules();
            if let Some(other) = rules.rules().iter().find(|r| r.kind() != Kind::Leases) {
                return Err(HttpConfigError::NotLeases {
                    rule: other.name().to_owned(),
                });
            }
            let fields = RateLimitFields::new(rules)?;
            let store = backend.store(rules.clone())?;
            armed.push(Armed {
                limit,
                store,
                fields,
            });
        }
        Ok(InFlightLayer {
            shared: Arc::new(Shared {
                backend,
                clock,
                limits: armed,
            }),
        })
    }
}

/// What a request comes to before any store is asked.
pub(crate) enum Plan<'p> {
    Pass,
    Refuse(Response<String>),
    Check {
        limit: usize,
        key: Extracted<'p>,
        cost: u64,
    },
}

impl<B: Backend, C> Shared<B, C> {
    /// The first limit that selects `parts`, and its key and cost.
    pub(crate) fn plan<'p>(&self, parts: &'p Parts) -> Plan<'p> {
        let Some(limit) = self.limits.iter().position(|a| a.limit.selects(parts)) else {
            return Plan::Pass;
        };
        let armed = &self.limits[limit];
        match armed.limit.key_of(parts) {
            Some(key) => Plan::Check {
                limit,
                key,
                cost: armed.limit.cost_of(parts),
            },
            None => match armed.limit.missing_key_choice().unwrap_or_default() {
                MissingKey::Pass => Plan::Pass,
                MissingKey::Deny => Plan::Refuse(problem(&Refusal::MissingKey {
                    policies: armed.names(),
                    fix: armed.limit.missing_key_fix(parts),
                })),
            },
        }
    }

    /// The refusal for a check that did not admit, with the limit's fields.
    pub(crate) fn refusal(
        &self,
        limit: usize,
        answer: &Result<Checked, BackendError>,
    ) -> Response<String> {
        let armed = &self.limits[limit];
        let policies = armed.names();
        let mut response = match answer {
            Ok(checked) => problem(&Refusal::QuotaExceeded {
                policies,
                retry_after: checked.decision().retry_after(),
            }),
            Err(BackendError::CostTooHigh { cost, max }) => problem(&Refusal::CostTooHigh {
                policies,
                cost: *cost,
                max: *max,
            }),
            Err(BackendError::KeysFull { cap }) => problem(&Refusal::KeysFull { cap: *cap }),
            Err(other) => {
                let detail = other.to_string();
                problem(&Refusal::Unavailable {
                    detail: &detail,
                    retry_after: None,
                })
            }
        };
        if let Ok(checked) = answer {
            armed.insert_fields(checked, response.headers_mut());
            if let Some(wait) = retry_after(&checked.decision()) {
                response.headers_mut().insert(RETRY_AFTER, wait);
            }
        }
        response
    }

    /// The fields of an admitted request's response.
    pub(crate) fn admitted<T>(&self, limit: usize, checked: &Checked, response: &mut Response<T>) {
        self.limits[limit].insert_fields(checked, response.headers_mut());
    }
}

impl<S> Armed<S> {
    /// `RateLimit-Policy`, and `RateLimit` of the binding decision.
    fn insert_fields(&self, checked: &Checked, headers: &mut HeaderMap) {
        headers.insert(RATELIMIT_POLICY, self.fields.policy().clone());
        let binding = self
            .fields
            .rate_limit_at(checked.binding(), &checked.decision());
        headers.insert(RATELIMIT, binding);
    }

    fn names(&self) -> Vec<&str> {
        self.limit
            .rules()
            .rules()
            .iter()
            .map(|r| r.name())
            .collect()
    }
}
