//! gRPC requests past the bounds: too many descriptors, a 10 MB key, invalid UTF-8, an
//! unknown method, an empty domain, huge hits.

use super::*;

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
