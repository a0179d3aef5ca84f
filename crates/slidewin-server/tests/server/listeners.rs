//! The listeners' bounds through real sockets: slowloris headers and bodies, thousands of idle
//! connections, the connection cap, a gRPC connection that never sends its preface, one that
//! answers pings but makes no call, and TLS on both listeners (a self-signed certificate made
//! at test time).
//!
//! No test sleeps or asserts on the wall clock: each sets small timeouts through the options
//! and waits, boundedly, for the server to close a connection (a read answering 0 or an
//! error); an outer `tokio::time::timeout` only guards against a hang.

use crate::support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry as PbEntry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest as PbRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code as PbCode;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use slidewin::Moment;
use slidewin::time::ManualClock;
use slidewin_server::{
    Bounds, Config, ConnectionLimits, Endpoints, Engine, Listeners, Metrics, ServeOptions, TlsFiles,
};
use slidewin_store::Memory;
use support::server::{self, Served};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls;

const CONFIG: &str = "\
domain: api
descriptors:
  - key: client
    rate_limit:
      unit: second
      requests_per_unit: 1000000
";

/// The hang guard: no bounded wait below should come near it.
const HANG: Duration = Duration::from_secs(30);

/// How long a slow client waits for the server's close before it sends its next byte.
const PACE: Duration = Duration::from_millis(20);

struct Running(Served);

impl std::ops::Deref for Running {
    type Target = Served;

    fn deref(&self) -> &Served {
        &self.0
    }
}

impl Running {
    async fn stop(self) {
        tokio::time::timeout(HANG, self.0.stop())
            .await
            .expect("the server stops");
    }
}

/// The test's config in memory, on a clock that stays put.
fn engine() -> Engine<Memory> {
    let config = Config::parse(CONFIG, "test.yaml").expect("the test's config is valid");
    Engine::new(
        Memory::new(),
        config,
        Arc::new(ManualClock::new(Moment::from_secs(1_000))),
        Bounds::default(),
        Metrics::new(),
    )
    .expect("memory holds the rules")
}

async fn start(limits: ConnectionLimits, tls: Option<TlsFiles>) -> Running {
    let engine = engine();
    let options = ServeOptions {
        admin: false,
        limits,
        tls,
        ..server::local()
    };
    Running(Served::start(Endpoints::new(engine, vec![]), &options).await)
}

/// Small timeouts, so that the server's closes come soon.
fn quick() -> ConnectionLimits {
    ConnectionLimits {
        header_read_timeout: Duration::from_millis(300),
        request_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_secs(2),
        ..ConnectionLimits::default()
    }
}

const JSON: &str =
    r#"{"domain":"api","descriptors":[{"entries":[{"key":"client","value":"ann"}]}]}"#;

fn json_request() -> String {
    format!(
        "POST /json HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{JSON}",
        JSON.len()
    )
}

