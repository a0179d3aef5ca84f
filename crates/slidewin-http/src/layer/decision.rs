//! What a request comes to: the plan before any store is asked, the checks' outcome, the
//! verdict, and the fields an admitted response gets.

use std::sync::atomic::Ordering;

use http::Response;
use http::header::{HeaderMap, HeaderValue, RETRY_AFTER};
use http::request::Parts;
use slidewin::limit::Binding;
use slidewin::stats::MetricEvent;
use slidewin::{Clock, Decision, Moment};
use slidewin_store::{Backend, BackendError, Checked, RequestKey};

use super::{Armed, MissingKey, Part, SLIDEWIN_DEGRADED, Shared};
use crate::fields::{RateLimitFields, retry_after};
use crate::limit::Extracted;
use crate::refusal::Refusal;
use crate::stats::PolicyStats;

/// What the checks of a request came to.
pub(super) struct Outcome {
    /// The enforced policies' decisions, in the order of their part's rules.
    enforced: Option<Checked>,
    /// The shadow policies', when they were checked.
    shadowed: Option<Checked>,
    /// Whether the request goes through.
    admitted: bool,
    refusal: Option<Refused>,
    without_store: Option<String>,
}

pub(super) enum Refused {
    Quota,
    CostTooHigh { cost: u64, max: u64 },
    KeysFull { cap: usize },
    Unavailable(String),
}

impl Outcome {
    pub(super) fn new() -> Outcome {
        Outcome {
            enforced: None,
            shadowed: None,
            admitted: true,
            refusal: None,
            without_store: None,
        }
    }

    /// Records the enforced policies' answer.
    fn enforced(&mut self, result: Result<Checked, BackendError>) {
        match result {
            Ok(mut checked) => {
                let without = checked.take_degraded();
                self.admitted = checked.allowed();
                if !self.admitted {
                    self.refusal = Some(match &without {
                        Some(why) => Refused::Unavailable(why.clone()),
                        None => Refused::Quota,
                    });
                }
                self.without_store = without;
                self.enforced = Some(checked);
            }
            Err(err) => {
                self.admitted = false;
                self.refusal = Some(match err {
                    BackendError::CostTooHigh { cost, max } => Refused::CostTooHigh { cost, max },
                    BackendError::KeysFull { cap } => Refused::KeysFull { cap },
                    // The memory budget spent: the layer's store cannot take the request now.
                    full @ BackendError::MemoryFull { .. } => {
                        Refused::Unavailable(full.to_string())
                    }
                    BackendError::Unavailable { detail } => Refused::Unavailable(detail),
                    // What a backend adds later: it could not decide, named.
                    other => Refused::Unavailable(other.to_string()),
                });
            }
        }
    }

    /// Records the shadow policies' answer. One that could never admit the cost, or has no
    /// room for the key, would have refused: counted as such. One whose store is down decides
    /// nothing.
    fn shadowed<S>(
        &mut self,
        armed: &Armed<S>,
        stats: Option<&[PolicyStats]>,
        now: Moment,
        result: Result<Checked, BackendError>,
    ) {
        match result {
            Ok(mut checked) => {
                let without = checked.take_degraded();
                self.without_store = self.without_store.take().or(without);
                self.shadowed = Some(checked);
            }
            Err(
                BackendError::CostTooHigh { .. }
                | BackendError::KeysFull { .. }
                | BackendError::MemoryFull { .. },
            ) => {
                if let (Some(part), Some(stats)) = (&armed.shadowed, stats) {
                    for &i in &part.rules {
                        stats[armed.first_stat + i].deny(now);
                    }
                }
            }
            Err(_) => {}
        }
    }

    /// Each decision made, with its rule's index in the limit.
    fn each<'a, S>(&'a self, armed: &'a Armed<S>) -> impl Iterator<Item = (usize, Decision)> + 'a {
        let part = |part: &'a Option<Part<S>>, answer: &'a Option<Checked>| {
            part.iter().zip(answer).flat_map(|(part, answer)| {
                part.rules
                    .iter()
                    .copied()
                    .zip(answer.decisions().iter().copied())
            })
        };
        part(&armed.enforced, &self.enforced).chain(part(&armed.shadowed, &self.shadowed))
    }

    /// Whether the policy at `rule` denied (or would have).
    fn denied_by<S>(&self, armed: &Armed<S>, rule: usize) -> bool {
        self.each(armed).any(|(r, d)| r == rule && !d.allowed())
    }

    /// The binding decision among those made, with its rule's index in the limit: the core's
    /// [`Binding`], so the service names the same rule for the same decisions.
    fn binding<S>(&self, armed: &Armed<S>) -> Option<(usize, Decision)> {
        let of = |part: &Option<Part<S>>, answer: &Option<Checked>| {
            let (part, answer) = (part.as_ref()?, answer.as_ref()?);
            Some((part.rules[answer.binding()], answer.decision()))
        };
        let mut binding = Binding::new();
        if let Some((rule, decision)) = of(&armed.enforced, &self.enforced) {
            binding.offer(decision, rule);
        }
        if let Some((rule, decision)) = of(&armed.shadowed, &self.shadowed) {
            binding.offer_shadow(decision, rule);
        }
        binding
            .into_inner()
            .map(|(decision, rule)| (rule, decision))
    }
}

