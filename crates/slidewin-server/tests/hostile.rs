//! Hostile clients, the payload half of issue 21: each hostile request through the real ports
//! gets a clear error naming what was wrong, with bounded work, and the service keeps
//! answering the others. Then property tests of the config loader and `/json`, and crafted
//! keys that must not reach another rule's, domain's or descriptor's counts, on memory and on
//! Redis.

mod support {
    pub(crate) mod server;
}

// Memory figures are counted, not estimated (tests/attacks/memory.rs).
#[global_allocator]
static ALLOCATOR: slidewin_test_support::counting_alloc::CountingAllocator =
    slidewin_test_support::counting_alloc::CountingAllocator;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry as PbEntry, RateLimitOverride as PbOverride,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code as PbCode;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{
    RateLimitRequest as PbRequest, RateLimitResponse as PbResponse,
};
use envoy_types::pb::google::protobuf::UInt64Value;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use proptest::prelude::*;
use proptest::test_runner::{RngSeed, TestCaseError};
use slidewin::Moment;
use slidewin::time::ManualClock;
use slidewin_redis::RedisLimiter;
use slidewin_server::{
    Bounds, Code, Config, Endpoints, Engine, Entry, FailurePolicy, LimitOverride, Metrics,
    RateLimitRequest, RequestDescriptor, ServeOptions, Unit,
};
use slidewin_store::{Backend, Memory, Redis};
use slidewin_test_support::redis::RedisServer;
use support::server::{self, Served};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CONFIG: &str = "\
domain: api
descriptors:
  - key: client
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: gcra
    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: gcra}
  - key: counter
    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: sliding_counter}
  - key: fixed
    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: fixed_window}
  - key: both
    limits:
      - {name: burst, quota: 3 per second}
      - {name: hourly, quota: 100 per hour}
";

/// Every limited key of [`CONFIG`]: each a limit of 3.
const LIMITED: [&str; 5] = ["client", "gcra", "counter", "fixed", "both"];

// ---- A service on real ports ----

struct Running {
    served: Served,
    /// Fresh values for the "is it still serving?" requests.
    fresh: AtomicU64,
}

impl std::ops::Deref for Running {
    type Target = Served;

    fn deref(&self) -> &Served {
        &self.served
    }
}

/// A service of `yaml` on `backend` with `bounds`, its engine on a manual clock at 1,000 s:
/// the service, its clock and its metrics.
fn service_of<B: Backend>(
    backend: B,
    yaml: &str,
    bounds: Bounds,
) -> (Endpoints<B>, Arc<ManualClock>, Metrics) {
    let config = Config::parse(yaml, "test.yaml").expect("the test's config is valid");
    let clock = Arc::new(ManualClock::new(Moment::from_secs(1_000)));
    let metrics = Metrics::new();
    let engine = Engine::new(backend, config, clock.clone(), bounds, metrics.clone())
        .expect("the backend holds the rules");
    (Endpoints::new(engine, vec![]), clock, metrics)
}

/// The test listeners' options: free ports, the admin surfaces closed.
fn data_plane_only() -> ServeOptions {
    ServeOptions {
        admin: false,
        ..server::local()
    }
}

async fn start<B: Backend>(backend: B, yaml: &str) -> Running {
    let (service, _, _) = service_of(backend, yaml, Bounds::default());
    Running {
        served: Served::start(service, &data_plane_only()).await,
        fresh: AtomicU64::new(0),
    }
}

/// `ShouldRateLimit` of `request` on the gRPC port `grpc`, from a client that may send what
/// the server must refuse.
async fn should_rate_limit(
    grpc: SocketAddr,
    request: PbRequest,
) -> Result<PbResponse, tonic::Status> {
    RateLimitServiceClient::connect(format!("http://{grpc}"))
        .await
        .expect("gRPC connects")
        .max_encoding_message_size(usize::MAX)
        .should_rate_limit(request)
        .await
        .map(tonic::Response::into_inner)
}

/// `POST /json` of `body` (as JSON) on the HTTP port `http`: the status and the body.
async fn post_json(http: SocketAddr, body: impl Into<Bytes>) -> (u16, String) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{http}/json"))
        .header("content-type", "application/json")
        .body(Full::new(body.into()))
        .unwrap();
    let response = client.request(request).await.expect("HTTP answers");
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

impl Running {
    async fn stop(self) {
        self.served.stop().await;
    }

    async fn grpc(&self, request: PbRequest) -> Result<PbResponse, tonic::Status> {
        should_rate_limit(self.grpc, request).await
    }

    async fn json(&self, body: impl Into<Bytes>) -> (u16, String) {
        post_json(self.http, body).await
    }

    /// A normal client is still answered, on both ports, by a limit that counts.
    async fn still_serving(&self) {
        let n = self.fresh.fetch_add(1, Ordering::Relaxed);
        let value = format!("bystander-{n}");
        let answer = self
            .grpc(request("api", &[("client", &value)]))
            .await
            .expect("a normal gRPC request is answered");
        assert_eq!(answer.overall_code, PbCode::Ok as i32);
        assert_eq!(answer.statuses[0].limit_remaining, 2);
        let (status, body) = self.json(json_request("client", &value)).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("\"limitRemaining\":1"), "{body}");
    }
}

fn request(domain: &str, entries: &[(&str, &str)]) -> PbRequest {
    PbRequest {
        domain: domain.to_owned(),
        descriptors: vec![descriptor(entries)],
        hits_addend: 0,
    }
}

fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(key, value)| PbEntry {
                key: (*key).to_owned(),
                value: (*value).to_owned(),
            })
            .collect(),
        ..Default::default()
    }
}

