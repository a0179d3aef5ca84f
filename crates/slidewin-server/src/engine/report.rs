//! A descriptor whose hits are costs reported after the response (`after_response: true`):
//! Envoy's `apply_on_stream_done` sends the tokens a model used, say, once the stream is over,
//! and a request-time descriptor of no hits asks whether anything is left. A report is
//! charged whatever the limit: the cost was spent already, and refusing it would only lose it.

use slidewin::Moment;
use slidewin::limit::Reservation;
use slidewin_store::{Backend, Checked, RequestKey};
use tracing::Span;

use super::check::{DescriptorCheck, counter_key, current_limit};
use super::request::{Code, CurrentLimit, DescriptorStatus, Entry, RequestError};
use super::{ActionRt, Engine, RuleRt, spans};

impl<B: Backend> Engine<B> {
    /// Answers `hits` of `entries` under `rule`, whose hits come after the response. No hits
    /// ask whether a unit is left (a peek of 1: over the limit with nothing left, and the wait
    /// until one unit is); more are charged at `now` whatever the limit, past it as debt that
    /// later questions wait out, and answered OK with what is left. A negative hit gives
    /// back what a limit that refunds holds, the oldest units first (a correction of a report
    /// that said too much), and is then asked as a question; a limit that does not refund
    /// keeps what it was charged.
    pub(super) async fn report(
        &self,
        rule: &RuleRt<B>,
        (domain, entries): (&str, &[Entry]),
        shared: &[(usize, String)],
        (hits, negative): (u64, bool),
        now: Moment,
        span: &Span,
    ) -> Result<DescriptorCheck, RequestError> {
        let ActionRt::Rules {
            spec, units, store, ..
        } = &rule.action
        else {
            // The config refuses `after_response` without rules that count.
            return self
                .check(rule, (domain, entries), shared, hits, now, span)
                .await;
        };
        let charge = if negative {
            self.give_back(rule, (domain, entries), shared, hits, now)
                .await?;
            0
        } else {
            hits
        };
        let metrics = rule.metrics();
        metrics.total_hits.inc_by(charge);
        let key = counter_key(domain, &rule.path, entries, shared);
        let key = RequestKey::Text(&key);
        let backend = &self.inner.backend;
        let current = |binding| current_limit(rule, spec, units, binding);
        let started = spans::store_started(span);
        if charge > 0 {
            let report = Reservation::unreserved(now);
            match backend.settle(store, key, report, charge).await {
                Ok(_) => metrics.charged.inc_by(charge),
                Err(err) => {
                    spans::store_done(span, started);
                    return self.store_failed(err, rule, charge, now, entries, current(0));
                }
            }
        }
        let asked = backend.peek(store, key, now, u64::from(charge == 0)).await;
        spans::store_done(span, started);
        match asked {
            Ok(checked) if charge > 0 => Ok(reported(&checked, current(checked.binding()))),
            Ok(checked) => {
                let limit = current(checked.binding());
                Ok(self.counted(rule, &checked, 0, now, entries, limit))
            }
            Err(err) => self.store_failed(err, rule, charge, now, entries, current(0)),
        }
    }
}

/// A report's answer: OK (it was charged; Envoy reads no answer at the end of a stream), with
/// what is left after it.
fn reported(checked: &Checked, limit: CurrentLimit) -> DescriptorCheck {
    let decision = checked.decision();
    DescriptorCheck {
        status: DescriptorStatus {
            code: Code::Ok,
            current_limit: Some(limit),
            limit_remaining: u32::try_from(decision.remaining()).unwrap_or(u32::MAX),
            duration_until_reset: Some(decision.reset_after()),
        },
        decided: Some((checked.binding(), decision)),
        without_store: checked.degraded().is_some(),
    }
}
