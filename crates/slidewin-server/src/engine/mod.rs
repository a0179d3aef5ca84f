//! The decisions: a request's descriptors matched against the config's trees, as envoy
//! ratelimit matches them, each matched limit checked in the backend. The engine and its
//! public API are here, and the path of a check from the request to its answer; the steps
//! are in the submodules.

mod answers;
#[cfg(test)]
mod calendar_tests;
mod check;
mod detailed;
mod matching;
mod report;
#[cfg(test)]
mod report_tests;
pub(crate) mod request;
mod spans;
mod stats;
mod tally;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use http::{HeaderName, HeaderValue};
use slidewin::{Clock, Moment};
use slidewin_http::{RATELIMIT, RATELIMIT_POLICY, RateLimitFields};

use crate::error::Error;

use self::answers::envoy_headers;
pub use self::answers::{AnswerOptions, ResponseHeaders};
use self::check::{counter_key, refused_status};
use self::matching::{Node, build, find};
pub use self::request::{
    Bounds, Code, CurrentLimit, DescriptorStatus, Entry, LimitOverride, RateLimitRequest,
    RateLimitResponse, RequestDescriptor, RequestError,
};
pub(crate) use self::spans::traceparent;
pub use self::spans::{SPAN_TARGET, join_callers_traces};
pub(crate) use self::stats::{LimitWindows, RuleWindow};
use self::tally::Tally;
use crate::config::{Config, Unit};
use crate::metrics::{LazyRuleMetrics, LimitShown, Metrics, RuleMetrics};
use crate::overrides::{Overrides, Refused};
use crate::top::TopKeys;
use slidewin_store::{Backend, RequestKey};

/// A limit in force: its counts, its fields and its statistics. Kept across a reload while its
/// domain, path and rules stay the same.
pub(crate) struct RuleRt<B: Backend> {
    pub(crate) domain: String,
    pub(crate) path: String,
    /// Its one name, everywhere it is shown (see [`crate::config::DescriptorLimit::name`]).
    pub(crate) shown: String,
    pub(crate) name: Option<String>,
    pub(crate) replaces: Vec<String>,
    pub(crate) shadow: bool,
    pub(crate) quota_mode: bool,
    /// Its hits are costs reported after the response (`report`).
    pub(crate) after_response: bool,
    pub(crate) action: ActionRt<B>,
    pub(crate) stats: Arc<RuleWindow>,
    /// Each of its limits' requests over it in the last minute.
    pub(crate) limit_stats: Arc<LimitWindows>,
    pub(crate) metrics: LazyRuleMetrics,
    /// Its hits per descriptor, when `detailed_metric` or `value_to_metric` ask for them.
    pub(crate) detail: Option<detailed::DetailedPlan>,
}

pub(crate) enum ActionRt<B: Backend> {
    Unlimited,
    Blocked {
        unit: Unit,
    },
    Rules {
        spec: slidewin::limit::RuleSet,
        units: Vec<Option<Unit>>,
        store: Arc<B::Store>,
        fields: RateLimitFields,
    },
}

impl<B: Backend> ActionRt<B> {
    /// The names of the limits it counts against, as [`check::limit_name`] gives them (`rule`
    /// is the rule's own name); none when it counts nothing.
    pub(crate) fn limit_names(&self, rule: &str) -> Vec<String> {
        match self {
            ActionRt::Rules { spec, .. } if spec.rules().len() == 1 => vec![rule.to_owned()],
            ActionRt::Rules { spec, .. } => {
                spec.rules().iter().map(|r| r.name().to_owned()).collect()
            }
            ActionRt::Unlimited | ActionRt::Blocked { .. } => Vec::new(),
        }
    }
}

/// A config in force.
pub(crate) struct Loaded<B: Backend> {
    pub(crate) config: Config,
    pub(crate) version: u64,
    pub(crate) loaded_at: jiff::Timestamp,
    domains: HashMap<String, Node<B>>,
    /// Every limit, in config order.
    pub(crate) rules: Vec<Arc<RuleRt<B>>>,
}