fn json_request(key: &str, value: &str) -> String {
    format!(
        r#"{{"domain":"api","descriptors":[{{"entries":[{{"key":"{key}","value":"{value}"}}]}}]}}"#
    )
}

fn assert_status(status: &tonic::Status, code: tonic::Code, names: &[&str]) {
    assert_eq!(status.code(), code, "{status:?}");
    for name in names {
        assert!(
            status.message().contains(name),
            "`{name}` not in {:?}",
            status.message()
        );
    }
}

async fn redis_backend(server: &RedisServer) -> Redis {
    let limiter = RedisLimiter::connect(&server.url())
        .await
        .expect("redis connects");
    Redis::new(limiter.with_failure_policy(FailurePolicy::Closed)).with_layer_clock()
}

// ---- gRPC: too many descriptors, too large a message ----

#[tokio::test]
async fn grpc_with_100_000_descriptors_is_refused_by_size() {
    let running = start(Memory::new(), CONFIG).await;
    let many = PbRequest {
        domain: "api".to_owned(),
        descriptors: vec![descriptor(&[("client", "value")]); 100_000],
        hits_addend: 0,
    };
    let len = prost::Message::encoded_len(&many);
    assert!(len > Bounds::MAX_BODY_BYTES, "{len} bytes");
    let err = running.grpc(many).await.unwrap_err();
    assert_status(
        &err,
        tonic::Code::OutOfRange,
        &[&len.to_string(), &Bounds::MAX_BODY_BYTES.to_string()],
    );
    running.still_serving().await;

    // Under the byte bound, over the count bound: refused before any check, by name.
    let under = PbRequest {
        domain: "api".to_owned(),
        descriptors: vec![descriptor(&[("client", "value")]); 50_000],
        hits_addend: 0,
    };
    assert!(prost::Message::encoded_len(&under) < Bounds::MAX_BODY_BYTES);
    let err = running.grpc(under).await.unwrap_err();
    assert_status(
        &err,
        tonic::Code::InvalidArgument,
        &["50000 descriptors", "max_descriptors"],
    );
    // Nothing was counted for the refused request.
    let answer = running
        .grpc(request("api", &[("client", "value")]))
        .await
        .unwrap();
    assert_eq!(answer.statuses[0].limit_remaining, 2);
    running.still_serving().await;
    running.stop().await;
}

// ---- a 10 MB key ----

#[tokio::test]
async fn a_10_mb_key_is_refused_by_the_size_bound() {
    let running = start(Memory::new(), CONFIG).await;
    let huge = "k".repeat(10 << 20);
    let err = running
        .grpc(request("api", &[(&huge, "v")]))
        .await
        .unwrap_err();
    assert_status(
        &err,
        tonic::Code::OutOfRange,
        &["too large", &Bounds::MAX_BODY_BYTES.to_string()],
    );
    running.still_serving().await;
    let (status, body) = running.json(json_request(&huge, "v")).await;
    assert_eq!(status, 413, "{body}");
    assert!(
        body.contains("too large") && body.contains(&Bounds::MAX_BODY_BYTES.to_string()),
        "{body}"
    );
    running.still_serving().await;

    // Within the message bound, over the text bound: INVALID_ARGUMENT / 400, by name.
    let long = "k".repeat(4_000);
    let err = running
        .grpc(request("api", &[("client", &long)]))
        .await
        .unwrap_err();
    assert_status(
        &err,
        tonic::Code::InvalidArgument,
        &["value of 4000 bytes", "max_text_len"],
    );
    let (status, body) = running.json(json_request(&long, "v")).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("key of 4000 bytes") && body.contains("max_text_len"),
        "{body}"
    );
    running.still_serving().await;
    running.stop().await;
}

// ---- invalid UTF-8 ----

/// Protobuf's wire format by hand: a length-delimited field.
fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![(number << 3) | 2];
    let mut len = bytes.len();
    loop {
        let byte = u8::try_from(len & 0x7f).unwrap();
        len >>= 7;
        if len == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
    out.extend_from_slice(bytes);
    out
}

/// A `RateLimitRequest` of one descriptor of one entry, its strings as raw bytes.
fn raw_request(domain: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
    let entry = [field(1, key), field(2, value)].concat();
    let descriptor = field(1, &entry);
    [field(1, domain), field(2, &descriptor)].concat()
}

/// Sends raw protobuf bytes as the request message; decodes the answer as envoy's.
#[derive(Clone, Copy, Default)]
struct RawCodec;

struct RawEncoder;
struct PbDecoder;

impl tonic::codec::Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: Vec<u8>,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        prost::bytes::BufMut::put_slice(dst, &item);
        Ok(())
    }
}

impl tonic::codec::Decoder for PbDecoder {
    type Item = PbResponse;
    type Error = tonic::Status;
    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<PbResponse>, tonic::Status> {
        prost::Message::decode(src)
            .map(Some)
            .map_err(|e| tonic::Status::internal(e.to_string()))
    }
}

impl tonic::codec::Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = PbResponse;
    type Encoder = RawEncoder;
    type Decoder = PbDecoder;
    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> PbDecoder {
        PbDecoder
    }
}

async fn raw_grpc(addr: SocketAddr, message: Vec<u8>) -> Result<PbResponse, tonic::Status> {
    raw_grpc_at(
        addr,
        "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
        message,
    )
    .await
}

