//! A gRPC connection's idle close, the calls that keep it open, the request timeout and the
//! stop, on an in-memory connection under tokio's paused clock: each instant is exact. The
//! client is hyper's HTTP/2 (tonic's channel is one), which answers the server's pings.

use std::future::Future;
use std::io;
use std::sync::Mutex;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, StreamBody};
use hyper::body::Bytes;
use hyper::client::conn::http2::SendRequest;
use tokio::io::ReadBuf;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::*;
use crate::Metrics;
use crate::serve::ConnectionLimits;

const IDLE: Duration = Duration::from_secs(60);

/// A request's body, as the tests' client sends it.
type Body = BoxBody<Bytes, Infallible>;

fn limits() -> ConnectionLimits {
    ConnectionLimits {
        idle_timeout: IDLE,
        request_timeout: IDLE,
        ..ConnectionLimits::default()
    }
}

/// A gRPC service whose every call reads its request's body (as tonic's unary machinery
/// does), waits for a permit of its gate, then answers `OK` (with a message of five bytes when
/// `message`).
#[derive(Clone)]
struct Gated {
    gate: Arc<Semaphore>,
    message: bool,
}

impl tower::Service<GrpcRequest> for Gated {
    type Response = GrpcAnswer;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<GrpcAnswer, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: GrpcRequest) -> Self::Future {
        let (gate, message) = (Arc::clone(&self.gate), self.message);
        Box::pin(async move {
            if let Err(e) = request.into_body().collect().await {
                return Ok(tonic::Status::from_error(e).into_http());
            }
            gate.acquire().await.expect("the gate stays open").forget();
            let mut answer = tonic::Status::ok("").into_http();
            if message {
                let bytes = Bytes::from_static(b"\0\0\0\0\x05hello");
                *answer.body_mut() = tonic::body::Body::new(http_body_util::Full::new(bytes));
            }
            Ok(answer)
        })
    }
}

/// The server's side of the connection, keeping a copy of what it writes.
struct Tap<I> {
    io: I,
    written: Arc<Mutex<Vec<u8>>>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Tap<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Tap<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            this.written.lock().unwrap().extend_from_slice(&buf[..n]);
        }
        polled
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// One connection: the client's handle, the server's task, and what the server wrote.
struct Connection {
    client: SendRequest<Body>,
    client_task: JoinHandle<Result<(), hyper::Error>>,
    server: JoinHandle<()>,
    written: Arc<Mutex<Vec<u8>>>,
    stop: watch::Sender<Phase>,
    cap: Arc<CallCap>,
}

impl Connection {
    async fn open(gate: &Arc<Semaphore>, limits: ConnectionLimits) -> Connection {
        Connection::open_with(gate, limits, false, None).await
    }

    /// A connection to a service answering a message when `message`, from a client whose
    /// streams' flow-control window is `window` (hyper's default if `None`).
    async fn open_with(
        gate: &Arc<Semaphore>,
        limits: ConnectionLimits,
        message: bool,
        window: Option<u32>,
    ) -> Connection {
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let written = Arc::new(Mutex::new(Vec::new()));
        let (stop, stop_rx) = watch::channel(Phase::Serving);
        let tap = Tap {
            io: ours,
            written: Arc::clone(&written),
        };
        let cap = Arc::new(CallCap::new(&limits, &Metrics::new()));
        let gated = Gated {
            gate: Arc::clone(gate),
            message,
        };
        let protocol = GrpcConnections::new(
            gated,
            tonic_health::server::health_reporter().1,
            limits,
            Arc::clone(&cap),
        );
        let server = tokio::spawn(protocol.serve(tap, stop_rx));
        let mut client = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
        client.timer(TokioTimer::new());
        if let Some(window) = window {
            client.initial_stream_window_size(window);
        }
        let (client, connection) = client
            .handshake(TokioIo::new(theirs))
            .await
            .expect("the HTTP/2 handshake");
        Connection {
            client,
            client_task: tokio::spawn(connection),
            server,
            written,
            stop,
            cap,
        }
    }

    /// Starts a call; its answer's `grpc-status`.
    fn call(&mut self) -> JoinHandle<String> {
        self.call_within(None)
    }

    /// Starts a call with a deadline of its own (`grpc-timeout`), if any.
    fn call_within(&mut self, deadline: Option<&'static str>) -> JoinHandle<String> {
        self.send(deadline, Empty::new().boxed())
    }

