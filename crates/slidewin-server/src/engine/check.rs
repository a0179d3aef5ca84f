//! One descriptor checked against the limit it matched: its key counted in the backend, its
//! metrics and statistics kept, and its status answered.

use slidewin::stats::MetricEvent;
use slidewin::{Decision, Moment};
use slidewin_store::{BackendError, Checked, RequestKey};
use tracing::Span;

use super::request::{Code, CurrentLimit, DescriptorStatus, Entry, LimitOverride, RequestError};
use super::{ActionRt, Engine, RuleRt, spans};
use crate::config::Unit;
use crate::metrics::RuleMetrics;
use crate::overrides::Refused;
use crate::top::Denier;
use slidewin_store::Backend;

/// What checking one descriptor against its limit found.
pub(super) struct DescriptorCheck {
    /// Its answer.
    pub(super) status: DescriptorStatus,
    /// The index of the binding rule in the limit's set, and that rule's decision; `None` when
    /// nothing was counted.
    pub(super) decided: Option<(usize, Decision)>,
    /// Whether the store failed and the backend's failure policy answered instead.
    pub(super) without_store: bool,
}

impl DescriptorCheck {
    /// An answer with nothing counted.
    fn uncounted(status: DescriptorStatus) -> DescriptorCheck {
        DescriptorCheck {
            status,
            decided: None,
            without_store: false,
        }
    }
}

impl<B: Backend> Engine<B> {
    /// Checks `hits` of `entries` against `rule`, in `domain`, at `now`; `shared` are the
    /// patterns its `share_threshold` entries count under. The backend's time goes on `span`.
    pub(super) async fn check(
        &self,
        rule: &RuleRt<B>,
        (domain, entries): (&str, &[Entry]),
        shared: &[(usize, String)],
        hits: u64,
        now: Moment,
        span: &Span,
    ) -> Result<DescriptorCheck, RequestError> {
        let metrics = rule.metrics();
        match &rule.action {
            ActionRt::Unlimited => Ok(DescriptorCheck::uncounted(DescriptorStatus {
                code: Code::Ok,
                current_limit: None,
                limit_remaining: u32::MAX,
                duration_until_reset: None,
            })),
            ActionRt::Blocked { unit } => {
                metrics.total_hits.inc_by(hits);
                let code = self.over(rule, hits, now, entries, None);
                Ok(DescriptorCheck::uncounted(DescriptorStatus {
                    code,
                    current_limit: Some(CurrentLimit {
                        name: rule.display_name().to_owned(),
                        requests_per_unit: 0,
                        unit: Some(*unit),
                    }),
                    limit_remaining: 0,
                    duration_until_reset: Some(unit.span()),
                }))
            }
            ActionRt::Rules {
                spec, units, store, ..
            } => {
                let key = counter_key(domain, &rule.path, entries, shared);
                metrics.total_hits.inc_by(hits);
                let key = RequestKey::Text(&key);
                let started = spans::store_started(span);
                let checked = match self.inner.backend.check_at_once(store, key, now, hits) {
                    Some(answer) => answer,
                    None => self.inner.backend.check(store, key, now, hits).await,
                };
                spans::store_done(span, started);
                let current = |binding| current_limit(rule, spec, units, binding);
                match checked {
                    Ok(checked) => {
                        let limit = current(checked.binding());
                        Ok(self.counted(rule, &checked, hits, now, entries, limit))
                    }
                    Err(err) => self.store_failed(err, rule, hits, now, entries, current(0)),
                }
            }
        }
    }

    /// Gives back `hits` of `entries` under `rule` (envoy's `is_negative_hits`: a request
    /// that held leases ended, or cost less than it was charged), then answers the limit as
    /// it stands, by a check of no hits. See [`give_back`](Engine::give_back).
    pub(super) async fn release(
        &self,
        rule: &RuleRt<B>,
        (domain, entries): (&str, &[Entry]),
        shared: &[(usize, String)],
        hits: u64,
        now: Moment,
        span: &Span,
    ) -> Result<DescriptorCheck, RequestError> {
        self.give_back(rule, (domain, entries), shared, hits, now)
            .await?;
        self.check(rule, (domain, entries), shared, 0, now, span)
            .await
    }