async fn raw_grpc_at(
    addr: SocketAddr,
    path: &'static str,
    message: Vec<u8>,
) -> Result<PbResponse, tonic::Status> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("gRPC connects");
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("ready");
    let path = http::uri::PathAndQuery::from_static(path);
    grpc.unary(tonic::Request::new(message), path, RawCodec)
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn invalid_utf8_is_refused_clearly() {
    let running = start(Memory::new(), CONFIG).await;
    // The hand-made encoding is right: valid text is decided.
    let valid = raw_grpc(running.grpc, raw_request(b"api", b"client", b"raw"))
        .await
        .expect("valid bytes are decided");
    assert_eq!(valid.statuses[0].limit_remaining, 2);
    for (what, message) in [
        ("domain", raw_request(b"ap\xffi", b"client", b"v")),
        ("key", raw_request(b"api", b"cli\xc3\x28ent", b"v")),
        ("value", raw_request(b"api", b"client", b"\xed\xa0\x80")),
    ] {
        let err = raw_grpc(running.grpc, message).await.unwrap_err();
        // prost refuses the string as it decodes: the client's error, INVALID_ARGUMENT (not
        // tonic-prost's INTERNAL), naming the message, the field and the cause.
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{what}: {err:?}");
        assert!(
            err.message().contains("not a valid RateLimitRequest")
                && err.message().contains("not UTF-8")
                && err.message().contains(what),
            "{what}: {err:?}"
        );
        running.still_serving().await;
    }
    for body in [
        &b"{\"domain\":\"ap\xffi\",\"descriptors\":[{\"entries\":[{\"key\":\"client\",\"value\":\"v\"}]}]}"[..],
        b"{\"domain\":\"api\",\"descriptors\":[{\"entries\":[{\"key\":\"client\",\"value\":\"\xc3\x28\"}]}]}",
        // A lone surrogate, escaped: not a Unicode scalar value.
        br#"{"domain":"api","descriptors":[{"entries":[{"key":"client","value":"\udc00"}]}]}"#,
    ] {
        let (status, answer) = running.json(body.to_vec()).await;
        assert_eq!(status, 400, "{answer}");
        assert!(answer.contains("invalid request"), "{answer}");
        assert!(
            answer.contains("unicode") || answer.contains("UTF-8") || answer.contains("surrogate"),
            "{answer}"
        );
        assert!(answer.contains("line 1 column"), "{answer}");
        running.still_serving().await;
    }
    running.stop().await;
}

#[tokio::test]
async fn an_unknown_method_is_unimplemented_and_names_the_one_served() {
    let running = start(Memory::new(), CONFIG).await;
    for path in [
        "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimitTwice",
        // (`grpc.health.v1.Health` is served, issue 31: see tests/server/health.rs.)
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    ] {
        let err = raw_grpc_at(running.grpc, path, raw_request(b"api", b"client", b"v"))
            .await
            .unwrap_err();
        assert_status(&err, tonic::Code::Unimplemented, &[path, "ShouldRateLimit"]);
        running.still_serving().await;
    }
    running.stop().await;
}

// ---- an empty domain ----

#[tokio::test]
async fn an_empty_domain_is_an_invalid_argument() {
    let running = start(Memory::new(), CONFIG).await;
    let err = running
        .grpc(request("", &[("client", "v")]))
        .await
        .unwrap_err();
    assert_status(&err, tonic::Code::InvalidArgument, &["domain"]);
    let (status, body) = running
        .json(r#"{"domain":"","descriptors":[{"entries":[{"key":"client","value":"v"}]}]}"#)
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("domain"), "{body}");
    // A missing domain, too.
    let (status, body) = running
        .json(r#"{"descriptors":[{"entries":[{"key":"client","value":"v"}]}]}"#)
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("domain"), "{body}");
    running.still_serving().await;
    running.stop().await;
}

// ---- huge hits_addend ----

async fn huge_hits_are_over_the_limit_and_consume_nothing<B: Backend>(backend: B) {
    let running = start(backend, CONFIG).await;
    for key in LIMITED {
        let value = "hungry";
        // Request level: u32::MAX, the most protobuf's field holds.
        let mut r = request("api", &[(key, value)]);
        r.hits_addend = u32::MAX;
        let answer = running.grpc(r).await.unwrap();
        assert_eq!(answer.overall_code, PbCode::OverLimit as i32, "{key}");
        // Descriptor level: u64::MAX.
        let mut r = request("api", &[(key, value)]);
        r.descriptors[0].hits_addend = Some(UInt64Value { value: u64::MAX });
        let answer = running.grpc(r).await.unwrap();
        assert_eq!(answer.overall_code, PbCode::OverLimit as i32, "{key}");
        // JSON: as a number and as protobuf's string.
        for hits in ["18446744073709551615", "\"18446744073709551615\""] {
            for at in ["descriptor", "request"] {
                let body = match at {
                    "descriptor" => format!(
                        r#"{{"domain":"api","descriptors":[{{"entries":[{{"key":"{key}","value":"{value}"}}],"hits_addend":{hits}}}]}}"#
                    ),
                    _ => format!(
                        r#"{{"domain":"api","hitsAddend":{hits},"descriptors":[{{"entries":[{{"key":"{key}","value":"{value}"}}]}}]}}"#
                    ),
                };
                let (status, body) = running.json(body).await;
                assert_eq!(status, 429, "{key} {at} {hits}: {body}");
                assert!(body.contains("OVER_LIMIT"), "{body}");
            }
        }
        // One more than u64::MAX is refused, naming the value.
        let (status, body) = running
            .json(format!(
                r#"{{"domain":"api","hits_addend":"18446744073709551616","descriptors":[{{"entries":[{{"key":"{key}","value":"{value}"}}]}}]}}"#
            ))
            .await;
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("18446744073709551616"), "{body}");
        // Nothing was consumed: the whole limit is there.
        let answer = running.grpc(request("api", &[(key, value)])).await.unwrap();
        assert_eq!(answer.overall_code, PbCode::Ok as i32, "{key}");
        assert_eq!(answer.statuses[0].limit_remaining, 2, "{key}");
    }
    running.still_serving().await;
    running.stop().await;
}

