//! What the Redis tests share: the servers (from `slidewin-test-support`) and helpers for the
//! limiter.

// Each test crate uses a part.
#![allow(dead_code, unreachable_pub, unused_imports)]

pub use slidewin_test_support::redis::{RedisCluster, RedisServer};

/// What `future` answers on its first poll, if it answers then: `None` if it would wait for
/// anything (Redis, a timer, another task). A check that answers here took no round trip.
pub fn at_once<F: Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(answer) => Some(answer),
        std::task::Poll::Pending => None,
    }
}

/// Until `redis` goes to Redis again: its probe, in the background, finds it back.
pub async fn until_available(redis: &slidewin_redis::RedisLimiter) {
    use slidewin_redis::CircuitState;
    let mut state = redis.circuit_state();
    while state != CircuitState::Closed {
        state = redis.circuit_changed(state).await;
    }
}

/// For tests that drive async code from outside it (proptests): a runtime, a server of the
/// test's own (keep it alive), and a limiter on that server.
pub fn blocking_limiter() -> (
    tokio::runtime::Runtime,
    RedisServer,
    slidewin_redis::RedisLimiter,
) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let server = RedisServer::start();
    let redis = runtime
        .block_on(slidewin_redis::RedisLimiter::connect(&server.url()))
        .expect("our own server");
    (runtime, server, redis)
}

/// How a Redis key names a rule's algorithm: `{prefix:key}:name:<this>`.
pub fn kind_in_key(kind: slidewin::limit::Kind) -> &'static str {
    use slidewin::limit::Kind;
    match kind {
        Kind::SlidingLog => "stamps",
        Kind::SlidingCounter => "counter",
        Kind::FixedWindow => "fixed",
        Kind::Gcra => "gcra",
        Kind::Leases => "leases",
        Kind::Calendar => "calendar",
    }
}

/// Every key on `server`, sorted.
pub fn all_keys(server: &RedisServer) -> Vec<String> {
    let mut keys: Vec<String> = server
        .cli(&["keys", "*"])
        .lines()
        .map(String::from)
        .collect();
    keys.sort();
    keys
}