    /// Starts a call whose message never comes: its headers, and a body that never ends.
    fn call_without_message(&mut self) -> JoinHandle<String> {
        let never = StreamBody::new(futures_util::stream::pending::<
            Result<hyper::body::Frame<Bytes>, Infallible>,
        >());
        self.send(None, never.boxed())
    }

    fn send(&mut self, deadline: Option<&'static str>, body: Body) -> JoinHandle<String> {
        let mut client = self.client.clone();
        tokio::spawn(async move {
            client.ready().await.expect("the connection takes a call");
            let mut request = http::Request::post("http://test/p")
                .header(http::header::CONTENT_TYPE, "application/grpc");
            if let Some(deadline) = deadline {
                request = request.header("grpc-timeout", deadline);
            }
            let request = request.body(body).unwrap();
            let answer = client.send_request(request).await.expect("an answer");
            let status = answer.headers().get("grpc-status").expect("grpc-status");
            status.to_str().unwrap().to_owned()
        })
    }

    /// The HTTP/2 frames the server has written: (type, flags, payload).
    fn frames(&self) -> Vec<(u8, u8, Vec<u8>)> {
        let written = self.written.lock().unwrap();
        let mut frames = Vec::new();
        let mut at = 0;
        while at + 9 <= written.len() {
            let len = usize::from(written[at]) << 16
                | usize::from(written[at + 1]) << 8
                | usize::from(written[at + 2]);
            let end = (at + 9 + len).min(written.len());
            frames.push((
                written[at + 3],
                written[at + 4],
                written[at + 9..end].to_vec(),
            ));
            at += 9 + len;
        }
        frames
    }

    /// The error codes of the `GOAWAY` frames the server has sent.
    fn goaways(&self) -> Vec<u32> {
        self.frames()
            .into_iter()
            .filter(|(kind, _, payload)| *kind == 7 && payload.len() >= 8)
            .map(|(_, _, p)| u32::from_be_bytes([p[4], p[5], p[6], p[7]]))
            .collect()
    }

    /// Waits for the server to close the connection; when it did.
    async fn closed(mut self) -> Instant {
        let goaways = |c: &Connection| c.goaways();
        // (A hang guard: every close below comes within one idle timeout.)
        tokio::time::timeout(IDLE * 10, &mut self.server)
            .await
            .expect("the server closes the connection")
            .expect("the server's task");
        let closed_at = Instant::now();
        let sent = goaways(&self);
        assert!(
            !sent.is_empty() && sent.iter().all(|code| *code == 0),
            "GOAWAY, NO_ERROR: {sent:?}"
        );
        let client = self.client_task.await.expect("the client's task");
        assert!(client.is_ok(), "the client saw a clean close: {client:?}");
        closed_at
    }
}

#[tokio::test(start_paused = true)]
async fn a_connection_without_calls_gets_a_goaway_after_the_idle_timeout() {
    let gate = Arc::new(Semaphore::new(0));
    let opened = Instant::now();
    let connection = Connection::open(&gate, limits()).await;
    // Pings every 20 s, answered: the connection is alive, only idle.
    let pings = |c: &Connection| c.frames().iter().filter(|f| f.0 == 6 && f.1 == 0).count();
    tokio::time::sleep(IDLE - Duration::from_secs(1)).await;
    assert!(pings(&connection) >= 2, "{:?}", connection.frames());
    assert!(connection.goaways().is_empty());
    assert!(!connection.server.is_finished());
    let closed = connection.closed().await;
    assert_eq!(closed - opened, IDLE);
}

#[tokio::test(start_paused = true)]
async fn calls_keep_a_connection_open_and_its_idle_time_counts_from_the_last() {
    let gate = Arc::new(Semaphore::new(Semaphore::MAX_PERMITS));
    let mut connection = Connection::open(&gate, limits()).await;
    // Five calls, 45 s apart: 3 minutes, three times the idle timeout.
    for _ in 0..5 {
        assert_eq!(connection.call().await.unwrap(), "0");
        assert!(connection.goaways().is_empty());
        tokio::time::sleep(IDLE * 3 / 4).await;
        assert!(!connection.server.is_finished());
    }
    let last = Instant::now() - IDLE * 3 / 4;
    let closed = connection.closed().await;
    assert_eq!(closed - last, IDLE);
}