#[tokio::test]
async fn huge_hits_memory() {
    huge_hits_are_over_the_limit_and_consume_nothing(Memory::new()).await;
}

#[tokio::test]
async fn huge_hits_redis() {
    let server = RedisServer::start();
    huge_hits_are_over_the_limit_and_consume_nothing(redis_backend(&server).await).await;
}

// ---- negative or absurd units ----

#[test]
fn absurd_units_in_the_config_are_errors_naming_the_place_and_the_value() {
    let head = "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n";
    let cases: &[(&str, &str)] = &[
        ("      unit: second\n      requests_per_unit: -1\n", "-1"),
        (
            "      unit: second\n      requests_per_unit: 99999999999999\n",
            "99999999999999",
        ),
        (
            "      unit: second\n      requests_per_unit: 1e400\n",
            "1e400",
        ),
        (
            "      unit: fortnight\n      requests_per_unit: 1\n",
            "fortnight",
        ),
        ("      unit: -3\n      requests_per_unit: 1\n", "-3"),
        ("      unit: 99\n      requests_per_unit: 1\n", "99"),
        ("      quota: \"0 per second\"\n", "0 per second"),
        ("      quota: \"5 per 0 seconds\"\n", "5 per 0 seconds"),
        ("      quota: \"-5 per second\"\n", "-5 per second"),
        ("      quota: \"5 per -1 seconds\"\n", "5 per -1 seconds"),
        (
            "      quota: \"5 per 99999999999999999999 years\"\n",
            "5 per 99999999999999999999 years",
        ),
        (
            "      quota: \"5 per 584942417355 years\"\n",
            "5 per 584942417355 years",
        ),
        (
            "      quota: \"5 per 18446744073709551615 seconds\"\n",
            "5 per 18446744073709551615 seconds",
        ),
        (
            "      quota: \"18446744073709551616 per second\"\n",
            "18446744073709551616 per second",
        ),
    ];
    for (body, value) in cases {
        let text = format!("{head}{body}");
        let Err(err) = Config::parse(&text, "absurd.yaml") else {
            panic!("accepted:\n{text}");
        };
        let shown = err.to_string();
        let line = err.line().unwrap_or_else(|| panic!("no line: {shown}"));
        let column = err.column().unwrap_or_else(|| panic!("no column: {shown}"));
        assert!(
            shown.starts_with(&format!("absurd.yaml:{line}:{column}: ")),
            "{shown}"
        );
        assert!(shown.contains(value), "`{value}` not in {shown}");
        // The place is the value's own line.
        let on_line = text.lines().nth(line - 1).unwrap();
        assert!(
            on_line.contains(value),
            "line {line} is {on_line:?}: {shown}"
        );
    }
}

/// The checks made after the YAML is read have their place too: every one is made as it is
/// read.
#[test]
fn every_config_error_has_its_line() {
    let cases: &[(&str, usize, &str)] = &[
        ("", 1, "domain"),
        ("domain: ''\n", 1, "empty"),
        ("descriptors: []\n", 1, "domain"),
        (
            "domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n",
            3,
            "duplicate descriptor `k_v`",
        ),
        ("domain: d\ndescriptors:\n  - key: ''\n", 3, "empty key"),
        (
            "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n        share_threshold: true\n",
            5,
            "share_threshold",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {quota: 1/s}\n    limits: [{name: a, quota: 1/s}]\n",
            4,
            "both",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    limits:\n      - {name: a, quota: 1/s}\n      - {name: a, quota: 2/s}\n",
            5,
            "named `a`",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    limits: []\n",
            4,
            "`limits` is empty",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unlimited: true\n      quota: 1/s\n",
            3,
            "unlimited",
        ),
        (
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      name: x\n      replaces: [{name: x}]\n      quota: 1/s\n",
            5,
            "replaces itself",
        ),
    ];
    for (text, line, says) in cases {
        let err = Config::parse(text, "e.yaml").expect_err(text);
        assert_eq!(err.line(), Some(*line), "{err} for {text:?}");
        assert!(err.column().is_some(), "{err}");
        assert!(err.to_string().contains(says), "`{says}` not in {err}");
    }
}

/// A config nested deep, in flow and in block style: refused with its place, no stack
/// overflow. Flow nesting past `Config::MAX_FLOW_NESTING` (128) is refused before parsing, at its
/// 129th bracket (the YAML scanner takes time quadratic in the flow depth: 31 s for 50,000
/// levels of `{a: ` in a release build); block nesting at `yaml_serde`'s recursion limit (128).
#[test]
fn a_deeply_nested_config_is_refused() {
    let flow = format!(
        "domain: d\ndescriptors: {}{}\n",
        "[{key: a, descriptors: ".repeat(50_000),
        "]}".repeat(50_000)
    );
    let mut block = String::from("domain: d\ndescriptors:\n");
    // (Block style indents each level: 1,000 levels, well past the limit of 128, keep the
    // text to a megabyte.)
    for depth in 0..1_000 {
        let indent = " ".repeat(depth * 2);
        block.push_str(&format!("{indent}- key: a\n{indent}  descriptors:\n"));
    }
    for text in [
        flow,
        block,
        "[".repeat(50_000),
        format!("{}x{}", "{a: ".repeat(50_000), "}".repeat(50_000)),
    ] {
        let err = Config::parse(&text, "deep.yaml").expect_err("too deep");
        assert!(err.line().is_some(), "{err}");
        assert!(err.to_string().starts_with("deep.yaml:"), "{err}");
    }
}