/// The decision engine: a config, a backend, statistics. Cloning shares it.
pub struct Engine<B: Backend> {
    inner: Arc<Inner<B>>,
    answers: Arc<AnswerOptions>,
}

impl<B: Backend> Clone for Engine<B> {
    fn clone(&self) -> Engine<B> {
        Engine {
            inner: Arc::clone(&self.inner),
            answers: Arc::clone(&self.answers),
        }
    }
}

struct Inner<B: Backend> {
    backend: B,
    clock: Arc<dyn Clock + Send + Sync>,
    bounds: Bounds,
    loaded: RwLock<Arc<Loaded<B>>>,
    metrics: Metrics,
    top: TopKeys,
    /// The limits requests set, one store per domain, limit and unit, bounded.
    overrides: Overrides<B>,
}

impl<B: Backend> Engine<B> {
    /// An engine deciding by `config` in `backend`, on `clock`.
    ///
    /// # Errors
    ///
    /// A rule the backend cannot hold.
    pub fn new(
        backend: B,
        config: Config,
        clock: Arc<dyn Clock + Send + Sync>,
        bounds: Bounds,
        metrics: Metrics,
    ) -> Result<Engine<B>, Error> {
        let now = clock.now();
        let loaded = build(&backend, config, None, 1, now, &metrics).map_err(Error::Store)?;
        Ok(Engine {
            inner: Arc::new(Inner {
                backend,
                clock,
                bounds,
                loaded: RwLock::new(Arc::new(loaded)),
                metrics,
                top: TopKeys::new(),
                overrides: Overrides::new(),
            }),
            answers: Arc::new(AnswerOptions::default()),
        })
    }

