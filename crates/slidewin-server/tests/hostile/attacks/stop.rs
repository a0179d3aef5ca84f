//! Issue 29, findings 2 and 5, through the real ports: a stop that finishes whatever the
//! clients do, and calls past the cap on calls in flight shed at once.
//!
//! The waits here are hang guards only: a test that fails does not hang, and no test asserts
//! how long anything took.

use std::time::Duration;

use http_body_util::combinators::BoxBody;
use hyper_util::rt::{TokioIo, TokioTimer};
use slidewin_server::ConnectionLimits;
use tokio::net::TcpStream;

use super::*;

/// The longest any stop below may take before the test calls it hung.
const HANG: Duration = Duration::from_secs(60);

/// A service on free ports, its admin surfaces open, with `limits`; and its metrics.
async fn serving(limits: ConnectionLimits) -> (Served, Metrics) {
    let (service, _, metrics) = service_of(Memory::new(), CONFIG, Bounds::default());
    let options = ServeOptions {
        limits,
        ..server::local()
    };
    (Served::start(service, &options).await, metrics)
}

/// Stops `served` and waits for it, within the hang guard.
async fn stop_within_guard(served: Served) {
    tokio::time::timeout(HANG, served.stop())
        .await
        .expect("the stop finishes");
}

/// Issue 29: with one dashboard tab open, the service was still running 70 s after SIGTERM,
/// still sending snapshots. The drain here is longer than the guard: only the stream's end
/// lets the stop finish in time.
#[tokio::test]
async fn hostile_29_a_stop_with_a_dashboard_open_finishes() {
    let (served, _) = serving(ConnectionLimits {
        drain_timeout: HANG * 2,
        ..ConnectionLimits::default()
    })
    .await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let events = client
        .get(
            format!("http://{}/api/events", served.http)
                .parse()
                .unwrap(),
        )
        .await
        .expect("the dashboard answers");
    assert_eq!(events.status(), 200);
    let mut body = events.into_body();
    let first = body.frame().await.expect("a snapshot").expect("a frame");
    assert!(first.data_ref().is_some_and(|d| d.starts_with(b"data: ")));
    stop_within_guard(served).await;
    // The stream ended cleanly: no more snapshots, the body is done.
    while let Some(frame) = body.frame().await {
        assert!(frame.is_ok(), "the stream ends, not breaks: {frame:?}");
    }
}

/// The request message of a check of `client` = `value`, framed for gRPC.
fn grpc_message(value: &str) -> Bytes {
    let message = prost::Message::encode_to_vec(&request("api", &[("client", value)]));
    let mut framed = vec![0];
    framed.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    framed.extend_from_slice(&message);
    Bytes::from(framed)
}