#[tokio::test]
async fn absurd_units_in_a_request_override_are_invalid_arguments() {
    let running = start(Memory::new(), CONFIG).await;
    for unit in [99, -1, i32::MIN, i32::MAX] {
        let mut r = request("api", &[("client", "o")]);
        r.descriptors[0].limit = Some(PbOverride {
            requests_per_unit: 5,
            unit,
        });
        let err = running.grpc(r).await.unwrap_err();
        assert_status(
            &err,
            tonic::Code::InvalidArgument,
            &["unit", &unit.to_string()],
        );
    }
    for (limit, names) in [
        (
            r#"{"requests_per_unit":5,"unit":"EON"}"#,
            &["unit", "EON"][..],
        ),
        (r#"{"requests_per_unit":5,"unit":99}"#, &["99"]),
        (r#"{"requests_per_unit":-1,"unit":"SECOND"}"#, &["-1"]),
        (
            r#"{"requests_per_unit":4294967296,"unit":"SECOND"}"#,
            &["4294967296"],
        ),
        (r#"{"requests_per_unit":5}"#, &["unit"]),
    ] {
        let body = format!(
            r#"{{"domain":"api","descriptors":[{{"entries":[{{"key":"client","value":"o"}}],"limit":{limit}}}]}}"#
        );
        let (status, answer) = running.json(body).await;
        assert_eq!(status, 400, "{limit}: {answer}");
        for name in names {
            assert!(answer.contains(name), "`{name}` not in {answer}");
        }
    }
    running.still_serving().await;
    running.stop().await;
}

// ---- 100 MB bodies ----

/// Reads an HTTP/1.1 answer's status line and headers from `stream`.
async fn read_head(stream: &mut tokio::net::TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut byte).await.expect("the answer");
        assert!(
            n > 0,
            "closed before an answer: {:?}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

#[tokio::test]
async fn a_100_mb_body_is_refused_before_it_is_sent() {
    let running = start(Memory::new(), CONFIG).await;
    // Declared: refused on the headers alone, not one byte of the body sent.
    let mut stream = tokio::net::TcpStream::connect(running.http).await.unwrap();
    stream
        .write_all(
            format!(
                "POST /json HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                100 << 20
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let head = read_head(&mut stream).await;
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    let mut body = [0u8; 512];
    let n = stream.read(&mut body).await.unwrap();
    let body = String::from_utf8_lossy(&body[..n]);
    assert!(
        body.contains(&format!("{} bytes is too large", 100 << 20))
            && body.contains(&Bounds::MAX_BODY_BYTES.to_string()),
        "{body}"
    );
    drop(stream);
    running.still_serving().await;

    // Chunked, its length unknown: the server stops at the bound. Our writer never gets to
    // send all 100 MB: the answer comes first, then the connection is closed under it.
    let mut stream = tokio::net::TcpStream::connect(running.http).await.unwrap();
    stream
        .write_all(b"POST /json HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
        .await
        .unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let total = 100usize << 20;
    let writing = tokio::spawn(async move {
        let chunk = [b' '; 64 << 10];
        let framed = [
            format!("{:x}\r\n", chunk.len()).as_bytes(),
            &chunk[..],
            b"\r\n",
        ]
        .concat();
        let mut sent = 0usize;
        while sent < total {
            if writer.write_all(&framed).await.is_err() {
                return (sent, false);
            }
            sent += chunk.len();
        }
        let done = writer.write_all(b"0\r\n\r\n").await.is_ok();
        (sent, done)
    });
    let mut answer = Vec::new();
    let _ = reader.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    let (sent, finished) = writing.await.unwrap();
    assert!(
        !finished && sent < total,
        "the server read the whole body: {sent} bytes sent"
    );
    running.still_serving().await;
    running.stop().await;
}

// ---- deep JSON ----

#[tokio::test]
async fn json_nested_10_000_deep_is_a_400() {
    let running = start(Memory::new(), CONFIG).await;
    let deep_array = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let deep_object = format!("{}1{}", r#"{"a":"#.repeat(10_000), "}".repeat(10_000));
    let open_only = "[".repeat(10_000);
    for deep in [&deep_array, &deep_object, &open_only] {
        let places = [
            deep.clone(),
            format!(r#"{{"domain":"api","descriptors":{deep}}}"#),
            format!(r#"{{"domain":"api","descriptors":[{deep}]}}"#),
            format!(r#"{{"domain":"api","descriptors":[{{"entries":{deep}}}]}}"#),
            format!(r#"{{"domain":"api","descriptors":[{{"entries":[{deep}]}}]}}"#),
            format!(
                r#"{{"domain":"api","descriptors":[{{"entries":[{{"key":"client","value":{deep}}}]}}]}}"#
            ),
            format!(
                r#"{{"domain":"api","descriptors":[{{"entries":[{{"key":"client","value":"v"}}],"hits_addend":{deep}}}]}}"#
            ),
            format!(
                r#"{{"domain":"api","hits_addend":{deep},"descriptors":[{{"entries":[{{"key":"client","value":"v"}}]}}]}}"#
            ),
            format!(
                r#"{{"domain":"api","descriptors":[{{"entries":[{{"key":"client","value":"v"}}],"limit":{{"requests_per_unit":1,"unit":{deep}}}}}]}}"#
            ),
            format!(r#"{{"domain":{deep}}}"#),
        ];
        for (i, body) in places.into_iter().enumerate() {
            let (status, answer) = running.json(body).await;
            assert_eq!(status, 400, "place {i}: {answer}");
            assert!(answer.contains("invalid request"), "place {i}: {answer}");
            // serde_json stops at the first wrong type, or at its recursion limit (128).
            assert!(answer.contains("at line 1 column"), "place {i}: {answer}");
        }
        running.still_serving().await;
    }
    running.stop().await;
}

// ---- property tests: the config loader and `/json` on arbitrary input ----

fn config_cases() -> ProptestConfig {
    ProptestConfig {
        cases: 300,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(0x0405_7113),
        ..ProptestConfig::default()
    }
}

/// A scalar as envoy configs hold them, right and wrong.
fn yaml_scalar() -> impl Strategy<Value = yaml_serde::Value> {
    use yaml_serde::Value;
    prop_oneof![
        prop::sample::select(vec![
            "second",
            "minute",
            "fortnight",
            "SECOND",
            "5 per second",
            "0 per second",
            "5 per 0 seconds",
            "1/s",
            "sliding_log",
            "gcra",
            "leaky",
            "",
            "*",
            "a*b",
            "k",
            "v",
            "{x}",
            "1:k",
            "é",
            "5 per 584942417355 years",
            "true",
            "~",
        ])
        .prop_map(|s| Value::String(s.to_owned())),
        "\\PC{0,12}".prop_map(Value::String),
        prop::sample::select(vec![
            -1i64,
            0,
            1,
            5,
            i64::from(u32::MAX),
            i64::from(u32::MAX) + 1,
            i64::MAX,
            i64::MIN,
        ])
        .prop_map(|n| Value::Number(n.into())),
        any::<f64>().prop_map(|f| Value::Number(f.into())),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
    ]
}

/// envoy-config-like maps: the config's own keys and some others, any type under any key.
fn yaml_tree() -> impl Strategy<Value = yaml_serde::Value> {
    use yaml_serde::{Mapping, Value};
    let key = prop::sample::select(vec![
        "domain",
        "descriptors",
        "key",
        "value",
        "rate_limit",
        "limits",
        "unit",
        "requests_per_unit",
        "quota",
        "algorithm",
        "name",
        "replaces",
        "unlimited",
        "shadow_mode",
        "quota_mode",
        "share_threshold",
        "after_response",
        "zone",
        "anchor",
        "month_end",
        "refunds",
        "lease",
        "detailed_metric",
        "metadata",
        "rate_limt",
    ]);
    yaml_scalar().prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Sequence),
            prop::collection::vec((key.clone(), inner), 0..6).prop_map(|pairs| {
                let mut map = Mapping::new();
                for (k, v) in pairs {
                    map.insert(Value::String(k.to_owned()), v);
                }
                Value::Mapping(map)
            }),
        ]
    })
}

/// A root that is nearly a config: a domain and descriptors, their contents arbitrary.
fn near_config() -> impl Strategy<Value = yaml_serde::Value> {
    use yaml_serde::{Mapping, Value};
    (
        prop::option::of(yaml_scalar()),
        prop::collection::vec(yaml_tree(), 0..4),
    )
        .prop_map(|(domain, descriptors)| {
            let mut map = Mapping::new();
            if let Some(domain) = domain {
                map.insert(Value::String("domain".to_owned()), domain);
            }
            map.insert(
                Value::String("descriptors".to_owned()),
                Value::Sequence(descriptors),
            );
            Value::Mapping(map)
        })
}

/// Any text through the loader: an answer, never a panic; an error names the file, and the
/// line wherever the text is YAML at all.
fn loads_or_says_where(text: &str) -> Result<(), TestCaseError> {
    let Err(err) = Config::parse(text, "p.yaml") else {
        return Ok(());
    };
    prop_assert_eq!(err.file(), "p.yaml");
    let shown = err.to_string();
    prop_assert!(shown.starts_with("p.yaml"), "{}", shown);
    prop_assert!(!err.message().is_empty(), "{}", shown);
    if yaml_serde::from_str::<yaml_serde::Value>(text).is_ok() {
        prop_assert!(err.line().is_some(), "no line: {} for {:?}", shown, text);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config_cases())]

    #[test]
    fn arbitrary_text_is_loaded_or_refused_with_its_place(text in "\\PC{0,300}") {
        loads_or_says_where(&text)?;
    }

    #[test]
    fn yaml_like_text_is_loaded_or_refused_with_its_place(
        text in "[a-z_:{}\\[\\],\\-\\n #'\"0-9.*/]{0,300}",
    ) {
        loads_or_says_where(&text)?;
    }

    #[test]
    fn structured_wrong_configs_are_refused_with_their_place(tree in near_config()) {
        let text = yaml_serde::to_string(&tree).expect("a value prints");
        loads_or_says_where(&text)?;
    }

    #[test]
    fn mutated_configs_are_refused_with_their_place(
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<char>()), 1..6),
    ) {
        let mut text: Vec<char> = CONFIG.chars().collect();
        for (at, how, c) in edits {
            let i = at.index(text.len() + 1);
            match how {
                0 if i < text.len() => {
                    text.remove(i);
                }
                1 if i < text.len() => text[i] = c,
                _ => text.insert(i.min(text.len()), c),
            }
        }
        let text: String = text.into_iter().collect();
        loads_or_says_where(&text)?;
    }
}

/// `/json` without sockets: the router of a service on memory.
fn json_router() -> axum::Router {
    service_of(Memory::new(), CONFIG, Bounds::default())
        .0
        .router(true)
}

/// `body` to `/json`: 200, 429 or 400 only, and a 400 says what was wrong.
fn answers_or_says_why(router: &axum::Router, body: Vec<u8>) -> Result<(), TestCaseError> {
    use tower::ServiceExt;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let request = http::Request::builder()
        .method("POST")
        .uri("/json")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body.clone()))
        .unwrap();
    let (status, answer) = runtime.block_on(async {
        let response = router.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, body)
    });
    let answer = String::from_utf8_lossy(&answer).into_owned();
    prop_assert!(
        matches!(status, 200 | 429 | 400),
        "{} {} for {}",
        status,
        answer,
        String::from_utf8_lossy(&body)
    );
    let parsed: serde_json::Value = serde_json::from_str(&answer).expect("a JSON answer");
    if status == 400 {
        let why = parsed["error"].as_str().unwrap_or_default();
        prop_assert!(why.len() > 10, "{}", answer);
    } else {
        prop_assert!(parsed["overallCode"].is_string(), "{}", answer);
    }
    Ok(())
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let key = prop::sample::select(vec![
        "domain",
        "descriptors",
        "entries",
        "key",
        "value",
        "hits_addend",
        "hitsAddend",
        "limit",
        "requests_per_unit",
        "requestsPerUnit",
        "unit",
        "x",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(vec![
            "api",
            "client",
            "both",
            "",
            "SECOND",
            "EON",
            "18446744073709551615",
            "-1",
            "{}",
        ])
        .prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 5, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..5).prop_map(|pairs| Value::Object(
                pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
            )),
        ]
    })
}

proptest! {
    #![proptest_config(config_cases())]

    #[test]
    fn arbitrary_json_is_answered_or_refused_with_a_reason(value in json_value()) {
        let router = json_router();
        answers_or_says_why(&router, serde_json::to_vec(&value).unwrap())?;
    }

    #[test]
    fn mutated_requests_are_answered_or_refused_with_a_reason(
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<u8>()), 1..6),
    ) {
        let router = json_router();
        let mut body = br#"{"domain":"api","hits_addend":"2","descriptors":[{"entries":[{"key":"both","value":"v"}],"hitsAddend":1},{"entries":[{"key":"client","value":"w"}],"limit":{"requests_per_unit":5,"unit":"SECOND"}}]}"#.to_vec();
        for (at, how, byte) in edits {
            let i = at.index(body.len() + 1);
            match how {
                0 if i < body.len() => {
                    body.remove(i);
                }
                1 if i < body.len() => body[i] = byte,
                _ => body.insert(i.min(body.len()), byte),
            }
        }
        answers_or_says_why(&router, body)?;
    }
}

