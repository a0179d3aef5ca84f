//! envoy ratelimit's `POST /json`: its request and response as JSON, read within bounds and
//! answered with the engine's decision.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::Endpoints;
use crate::config::Unit;
use crate::engine::Bounds;
use crate::engine::{
    Code, DescriptorStatus, Entry, LimitOverride, RateLimitRequest, RateLimitResponse,
    RequestDescriptor,
};
use slidewin_store::Backend;

/// `POST /json`'s body: envoy's `RateLimitRequest` in protobuf's JSON mapping (either
/// spelling of a field, as protobuf's JSON parsers take).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRequest {
    domain: String,
    #[serde(default)]
    descriptors: Vec<JsonDescriptor>,
    #[serde(default, alias = "hitsAddend", deserialize_with = "json_u64")]
    hits_addend: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonDescriptor {
    #[serde(default)]
    entries: Vec<JsonEntry>,
    #[serde(default, alias = "hitsAddend", deserialize_with = "json_opt_u64")]
    hits_addend: Option<u64>,
    #[serde(default)]
    limit: Option<JsonLimitOverride>,
    #[serde(default, alias = "isNegativeHits")]
    is_negative_hits: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonLimitOverride {
    #[serde(alias = "requestsPerUnit")]
    requests_per_unit: u32,
    unit: JsonUnit,
}

/// A unit as protobuf's JSON names it (`SECOND`), or as our config does (`second`).
struct JsonUnit(Unit);

impl<'de> Deserialize<'de> for JsonUnit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<JsonUnit, D::Error> {
        let text = String::deserialize(d)?;
        Unit::from_name(&text).map(JsonUnit).ok_or_else(|| {
            serde::de::Error::custom(format_args!(
                "unknown unit `{text}`: expected SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR"
            ))
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonEntry {
    key: String,
    #[serde(default)]
    value: String,
}

/// protobuf's JSON writes 64-bit integers as strings, and takes numbers too.
#[derive(Deserialize)]
#[serde(untagged)]
enum JsonInt {
    Number(u64),
    Text(String),
}

fn json_u64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match JsonInt::deserialize(d)? {
        JsonInt::Number(n) => Ok(n),
        JsonInt::Text(text) => text.parse().map_err(|_| {
            serde::de::Error::custom(format_args!("`{text}` is not an unsigned 64-bit integer"))
        }),
    }
}

fn json_opt_u64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    json_u64(d).map(Some)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonResponse {
    overall_code: &'static str,
    statuses: Vec<JsonStatus>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    response_headers_to_add: Vec<JsonHeader>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonStatus {
    code: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    current_limit: Option<JsonLimit>,
    #[serde(skip_serializing_if = "is_zero")]
    limit_remaining: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_until_reset: Option<String>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's signature
fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonLimit {
    name: String,
    requests_per_unit: u32,
    unit: &'static str,
}

#[derive(Serialize)]
struct JsonHeader {
    key: String,
    value: String,
}

/// An entry, from either interface's owned strings.
pub(super) fn entry(key: String, value: String) -> Entry {
    Entry { key, value }
}

fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::OverLimit => "OVER_LIMIT",
    }
}

/// A duration as protobuf's JSON writes one: seconds, with up to nine decimals, and `s`.
fn json_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        let text = format!("{}.{:09}", d.as_secs(), d.subsec_nanos());
        format!("{}s", text.trim_end_matches('0'))
    }
}

fn json_status(status: &DescriptorStatus) -> JsonStatus {
    JsonStatus {
        code: code_name(status.code),
        current_limit: status.current_limit.as_ref().map(|limit| JsonLimit {
            name: limit.name.clone(),
            requests_per_unit: limit.requests_per_unit,
            unit: limit.unit.map_or("UNKNOWN", |u| unit_upper(u.name())),
        }),
        limit_remaining: status.limit_remaining,
        duration_until_reset: status.duration_until_reset.map(json_duration),
    }
}

fn unit_upper(name: &str) -> &'static str {
    match name {
        "second" => "SECOND",
        "minute" => "MINUTE",
        "hour" => "HOUR",
        "day" => "DAY",
        "week" => "WEEK",
        "month" => "MONTH",
        "year" => "YEAR",
        _ => "UNKNOWN",
    }
}

fn problem(status: StatusCode, detail: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::json!({ "error": detail }).to_string(),
    )
        .into_response()
}