    /// The same engine answering as `answers` says: this handle and its clones from now on.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use slidewin_server::{AnswerOptions, Bounds, Config, Engine, Metrics, ResponseHeaders};
    ///
    /// let config = Config::parse(Config::EXAMPLE, "example.yaml")?;
    /// let clock = Arc::new(slidewin::time::MonotonicClock);
    /// let engine = Engine::new(slidewin_store::Memory::new(), config, clock, Bounds::default(), Metrics::new())?
    ///     .with_answers(AnswerOptions { shadow_mode: true, headers: ResponseHeaders::None, ..AnswerOptions::default() });
    /// assert!(engine.answers().shadow_mode);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_answers(self, answers: AnswerOptions) -> Engine<B> {
        Engine {
            answers: Arc::new(answers),
            ..self
        }
    }

    /// How it answers.
    #[must_use]
    pub fn answers(&self) -> &AnswerOptions {
        &self.answers
    }

    /// Puts `config` in force. Limits kept (same domain and path) keep their counts and
    /// statistics; with new quotas, the backend carries what it can; limits gone free theirs.
    ///
    /// # Errors
    ///
    /// A rule the backend cannot hold; the config in force stays.
    pub fn reload(&self, config: Config) -> Result<u64, Error> {
        let now = self.inner.clock.now();
        let old = self.loaded();
        let loaded = build(
            &self.inner.backend,
            config,
            Some(&old),
            old.version + 1,
            now,
            &self.inner.metrics,
        )
        .map_err(Error::Store)?;
        let version = loaded.version;
        *self
            .inner
            .loaded
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(loaded);
        Ok(version)
    }

    pub(crate) fn loaded(&self) -> Arc<Loaded<B>> {
        Arc::clone(
            &self
                .inner
                .loaded
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// The config in force, its version (1 for the first) and when it was loaded.
    #[must_use]
    pub fn config(&self) -> (Config, u64, jiff::Timestamp) {
        let loaded = self.loaded();
        (loaded.config.clone(), loaded.version, loaded.loaded_at)
    }

    /// The metrics the engine counts into.
    #[must_use]
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The backend.
    #[must_use]
    pub fn backend(&self) -> &B {
        &self.inner.backend
    }

    /// Decides `request`.
    ///
    /// # Errors
    ///
    /// A request out of [`Bounds`], or a store that failed with no failure policy to answer.
    pub async fn should_rate_limit(
        &self,
        request: &RateLimitRequest,
    ) -> Result<RateLimitResponse, RequestError> {
        self.should_rate_limit_traced(request, None).await
    }

    /// [`Engine::should_rate_limit`], its span in the caller's trace: `traceparent` is the
    /// call's W3C `traceparent` (see [`join_callers_traces`](crate::join_callers_traces)).
    ///
    /// # Errors
    ///
    /// As [`Engine::should_rate_limit`].
    pub async fn should_rate_limit_traced(
        &self,
        request: &RateLimitRequest,
        traceparent: Option<&str>,
    ) -> Result<RateLimitResponse, RequestError> {
        let span = spans::request(traceparent);
        let answer = self.decide(request, &span).await;
        spans::answered(&span, request, self.inner.bounds.max_text_len, &answer);
        answer
    }

    /// [`Engine::should_rate_limit`]'s work, its descriptors' spans under `span`.
    #[inline]
    async fn decide(
        &self,
        request: &RateLimitRequest,
        span: &tracing::Span,
    ) -> Result<RateLimitResponse, RequestError> {
        request.validate(&self.inner.bounds)?;
        let started = std::time::Instant::now();
        let loaded = self.loaded();
        let now = self.inner.clock.now();
        let Some(root) = loaded.domains.get(&request.domain) else {
            // An unknown domain has no limits: every descriptor is OK, as in envoy ratelimit,
            // and counted, so that a typo is seen.
            let descriptors = u64::try_from(request.descriptors.len()).unwrap_or(u64::MAX);
            self.inner.metrics.unknown_domain(descriptors);
            return Ok(RateLimitResponse {
                overall_code: Code::Ok,
                statuses: request.descriptors.iter().map(|_| no_limit()).collect(),
                headers: Vec::new(),
            });
        };
        let matches = self.match_descriptors(root, request, now);
        let tally = self.check_descriptors(request, &matches, now, span).await?;
        // The global shadow mode answers OK, and the descriptors still say what they were.
        let over = tally.over();
        let denied = over && !self.answers.shadow_mode;
        spans::decided(span, over, denied);
        if over && !denied {
            self.inner.metrics.global_shadow_mode();
        }
        let headers = match &self.answers.headers {
            ResponseHeaders::Draft => self.headers(request, &matches, &tally, denied),
            ResponseHeaders::Envoy {
                limit,
                remaining,
                reset,
            } => envoy_headers((limit, remaining, reset), &tally.statuses),
            ResponseHeaders::None => Vec::new(),
        };
        self.inner.metrics.observe_decision(started.elapsed());
        Ok(RateLimitResponse {
            overall_code: if denied { Code::OverLimit } else { Code::Ok },
            statuses: tally.statuses,
            headers,
        })
    }

    /// Each descriptor's limit: the one it asks for itself (where requests may set them), else
    /// the one its entries reach in `root`; then the limits other matched limits replace, dropped.
    // This and the check's other helpers (`headers`, `Tally`, `counted`) are inlined into
    // `should_rate_limit`, as they were before the engine was split into modules: about 180
    // instructions a check (callgrind).
    #[inline]
    fn match_descriptors(
        &self,
        root: &Node<B>,
        request: &RateLimitRequest,
        now: Moment,
    ) -> Matches<B> {
        let mut found: Vec<Option<Matched<B>>> = Vec::with_capacity(request.descriptors.len());
        let mut refused: Vec<(usize, Refused, LimitOverride)> = Vec::new();
        for (i, descriptor) in request.descriptors.iter().enumerate() {
            let one = match descriptor.limit {
                Some(limit) if self.inner.bounds.request_overrides => {
                    match self.override_rule(&request.domain, limit, now) {
                        Ok(rule) => Some((rule, Vec::new())),
                        Err(why) => {
                            refused.push((i, why, limit));
                            None
                        }
                    }
                }
                Some(_) => {
                    self.inner.metrics.request_override("ignored");
                    find(root, &descriptor.entries)
                }
                None => find(root, &descriptor.entries),
            };
            found.push(one);
        }
        // Matched nothing (a request's refused override did match: its own limit).
        let unmatched = found.iter().filter(|one| one.is_none()).count() - refused.len();
        if unmatched > 0 {
            let unmatched = u64::try_from(unmatched).unwrap_or(u64::MAX);
            self.inner.metrics.no_rule(&request.domain, unmatched);
        }
        replace(&mut found);
        Matches { found, refused }
    }

    /// Each descriptor checked against its limit, in order; the first store error ends it.
    async fn check_descriptors(
        &self,
        request: &RateLimitRequest,
        matches: &Matches<B>,
        now: Moment,
        span: &tracing::Span,
    ) -> Result<Tally, RequestError> {
        let request_hits = if request.hits_addend == 0 {
            1
        } else {
            request.hits_addend
        };
        let mut tally = Tally::new(request.descriptors.len());
        for (i, (descriptor, slot)) in request.descriptors.iter().zip(&matches.found).enumerate() {
            if let Some((_, why, limit)) = matches.refused.iter().find(|(at, _, _)| *at == i) {
                tally.failed_rate += 1;
                tally.statuses.push(refused_status(why, *limit));
                continue;
            }
            let Some((rule, shared)) = slot else {
                tally.statuses.push(no_limit());
                continue;
            };
            let hits = descriptor.hits_addend.unwrap_or(request_hits);
            let span = spans::descriptor(span, &rule.shown, hits);
            let asked = (request.domain.as_str(), descriptor.entries.as_slice());
            // Reports and releases are boxed: their futures are the larger, and every check's
            // future would otherwise hold room for them (copied as the request's future moves).
            let checked = if rule.after_response {
                let hits = (hits, descriptor.is_negative_hits);
                Box::pin(self.report(rule, asked, shared, hits, now, &span)).await?
            } else if descriptor.is_negative_hits {
                Box::pin(self.release(rule, asked, shared, hits, now, &span)).await?
            } else {
                self.check(rule, asked, shared, hits, now, &span).await?
            };
            spans::checked(&span, rule.shadow, &checked);
            tally.add(i, rule, checked);
        }
        Ok(tally)
    }

    /// The answer's fields: every policy matched, the binding limit's `RateLimit` (and
    /// `Retry-After` when over), and whether a failure policy answered for a failed store.
    #[inline]
    fn headers(
        &self,
        request: &RateLimitRequest,
        matches: &Matches<B>,
        tally: &Tally,
        denied: bool,
    ) -> Vec<(HeaderName, HeaderValue)> {
        let mut headers = Vec::new();
        if !tally.policies.is_empty()
            && let Some(policy) = join_fields(&tally.policies)
        {
            headers.push((RATELIMIT_POLICY, policy));
        }
        if let Some((decision, (i, rule_at))) = tally.binding.get()
            && let Some((rule, shared)) = &matches.found[*i]
            && let ActionRt::Rules { fields, .. } = &rule.action
        {
            let value = match &self.answers.partition_keys {
                None => fields.rate_limit_at(*rule_at, decision),
                Some(keys) => {
                    let entries = &request.descriptors[*i].entries;
                    let key = counter_key(&request.domain, &rule.path, entries, shared);
                    fields.rate_limit_keyed(*rule_at, decision, keys, RequestKey::Text(&key))
                }
            };
            headers.push((RATELIMIT, value));
            if denied && let Some(retry) = slidewin_http::retry_after(decision) {
                headers.push((http::header::RETRY_AFTER, retry));
            }
        }
        if tally.degraded
            && let Some(way) = self.inner.backend.failure_policy()
        {
            headers.push((
                slidewin_http::SLIDEWIN_DEGRADED,
                HeaderValue::from_static(way.as_str()),
            ));
        }
        headers
    }

    /// The store for a limit a request set, made on first use, or why it is refused.
    fn override_rule(
        &self,
        domain: &str,
        limit: LimitOverride,
        now: Moment,
    ) -> Result<Arc<RuleRt<B>>, Refused> {
        let inner = &self.inner;
        let found = inner.overrides.rule(
            &inner.backend,
            &inner.metrics,
            &inner.bounds,
            (domain, limit),
            now,
        );
        inner.metrics.request_override(match &found {
            Ok(_) => "applied",
            Err(_) => "refused",
        });
        if let Err(why) = &found {
            tracing::debug!(domain, %why, "a request's limit override was refused");
        }
        found
    }
}

impl<B: Backend> RuleRt<B> {
    /// Its counters, made at its first hit.
    #[inline]
    pub(crate) fn metrics(&self) -> &RuleMetrics {
        self.metrics
            .get((&self.domain, &self.shown, &self.path), || {
                self.limits_shown()
            })
    }

    /// Its rules as the gauges show them: a blocked limit admits 0 in its unit.
    pub(crate) fn limits_shown(&self) -> Vec<LimitShown> {
        match &self.action {
            ActionRt::Unlimited => Vec::new(),
            ActionRt::Blocked { unit } => vec![LimitShown {
                name: self.shown.clone(),
                limit: 0,
                span_seconds: unit.span().as_secs_f64(),
            }],
            ActionRt::Rules { spec, .. } => spec
                .rules()
                .iter()
                .map(|rule| LimitShown {
                    name: rule.name().to_owned(),
                    limit: rule.quota().limit(),
                    span_seconds: rule.quota().span().as_secs_f64(),
                })
                .collect(),
        }
    }

    /// Removes every series it made: its counters, its gauges, its per-descriptor series.
    pub(crate) fn forget_metrics(&self, metrics: &Metrics) {
        metrics.forget_rule(&self.domain, &self.shown, &self.path);
        let names = self.limits_shown();
        metrics.forget_limits(
            &self.domain,
            &self.shown,
            names.iter().map(|l| l.name.as_str()),
        );
        if let Some(detail) = &self.detail {
            detail.forget(metrics, &self.domain, &self.shown);
        }
    }

    /// Its one name (see [`crate::config::DescriptorLimit::name`]).
    pub(crate) fn display_name(&self) -> &str {
        &self.shown
    }
}

/// A descriptor's limit, and the patterns `share_threshold` nodes count its entries under
/// (by entry index).
type Matched<B> = (Arc<RuleRt<B>>, Vec<(usize, String)>);

/// Each descriptor's limit, by index, and the descriptors whose own limit was refused: by
/// index, why, and what they asked.
struct Matches<B: Backend> {
    found: Vec<Option<Matched<B>>>,
    refused: Vec<(usize, Refused, LimitOverride)>,
}

/// A descriptor no limit matched: OK, as envoy ratelimit answers.
fn no_limit() -> DescriptorStatus {
    DescriptorStatus {
        code: Code::Ok,
        current_limit: None,
        limit_remaining: 0,
        duration_until_reset: None,
    }
}

/// `replaces`: a named limit is dropped when another matched limit replaces it.
fn replace<B: Backend>(matched: &mut [Option<Matched<B>>]) {
    let replaced: Vec<String> = matched
        .iter()
        .flatten()
        .flat_map(|(rule, _)| rule.replaces.iter().cloned())
        .collect();
    if replaced.is_empty() {
        return;
    }
    for slot in matched {
        // An unlimited limit is never replaced: envoy ratelimit sets it aside first.
        if slot
            .as_ref()
            .filter(|(rule, _)| !matches!(rule.action, ActionRt::Unlimited))
            .and_then(|(rule, _)| rule.name.as_ref())
            .is_some_and(|name| replaced.contains(name))
        {
            *slot = None;
        }
    }
}

/// Several policies' `RateLimit-Policy` members, as one field.
fn join_fields(values: &[HeaderValue]) -> Option<HeaderValue> {
    let mut joined = Vec::new();
    for value in values {
        if !joined.is_empty() {
            joined.extend_from_slice(b", ");
        }
        joined.extend_from_slice(value.as_bytes());
    }
    HeaderValue::from_bytes(&joined).ok()
}