// ---- crafted keys ----

/// Three domains whose paths and names invite confusion: a nested `k.j` and a top-level
/// `k.j` (the same path, `a.k.j`), a domain `a.k` whose `j` has that path too, and a domain
/// `override` whose descriptor has the path a request's limit override of 5 per second is
/// counted under. Every limit is 1 a minute.
const CRAFTED_DOMAINS: [(&str, &str); 3] = [
    (
        "a.yaml",
        "domain: a
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 1}
    descriptors:
      - key: j
        rate_limit: {unit: minute, requests_per_unit: 1}
  - key: k.j
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: k_j
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: m
    limits:
      - {name: burst, quota: 1 per minute}
      - {name: hourly, quota: 10 per hour}
",
    ),
    (
        "a.k.yaml",
        "domain: a.k
descriptors:
  - key: j
    rate_limit: {unit: minute, requests_per_unit: 1}
",
    ),
    (
        "override.yaml",
        "domain: override
descriptors:
  - key: '5'
    value: per_second
    rate_limit: {unit: minute, requests_per_unit: 1}
",
    ),
];

/// A config of several domains, from files of a directory of its own.
fn multi_domain_config(files: &[(&str, &str)]) -> Config {
    static DIRS: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "slidewin-hostile-{}-{}",
        std::process::id(),
        DIRS.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let config = Config::load(std::slice::from_ref(&dir)).expect("the test's config is valid");
    std::fs::remove_dir_all(&dir).unwrap();
    config
}