/// Issue 29: a gRPC client that keeps its flow-control window at 0 while answering pings kept
/// its calls past both timeouts, and the stop waited for them. The drain bounds the stop.
#[tokio::test]
async fn hostile_29_a_stop_with_a_stalled_grpc_client_finishes_at_the_drain() {
    let (served, metrics) = serving(ConnectionLimits {
        drain_timeout: Duration::from_millis(200),
        ..ConnectionLimits::default()
    })
    .await;
    let stream = TcpStream::connect(served.grpc).await.expect("gRPC listens");
    let (mut client, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .initial_stream_window_size(0)
        .handshake::<_, BoxBody<Bytes, std::convert::Infallible>>(TokioIo::new(stream))
        .await
        .expect("the HTTP/2 handshake");
    let connection = tokio::spawn(connection);
    let request = http::Request::post(format!(
        "http://{}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
        served.grpc
    ))
    .header(http::header::CONTENT_TYPE, "application/grpc")
    .header("te", "trailers")
    .body(Full::new(grpc_message("stalled")).boxed())
    .unwrap();
    // The answer's headers come; its message waits for a window that never opens.
    let answer = client.send_request(request).await.expect("an answer");
    assert_eq!(answer.status(), 200);
    stop_within_guard(served).await;
    assert!(
        metrics
            .encode()
            .contains("slidewin_connections_cut_total{reason=\"drain_over\"} 1"),
        "{}",
        metrics.encode()
    );
    // The client's connection was closed under it.
    let closed = tokio::time::timeout(HANG, connection)
        .await
        .expect("closed");
    assert!(closed.is_ok(), "{closed:?}");
    drop(answer);
}

/// Issue 29: past the cap on calls in flight, `POST /json` gets a 503 at once naming the bound,
/// and gRPC `RESOURCE_EXHAUSTED`; the call holding the place is answered when it finishes.
#[tokio::test]
async fn hostile_29_calls_past_the_cap_are_shed_on_both_listeners() {
    let (served, metrics) = serving(ConnectionLimits {
        max_calls_in_flight: 1,
        ..ConnectionLimits::default()
    })
    .await;
    // A /json request whose body is still coming holds the one place.
    let mut slow = TcpStream::connect(served.http).await.expect("HTTP listens");
    let body = json_request("client", "first");
    let head = format!(
        "POST /json HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        served.http,
        body.len()
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    slow.write_all(&body.as_bytes()[..10]).await.unwrap();
    // Wait (bounded) until its place is taken.
    let mut taken = false;
    for _ in 0..10_000 {
        if metrics.encode().contains("slidewin_calls_in_flight 1") {
            taken = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(taken, "{}", metrics.encode());
    let (status, refused) = post_json(served.http, json_request("client", "second")).await;
    assert_eq!(status, 503, "{refused}");
    assert!(refused.contains("max_calls_in_flight"), "{refused}");
    let shed = should_rate_limit(served.grpc, request("api", &[("client", "third")]))
        .await
        .unwrap_err();
    assert_status(
        &shed,
        tonic::Code::ResourceExhausted,
        &["max_calls_in_flight"],
    );
    // The slow one finishes and is answered; its place comes back.
    slow.write_all(&body.as_bytes()[10..]).await.unwrap();
    let head = read_head(&mut slow).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (status, _) = post_json(served.http, json_request("client", "second")).await;
    assert_eq!(status, 200);
    let text = metrics.encode();
    assert!(
        text.contains("slidewin_calls_shed_total{listener=\"http\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("slidewin_calls_shed_total{listener=\"grpc\"} 1"),
        "{text}"
    );
    stop_within_guard(served).await;
}

/// Issue 29: a gRPC call whose headers came but whose message never did held its memory until
/// the request timeout (30 s). Through the real port, with a header timeout of 200 ms: the call
/// is `DEADLINE_EXCEEDED`, naming the bound, and its place under the cap comes back.
#[tokio::test]
async fn hostile_29_a_call_without_its_message_is_cancelled_at_the_header_timeout() {
    let (served, metrics) = serving(ConnectionLimits {
        header_read_timeout: Duration::from_millis(200),
        ..ConnectionLimits::default()
    })
    .await;
    let stream = TcpStream::connect(served.grpc).await.expect("gRPC listens");
    let (mut client, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .handshake::<_, BoxBody<Bytes, std::convert::Infallible>>(TokioIo::new(stream))
        .await
        .expect("the HTTP/2 handshake");
    tokio::spawn(connection);
    let never = http_body_util::StreamBody::new(futures_util::stream::pending::<
        Result<hyper::body::Frame<Bytes>, std::convert::Infallible>,
    >());
    let request = http::Request::post(format!(
        "http://{}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
        served.grpc
    ))
    .header(http::header::CONTENT_TYPE, "application/grpc")
    .header("te", "trailers")
    .body(never.boxed())
    .unwrap();
    let answer = tokio::time::timeout(HANG, client.send_request(request))
        .await
        .expect("answered within the guard")
        .expect("an answer");
    let status = answer
        .headers()
        .get("grpc-status")
        .expect("a trailers-only answer");
    assert_eq!(status, "4", "DEADLINE_EXCEEDED: {:?}", answer.headers());
    let message = answer.headers().get("grpc-message").expect("a message");
    assert!(
        message
            .to_str()
            .unwrap()
            .contains("header%20read%20timeout"),
        "{message:?}"
    );
    drop(answer);
    let mut back = false;
    for _ in 0..10_000 {
        if metrics.encode().contains("slidewin_calls_in_flight 0") {
            back = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(back, "{}", metrics.encode());
    stop_within_guard(served).await;
}

/// The bodies of the calls in flight are bounded in bytes together: with the cap on calls, a
/// client trickling 1 MiB bodies could otherwise make the service hold 4 GiB. A call whose body
/// would go past the bound is refused by name, on both listeners; the others are served.
#[tokio::test]
async fn calls_whose_bodies_pass_the_bound_in_flight_are_refused_by_name() {
    let (served, _) = serving(ConnectionLimits {
        max_body_bytes_in_flight: 1_000,
        ..ConnectionLimits::default()
    })
    .await;
    let long = "v".repeat(2_000);
    let refused = should_rate_limit(served.grpc, request("api", &[("client", &long)]))
        .await
        .unwrap_err();
    assert_status(
        &refused,
        tonic::Code::ResourceExhausted,
        &["max_body_bytes_in_flight"],
    );
    let (status, body) = post_json(served.http, json_request("client", &long)).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("max_body_bytes_in_flight"), "{body}");
    // Each body's bytes come back with it: small calls go on being served.
    for _ in 0..3 {
        let answer = should_rate_limit(served.grpc, request("api", &[("client", "small")]))
            .await
            .expect("served");
        assert_eq!(answer.overall_code, PbCode::Ok as i32);
    }
    let (status, body) = post_json(served.http, json_request("client", "tiny")).await;
    assert_eq!(status, 200, "{body}");
    stop_within_guard(served).await;
}