/// What to do with a request, before any store is asked.
pub(super) enum Plan<'p> {
    /// No limit selects it, or its key is missing and may pass.
    Pass,
    /// Its key is missing.
    Refuse(Response<String>),
    /// Check `key` under the limit at `limit`.
    Check {
        limit: usize,
        key: Extracted<'p>,
        cost: u64,
        now: Moment,
    },
}

/// The checks' verdict: a refusal to send, or what to do with the wrapped service's answer.
pub(super) enum Verdict {
    Refused(Response<String>),
    Admitted(After),
}

/// What [`Shared::decide_at_once`] came to.
pub(super) enum AtOnce {
    /// The backend waits: nothing was checked.
    Waits,
    /// The outcome holds the checks.
    Decided,
    /// A limit without shadow policies admitted, with this binding decision; no outcome was
    /// built.
    Admitted(Option<(usize, Decision)>),
}

/// What an admitted request's response gets.
pub(super) struct After {
    limit: usize,
    /// When the wrapped service was called.
    pub(super) start: Moment,
    /// The binding decision, with its rule's index in the limit.
    binding: Option<(usize, Decision)>,
    degraded: bool,
    /// `;pk=…`, the key's partition, when the limit names it.
    pk: Option<Box<[u8]>>,
}

impl<B: Backend, C: Clock> Shared<B, C> {
    /// `RateLimit`'s `pk` parameter for `key` under `limit`, when the limit names partitions.
    #[inline]
    pub(super) fn partition(&self, limit: usize, key: RequestKey<'_>) -> Option<Box<[u8]>> {
        let keys = self.limits[limit].limit.partitions()?;
        Some(keys.parameter(key))
    }

    /// The policies' statistics, when they are kept.
    fn kept_stats(&self) -> Option<&[PolicyStats]> {
        self.stats_on.then_some(&*self.stats)
    }

