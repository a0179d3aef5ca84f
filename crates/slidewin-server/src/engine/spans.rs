//! The spans of a check, for a tracing subscriber that asks for them (`slidewin serve
//! --otlp-endpoint` exports them over OTLP): one for the request, and under it one for each
//! descriptor checked against a limit, with the backend's time.
//!
//! They are at TRACE level under their own target, [`SPAN_TARGET`], so that a check with no
//! subscriber asking for them pays a load of tracing's level filter and nothing more, and the
//! backend is timed only when a span will carry the figure. The spans are never entered: a
//! child names its parent, so an `.await` inside a check needs no span guard.

use std::sync::OnceLock;
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

/// The longest `traceparent` read: version 00's is 55 bytes; a later version may add fields.
const MAX_TRACEPARENT: usize = 256;

/// What joins a request's span to its caller's trace, set once by [`join_callers_traces`].
static JOIN: OnceLock<fn(&Span, &str)> = OnceLock::new();

/// Joins each check's span to the trace of the call that asked for it: `join` is given the
/// request's span and the call's W3C `traceparent` (a gRPC metadata entry or an HTTP header;
/// at most 256 bytes, the rest ignored) when the span is recorded, and sets its parent (the
/// CLI does it with the OpenTelemetry SDK's propagator). Set once per process; later calls
/// are ignored, and it returns whether this one was kept.
///
/// ```
/// fn join(span: &tracing::Span, traceparent: &str) {
///     // Parse `traceparent` and make it `span`'s parent.
/// }
/// assert!(slidewin_server::join_callers_traces(join));
/// assert!(!slidewin_server::join_callers_traces(join));
/// ```
pub fn join_callers_traces(join: fn(&Span, &str)) -> bool {
    JOIN.set(join).is_ok()
}

/// A call's W3C `traceparent` header (gRPC metadata or HTTP), read only while the check's
/// spans are recorded.
#[inline]
pub(crate) fn traceparent(headers: &http::HeaderMap) -> Option<String> {
    if !tracing::enabled!(target: SPAN_TARGET, tracing::Level::TRACE) {
        return None;
    }
    let value = headers.get("traceparent")?.to_str().ok()?;
    Some(value.to_owned())
}

/// A count as a span's integer: OpenTelemetry's are `i64`, and an unsigned one would be
/// exported as text. Counts here are far below `i64::MAX`; past it, the most an `i64` holds.
fn count(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// A request's span, its fields recorded when it is answered; under the caller's trace when
/// `traceparent` names one and a join is set.
#[inline]
pub(super) fn request(traceparent: Option<&str>) -> Span {
    let span = request_span();
    if let Some(traceparent) = traceparent.filter(|t| t.len() <= MAX_TRACEPARENT)
        && let Some(join) = JOIN.get()
        && !span.is_disabled()
    {
        join(&span, traceparent);
    }
    span
}

#[inline]
fn request_span() -> Span {
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
    if let Err(e) = answer {
        span.record("otel.status_code", "ERROR");
        span.record("error", tracing::field::display(e));
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
