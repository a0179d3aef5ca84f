//! Slow and idle clients: a header or a body trickled, idle keep-alive connections, and the
//! cap on connections.

use super::*;

#[tokio::test]
async fn a_header_sent_byte_by_byte_is_cut_and_others_are_served() {
    let running = start(quick(), None).await;
    let mut slow = TcpStream::connect(running.http).await.unwrap();
    let (bytes_sent, said) = tokio::join!(
        trickle(&mut slow, b"GET / HTTP/1.1\r\nx-slow: ", b"a"),
        async {
            json_ok(running.http).await;
            json_ok(running.http).await;
        }
    )
    .0;
    assert!(
        !said.starts_with("HTTP/1.1 2"),
        "no request completed: {said}"
    );
    assert!(bytes_sent > 0, "the header was trickled");
    json_ok(running.http).await;
    running.stop().await;
}

#[tokio::test]
async fn a_trickled_body_is_cut_by_the_request_timeout_and_others_are_served() {
    let running = start(quick(), None).await;
    let mut slow = TcpStream::connect(running.http).await.unwrap();
    let head = "POST /json HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n\
                content-length: 100000\r\n\r\n{\"domain\":\"";
    let ((_, said), ()) = tokio::join!(trickle(&mut slow, head.as_bytes(), b"a"), async {
        json_ok(running.http).await;
        json_ok(running.http).await;
    });
    assert!(
        said.starts_with("HTTP/1.1 408"),
        "408, then the close: {said}"
    );
    json_ok(running.http).await;
    running.stop().await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_by_the_header_timeout() {
    let running = start(quick(), None).await;
    let mut stream = TcpStream::connect(running.http).await.unwrap();
    let keep_alive = json_request().replace("connection: close\r\n", "");
    stream.write_all(keep_alive.as_bytes()).await.unwrap();
    // The answer comes, and then, with no next request, the close.
    let said = closed_by_server(&mut stream).await;
    assert!(said.starts_with("HTTP/1.1 200"), "{said}");
    assert!(
        !said.to_ascii_lowercase().contains("connection: close"),
        "{said}"
    );
    running.stop().await;
}

/// The most idle connections the test opens: each takes two descriptors in this process (the
/// client's and the server's), so it stays under the machine's 20,000 (`ulimit -n`, soft and
/// hard) with room for the other tests running beside it.
const IDLE: usize = 9_000;

#[tokio::test]
async fn thousands_of_idle_connections_starve_no_one_and_are_closed() {
    let limits = ConnectionLimits {
        header_read_timeout: Duration::from_secs(3),
        request_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(3),
        ..ConnectionLimits::default()
    };
    let running = start(limits, None).await;
    let mut idle = Vec::with_capacity(IDLE);
    for _ in 0..IDLE {
        match TcpStream::connect(running.http).await {
            Ok(stream) => idle.push(stream),
            Err(e) => panic!("connection {} of {IDLE}: {e}", idle.len() + 1),
        }
    }
    json_ok(running.http).await;
    grpc_ok(running.grpc).await;
    let closed = Arc::new(AtomicUsize::new(0));
    let mut waits = tokio::task::JoinSet::new();
    for mut stream in idle {
        let closed = closed.clone();
        waits.spawn(async move {
            closed_by_server(&mut stream).await;
            closed.fetch_add(1, Ordering::Relaxed);
        });
    }
    while let Some(done) = waits.join_next().await {
        done.unwrap();
    }
    assert_eq!(closed.load(Ordering::Relaxed), IDLE);
    json_ok(running.http).await;
    running.stop().await;
}

#[tokio::test]
async fn at_the_cap_a_new_connection_waits_until_one_closes() {
    let limits = ConnectionLimits {
        max_connections: 2,
        header_read_timeout: Duration::from_secs(60),
        request_timeout: Duration::from_secs(60),
        idle_timeout: Duration::from_secs(60),
        ..ConnectionLimits::default()
    };
    let running = start(limits, None).await;
    let first = TcpStream::connect(running.http).await.unwrap();
    let _second = TcpStream::connect(running.http).await.unwrap();
    let mut third = TcpStream::connect(running.http).await.unwrap();
    third.write_all(json_request().as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    // At the cap the third connection is in the kernel's backlog, unread: no answer comes.
    // (This wait can only miss a wrong answer, never fail a right one.)
    let early = tokio::time::timeout(Duration::from_millis(300), third.read_to_end(&mut answer));
    assert!(early.await.is_err(), "served past the cap");
    // The gRPC listener has its own cap: it keeps serving.
    grpc_ok(running.grpc).await;
    drop(first);
    tokio::time::timeout(HANG, third.read_to_end(&mut answer))
        .await
        .expect("served once a connection closed")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    running.stop().await;
}

#[tokio::test]
async fn at_the_cap_idle_connections_are_closed_so_a_new_client_is_served() {
    let limits = ConnectionLimits {
        max_connections: 4,
        ..quick()
    };
    let running = start(limits, None).await;
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(TcpStream::connect(running.http).await.unwrap());
    }
    // Past the cap: served once the header timeout has closed an idle one.
    json_ok(running.http).await;
    for stream in &mut idle {
        closed_by_server(stream).await;
    }
    running.stop().await;
}