    /// Gives back up to `hits` of `entries` under `rule`'s leases and its logs that refund
    /// (`refunds: true`), the oldest units first. A limit with neither keeps what it counted:
    /// the hits are counted as kept (`slidewin_rate_limit_kept`), so that negative hits sent
    /// to it are seen. A limit of no store holds nothing to give.
    pub(super) async fn give_back(
        &self,
        rule: &RuleRt<B>,
        (domain, entries): (&str, &[Entry]),
        shared: &[(usize, String)],
        hits: u64,
        now: Moment,
    ) -> Result<(), RequestError> {
        let ActionRt::Rules { spec, store, .. } = &rule.action else {
            return Ok(());
        };
        if !spec.rules().iter().any(slidewin::limit::Rule::gives_back) {
            rule.metrics().kept.inc_by(hits);
            return Ok(());
        }
        let key = counter_key(domain, &rule.path, entries, shared);
        let backend = &self.inner.backend;
        match backend
            .release(store, RequestKey::Text(&key), now, hits)
            .await
        {
            Ok(released) => {
                rule.metrics().released.inc_by(released);
                Ok(())
            }
            // The store is down and a failure policy answers for it: the units leave by
            // their leases or their window, and the answer is the policy's, degraded.
            Err(BackendError::Unavailable { .. }) if backend.failure_policy().is_some() => Ok(()),
            Err(err) => {
                self.inner.metrics.backend_error();
                Err(RequestError::Unavailable {
                    detail: err.to_string(),
                })
            }
        }
    }

    /// A descriptor the store counted: passed, or over its limit.
    #[inline]
    pub(super) fn counted(
        &self,
        rule: &RuleRt<B>,
        checked: &Checked,
        hits: u64,
        now: Moment,
        entries: &[Entry],
        current_limit: CurrentLimit,
    ) -> DescriptorCheck {
        let without_store = checked.degraded().is_some();
        if without_store {
            self.inner.metrics.backend_error();
        }
        let binding = checked.binding();
        let decision = checked.decision();
        let code = if decision.allowed() {
            let near = self.answers.near_limit_permille;
            passed(rule, rule.metrics(), (hits, near), now, decision);
            Code::Ok
        } else {
            self.over(rule, hits, now, entries, Some(binding))
        };
        if let Some(detail) = &rule.detail {
            let result = match (decision.allowed(), rule.shadow) {
                (true, _) => "within_limit",
                (false, true) => "shadow_mode",
                (false, false) => "over_limit",
            };
            let series = detail.series(entries);
            self.inner
                .metrics
                .descriptor_hits(&rule.domain, &rule.shown, &series, result, hits);
        }
        let remaining = u32::try_from(decision.remaining()).unwrap_or(u32::MAX);
        DescriptorCheck {
            status: DescriptorStatus {
                code,
                current_limit: Some(current_limit),
                limit_remaining: remaining,
                duration_until_reset: Some(decision.reset_after()),
            },
            decided: Some((binding, decision)),
            without_store,
        }
    }

    /// A store that would not count (no room for the key, a cost past the limit: over the
    /// limit, nothing counted) or could not be reached (the request fails; a failure policy
    /// would have answered in the store).
    #[cold]
    pub(super) fn store_failed(
        &self,
        err: BackendError,
        rule: &RuleRt<B>,
        hits: u64,
        now: Moment,
        entries: &[Entry],
        limit: CurrentLimit,
    ) -> Result<DescriptorCheck, RequestError> {
        match err {
            refused @ (BackendError::CostTooHigh { .. }
            | BackendError::KeysFull { .. }
            | BackendError::MemoryFull { .. }) => {
                Ok(self.refused_by_store(&refused, rule, hits, now, entries, limit))
            }
            other => {
                self.inner.metrics.backend_error();
                Err(RequestError::Unavailable {
                    detail: other.to_string(),
                })
            }
        }
    }