#[tokio::test(start_paused = true)]
async fn a_call_in_flight_at_the_deadline_is_answered_and_the_close_waits_for_it() {
    let gate = Arc::new(Semaphore::new(0));
    // A call longer than the idle timeout (`validate` refuses such limits, so that the
    // request timeout always comes first; here they show the mechanism): it alone keeps
    // the connection open, not the time since it started.
    let limits = ConnectionLimits {
        request_timeout: IDLE * 4,
        ..limits()
    };
    let opened = Instant::now();
    let mut connection = Connection::open(&gate, limits).await;
    tokio::time::sleep(IDLE / 2).await;
    let call = connection.call();
    tokio::time::sleep(IDLE * 3).await;
    assert!(!connection.server.is_finished());
    assert!(connection.goaways().is_empty());
    gate.add_permits(1);
    assert_eq!(call.await.unwrap(), "0");
    let answered = Instant::now();
    assert_eq!(answered - opened, IDLE * 7 / 2);
    let closed = connection.closed().await;
    assert_eq!(closed - answered, IDLE);
}

#[tokio::test(start_paused = true)]
async fn a_call_past_the_request_timeout_is_cancelled_and_the_connection_serves_on() {
    let gate = Arc::new(Semaphore::new(0));
    let limits = ConnectionLimits {
        request_timeout: IDLE / 4,
        ..limits()
    };
    let mut connection = Connection::open(&gate, limits).await;
    let started = Instant::now();
    // CANCELLED, as tonic's own timeout answers.
    assert_eq!(connection.call().await.unwrap(), "1");
    assert_eq!(started.elapsed(), IDLE / 4);
    // A client's own sooner deadline is kept too; a later one is not.
    let started = Instant::now();
    assert_eq!(connection.call_within(Some("2S")).await.unwrap(), "1");
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    let started = Instant::now();
    assert_eq!(connection.call_within(Some("1H")).await.unwrap(), "1");
    assert_eq!(started.elapsed(), IDLE / 4);
    gate.add_permits(1);
    assert_eq!(connection.call().await.unwrap(), "0");
    let answered = Instant::now();
    let closed = connection.closed().await;
    assert_eq!(closed - answered, IDLE);
}

#[test]
fn a_clients_grpc_timeout_is_read_as_the_protocol_spells_it() {
    let deadline = |value: &'static str| {
        let mut headers = http::HeaderMap::new();
        headers.insert("grpc-timeout", http::HeaderValue::from_static(value));
        client_deadline(&headers)
    };
    assert_eq!(deadline("20m"), Some(Duration::from_millis(20)));
    assert_eq!(deadline("1H"), Some(Duration::from_secs(3_600)));
    assert_eq!(
        deadline("99999999H"),
        Some(Duration::from_secs(99_999_999 * 3_600))
    );
    assert_eq!(deadline("5u"), Some(Duration::from_micros(5)));
    for bad in ["", "m", "123456789S", "10x", "-1S", "1.5S", "S1"] {
        assert_eq!(deadline(bad), None, "{bad}");
    }
    assert_eq!(client_deadline(&http::HeaderMap::new()), None);
}

#[tokio::test(start_paused = true)]
async fn the_stop_lets_the_call_in_flight_finish() {
    let gate = Arc::new(Semaphore::new(0));
    let mut connection = Connection::open(&gate, limits()).await;
    let call = connection.call();
    tokio::time::sleep(Duration::from_secs(1)).await;
    connection.stop.send(Phase::Draining).unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!connection.server.is_finished(), "the call holds it open");
    gate.add_permits(1);
    assert_eq!(call.await.unwrap(), "0");
    connection.closed().await;
}

/// Issue 29: a call whose headers came but whose message never did held its memory until the
/// request timeout (30 s); 20 connections held 20,480 such calls.
#[tokio::test(start_paused = true)]
async fn hostile_29_a_call_without_its_message_is_cancelled_at_the_header_timeout() {
    let gate = Arc::new(Semaphore::new(Semaphore::MAX_PERMITS));
    let mut connection = Connection::open(&gate, limits()).await;
    let started = Instant::now();
    assert_eq!(connection.call_without_message().await.unwrap(), "4");
    assert_eq!(
        started.elapsed(),
        ConnectionLimits::DEFAULT_HEADER_READ_TIMEOUT
    );
    // Its place is given back, and the connection serves on.
    assert_eq!(connection.cap.in_flight.get(), 0);
    assert_eq!(connection.call().await.unwrap(), "0");
}

