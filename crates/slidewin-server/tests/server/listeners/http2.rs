//! gRPC's HTTP/2 connections: a missing or trickled preface, a client that answers pings and
//! calls nothing, a tonic channel left idle.

use super::*;

#[tokio::test]
async fn a_grpc_connection_without_its_preface_is_closed_and_others_are_served() {
    let running = start(quick_not_idle(), None).await;
    let mut silent = TcpStream::connect(running.grpc).await.unwrap();
    let mut partial = TcpStream::connect(running.grpc).await.unwrap();
    // Ten of the preface's 24 bytes, then nothing.
    partial.write_all(&PREFACE[..10]).await.unwrap();
    // (The server's HTTP/2 SETTINGS may come before the close: it speaks first.)
    tokio::join!(
        closed_by_server(&mut silent),
        closed_by_server(&mut partial),
        grpc_ok(running.grpc)
    );
    grpc_ok(running.grpc).await;
    running.stop().await;
}

#[tokio::test]
async fn a_trickled_grpc_preface_is_cut_too() {
    let running = start(quick_not_idle(), None).await;
    let mut slow = TcpStream::connect(running.grpc).await.unwrap();
    // One byte per PACE (20 ms) or slower: the 300 ms header timeout comes before the 24th.
    let (sent, _) = trickle(&mut slow, b"", PREFACE).await;
    assert!(
        sent < PREFACE.len(),
        "cut before the preface was whole: {sent}"
    );
    grpc_ok(running.grpc).await;
    running.stop().await;
}

/// An HTTP/2 client that makes no call and answers the server's settings and pings, as
/// Envoy's or tonic's idle connection does, until the server closes the connection: the
/// error code of each `GOAWAY` it got, and the pings it answered.
async fn idle_http2_client(mut stream: TcpStream) -> (Vec<u32>, usize) {
    const SETTINGS: u8 = 4;
    const PING: u8 = 6;
    const GOAWAY: u8 = 7;
    const ACK: u8 = 1;
    stream.write_all(PREFACE).await.unwrap();
    stream
        .write_all(&[0, 0, 0, SETTINGS, 0, 0, 0, 0, 0])
        .await
        .unwrap();
    let (mut goaways, mut pings) = (Vec::new(), 0);
    tokio::time::timeout(HANG, async {
        let mut head = [0u8; 9];
        while stream.read_exact(&mut head).await.is_ok() {
            let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
            let mut payload = vec![0; len];
            if stream.read_exact(&mut payload).await.is_err() {
                break;
            }
            let (kind, flags) = (head[3], head[4]);
            let answer = match kind {
                SETTINGS if flags & ACK == 0 => vec![0, 0, 0, SETTINGS, ACK, 0, 0, 0, 0],
                PING if flags & ACK == 0 => {
                    pings += 1;
                    [&[0, 0, 8, PING, ACK, 0, 0, 0, 0][..], &payload].concat()
                }
                GOAWAY if len >= 8 => {
                    goaways.push(u32::from_be_bytes([
                        payload[4], payload[5], payload[6], payload[7],
                    ]));
                    continue;
                }
                _ => continue,
            };
            // The server may close as this is written.
            let _ = stream.write_all(&answer).await;
        }
    })
    .await
    .expect("the server closes the idle connection");
    (goaways, pings)
}

/// [`quick`] with an idle timeout of `idle` and gRPC's pings ten times in it: bytes move all
/// the time, so only the count of calls in flight can find a connection idle.
fn pinging(idle: Duration) -> ConnectionLimits {
    ConnectionLimits {
        idle_timeout: idle,
        http2_keepalive_interval: idle / 10,
        ..quick()
    }
}

#[tokio::test]
async fn a_grpc_connection_that_answers_pings_but_makes_no_call_gets_a_goaway() {
    let running = start(pinging(Duration::from_secs(1)), None).await;
    let idle = TcpStream::connect(running.grpc).await.unwrap();
    let ((goaways, pings), ()) = tokio::join!(idle_http2_client(idle), async {
        grpc_ok(running.grpc).await;
        grpc_ok(running.grpc).await;
    });
    assert!(
        !goaways.is_empty() && goaways.iter().all(|code| *code == 0),
        "a graceful GOAWAY (NO_ERROR), then the close: {goaways:?}"
    );
    assert!(pings > 0, "the client answered pings");
    grpc_ok(running.grpc).await;
    running.stop().await;
}

/// A client's TCP connection that says when the client has let it go (once the server
/// closed it or said `GOAWAY`: a channel keeps its connection otherwise).
struct Watched {
    stream: TcpStream,
    closed: Arc<tokio::sync::Notify>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.closed.notify_one();
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// A tonic channel held open between calls, as Envoy holds its connection: the server closes
/// its idle connection (a `GOAWAY`), and the channel's next call goes on a new one, answered.
#[tokio::test]
async fn a_tonic_channel_left_idle_is_closed_and_calls_again_on_a_new_connection() {
    let running = start(pinging(Duration::from_millis(500)), None).await;
    let (opened, closed) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(tokio::sync::Notify::new()),
    );
    let grpc = running.grpc;
    let connector = {
        let (opened, closed) = (opened.clone(), closed.clone());
        tower::service_fn(move |_: http::Uri| {
            let (opened, closed) = (opened.clone(), closed.clone());
            async move {
                let stream = TcpStream::connect(grpc).await?;
                opened.fetch_add(1, Ordering::Relaxed);
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(Watched { stream, closed }))
            }
        })
    };
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{grpc}"))
        .unwrap()
        .connect_with_connector(connector)
        .await
        .expect("gRPC connects");
    let mut client = RateLimitServiceClient::new(channel);
    for round in 1..=3 {
        let answer = client.should_rate_limit(grpc_request()).await.unwrap();
        assert_eq!(answer.into_inner().overall_code, PbCode::Ok as i32);
        assert_eq!(opened.load(Ordering::Relaxed), round);
        tokio::time::timeout(HANG, closed.notified())
            .await
            .expect("the server closes the idle connection");
    }
    running.stop().await;
}
