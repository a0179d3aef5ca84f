//! A layer's limits, each armed with its store and its fields: what the layers that decide a
//! request once and act on its response share (the [`InFlightLayer`](crate::InFlightLayer)).
//! The first limit that selects a request decides it.

use http::Response;
use http::header::{HeaderMap, RETRY_AFTER};
use http::request::Parts;
use slidewin::limit::Rule;
use slidewin_store::{Backend, BackendError, Checked, RequestKey};

use crate::MissingKey;
use crate::error::HttpConfigError;
use crate::fields::{RATELIMIT, RATELIMIT_POLICY, RateLimitFields, retry_after};
use crate::limit::{Extracted, Limit};
use crate::refusal::{Refusal, problem};

/// The service a layer `$layer` wraps around yours, `$service`: the inner service and the
/// layer's `Shared` state (the name in the calling module), with its `Layer`, `Clone` and
/// `Debug`. The two layers that decide once and act on the response have the same shape.
macro_rules! wrapping_service {
    ($(#[$doc:meta])* $service:ident, $layer:ident) => {
        impl<S, B: Backend, C> tower::Layer<S> for $layer<B, C> {
            type Service = $service<S, B, C>;

            fn layer(&self, inner: S) -> $service<S, B, C> {
                $service {
                    inner,
                    shared: Arc::clone(&self.shared),
                }
            }
        }

        $(#[$doc])*
        pub struct $service<S, B: Backend, C = crate::clock::TscClock> {
            inner: S,
            shared: Arc<Shared<B, C>>,
        }

        impl<S: Clone, B: Backend, C> Clone for $service<S, B, C> {
            fn clone(&self) -> Self {
                $service {
                    inner: self.inner.clone(),
                    shared: Arc::clone(&self.shared),
                }
            }
        }

        impl<S: std::fmt::Debug, B: Backend, C> std::fmt::Debug for $service<S, B, C> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($service))
                    .field("inner", &self.inner)
                    .finish_non_exhaustive()
            }
        }
    };
}

pub(crate) use wrapping_service;

/// The limits of a layer, on its backend and clock.
pub(crate) struct Limits<B: Backend, C> {
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

impl<B: Backend, C> Limits<B, C> {
    /// `limits` on `backend` and `clock`, each rule first passed by `admit` (a layer's
    /// refusal of a kind of rule it cannot hold).
    pub(crate) fn new(
        backend: B,
        clock: C,
        limits: impl IntoIterator<Item = Limit>,
        admit: impl Fn(&Rule) -> Result<(), HttpConfigError>,
    ) -> Result<Limits<B, C>, HttpConfigError> {
        let mut armed = Vec::new();
        for limit in limits {
            let rules = limit.rules();
            rules.rules().iter().try_for_each(&admit)?;
            let fields = RateLimitFields::with_unit(rules, limit.unit())?;
            let store = backend.store(rules.clone())?;
            armed.push(Armed {
                limit,
                store,
                fields,
            });
        }
        Ok(Limits {
            backend,
            clock,
            limits: armed,
        })
    }

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

    /// The refusal for a check of `key` that did not admit, with the limit's fields.
    pub(crate) fn refusal(
        &self,
        limit: usize,
        key: RequestKey<'_>,
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
            armed.insert_fields(key, checked, response.headers_mut());
            if let Some(wait) = retry_after(&checked.decision()) {
                response.headers_mut().insert(RETRY_AFTER, wait);
            }
        }
        response
    }

    /// The fields of an admitted request's response.
    pub(crate) fn admitted<T>(
        &self,
        limit: usize,
        key: RequestKey<'_>,
        checked: &Checked,
        response: &mut Response<T>,
    ) {
        self.limits[limit].insert_fields(key, checked, response.headers_mut());
    }
}

impl<S> Armed<S> {
    /// `RateLimit-Policy`, and `RateLimit` of the binding decision (with its `pk`, when the
    /// limit names partitions).
    fn insert_fields(&self, key: RequestKey<'_>, checked: &Checked, headers: &mut HeaderMap) {
        headers.insert(RATELIMIT_POLICY, self.fields.policy().clone());
        let (index, decision) = (checked.binding(), checked.decision());
        let binding = match self.limit.partitions() {
            Some(keys) => self.fields.rate_limit_keyed(index, &decision, keys, key),
            None => self.fields.rate_limit_at(index, &decision),
        };
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
