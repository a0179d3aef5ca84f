//! Issue 33: leases through the real gRPC port. `is_negative_hits` gives a unit back (it was
//! refused before), on memory and on Redis; and, the soak's finding, while Redis is down a
//! release is answered by the failure policy, degraded, as a check is (it was `UNAVAILABLE`).

use super::*;

const LEASES: &str = "\
domain: api
descriptors:
  - key: user
    rate_limit: {name: in_flight, quota: 1 concurrent, lease: 30 seconds}
";

/// One descriptor of `user`, taking a unit or (`release`) giving one back.
async fn lease<B: Backend>(
    running: &Running<B>,
    release: bool,
) -> envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse {
    let mut client = RateLimitServiceClient::connect(format!("http://{}", running.grpc))
        .await
        .expect("gRPC connects");
    let request = PbRequest {
        domain: "api".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![PbEntry {
                key: "user".into(),
                value: "ann".into(),
            }],
            is_negative_hits: release,
            ..Default::default()
        }],
        hits_addend: 0,
    };
    let answer = client.should_rate_limit(request).await;
    answer.expect("answered").into_inner()
}

async fn a_release_gives_the_unit_back<B: Backend>(backend: B) {
    let running = start(backend, LEASES, false).await;
    assert_eq!(lease(&running, false).await.overall_code, PbCode::Ok as i32);
    assert_eq!(
        lease(&running, false).await.overall_code,
        PbCode::OverLimit as i32
    );
    let released = lease(&running, true).await;
    assert_eq!(released.overall_code, PbCode::Ok as i32);
    assert_eq!(released.statuses[0].limit_remaining, 1);
    assert_eq!(lease(&running, false).await.overall_code, PbCode::Ok as i32);
    running.stop().await;
}

#[tokio::test]
async fn grpc_negative_hits_give_a_lease_back_in_memory() {
    a_release_gives_the_unit_back(Memory::new()).await;
}

#[tokio::test]
async fn grpc_negative_hits_give_a_lease_back_on_redis() {
    let server = RedisServer::start();
    let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
    a_release_gives_the_unit_back(Redis::new(limiter).with_layer_clock()).await;
}

#[tokio::test]
async fn issue_33_soak_a_release_while_redis_is_down_is_answered_by_the_failure_policy() {
    let mut server = RedisServer::start();
    let limiter = RedisLimiter::connect(&server.url()).await.unwrap();
    let backend = Redis::new(limiter.with_failure_policy(FailurePolicy::Open)).with_layer_clock();
    let running = start(backend, LEASES, false).await;
    assert_eq!(lease(&running, false).await.overall_code, PbCode::Ok as i32);
    server.kill();
    let released = lease(&running, true).await;
    assert_eq!(released.overall_code, PbCode::Ok as i32);
    let degraded = released
        .response_headers_to_add
        .iter()
        .find(|h| h.key == "slidewin-degraded")
        .expect("answered without Redis, and says so");
    assert_eq!(degraded.value, "open");
    running.stop().await;
}
