//! The spans of a check, for a tracing subscriber that asks for them (`slidewin serve
//! --otlp-endpoint` exports them over OTLP): one for the request, and under it one for each
//! descriptor checked against a limit, with the backend's time.
//!
//! They are at TRACE level under their own target, [`SPAN_TARGET`], so that a check with no
//! subscriber asking for them pays a load of tracing's level filter and nothing more, and the
//! backend is timed only when a span will carry the figure. The spans are never entered: a
//! child names its parent, so an `.await` inside a check needs no span guard.

use std::time::Instant;

use tracing::Span;
use tracing::field::Empty;

use super::check::DescriptorCheck;
use super::request::{RateLimitRequest, RateLimitResponse, RequestError};

/// The target of the check spans: a subscriber enables them with this target at TRACE level
/// (`slidewin::check=trace`).
///
/// ```
/// assert_eq!(slidewin_server::SPAN_TARGET, "slidewin::check");
/// ```
pub const SPAN_TARGET: &str = "slidewin::check";

/// A count as a span's integer: OpenTelemetry's are `i64`, and an unsigned one would be
/// exported as text. Counts here are far below `i64::MAX`; past it, the most an `i64` holds.
fn count(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// A request's span, its fields recorded when it is answered.
#[inline]
pub(super) fn request() -> Span {
    tracing::trace_span!(
        target: SPAN_TARGET,
        "slidewin.check",
        otel.kind = "server",
        domain = Empty,
        descriptors = Empty,
        decision = Empty,
        otel.status_code = Empty,
        error = Empty,
    )
}

/// What `request`'s span says of its answer: the domain (once the request is within its
/// bounds, so a span never holds more than `max_text_len` of a client's bytes), the number
/// of descriptors, and the decision or the error.
#[inline]
pub(super) fn answered(
    span: &Span,
    request: &RateLimitRequest,
    max_text_len: usize,
    answer: &Result<RateLimitResponse, RequestError>,
) {
    if span.is_disabled() {
        return;
    }
    if request.domain.len() <= max_text_len {
        span.record("domain", request.domain.as_str());
    }
    span.record("descriptors", count(request.descriptors.len()));
    match answer {
        Ok(_) => {}
        Err(e) => {
            span.record("otel.status_code", "ERROR");
            span.record("error", tracing::field::display(e));
        }
    }
}

/// Records a request's decision: within its limits, over one, or over one and answered OK by
/// the global shadow mode. The names are those of the metrics' `result` label.
#[inline]
pub(super) fn decided(span: &Span, over: bool, denied: bool) {
    span.record("decision", decision(over, denied));
}

fn decision(over: bool, denied: bool) -> &'static str {
    match (over, denied) {
        (false, _) => "within_limit",
        (true, true) => "over_limit",
        (true, false) => "shadow_mode",
    }
}

/// A descriptor's span under its request's, for `hits` against the limit named `rule`.
#[inline]
pub(super) fn descriptor(parent: &Span, rule: &str, hits: u64) -> Span {
    if parent.is_disabled() {
        return Span::none();
    }
    tracing::trace_span!(
        target: SPAN_TARGET,
        parent: parent,
        "slidewin.descriptor",
        rule,
        hits = count(hits),
        limit = Empty,
        decision = Empty,
        degraded = Empty,
        store_us = Empty,
    )
}

/// What a descriptor's check found: the limit that bound it, its decision (a limit in shadow
/// mode over its limit says `shadow_mode`), and whether a failure policy answered for the store.
#[inline]
pub(super) fn checked(span: &Span, shadow: bool, checked: &DescriptorCheck) {
    if span.is_disabled() {
        return;
    }
    if let Some(limit) = &checked.status.current_limit {
        span.record("limit", limit.name.as_str());
    }
    // Over even where a shadow limit answered OK: a counted check by its decision; one with
    // nothing counted (a limit of 0, the store's refusal) by its limit and nothing remaining.
    let over = match checked.decided {
        Some((_, decided)) => !decided.allowed(),
        None => checked.status.current_limit.is_some() && checked.status.limit_remaining == 0,
    };
    span.record("decision", decision(over, !shadow));
    if checked.without_store {
        span.record("degraded", true);
    }
}

/// The start of a backend call, when `span` will carry its time.
#[inline]
pub(super) fn store_started(span: &Span) -> Option<Instant> {
    (!span.is_disabled()).then(Instant::now)
}

/// Records the backend's time since `started` on `span`, in microseconds.
#[inline]
pub(super) fn store_done(span: &Span, started: Option<Instant>) {
    if let Some(started) = started {
        span.record("store_us", count(started.elapsed().as_micros()));
    }
}