    /// A descriptor the store would not count: more hits than the limit ever admits, or no
    /// room for its key. Over the limit, with nothing counted. At the key cap or the memory
    /// budget a new key is refused, so no limited key is pushed out.
    fn refused_by_store(
        &self,
        refused: &BackendError,
        rule: &RuleRt<B>,
        hits: u64,
        now: Moment,
        entries: &[Entry],
        current_limit: CurrentLimit,
    ) -> DescriptorCheck {
        match refused {
            BackendError::KeysFull { .. } => self.inner.metrics.key_cap_refusal(),
            BackendError::MemoryFull { .. } => self.inner.metrics.memory_refusal(),
            _ => {}
        }
        let code = self.over(rule, hits, now, entries, None);
        DescriptorCheck::uncounted(DescriptorStatus {
            code,
            current_limit: Some(current_limit),
            limit_remaining: 0,
            duration_until_reset: None,
        })
    }

    /// Counts an over-limit descriptor and answers its code: OK in shadow mode. `limit` is
    /// the index of the limit in the rule's set that found it over, if one did (the store's
    /// refusals and a limit of 0 are no limit's).
    fn over(
        &self,
        rule: &RuleRt<B>,
        hits: u64,
        now: Moment,
        entries: &[Entry],
        limit: Option<usize>,
    ) -> Code {
        rule.metrics().over_limit.inc_by(hits);
        if let Some(limit) = limit {
            rule.limit_stats.over(now, limit);
        }
        if rule.shadow {
            rule.metrics().shadow_mode.inc_by(hits);
            // Counted as shadow-denied only: the three outcomes never overlap.
            rule.stats.shadow.add(now, MetricEvent::Block, 1);
            Code::Ok
        } else {
            rule.stats.outcomes.add(now, MetricEvent::Block, 1);
            let limit_name = match (&rule.action, limit) {
                (ActionRt::Rules { spec, .. }, Some(limit)) => spec
                    .rules()
                    .get(limit)
                    .map_or(rule.display_name(), |one| limit_name(rule, spec, one)),
                _ => rule.display_name(),
            };
            let denier = Denier {
                domain: &rule.domain,
                rule: rule.display_name(),
                limit: limit_name,
            };
            self.inner.top.deny(now, &denier, entries);
            Code::OverLimit
        }
    }
}

/// A descriptor within its limit: counted as passed, and as near the limit past `near`
/// thousandths of it.
fn passed<B: Backend>(
    rule: &RuleRt<B>,
    metrics: &RuleMetrics,
    (hits, near): (u64, u16),
    now: Moment,
    decision: Decision,
) {
    rule.stats.outcomes.add(now, MetricEvent::Pass, 1);
    metrics.within_limit.inc_by(hits);
    let limit = decision.limit();
    let used = limit.saturating_sub(decision.remaining());
    // envoy ratelimit's near limit: past the ratio of the limit after this request.
    if u128::from(used) * 1000 > u128::from(limit) * u128::from(near) {
        metrics.near_limit.inc_by(hits);
    }
}

/// A descriptor whose own limit was refused: over the limit (a limit is never switched off by
/// asking for one that cannot be had), the reason as its limit's name (envoy's
/// `RateLimit.name`: "a name or description of this limit").
pub(super) fn refused_status(why: &Refused, limit: LimitOverride) -> DescriptorStatus {
    DescriptorStatus {
        code: Code::OverLimit,
        current_limit: Some(CurrentLimit {
            name: why.to_string(),
            requests_per_unit: limit.requests_per_unit,
            unit: Some(limit.unit),
        }),
        limit_remaining: 0,
        duration_until_reset: None,
    }
}

/// The name `one`, a limit of `rule`'s set `spec`, is shown by: the rule's own when it is the
/// only one, else its own within the rule.
pub(super) fn limit_name<'a, B: Backend>(
    rule: &'a RuleRt<B>,
    spec: &slidewin::limit::RuleSet,
    one: &'a slidewin::limit::Rule,
) -> &'a str {
    if spec.rules().len() == 1 {
        rule.display_name()
    } else {
        one.name()
    }
}

