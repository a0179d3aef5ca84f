//! The soak's load: gRPC streams and HTTP clients in closed loops on the hot and cold keys,
//! each check recorded as its client saw it ([`Record`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tonic::transport::{Channel, Endpoint};

use crate::{COLD, COLD_KEYS, DEADLINE, HOT, HOT_KEYS};

/// What a check got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    Ok,
    Over,
    /// An answer that is an error: its kind, and what it said.
    Error(String, String),
    /// Nothing within the deadline.
    Timeout,
}

/// Where a check went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    Grpc,
    Http,
    Flood,
    /// The leases' clients, by gRPC or HTTP (see `leases`).
    Lease,
}

/// One check, as its client saw it.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub(crate) send: u64,
    pub(crate) answer: u64,
    /// The key's index: hot ones first, then the cold ones; the flood's keys are all
    /// `u32::MAX`.
    pub(crate) key: u32,
    pub(crate) via: Via,
    pub(crate) decision: Decision,
    /// The answer carried `slidewin-degraded`.
    pub(crate) degraded: bool,
}

/// Nanoseconds since `base`.
pub(crate) fn nanos(base: Instant) -> u64 {
    u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

pub(crate) fn key_entry(key: u32) -> (&'static str, String) {
    if key < HOT_KEYS {
        (HOT.0, format!("h{key}"))
    } else {
        (COLD.0, format!("c{}", key - HOT_KEYS))
    }
}

/// A small generator of our own (xorshift), one per client.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        (self.next() >> 11) % n
    }

    /// Half the checks on a hot key, half on a cold one.
    fn key(&mut self) -> u32 {
        let r = self.next();
        let pick = u32::try_from(r >> 40).unwrap_or(0);
        if r & 1 == 0 {
            pick % HOT_KEYS
        } else {
            HOT_KEYS + pick % COLD_KEYS
        }
    }
}

pub(crate) fn grpc_request(key: &str, value: String) -> RateLimitRequest {
    RateLimitRequest {
        domain: "soak".to_owned(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: key.to_owned(),
                value,
            }],
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

pub(crate) async fn grpc_check(
    client: &mut RateLimitServiceClient<Channel>,
    request: RateLimitRequest,
) -> (Decision, bool) {
    match tokio::time::timeout(DEADLINE, client.should_rate_limit(request)).await {
        Err(_) => (Decision::Timeout, false),
        Ok(Err(status)) => {
            // The message, then its causes (h2's reason is in them).
            let mut said = status.message().to_owned();
            let mut source = std::error::Error::source(&status);
            while let Some(cause) = source {
                said = format!("{said}: {cause}");
                source = cause.source();
            }
            (
                Decision::Error(format!("grpc {:?}", status.code()), said),
                false,
            )
        }
        Ok(Ok(response)) => {
            let response = response.into_inner();
            let degraded = response
                .response_headers_to_add
                .iter()
                .any(|h| h.key.eq_ignore_ascii_case("slidewin-degraded"));
            let decision = if response.overall_code == Code::Ok as i32 {
                Decision::Ok
            } else if response.overall_code == Code::OverLimit as i32 {
                Decision::Over
            } else {
                Decision::Error(
                    "grpc answer".to_owned(),
                    format!("overall_code {}", response.overall_code),
                )
            };
            (decision, degraded)
        }
    }
}

/// A client of the service's gRPC address, connected at its first check; `None` for an
/// address that is not one.
pub(crate) fn grpc_connect(grpc: &str) -> Option<RateLimitServiceClient<Channel>> {
    let endpoint = Endpoint::from_shared(format!("http://{grpc}")).ok()?;
    Some(RateLimitServiceClient::new(endpoint.connect_lazy()))
}

pub(crate) async fn grpc_client(
    grpc: String,
    base: Instant,
    stop: Arc<AtomicBool>,
    seed: u64,
) -> Vec<Record> {
    let mut records = Vec::new();
    let Some(mut client) = grpc_connect(&grpc) else {
        return records;
    };
    let mut rng = Rng(seed | 1);
    while !stop.load(Ordering::Relaxed) {
        let key = rng.key();
        let (name, value) = key_entry(key);
        let send = nanos(base);
        let (decision, degraded) = grpc_check(&mut client, grpc_request(name, value)).await;
        let answer = nanos(base);
        let record = Record {
            send,
            answer,
            key,
            via: Via::Grpc,
            decision,
            degraded,
        };
        keep(&mut records, record).await;
    }
    records
}

/// Keeps `record`; after an error or a timeout, waits a little before the next check: a
/// refused connection answers at once, and the client must not spin on it.
async fn keep(records: &mut Vec<Record>, record: Record) {
    let failed = matches!(record.decision, Decision::Error(..) | Decision::Timeout);
    records.push(record);
    if failed {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

pub(crate) type Http = Client<HttpConnector, Full<Bytes>>;

pub(crate) fn http_client() -> Http {
    Client::builder(TokioExecutor::new()).build_http()
}

/// One HTTP exchange: status, whether `slidewin-degraded` came, the body.
pub(crate) async fn http_call(
    client: &Http,
    method: hyper::Method,
    url: &str,
    body: String,
) -> Result<(u16, bool, String), String> {
    let request = hyper::Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let exchange = async {
        let response = client.request(request).await.map_err(|e| {
            let mut said = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                said = format!("{said}: {s}");
                source = s.source();
            }
            said
        })?;
        let status = response.status().as_u16();
        let degraded = response.headers().contains_key("slidewin-degraded");
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        Ok((
            status,
            degraded,
            String::from_utf8_lossy(&body).into_owned(),
        ))
    };
    match tokio::time::timeout(DEADLINE, exchange).await {
        Ok(answer) => answer,
        Err(_) => Err("timeout".to_owned()),
    }
}

pub(crate) async fn http_load(
    http: String,
    base: Instant,
    stop: Arc<AtomicBool>,
    seed: u64,
) -> Vec<Record> {
    let mut records = Vec::new();
    let client = http_client();
    let url = format!("http://{http}/json");
    let mut rng = Rng(seed | 1);
    while !stop.load(Ordering::Relaxed) {
        let key = rng.key();
        let (name, value) = key_entry(key);
        let body = serde_json::json!({
            "domain": "soak",
            "descriptors": [{"entries": [{"key": name, "value": value}]}],
        })
        .to_string();
        let send = nanos(base);
        let answer = http_call(&client, hyper::Method::POST, &url, body).await;
        let (decision, degraded) = match answer {
            Ok((200, degraded, _)) => (Decision::Ok, degraded),
            Ok((429, degraded, _)) => (Decision::Over, degraded),
            Ok((status, degraded, body)) => (
                Decision::Error(format!("http {status}"), body.chars().take(160).collect()),
                degraded,
            ),
            Err(e) if e == "timeout" => (Decision::Timeout, false),
            Err(e) => (Decision::Error("http transport".to_owned(), e), false),
        };
        let record = Record {
            send,
            answer: nanos(base),
            key,
            via: Via::Http,
            decision,
            degraded,
        };
        keep(&mut records, record).await;
    }
    records
}

/// The config version `/api/config` reports.
pub(crate) async fn config_version(client: &Http, http: &str) -> Result<u64, String> {
    let (status, _, body) = http_call(
        client,
        hyper::Method::GET,
        &format!("http://{http}/api/config"),
        String::new(),
    )
    .await?;
    if status != 200 {
        return Err(format!("/api/config: {status} {body}"));
    }
    let json: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("/api/config: {e}"))?;
    json["version"]
        .as_u64()
        .ok_or_else(|| format!("/api/config has no version: {body}"))
}