/// One request of one descriptor.
fn probe(domain: &str, entries: &[(&str, &str)], limit: Option<LimitOverride>) -> RateLimitRequest {
    let mut descriptor =
        RequestDescriptor::new(entries.iter().map(|(k, v)| Entry::new(k, v)).collect());
    descriptor.limit = limit;
    RateLimitRequest::new(domain, vec![descriptor])
}

const FIVE_PER_SECOND: Option<LimitOverride> = Some(LimitOverride {
    requests_per_unit: 5,
    unit: Unit::Second,
});

/// Requests that each must count alone. In order, each is the first to touch its counts: so
/// the first of each is admitted with its whole limit less one, whatever came before it.
fn crafted_probes() -> Vec<(RateLimitRequest, u32)> {
    // The counter key of `a`'s `k` for `x`, and its Redis key's tail: values that spell them.
    let spelled = "1:a3:a.k1:k1:x";
    let mut probes = vec![
        (probe("a", &[("k", "x")], None), 1),
        (probe("a", &[("k", "x"), ("j", "y")], None), 1),
        (probe("a", &[("k.j", "y")], None), 1),
        (probe("a", &[("k_j", "y")], None), 1),
        (probe("a.k", &[("j", "y")], None), 1),
        (probe("a.k", &[("j", "x")], None), 1),
        // The separators of our keys, and of Redis's: in keys and values.
        (probe("a", &[("k", "1:x")], None), 1),
        (probe("a", &[("k", "x:")], None), 1),
        (probe("a", &[("k", "x_j")], None), 1),
        (probe("a", &[("k", "x.j")], None), 1),
        (probe("a", &[("k", "x"), ("j", "1:y")], None), 1),
        (probe("a", &[("k", "x1:j1:y")], None), 1),
        (probe("a", &[("k", spelled)], None), 1),
        (
            probe("a", &[("k", &format!("{spelled}}}:a.k:stamps"))], None),
            1,
        ),
        (probe("a", &[("k", "x}:a.k.j:stamps")], None), 1),
        (probe("a.k", &[("j", &format!("{spelled}}}"))], None), 1),
        // Hash tags: braces anywhere.
        (probe("a", &[("k", "{x}")], None), 1),
        (probe("a", &[("k", "}x{")], None), 1),
        (probe("a", &[("k", "{")], None), 1),
        (probe("a", &[("k", "}")], None), 1),
        (probe("a", &[("k", "{slidewin:a}")], None), 1),
        (probe("a", &[("k", "x"), ("j", "}{")], None), 1),
        // A limit of two rules, two Redis keys for one tag: values spelling a rule's tail.
        (probe("a", &[("m", "x")], None), 1),
        (probe("a", &[("m", "x}:burst:stamps")], None), 1),
        (probe("a", &[("m", "x}:hourly")], None), 1),
        (probe("a", &[("m", "{x}:burst")], None), 1),
        // Control bytes.
        (probe("a", &[("k", "x\n")], None), 1),
        (probe("a", &[("k", "x\0")], None), 1),
        (probe("a", &[("k", "\0")], None), 1),
        (probe("a", &[("k", "")], None), 1),
        (probe("a", &[("k", "x\r\nDEL *")], None), 1),
        // Values that are another domain's, or another rule's, path.
        (probe("a", &[("k", "a.k.j")], None), 1),
        (probe("a", &[("k", "a.k")], None), 1),
        (probe("a.k", &[("j", "a.k.j")], None), 1),
        // A limit override beside the config's limit of the same path, and in another domain.
        (probe("override", &[("5", "per_second")], None), 1),
        (
            probe("override", &[("5", "per_second")], FIVE_PER_SECOND),
            5,
        ),
        (probe("a", &[("5", "per_second")], FIVE_PER_SECOND), 5),
        (probe("a", &[("k", "x")], FIVE_PER_SECOND), 5),
    ];
    // Long values: the length prefix, not a terminator, keeps them apart.
    let long = "9".repeat(1_000);
    probes.push((probe("a", &[("k", &long)], None), 1));
    probes.push((probe("a", &[("k", &long[..999])], None), 1));
    probes
}