/// A body over [`Bounds::MAX_BODY_BYTES`]: 413, naming the bound.
fn too_large(declared: Option<u64>) -> Response {
    let what = declared.map_or_else(
        || "the request body is too large".to_owned(),
        |len| format!("the request body of {len} bytes is too large"),
    );
    problem(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("{what}: at most {} bytes", Bounds::MAX_BODY_BYTES),
    )
}

pub(super) async fn json<B: Backend>(
    State(service): State<Endpoints<B>>,
    request: axum::extract::Request,
) -> Response {
    use axum::extract::FromRequest;
    // Before anything is read or counted: a web page's form or `text/plain` post counts nothing.
    if let Err(why) = crate::access::json_content_type(request.headers()) {
        return problem(StatusCode::UNSUPPORTED_MEDIA_TYPE, &why);
    }
    // A declared length over the bound is refused on the headers alone: reading the body
    // first (as the `Bytes` extractor does, up to the bound) would wait for a client that
    // may never send it, and read a megabyte to refuse it anyway.
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > Bounds::MAX_BODY_BYTES as u64) {
        return too_large(declared);
    }
    let traceparent = crate::engine::traceparent(request.headers());
    // Chunked: read up to the bound (the router's `DefaultBodyLimit`), and no further.
    let body = match axum::body::Bytes::from_request(request, &()).await {
        Ok(body) => body,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return too_large(None);
        }
        Err(rejection) => {
            // Past the bound on the bytes of bodies in flight: the service is busy, not the
            // client wrong.
            if let Some(full) = crate::serve::bodies_full(&rejection) {
                return problem(StatusCode::SERVICE_UNAVAILABLE, &full.to_string());
            }
            return rejection.into_response();
        }
    };
    let request = match RateLimitRequest::from_json(&body) {
        Ok(request) => request,
        Err(e) => return problem(StatusCode::BAD_REQUEST, &format!("invalid request: {e}")),
    };
    let engine = service.engine();
    match engine
        .should_rate_limit_traced(&request, traceparent.as_deref())
        .await
    {
        Ok(response) => json_answer(&response),
        Err(e) if e.is_invalid_argument() => problem(StatusCode::BAD_REQUEST, &e.to_string()),
        Err(e) => problem(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}

impl RateLimitRequest {
    /// A request in envoy ratelimit's `POST /json` form (its field names in `snake_case` or
    /// `camelCase`, counts as numbers or strings), as `POST /json` reads it.
    ///
    /// # Errors
    ///
    /// What does not parse, or a field that is not one of the form's, said by serde.
    ///
    /// ```
    /// use slidewin_server::RateLimitRequest;
    /// let body = br#"{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}"#;
    /// let request = RateLimitRequest::from_json(body).unwrap();
    /// assert_eq!(request.domain, "edge");
    /// assert_eq!(request.descriptors[0].entries[0].value, "ann");
    /// assert!(RateLimitRequest::from_json(br#"{"domain":"edge","bogus":1}"#).is_err());
    /// ```
    pub fn from_json(body: &[u8]) -> Result<RateLimitRequest, serde_json::Error> {
        let request: JsonRequest = serde_json::from_slice(body)?;
        Ok(RateLimitRequest {
            domain: request.domain,
            descriptors: request
                .descriptors
                .into_iter()
                .map(|d| RequestDescriptor {
                    entries: d
                        .entries
                        .into_iter()
                        .map(|e| entry(e.key, e.value))
                        .collect(),
                    hits_addend: d.hits_addend,
                    limit: d.limit.map(|l| LimitOverride {
                        requests_per_unit: l.requests_per_unit,
                        unit: l.unit.0,
                    }),
                    is_negative_hits: d.is_negative_hits,
                })
                .collect(),
            hits_addend: request.hits_addend,
        })
    }
}

fn json_answer(response: &RateLimitResponse) -> Response {
    let body = JsonResponse {
        overall_code: code_name(response.overall_code),
        statuses: response.statuses.iter().map(json_status).collect(),
        response_headers_to_add: response
            .headers
            .iter()
            .map(|(name, value)| JsonHeader {
                key: name.as_str().to_owned(),
                value: value.to_str().unwrap_or_default().to_owned(),
            })
            .collect(),
    };
    let status = match response.overall_code {
        Code::Ok => StatusCode::OK,
        Code::OverLimit => StatusCode::TOO_MANY_REQUESTS,
    };
    let mut answer = (status, Json(body)).into_response();
    for (name, value) in &response.headers {
        answer.headers_mut().append(name.clone(), value.clone());
    }
    answer
}
