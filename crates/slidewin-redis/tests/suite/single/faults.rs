//! Faults: Redis down then back, a paused server, a bad setup.

use super::*;

#[tokio::test]
async fn redis_down_then_back_errors_at_once_then_recovers() {
    let mut server = RedisServer::start();
    let url = server.url();
    let redis = limiter(&server)
        .await
        .with_timeout(Duration::from_millis(300))
        .unwrap();
    let (_, rules) = log("2/minute");
    assert!(
        redis
            .check(&rules, "k", secs(1), 2)
            .await
            .unwrap()
            .allowed()
    );

    server.kill();
    let err = redis.check(&rules, "k", secs(2), 1).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(
        matches!(
            &err,
            RedisError::Unavailable { at, .. } | RedisError::Timeout { at, .. } if *at == url
        ),
        "{err}"
    );
    // The circuit is open: the checks after the first answer without asking, saying so.
    assert!(!redis.is_available());
    for _ in 0..3 {
        let err = redis.check(&rules, "k", secs(2), 1).await.unwrap_err();
        let RedisError::Unavailable { at, detail } = &err else {
            panic!("{err}");
        };
        assert_eq!(*at, url);
        assert!(
            detail.starts_with("not asked: the circuit is open since "),
            "{err}"
        );
    }
    // As do the other calls, and clones; and a policy answers them.
    let err = redis.reset(&rules, "k").await.unwrap_err();
    assert!(err.to_string().contains("not asked"), "{err}");
    let open = redis.clone().with_failure_policy(FailurePolicy::Open);
    let decision = open.check(&rules, "k", secs(2), 1).await.unwrap();
    assert!(decision.allowed() && decision.degraded().is_some());
    let closed = redis.clone().with_failure_policy(FailurePolicy::Closed);
    let decision = closed.check(&rules, "k", secs(2), 1).await.unwrap();
    assert!(!decision.allowed() && decision.degraded().is_some());

    // Back, and empty (it keeps nothing on disk): the probe finds it by itself.
    server.restart();
    until_available(&redis).await;
    assert!(redis.is_available());
    let first = redis.check(&rules, "k", secs(3), 2).await.unwrap();
    assert!(first.allowed() && first.degraded().is_none());
    assert!(
        !redis
            .check(&rules, "k", secs(3), 1)
            .await
            .unwrap()
            .allowed()
    );
}

#[tokio::test]
async fn a_paused_server_is_a_timeout_naming_it() {
    let server = RedisServer::start();
    let redis = limiter(&server)
        .await
        .with_timeout(Duration::from_millis(100))
        .unwrap();
    let rules = one(&rule("api", Kind::Gcra, "10/s"));
    assert!(redis.check_now(&rules, "k", 1).await.unwrap().allowed());
    server.cli(&["client", "pause", "2000", "write"]);
    let err = redis.check_now(&rules, "k", 1).await.unwrap_err();
    assert_eq!(
        err,
        RedisError::Timeout {
            at: server.url(),
            after: Duration::from_millis(100)
        }
    );
    assert_eq!(
        err.to_string(),
        format!(
            "Redis at redis://127.0.0.1:{}/ did not answer within 100ms",
            server.port
        )
    );
    server.cli(&["client", "unpause"]);
}

#[tokio::test]
async fn bad_setup_is_an_error_naming_the_value() {
    let err = RedisLimiter::connect("http://nowhere").await.unwrap_err();
    assert!(matches!(err, RedisError::Config { .. }), "{err}");
    assert!(err.to_string().contains("http://nowhere"), "{err}");
    // A URL is shown without its password.
    let err = RedisLimiter::connect("redis://bob:hunter2@cache:notaport/")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot set up the Redis limiter: `redis://bob:***@cache:notaport/`: Redis URL did not \
         parse - InvalidClientConfig"
    );
    let err = RedisLimiter::connect_cluster(&["redis://:hunter2@a:1/", "redis://b:x/"])
        .await
        .unwrap_err();
    // The node that is not a URL is named, alone.
    assert_eq!(
        err.to_string(),
        "cannot set up the Redis limiter: `redis://b:x/`: Redis URL did not parse - \
         InvalidClientConfig"
    );
    let err = RedisLimiter::connect_cluster(&[]).await.unwrap_err();
    assert!(err.to_string().contains("got none"), "{err}");
    let server = RedisServer::start();
    let err = limiter(&server)
        .await
        .with_timeout(Duration::ZERO)
        .unwrap_err();
    assert!(err.to_string().contains("got 0ns"), "{err}");
    // Nothing listens on a port of a server that is gone: the error names it, password hidden.
    let port = server.port;
    drop(server);
    let err = RedisLimiter::connect(&format!("redis://bob:hunter2@127.0.0.1:{port}/"))
        .await
        .unwrap_err();
    let shown = format!("redis://bob:***@127.0.0.1:{port}/");
    assert!(
        matches!(
            &err,
            RedisError::Unavailable { at, .. } | RedisError::Timeout { at, .. } if *at == shown
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with(&format!("Redis at {shown} is unavailable: ")),
        "{err}"
    );
}