    // Inlined into `RateLimit::call`, as it was before the layer's modules were split: once
    // a request, and apart it costs a call and the moves of its result (callgrind: 40
    // instructions a request).
    #[inline]
    pub(super) fn plan<'p>(&self, parts: &'p Parts) -> Plan<'p> {
        let Some(limit) = self.limits.iter().position(|a| a.limit.selects(parts)) else {
            return Plan::Pass;
        };
        let armed = &self.limits[limit];
        let Some(key) = armed.limit.key_of(parts) else {
            return match armed.limit.missing_key_choice().unwrap_or(self.missing_key) {
                MissingKey::Pass => Plan::Pass,
                MissingKey::Deny => {
                    let names = armed.limit.rules().rules();
                    let policies = names.iter().map(|r| r.name()).collect();
                    let fix = armed.limit.missing_key_fix(parts);
                    if let Some(fix) = fix
                        && !self.warned_fix.swap(true, Ordering::Relaxed)
                    {
                        // Once: every request of a misconfigured server would repeat it.
                        tracing::warn!("a rate limit answers 500 to every request: {fix}");
                    }
                    let refusal = Refusal::MissingKey { policies, fix };
                    let mut response = (self.on_refusal)(&refusal);
                    self.insert_fields(armed, None, None, None, response.headers_mut());
                    Plan::Refuse(response)
                }
            };
        };
        Plan::Check {
            limit,
            cost: armed.limit.cost_of(parts),
            key,
            now: self.clock.now(),
        }
    }

    /// The checks into `out`, when the backend answers them at once. (Written in place: an
    /// outcome is a few hundred bytes.) A limit with no shadow policy whose store admits
    /// builds no outcome: its binding decision is all the response needs.
    #[inline]
    pub(super) fn decide_at_once(
        &self,
        armed: &Armed<B::Store>,
        key: RequestKey<'_>,
        now: Moment,
        cost: u64,
        out: &mut Outcome,
    ) -> AtOnce {
        let mut checked = false;
        if let Some(part) = &armed.enforced {
            let Some(result) = self.backend.check_at_once(&part.store, key, now, cost) else {
                return AtOnce::Waits;
            };
            if armed.shadowed.is_none()
                && let Ok(answer) = &result
                && answer.allowed()
                && answer.degraded().is_none()
            {
                return AtOnce::Admitted(Some((part.rules[answer.binding()], answer.decision())));
            }
            out.enforced(result);
            checked = true;
        }
        if out.admitted
            && let Some(part) = &armed.shadowed
        {
            match self.backend.check_at_once(&part.store, key, now, cost) {
                Some(result) => out.shadowed(armed, self.kept_stats(), now, result),
                None if !checked => return AtOnce::Waits,
                // A backend that admitted at once answers at once always (memory; Redis
                // answers at once only a denial it kept); were it not to, the shadow policies
                // decide nothing rather than have the enforced ones charged twice.
                None => {}
            }
        }
        AtOnce::Decided
    }

    /// An admitted request: counted as passed, and what its response will get.
    pub(super) fn admitted(
        &self,
        limit: usize,
        now: Moment,
        binding: Option<(usize, Decision)>,
        degraded: bool,
        pk: Option<Box<[u8]>>,
    ) -> After {
        if self.stats_on {
            self.limits[limit].requests.add(now, MetricEvent::Pass, 1);
        }
        After {
            limit,
            start: now,
            binding,
            degraded,
            pk,
        }
    }

    /// The checks: the limit's enforced policies, then (when they admit) its shadow ones.
    pub(super) async fn decide(
        &self,
        armed: &Armed<B::Store>,
        key: RequestKey<'_>,
        now: Moment,
        cost: u64,
    ) -> Outcome {
        let mut out = Outcome::new();
        if let Some(part) = &armed.enforced {
            out.enforced(self.backend.check(&part.store, key, now, cost).await);
        }
        if out.admitted
            && let Some(part) = &armed.shadowed
        {
            let result = self.backend.check(&part.store, key, now, cost).await;
            out.shadowed(armed, self.kept_stats(), now, result);
        }
        out
    }

    /// The statistics of the checks, and the refusal or what the response will get.
    pub(super) fn conclude(
        &self,
        limit: usize,
        now: Moment,
        outcome: &Outcome,
        pk: Option<Box<[u8]>>,
    ) -> Verdict {
        let armed = &self.limits[limit];
        let names = armed.limit.rules().rules();
        let stats = &self.stats[armed.first_stat..armed.first_stat + names.len()];
        let binding = outcome.binding(armed);
        let degraded = self.degraded && outcome.without_store.is_some();
        if outcome.admitted {
            if self.stats_on && armed.shadowed.is_some() {
                for (i, stat) in stats.iter().enumerate() {
                    if outcome.denied_by(armed, i) {
                        stat.deny(now); // a shadow policy's would-be denial
                    }
                }
            }
            return Verdict::Admitted(self.admitted(limit, now, binding, degraded, pk));
        }
        let refused = outcome.refusal.as_ref().unwrap_or(&Refused::Quota);
        let mut violated: Vec<&str> = Vec::new();
        for (i, stat) in stats.iter().enumerate() {
            let by_it = match refused {
                Refused::Quota => outcome.denied_by(armed, i),
                Refused::CostTooHigh { cost, .. } => {
                    !stat.is_shadow() && names[i].max_cost() < *cost
                }
                Refused::KeysFull { .. } | Refused::Unavailable(_) => !stat.is_shadow(),
            };
            if by_it {
                if self.stats_on {
                    stat.deny(now);
                }
                violated.push(names[i].name());
            }
        }
        let wait = binding.and_then(|(_, d)| d.retry_after());
        let refusal = match refused {
            Refused::Quota => Refusal::QuotaExceeded {
                policies: violated,
                retry_after: wait,
            },
            Refused::CostTooHigh { cost, max } => Refusal::CostTooHigh {
                policies: violated,
                cost: *cost,
                max: *max,
            },
            Refused::KeysFull { cap } => Refusal::KeysFull { cap: *cap },
            Refused::Unavailable(detail) => Refusal::Unavailable {
                detail,
                retry_after: wait,
            },
        };
        let mut response = (self.on_refusal)(&refusal);
        let headers = response.headers_mut();
        let degraded = degraded.then_some("closed");
        self.insert_fields(armed, binding, degraded, pk.as_deref(), headers);
        if let Some(wait) = binding.and_then(|(_, decision)| retry_after(&decision)) {
            headers.insert(RETRY_AFTER, wait);
        }
        Verdict::Refused(response)
    }

    /// The wrapped service's answer: timed, counted, and given the fields.
    pub(super) fn finish<T>(&self, after: &After, response: &mut Response<T>) {
        let armed = &self.limits[after.limit];
        if self.stats_on {
            let done = self.clock.now();
            let event = if response.status().is_server_error() {
                MetricEvent::Exception
            } else {
                MetricEvent::Success
            };
            armed.requests.add(done, event, 1);
            armed
                .requests
                .add_rt(done, done.saturating_duration_since(after.start));
        }
        let degraded = after.degraded.then_some("open");
        let headers = response.headers_mut();
        self.insert_fields(armed, after.binding, degraded, after.pk.as_deref(), headers);
    }

    /// A limited request's fields: `RateLimit-Policy`; the binding decision's `RateLimit`
    /// (and the legacy headers, when asked for); `Slidewin-Degraded` with the way a failure
    /// policy went.
    fn insert_fields(
        &self,
        armed: &Armed<B::Store>,
        binding: Option<(usize, Decision)>,
        degraded: Option<&'static str>,
        pk: Option<&[u8]>,
        headers: &mut HeaderMap,
    ) {
        headers.insert(
            crate::fields::RATELIMIT_POLICY,
            armed.fields.policy().clone(),
        );
        if let Some((rule, decision)) = binding {
            headers.insert(
                crate::fields::RATELIMIT,
                armed.fields.rate_limit_in(rule, &decision, pk),
            );
            if self.legacy {
                RateLimitFields::insert_legacy_one(&decision, headers);
            }
        }
        if let Some(way) = degraded {
            headers.insert(SLIDEWIN_DEGRADED, HeaderValue::from_static(way));
        }
    }
}