pub(super) fn current_limit<B: Backend>(
    rule: &RuleRt<B>,
    spec: &slidewin::limit::RuleSet,
    units: &[Option<Unit>],
    binding: usize,
) -> CurrentLimit {
    let index = binding.min(spec.rules().len() - 1);
    let one = &spec.rules()[index];
    CurrentLimit {
        name: limit_name(rule, spec, one).to_owned(),
        requests_per_unit: u32::try_from(one.quota().limit()).unwrap_or(u32::MAX),
        unit: units.get(index).copied().flatten(),
    }
}

/// The key a descriptor counts under: the SHA-256 of the domain, the limit's path and each
/// entry, each prefixed by its length (so that no crafted value can spell another limit's or
/// entry's key), in hex. So a key is 64 bytes in memory and in Redis whatever the descriptor
/// (16 entries of 1 KB made a 35 KB Redis key), and two descriptors share a count only if they
/// are the same: finding two that are not takes a SHA-256 collision. The readable form is in
/// the dashboard's top keys and the logs, never in the store.
pub(super) fn counter_key(
    domain: &str,
    path: &str,
    entries: &[Entry],
    shared: &[(usize, String)],
) -> String {
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    let mut push = |text: &str| {
        digest.update(&(text.len() as u64).to_be_bytes());
        digest.update(text.as_bytes());
    };
    push(domain);
    push(path);
    for (i, entry) in entries.iter().enumerate() {
        push(&entry.key);
        match shared.iter().find(|(at, _)| *at == i) {
            Some((_, pattern)) => push(pattern),
            None => push(&entry.value),
        }
    }
    // Two digits a byte from a table: `write!` with `{:02x}` took a third of a check's
    // instructions (callgrind), the formatter's machinery for each of 32 bytes.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = [0_u8; 64];
    for (pair, byte) in hex.chunks_exact_mut(2).zip(digest.finish().as_ref()) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0x0f)];
    }
    String::from_utf8(hex.to_vec()).expect("hex digits are ASCII")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 29: 16 entries of 1 KB each made a 35 KB counter key (a Redis key that filled a
    /// 16 MB Redis in 474 requests).
    #[test]
    fn hostile_29_counter_keys_have_a_bounded_length() {
        let huge = "x".repeat(1024);
        let entries: Vec<Entry> = (0..16).map(|_| Entry::new(&huge, &huge)).collect();
        let key = counter_key(&huge, &huge, &entries, &[]);
        assert_eq!(key.len(), 64);
        assert!(key.bytes().all(|b| b.is_ascii_hexdigit()), "{key}");
        assert_eq!(counter_key("", "", &[], &[]).len(), 64);
    }

    /// The keys are what they were before the hex digits came from a table: a key kept in Redis
    /// across an upgrade is the same key. SHA-256 of the length-prefixed parts, in lowercase hex
    /// (computed apart, with Python's hashlib).
    #[test]
    fn counter_keys_are_the_sha256_of_their_parts_in_lowercase_hex() {
        assert_eq!(
            counter_key("", "", &[], &[]),
            "374708fff7719dd5979ec875d56cd2286f6d3cf7ec317a3b25632aab28ec37bb"
        );
        assert_eq!(
            counter_key("edge", "user", &[Entry::new("user", "ann")], &[]),
            "8f8e811bbdafdbb45f0a5dfd9430e4b4095c857a001c960990761ffe1cb7f626"
        );
    }

    #[test]
    fn counter_keys_cannot_be_forged_by_values() {
        let a = counter_key("d", "d.k", &[Entry::new("k", "a1:b")], &[]);
        let b = counter_key(
            "d",
            "d.k",
            &[Entry::new("k", "a"), Entry::new("b", "")],
            &[],
        );
        assert_ne!(a, b);
        let pattern = [(0, "a*".to_owned())];
        let shared = counter_key("d", "d.k_a*", &[Entry::new("k", "abc")], &pattern);
        assert_eq!(
            shared,
            counter_key("d", "d.k_a*", &[Entry::new("k", "axy")], &pattern)
        );
    }
}
