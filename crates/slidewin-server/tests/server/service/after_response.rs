//! Issue 33: costs reported after the response through the real gRPC port, as Envoy sends
//! them: the descriptor's own `hits_addend` (a `UInt64Value`) of 0 before the request, and of
//! the cost when the stream ends (`apply_on_stream_done`). On memory, and on Redis at Redis's
//! own time (where the report is charged at its `TIME`). Then negative corrections of an
//! estimate (`is_negative_hits`) on a log that refunds, on both.

use envoy_types::pb::google::protobuf::UInt64Value;

use super::*;

const TOKENS: &str = "\
domain: ai
descriptors:
  - key: api_key
    after_response: true
    rate_limit: {name: tokens, quota: 1000 per minute}
";

/// `api_key`'s descriptor with its own `hits`.
async fn tokens<B: Backend>(
    running: &Running<B>,
    hits: u64,
) -> envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse {
    sent(running, hits, false).await
}

/// `api_key`'s descriptor with its own `hits`, given back when `negative`.
async fn sent<B: Backend>(
    running: &Running<B>,
    hits: u64,
    negative: bool,
) -> envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse {
    let mut client = RateLimitServiceClient::connect(format!("http://{}", running.grpc))
        .await
        .expect("gRPC connects");
    let request = PbRequest {
        domain: "ai".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![PbEntry {
                key: "api_key".into(),
                value: "k1".into(),
            }],
            hits_addend: Some(UInt64Value { value: hits }),
            is_negative_hits: negative,
            ..Default::default()
        }],
        hits_addend: 0,
    };
    let answer = client.should_rate_limit(request).await;
    answer.expect("answered").into_inner()
}

/// The question passes, a report of 1,200 past the limit is charged and answered OK, and the
/// next question is refused with what is owed.
async fn a_report_past_the_limit_is_owed<B: Backend>(backend: B) {
    let running = start(backend, TOKENS, false).await;
    let asked = tokens(&running, 0).await;
    assert_eq!(asked.overall_code, PbCode::Ok as i32);
    assert_eq!(asked.statuses[0].limit_remaining, 999);
    let reported = tokens(&running, 1_200).await;
    assert_eq!(reported.overall_code, PbCode::Ok as i32);
    assert_eq!(reported.statuses[0].limit_remaining, 0);
    let refused = tokens(&running, 0).await;
    assert_eq!(refused.overall_code, PbCode::OverLimit as i32);
    let retry = refused
        .response_headers_to_add
        .iter()
        .find(|h| h.key == "retry-after")
        .expect("a refusal says when to come back");
    assert!(retry.value.parse::<u64>().unwrap() <= 60, "{}", retry.value);
    running.stop().await;
}

#[tokio::test]
async fn grpc_reports_after_the_response_are_charged_in_memory() {
    a_report_past_the_limit_is_owed(Memory::new()).await;
}

#[tokio::test]
async fn grpc_reports_after_the_response_are_charged_on_redis_at_its_time() {
    let server = RedisServer::start();
    let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
    a_report_past_the_limit_is_owed(Redis::new(limiter)).await;
}

const ESTIMATED: &str = "\
domain: ai
descriptors:
  - key: api_key
    rate_limit: {name: tokens, quota: 1000 per minute, refunds: true}
";

/// Envoy charges an estimate of 800 before the request and, the request having used 300,
/// sends 500 back with `is_negative_hits` when it ends: the log gives back its oldest 500,
/// and a request of 700 fits again; a correction of more than is held gives back what is.
async fn a_negative_correction_refunds_the_estimate<B: Backend>(backend: B) {
    let running = start(backend, ESTIMATED, false).await;
    assert_eq!(
        sent(&running, 800, false).await.overall_code,
        PbCode::Ok as i32
    );
    assert_eq!(
        sent(&running, 300, false).await.overall_code,
        PbCode::OverLimit as i32
    );
    let back = sent(&running, 500, true).await;
    assert_eq!(back.overall_code, PbCode::Ok as i32);
    assert_eq!(back.statuses[0].limit_remaining, 700);
    assert_eq!(
        sent(&running, 700, false).await.overall_code,
        PbCode::Ok as i32
    );
    let all = sent(&running, 5_000, true).await;
    assert_eq!(all.statuses[0].limit_remaining, 1000);
    running.stop().await;
}

#[tokio::test]
async fn grpc_negative_hits_refund_a_log_that_refunds_in_memory() {
    a_negative_correction_refunds_the_estimate(Memory::new()).await;
}

#[tokio::test]
async fn grpc_negative_hits_refund_a_log_that_refunds_on_redis() {
    let server = RedisServer::start();
    let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
    a_negative_correction_refunds_the_estimate(Redis::new(limiter)).await;
}