/// `POST /json` over `io`, read to the close: the whole answer.
async fn post_json<I: AsyncRead + AsyncWrite + Unpin>(mut io: I) -> String {
    io.write_all(json_request().as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = io.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// A plain-text `POST /json` on a new connection answers 200.
async fn json_ok(http: SocketAddr) {
    let answer = tokio::time::timeout(HANG, async {
        post_json(TcpStream::connect(http).await.unwrap()).await
    })
    .await
    .expect("answered");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

async fn grpc_ok(grpc: SocketAddr) {
    let mut client = RateLimitServiceClient::connect(format!("http://{grpc}"))
        .await
        .expect("gRPC connects");
    let answer = client.should_rate_limit(grpc_request()).await.unwrap();
    assert_eq!(answer.into_inner().overall_code, PbCode::Ok as i32);
}

fn grpc_request() -> PbRequest {
    PbRequest {
        domain: "api".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![PbEntry {
                key: "client".into(),
                value: "ann".into(),
            }],
            ..Default::default()
        }],
        hits_addend: 1,
    }
}

/// Waits (boundedly) for the server to close `stream`; what it said before, if anything.
async fn closed_by_server(stream: &mut TcpStream) -> String {
    let mut said = Vec::new();
    tokio::time::timeout(HANG, async {
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => said.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .expect("the server closes the connection");
    String::from_utf8_lossy(&said).into_owned()
}

/// Sends `head`, then the bytes of `then` (over and over) one at a time, each after waiting
/// [`PACE`] for the server to close, until it does. The bytes trickled, and what the server
/// said.
async fn trickle(stream: &mut TcpStream, head: &[u8], then: &[u8]) -> (usize, String) {
    let mut sent = 0;
    let mut said = Vec::new();
    stream.write_all(head).await.unwrap();
    tokio::time::timeout(HANG, async {
        let mut buf = [0u8; 1024];
        loop {
            match tokio::time::timeout(PACE, stream.read(&mut buf)).await {
                Ok(Ok(0) | Err(_)) => break,
                Ok(Ok(n)) => said.extend_from_slice(&buf[..n]),
                Err(_) => {
                    let byte = then[sent % then.len()];
                    if stream.write_all(&[byte]).await.is_err() {
                        break;
                    }
                    sent += 1;
                }
            }
        }
    })
    .await
    .expect("the server closes the slow connection");
    (sent, String::from_utf8_lossy(&said).into_owned())
}

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

/// [`quick`], but with an idle timeout no test waits for: a close comes from another bound.
fn quick_not_idle() -> ConnectionLimits {
    ConnectionLimits {
        idle_timeout: HANG * 2,
        ..quick()
    }
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

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

/// A self-signed certificate for `localhost`, written to a fresh directory: (files, PEM).
fn self_signed() -> (TlsFiles, String) {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a certificate");
    let dir = std::env::temp_dir().join(format!(
        "slidewin-listeners-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let pem = certified.cert.pem();
    std::fs::write(&cert, &pem).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    (
        TlsFiles {
            cert,
            key,
            client_ca: None,
            only_grpc: false,
        },
        pem,
    )
}

/// Removes the directory [`self_signed`] made (the files are read once, when binding).
fn remove(files: &TlsFiles) {
    if let Some(dir) = files.cert.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn tls_connector(ca_pem: &str) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

async fn https_json_ok(http: SocketAddr, connector: &tokio_rustls::TlsConnector) {
    let tcp = TcpStream::connect(http).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = connector.connect(name, tcp).await.expect("TLS handshake");
    let answer = tokio::time::timeout(HANG, post_json(tls))
        .await
        .expect("answered");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

async fn grpcs_ok(grpc: SocketAddr, ca_pem: &str) {
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
    let channel = Endpoint::from_shared(format!("https://{grpc}"))
        .unwrap()
        .tls_config(
            ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(ca_pem))
                .domain_name("localhost"),
        )
        .unwrap()
        .connect()
        .await
        .expect("gRPC over TLS connects");
    let answer = RateLimitServiceClient::new(channel)
        .should_rate_limit(grpc_request())
        .await
        .unwrap();
    assert_eq!(answer.into_inner().overall_code, PbCode::Ok as i32);
}

#[tokio::test]
async fn tls_on_both_listeners_and_plain_text_fails_cleanly() {
    let (files, ca) = self_signed();
    let running = start(ConnectionLimits::default(), Some(files.clone())).await;
    remove(&files);
    let connector = tls_connector(&ca);
    https_json_ok(running.http, &connector).await;
    grpcs_ok(running.grpc, &ca).await;

    // Plain text to the TLS ports: no HTTP answer, the connection closed.
    let mut plain = TcpStream::connect(running.http).await.unwrap();
    plain.write_all(json_request().as_bytes()).await.unwrap();
    let said = closed_by_server(&mut plain).await;
    assert!(!said.starts_with("HTTP/"), "{said}");
    let mut client = RateLimitServiceClient::connect(format!("http://{}", running.grpc))
        .await
        .expect("TCP connects");
    assert!(client.should_rate_limit(grpc_request()).await.is_err());

    // And both keep serving.
    https_json_ok(running.http, &connector).await;
    grpcs_ok(running.grpc, &ca).await;
    running.stop().await;
}

#[tokio::test]
async fn a_stalled_tls_handshake_is_closed_on_both_listeners() {
    let (files, ca) = self_signed();
    let running = start(quick_not_idle(), Some(files.clone())).await;
    remove(&files);
    // A TLS record header announcing a 512-byte handshake message, and 40 bytes of it: more
    // than the first bytes due, less than a `ClientHello`.
    let mut stalled = [0u8; 45];
    stalled[..5].copy_from_slice(&[0x16, 0x03, 0x01, 0x02, 0x00]);
    stalled[5] = 0x01;
    let mut http = TcpStream::connect(running.http).await.unwrap();
    let mut grpc = TcpStream::connect(running.grpc).await.unwrap();
    http.write_all(&stalled).await.unwrap();
    grpc.write_all(&stalled).await.unwrap();
    tokio::join!(closed_by_server(&mut http), closed_by_server(&mut grpc));
    https_json_ok(running.http, &tls_connector(&ca)).await;
    grpcs_ok(running.grpc, &ca).await;
    running.stop().await;
}

#[tokio::test]
async fn a_missing_or_bad_tls_file_is_a_startup_error_naming_it() {
    let (files, _) = self_signed();
    let bind = |tls: TlsFiles| async move {
        let options = ServeOptions {
            tls: Some(tls),
            ..server::local()
        };
        match Listeners::bind(&options).await {
            Ok(_) => panic!("bound with a bad TLS file"),
            Err(e) => e.to_string(),
        }
    };
    let missing = PathBuf::from("/nonexistent/slidewin/cert.pem");
    let error = bind(TlsFiles {
        cert: missing.clone(),
        key: files.key.clone(),
        client_ca: None,
        only_grpc: false,
    })
    .await;
    assert!(error.contains(&missing.display().to_string()), "{error}");

    let garbage = files.key.with_file_name("garbage.pem");
    std::fs::write(&garbage, "not a key").unwrap();
    let error = bind(TlsFiles {
        cert: files.cert.clone(),
        key: garbage.clone(),
        client_ca: None,
        only_grpc: false,
    })
    .await;
    assert!(error.contains(&garbage.display().to_string()), "{error}");

    // A key that is not the certificate's.
    let (other, _) = self_signed();
    let error = bind(TlsFiles {
        cert: files.cert.clone(),
        key: other.key.clone(),
        client_ca: None,
        only_grpc: false,
    })
    .await;
    assert!(error.contains(&other.key.display().to_string()), "{error}");

    // A certificate file holding a key only.
    let error = bind(TlsFiles {
        cert: files.key.clone(),
        key: files.key.clone(),
        client_ca: None,
        only_grpc: false,
    })
    .await;
    assert!(error.contains("no CERTIFICATE"), "{error}");
    remove(&files);
    remove(&other);
}

#[tokio::test]
async fn limits_that_bound_nothing_are_refused_by_name() {
    let options = ServeOptions {
        limits: ConnectionLimits {
            header_read_timeout: Duration::ZERO,
            ..ConnectionLimits::default()
        },
        ..server::local()
    };
    let Err(error) = Listeners::bind(&options).await else {
        panic!("bound with a zero timeout")
    };
    assert!(error.to_string().contains("header_read_timeout"), "{error}");
}

/// Over TLS, the admin sign-in cookie is `Secure`; over plain http it is not (a browser would
/// drop it).
#[tokio::test]
async fn the_admin_cookie_is_secure_over_tls() {
    let (files, ca) = self_signed();
    let token = "0123456789abcdef0123456789abcdef";
    let sign_in =
        format!("GET /?token={token} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n");
    for tls in [Some(files.clone()), None] {
        let service = Endpoints::new(engine(), vec![])
            .with_admin_token(slidewin_server::AdminToken::new(token).unwrap());
        let over_tls = tls.is_some();
        // The admin routes open (behind the token), every bound the default.
        let options = ServeOptions {
            tls,
            ..server::local()
        };
        let served = Served::start(service, &options).await;
        let http = served.http;
        let tcp = TcpStream::connect(http).await.unwrap();
        let mut answer = String::new();
        if over_tls {
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let mut stream = tls_connector(&ca)
                .connect(name, tcp)
                .await
                .expect("TLS handshake");
            stream.write_all(sign_in.as_bytes()).await.unwrap();
            let _ = stream.read_to_string(&mut answer).await;
        } else {
            let mut stream = tcp;
            stream.write_all(sign_in.as_bytes()).await.unwrap();
            let _ = stream.read_to_string(&mut answer).await;
        }
        let cookie = answer
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
            .unwrap_or_else(|| panic!("a sign-in cookie: {answer}"));
        assert!(
            cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
            "{cookie}"
        );
        assert_eq!(cookie.contains("; Secure"), over_tls, "{cookie}");
        served.stop().await;
    }
    remove(&files);
}

/// The HTTP/2 frame types `bytes` holds, in order (each frame: a 9-byte head, then its payload).
fn frame_types(bytes: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    let mut at = 0;
    while at + 9 <= bytes.len() {
        let length = usize::from(bytes[at]) << 16
            | usize::from(bytes[at + 1]) << 8
            | usize::from(bytes[at + 2]);
        types.push(bytes[at + 3]);
        at += 9 + length;
    }
    types
}

/// Issue 31: envoy ratelimit's `GRPC_MAX_CONNECTION_AGE`. A gRPC connection, busy or not
/// (the idle timeout is out of reach here), gets a `GOAWAY` once it is old, and is closed.
#[tokio::test]
async fn issue_31_an_aged_grpc_connection_gets_a_goaway() {
    let running = start(
        ConnectionLimits {
            max_connection_age: Some(Duration::from_millis(50)),
            ..quick_not_idle()
        },
        None,
    )
    .await;
    let mut stream = TcpStream::connect(running.grpc).await.unwrap();
    stream.write_all(PREFACE).await.unwrap();
    // An empty SETTINGS frame: the client's half of the handshake.
    stream
        .write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0])
        .await
        .unwrap();
    let mut seen = Vec::new();
    tokio::time::timeout(HANG, stream.read_to_end(&mut seen))
        .await
        .expect("the aged connection is closed")
        .unwrap();
    const GOAWAY: u8 = 7;
    assert!(
        frame_types(&seen).contains(&GOAWAY),
        "{:?}",
        frame_types(&seen)
    );
    // A new connection is served as before.
    grpc_ok(running.grpc).await;
    running.stop().await;
}

#[test]
fn a_zero_max_connection_age_is_refused_naming_it() {
    let limits = ConnectionLimits {
        max_connection_age: Some(Duration::ZERO),
        ..ConnectionLimits::default()
    };
    assert!(
        limits
            .validate()
            .unwrap_err()
            .to_string()
            .contains("max_connection_age")
    );
}
