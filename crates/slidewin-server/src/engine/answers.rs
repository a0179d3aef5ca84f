//! How an answer is given, besides its decisions: the global shadow mode, the headers it asks
//! Envoy to add, and where "near the limit" begins.

use http::{HeaderName, HeaderValue};
use slidewin_http::PartitionKeys;

use super::request::{Code, DescriptorStatus};

/// How the engine answers, the same for every domain: envoy ratelimit's `SHADOW_MODE`,
/// `LIMIT_RESPONSE_HEADERS_ENABLED` with its header names, and `NEAR_LIMIT_RATIO`.
///
/// ```
/// use slidewin_server::{AnswerOptions, ResponseHeaders};
/// let options = AnswerOptions::default();
/// assert!(!options.shadow_mode);
/// assert_eq!(options.headers, ResponseHeaders::Draft);
/// assert_eq!(options.near_limit_permille, 800);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnswerOptions {
    /// Every request over a limit is answered OK (its descriptors still say `OVER_LIMIT`, and
    /// it is counted in `slidewin_global_shadow_mode_total`): a config tried in production
    /// without denying anyone. `false` by default.
    pub shadow_mode: bool,
    /// The headers an answer asks Envoy to add to its response. [`ResponseHeaders::Draft`] by
    /// default.
    pub headers: ResponseHeaders,
    /// A request within its limit counts as near it (`slidewin_near_limit_total`) when the
    /// limit is used past this many thousandths of it: 800 by default, envoy ratelimit's 0.8.
    pub near_limit_permille: u16,
    /// Whose keyed digest names the binding descriptor's partition in `RateLimit` (the
    /// draft's `pk`): never the descriptor's values. `None` (the default): no `pk`.
    pub partition_keys: Option<PartitionKeys>,
}

impl Default for AnswerOptions {
    fn default() -> AnswerOptions {
        AnswerOptions {
            shadow_mode: false,
            headers: ResponseHeaders::Draft,
            near_limit_permille: 800,
            partition_keys: None,
        }
    }
}

/// The headers an answer carries for Envoy to add to the response it sends its client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResponseHeaders {
    /// `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers), with
    /// `Retry-After` when the request is denied, and `slidewin-degraded` when a failure policy
    /// answered for the store.
    Draft,
    /// envoy ratelimit's three (its `LIMIT_RESPONSE_HEADERS_ENABLED`), for the descriptor
    /// closest to its limit: the limit, what is left of it, and the whole seconds until it is
    /// back to full; under these names.
    Envoy {
        /// `RateLimit-Limit` in envoy ratelimit.
        limit: HeaderName,
        /// `RateLimit-Remaining`.
        remaining: HeaderName,
        /// `RateLimit-Reset`.
        reset: HeaderName,
    },
    /// None: envoy ratelimit's default.
    None,
}

impl ResponseHeaders {
    /// envoy ratelimit's three headers under its default names.
    #[must_use]
    pub fn envoy() -> ResponseHeaders {
        ResponseHeaders::Envoy {
            limit: HeaderName::from_static("ratelimit-limit"),
            remaining: HeaderName::from_static("ratelimit-remaining"),
            reset: HeaderName::from_static("ratelimit-reset"),
        }
    }
}

/// envoy ratelimit's headers for `statuses`: those of the last descriptor over its limit, else
/// of the first with the least left; none when no descriptor had a limit.
pub(super) fn envoy_headers(
    (limit, remaining, reset): (&HeaderName, &HeaderName, &HeaderName),
    statuses: &[DescriptorStatus],
) -> Vec<(HeaderName, HeaderValue)> {
    let limited = statuses.iter().filter(|s| s.current_limit.is_some());
    let closest = limited
        .clone()
        .rfind(|s| s.code == Code::OverLimit)
        .or_else(|| limited.min_by_key(|s| s.limit_remaining));
    let Some(status) = closest else {
        return Vec::new();
    };
    let Some(current) = &status.current_limit else {
        return Vec::new();
    };
    let reset_seconds = status
        .duration_until_reset
        .map_or(0, |d| d.as_secs() + u64::from(d.subsec_nanos() > 0));
    vec![
        (limit.clone(), HeaderValue::from(current.requests_per_unit)),
        (remaining.clone(), HeaderValue::from(status.limit_remaining)),
        (reset.clone(), HeaderValue::from(reset_seconds)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::request::CurrentLimit;
    use std::time::Duration;

    fn status(code: Code, limit: u32, remaining: u32, reset_ms: u64) -> DescriptorStatus {
        DescriptorStatus {
            code,
            current_limit: Some(CurrentLimit {
                name: String::new(),
                requests_per_unit: limit,
                unit: None,
            }),
            limit_remaining: remaining,
            duration_until_reset: Some(Duration::from_millis(reset_ms)),
        }
    }

    fn names() -> (HeaderName, HeaderName, HeaderName) {
        let ResponseHeaders::Envoy {
            limit,
            remaining,
            reset,
        } = ResponseHeaders::envoy()
        else {
            unreachable!()
        };
        (limit, remaining, reset)
    }

    fn values(statuses: &[DescriptorStatus]) -> Vec<String> {
        let (l, r, s) = names();
        envoy_headers((&l, &r, &s), statuses)
            .into_iter()
            .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap()))
            .collect()
    }

    #[test]
    fn envoy_headers_name_the_descriptor_closest_to_its_limit() {
        let statuses = [
            status(Code::Ok, 10, 7, 1_000),
            status(Code::Ok, 100, 3, 59_001),
            status(Code::Ok, 5, 3, 2_000),
        ];
        assert_eq!(
            values(&statuses),
            [
                "ratelimit-limit: 100",
                "ratelimit-remaining: 3",
                "ratelimit-reset: 60"
            ]
        );
    }

    #[test]
    fn envoy_headers_name_a_denied_descriptor_first() {
        let statuses = [
            status(Code::Ok, 10, 0, 1_000),
            status(Code::OverLimit, 3, 0, 4_000),
        ];
        assert_eq!(values(&statuses)[0], "ratelimit-limit: 3");
        assert_eq!(values(&statuses)[2], "ratelimit-reset: 4");
    }

    #[test]
    fn envoy_headers_are_none_without_a_limit() {
        let mut unlimited = status(Code::Ok, 0, 0, 0);
        unlimited.current_limit = None;
        assert!(values(&[]).is_empty());
        assert!(values(&[unlimited]).is_empty());
    }
}