/// Issue 29: a client that keeps its flow-control window at 0 while answering pings kept its
/// calls past every timeout. Its connection is closed once an answer has waited three epochs
/// (half a request timeout each) for it: here the call starts as the first epoch does, so at
/// exactly one and a half request timeouts.
#[tokio::test(start_paused = true)]
async fn hostile_29_an_answer_not_taken_closes_its_connection() {
    let gate = Arc::new(Semaphore::new(Semaphore::MAX_PERMITS));
    let opened = Instant::now();
    let connection = Connection::open_with(&gate, limits(), true, Some(0)).await;
    // The answer's headers come (HTTP/2 does not count them against the window); its message
    // cannot, and the client keeps the answer open without reading it.
    let (headers_tx, headers) = tokio::sync::oneshot::channel();
    let mut client = connection.client.clone();
    let _reader = tokio::spawn(async move {
        client.ready().await.expect("the connection takes a call");
        let request = http::Request::post("http://test/p")
            .header(http::header::CONTENT_TYPE, "application/grpc")
            .body(Empty::new().boxed())
            .unwrap();
        let answer = client.send_request(request).await.expect("an answer");
        let _ = headers_tx.send(answer.headers()["grpc-status"].clone());
        std::future::pending::<()>().await;
        drop(answer);
    });
    let mut connection = connection;
    assert_eq!(headers.await.unwrap(), "0");
    assert_eq!(
        connection.cap.in_flight.get(),
        1,
        "the call holds its place"
    );
    tokio::time::timeout(IDLE * 10, &mut connection.server)
        .await
        .expect("the server closes the connection")
        .expect("the server's task");
    assert_eq!(opened.elapsed(), IDLE * 3 / 2);
    assert_eq!(connection.cap.in_flight.get(), 0, "its place is given back");
    assert_eq!(connection.cap.stalled.get(), 1);
}

/// An answer taken a little late is never cut: only one not taken for a request timeout is.
#[tokio::test(start_paused = true)]
async fn an_answer_taken_within_the_request_timeout_keeps_its_connection() {
    let gate = Arc::new(Semaphore::new(0));
    let mut connection = Connection::open_with(&gate, limits(), true, None).await;
    // In flight for most of a request timeout, over two epochs' looks: then answered.
    let call = connection.call();
    tokio::time::sleep(IDLE * 9 / 10).await;
    gate.add_permits(1);
    assert_eq!(call.await.unwrap(), "0");
    // Two more epochs' looks, within the idle timeout.
    tokio::time::sleep(IDLE * 9 / 10).await;
    assert_eq!(connection.cap.stalled.get(), 0);
    gate.add_permits(1);
    assert_eq!(connection.call().await.unwrap(), "0");
}

/// Issue 29: past the cap on calls in flight, a call is shed at once, `RESOURCE_EXHAUSTED`
/// naming the bound, and counted; a place given back is taken again.
#[tokio::test(start_paused = true)]
async fn hostile_29_calls_past_the_cap_are_shed_at_once() {
    let gate = Arc::new(Semaphore::new(0));
    let limits = ConnectionLimits {
        max_calls_in_flight: 2,
        ..limits()
    };
    let mut connection = Connection::open(&gate, limits).await;
    let (first, second) = (connection.call(), connection.call());
    while connection.cap.in_flight.get() < 2 {
        tokio::task::yield_now().await;
    }
    let started = Instant::now();
    assert_eq!(connection.call().await.unwrap(), "8");
    assert_eq!(started.elapsed(), Duration::ZERO, "at once");
    assert_eq!(connection.cap.shed_grpc.get(), 1);
    gate.add_permits(2);
    assert_eq!(
        (first.await.unwrap(), second.await.unwrap()),
        ("0".into(), "0".into())
    );
    assert_eq!(connection.cap.in_flight.get(), 0);
    gate.add_permits(1);
    assert_eq!(connection.call().await.unwrap(), "0");
    assert_eq!(connection.cap.shed_grpc.get(), 1);
}