async fn crafted_keys_keep_to_their_own_counts<B: Backend>(backend: B) {
    let config = multi_domain_config(&CRAFTED_DOMAINS);
    let clock = Arc::new(ManualClock::new(Moment::from_secs(1_000)));
    let engine = Engine::new(backend, config, clock, Bounds::default(), Metrics::new()).unwrap();
    let probes = crafted_probes();
    for (i, (request, limit)) in probes.iter().enumerate() {
        let first = engine.should_rate_limit(request).await.unwrap();
        let status = &first.statuses[0];
        assert_eq!(
            (status.code, status.limit_remaining),
            (Code::Ok, limit - 1),
            "probe {i} was touched by another: {request:?}"
        );
        // Spend the rest: the next probes must not see it.
        for _ in 1..*limit {
            engine.should_rate_limit(request).await.unwrap();
        }
        let denied = engine.should_rate_limit(request).await.unwrap();
        assert_eq!(
            denied.overall_code,
            Code::OverLimit,
            "probe {i}: {request:?}"
        );
    }
}

#[tokio::test]
async fn crafted_keys_memory() {
    crafted_keys_keep_to_their_own_counts(Memory::new()).await;
}

/// On Redis, too, and each probe's counts under a Redis key of its own: as many keys as
/// probes, each `{slidewin:…}:name:stamps`, its hash tag holding the whole counter key.
#[tokio::test]
async fn crafted_keys_redis() {
    let server = RedisServer::start();
    crafted_keys_keep_to_their_own_counts(redis_backend(&server).await).await;
    // One key per probe and rule (two for each of the four probes of `m`): no two probes'
    // counts met in one Redis key.
    let expected = crafted_probes().len() + 4;
    let size = server.cli(&["DBSIZE"]);
    assert_eq!(size.trim(), expected.to_string());
    // Each `{slidewin:counter_key}:name:stamps`, the counter key a SHA-256 in hex (issue 29: a
    // key's length is bounded whatever the descriptor).
    let listed = server.cli(&["--no-raw", "KEYS", "*"]);
    let keys: Vec<&str> = listed
        .lines()
        .map(|key| key.split_once(") ").map_or(key, |(_, k)| k))
        .collect();
    assert_eq!(keys.len(), expected, "{listed}");
    let mut burst_tags = Vec::new();
    for key in &keys {
        let rest = key.strip_prefix("\"{slidewin:").expect(key);
        let (digest, tail) = rest.split_once('}').expect(key);
        assert_eq!(digest.len(), 64, "{key}");
        assert!(digest.bytes().all(|b| b.is_ascii_hexdigit()), "{key}");
        assert!(tail.ends_with(":stamps\""), "{key}");
        if tail == ":burst:stamps\"" {
            burst_tags.push(digest);
        }
    }
    // The two rules of one descriptor share its tag: each `burst` key has its `hourly` one.
    assert_eq!(burst_tags.len(), 4, "{listed}");
    for tag in burst_tags {
        let hourly = format!("\"{{slidewin:{tag}}}:hourly:stamps\"");
        assert!(keys.contains(&hourly.as_str()), "{hourly} in {listed}");
    }
}

// ---- Issue 29: its findings' regression tests, a file per group under tests/attacks/ ----

mod attacks {
    use super::*;

    mod browsers;
    mod dashboard;
    mod memory;
    mod overrides;
    mod redis_down;
    mod stop;
}
