//! Listening: the gRPC and HTTP listeners, each connection's bounds, optional TLS, reloads on a
//! file change or SIGHUP, and a graceful stop.
//!
//! Both listeners take connections through one accept loop of ours, so that each connection is
//! bounded whatever it sends (see [`ConnectionLimits`]):
//!
//! - at most [`ConnectionLimits::max_connections`] are open per listener; past it, a new
//!   connection waits in the kernel's backlog until one closes, and idle ones do close (below);
//! - a connection must send its first bytes within [`ConnectionLimits::header_read_timeout`]
//!   (on gRPC, the 24 of HTTP/2's preface or of a TLS `ClientHello`), a TLS handshake must
//!   finish within it, and an HTTP/1 request must send its whole head
//!   within it (hyper's timer, which also runs while a keep-alive connection waits for its
//!   next request: so it closes idle HTTP/1 connections);
//! - a connection on which no byte moves either way for [`ConnectionLimits::idle_timeout`] is
//!   closed (a dead peer, a slow reader, a stalled TLS handshake);
//! - an HTTP request (its body read and its answer) gets [`ConnectionLimits::request_timeout`],
//!   then `408 Request Timeout`; a gRPC call gets the same, then `CANCELLED`, tonic's answer;
//! - gRPC's HTTP/2 gets keep-alive pings and a cap on concurrent streams. A connection whose
//!   client answers the pings is not idle (Envoy's long-lived connection is the normal case):
//!   one that makes no call holds its place until it goes, bounded by the cap. (tonic 0.14's
//!   `max_connection_age` would bound it, but cuts the calls in flight without a `GOAWAY`
//!   when given a grace period, and is unsafe without one, so it is not used.)

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

use crate::backend::ServiceBackend;
use crate::service::grpc::Grpc;
use crate::service::{MAX_BODY_BYTES, Service};

/// Where to listen, what to show, each connection's bounds, and TLS.
///
/// ```
/// use slidewin_server::{ConnectionLimits, ServeOptions};
/// let options = ServeOptions::default();
/// assert!(options.grpc_addr.ip().is_loopback() && options.http_addr.ip().is_loopback());
/// assert_eq!(options.limits, ConnectionLimits::default());
/// assert!(options.tls.is_none());
/// ```
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Envoy's RLS gRPC: 127.0.0.1:8081 by default, envoy ratelimit's port.
    pub grpc_addr: SocketAddr,
    /// The HTTP API and dashboard: 127.0.0.1:8080 by default.
    pub http_addr: SocketAddr,
    /// Serve the dashboard, `/api/*` and `/metrics`; `false` closes them.
    pub admin: bool,
    /// The bounds on each connection, on both listeners.
    pub limits: ConnectionLimits,
    /// TLS on both listeners; `None`, the default, speaks plain text.
    pub tls: Option<TlsFiles>,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            grpc_addr: SocketAddr::from(([127, 0, 0, 1], 8081)),
            http_addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            admin: true,
            limits: ConnectionLimits::default(),
            tls: None,
        }
    }
}

/// A certificate chain and its private key, PEM files, for TLS on both listeners.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first (PEM `CERTIFICATE` blocks).
    pub cert: PathBuf,
    /// The leaf's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// How long a connection may take to send its first bytes and an HTTP/1 request its head:
/// 10 s.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an HTTP request may take, its body read and its answer, and a gRPC call: 30 s.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection may stay with no byte moving either way: 60 s.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// The most connections open at once on each listener: 10,000.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// The most gRPC calls in flight at once on one HTTP/2 connection: 1,024.
pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 1_024;
/// How often an HTTP/2 connection is pinged while it is quiet: every 20 s.
pub const DEFAULT_HTTP2_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(20);
/// How long a ping may go unanswered before its connection is closed: 10 s.
pub const DEFAULT_HTTP2_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// The first bytes a gRPC connection must send within the header read timeout: the length of
/// HTTP/2's preface (`PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`), which every client sends first (and
/// a TLS `ClientHello` is longer).
const GRPC_FIRST_BYTES: usize = 24;

/// An HTTP/1 connection's first byte is due within the header read timeout (hyper bounds the
/// whole head, and a request may be shorter than HTTP/2's preface: `GET / HTTP/1.0`).
const HTTP_FIRST_BYTES: usize = 1;

/// How long the accept loop rests after an error that is not one connection's (the process
/// is out of file descriptors, say), so that it does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The bounds on each connection, on both listeners: what a hostile or broken client can hold.
///
/// ```
/// use std::time::Duration;
/// use slidewin_server::{ConnectionLimits, ServeOptions};
/// let options = ServeOptions {
///     limits: ConnectionLimits {
///         max_connections: 1_000,
///         header_read_timeout: Duration::from_secs(5),
///         ..ConnectionLimits::default()
///     },
///     ..ServeOptions::default()
/// };
/// assert!(options.limits.validate().is_ok());
/// let zero = ConnectionLimits { max_connections: 0, ..ConnectionLimits::default() };
/// assert!(zero.validate().unwrap_err().contains("max_connections"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// A new connection's first bytes (on gRPC, HTTP/2's 24-byte preface), a TLS handshake,
    /// and each HTTP/1 request's head (also awaited on an idle
    /// keep-alive connection) must arrive within it, or the connection is closed: the
    /// slowloris bound. [`DEFAULT_HEADER_READ_TIMEOUT`].
    pub header_read_timeout: Duration,
    /// An HTTP request's body read and answer, or a gRPC call, must finish within it: HTTP
    /// answers `408 Request Timeout`, gRPC `CANCELLED`. [`DEFAULT_REQUEST_TIMEOUT`].
    pub request_timeout: Duration,
    /// A connection with no byte moving either way for this long is closed. At least
    /// `request_timeout`, so that a request in flight is never cut by it.
    /// [`DEFAULT_IDLE_TIMEOUT`].
    pub idle_timeout: Duration,
    /// The most connections open at once on each listener; past it, a new connection waits
    /// (in the kernel's backlog) until one closes. [`DEFAULT_MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// The most gRPC calls in flight on one connection. [`DEFAULT_MAX_CONCURRENT_STREAMS`].
    pub max_concurrent_streams: u32,
    /// gRPC's HTTP/2 pings a quiet connection this often.
    /// [`DEFAULT_HTTP2_KEEPALIVE_INTERVAL`].
    pub http2_keepalive_interval: Duration,
    /// An unanswered ping closes its connection after this long.
    /// [`DEFAULT_HTTP2_KEEPALIVE_TIMEOUT`].
    pub http2_keepalive_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_concurrent_streams: DEFAULT_MAX_CONCURRENT_STREAMS,
            http2_keepalive_interval: DEFAULT_HTTP2_KEEPALIVE_INTERVAL,
            http2_keepalive_timeout: DEFAULT_HTTP2_KEEPALIVE_TIMEOUT,
        }
    }
}

impl ConnectionLimits {
    /// Checks that every bound bounds something.
    ///
    /// # Errors
    ///
    /// The first bound that is zero, or an idle timeout shorter than the request timeout,
    /// named.
    pub fn validate(&self) -> Result<(), String> {
        for (name, value) in [
            ("header_read_timeout", self.header_read_timeout),
            ("request_timeout", self.request_timeout),
            ("idle_timeout", self.idle_timeout),
            ("http2_keepalive_interval", self.http2_keepalive_interval),
            ("http2_keepalive_timeout", self.http2_keepalive_timeout),
        ] {
            if value.is_zero() {
                return Err(format!("{name} is zero: it must be a positive duration"));
            }
        }
        if self.max_connections == 0 {
            return Err("max_connections is 0: a listener must take at least one".to_owned());
        }
        if self.max_concurrent_streams == 0 {
            return Err("max_concurrent_streams is 0: a connection must carry a call".to_owned());
        }
        if self.idle_timeout < self.request_timeout {
            return Err(format!(
                "idle_timeout ({:?}) is shorter than request_timeout ({:?}): it would cut \
                 requests in flight",
                self.idle_timeout, self.request_timeout
            ));
        }
        Ok(())
    }
}

/// Bound listeners, ready to serve.
pub struct Listeners {
    grpc: TcpListener,
    http: TcpListener,
    limits: ConnectionLimits,
    tls: Option<Tls>,
}

/// TLS, read and checked: rustls' acceptor for HTTP, the same PEM for tonic.
struct Tls {
    http: TlsAcceptor,
    grpc: tonic::transport::Identity,
}

impl Listeners {
    /// Checks the limits, reads the TLS files if any, and binds both addresses.
    ///
    /// # Errors
    ///
    /// A bound that bounds nothing; a TLS file that cannot be read or holds no valid
    /// certificate or key, named; an address that cannot be bound, named.
    pub async fn bind(options: &ServeOptions) -> io::Result<Listeners> {
        options
            .limits
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let tls = options.tls.as_ref().map(Tls::load).transpose()?;
        let named = |what: &'static str, addr: SocketAddr| {
            move |e: io::Error| {
                io::Error::new(e.kind(), format!("cannot listen on {addr} ({what}): {e}"))
            }
        };
        Ok(Listeners {
            grpc: TcpListener::bind(options.grpc_addr)
                .await
                .map_err(named("gRPC", options.grpc_addr))?,
            http: TcpListener::bind(options.http_addr)
                .await
                .map_err(named("HTTP", options.http_addr))?,
            limits: options.limits,
            tls,
        })
    }

    /// The gRPC listener's address.
    ///
    /// # Errors
    ///
    /// The socket's error.
    pub fn grpc_addr(&self) -> io::Result<SocketAddr> {
        self.grpc.local_addr()
    }

    /// The HTTP listener's address.
    ///
    /// # Errors
    ///
    /// The socket's error.
    pub fn http_addr(&self) -> io::Result<SocketAddr> {
        self.http.local_addr()
    }

    /// Whether both listeners speak TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }
}

impl Tls {
    fn load(files: &TlsFiles) -> io::Result<Tls> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};

        let bad = |path: &Path, what: String| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("TLS: {}: {what}", path.display()),
            )
        };
        let read = |path: &Path| {
            std::fs::read(path).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("TLS: cannot read {}: {e}", path.display()),
                )
            })
        };
        let (cert_pem, key_pem) = (read(&files.cert)?, read(&files.key)?);
        let certs = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(&files.cert, format!("not a PEM certificate chain: {e}")))?;
        if certs.is_empty() {
            return Err(bad(&files.cert, "holds no CERTIFICATE block".to_owned()));
        }
        let key = PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|e| bad(&files.key, format!("holds no PEM private key: {e}")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| io::Error::other(format!("TLS: {e}")))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| {
                bad(
                    &files.key,
                    format!("does not fit the certificate {}: {e}", files.cert.display()),
                )
            })?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            http: TlsAcceptor::from(Arc::new(config)),
            grpc: tonic::transport::Identity::from_pem(cert_pem, key_pem),
        })
    }
}

/// Serves `service` on `listeners` until `shutdown` completes: then both listeners stop
/// accepting, the checks in flight finish, and it returns. Each connection is bounded by the
/// listeners' [`ConnectionLimits`].
///
/// # Errors
///
/// A listener that failed.
pub async fn serve<B: ServiceBackend>(
    service: Service<B>,
    listeners: Listeners,
    admin: bool,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let limits = listeners.limits;
    let (http_tls, grpc_tls) = match listeners.tls {
        Some(tls) => (Some(tls.http), Some(tls.grpc)),
        None => (None, None),
    };
    let service = if http_tls.is_some() {
        service.over_tls()
    } else {
        service
    };
    let router = service.router(admin);
    let http = serve_http(listeners.http, router, limits, http_tls, stop_rx.clone());
    let mut builder = tonic::transport::Server::builder()
        .timeout(limits.request_timeout)
        .http2_keepalive_interval(Some(limits.http2_keepalive_interval))
        .http2_keepalive_timeout(Some(limits.http2_keepalive_timeout))
        .max_concurrent_streams(limits.max_concurrent_streams);
    if let Some(identity) = grpc_tls {
        builder = builder
            .tls_config(
                tonic::transport::ServerTlsConfig::new()
                    .identity(identity)
                    .timeout(limits.header_read_timeout),
            )
            .map_err(|e| io::Error::other(format!("TLS on the gRPC listener: {e}")))?;
    }
    let grpc = builder
        .add_service(
            RateLimitServiceServer::new(Grpc {
                service: service.clone(),
            })
            .max_decoding_message_size(MAX_BODY_BYTES),
        )
        .serve_with_incoming_shutdown(incoming(listeners.grpc, limits), stopped(stop_rx.clone()));
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!("shutting down: no new connections; finishing the checks in flight");
        let _ = stop_tx.send(true);
    });
    let (http, grpc) = tokio::join!(http, grpc);
    http?;
    grpc.map_err(io::Error::other)
}

/// Completes when the stop is sent (or its sender is gone).
async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

/// The HTTP listener: our accept loop, hyper's HTTP/1 with a header read timeout, each
/// request under the request timeout, and a graceful stop.
async fn serve_http(
    listener: TcpListener,
    router: axum::Router,
    limits: ConnectionLimits,
    tls: Option<TlsAcceptor>,
    stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    // Each connection holds a sender; when all are dropped, `recv` answers `None`.
    let (open_tx, mut open_rx) = mpsc::channel::<Infallible>(1);
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    let stopping = stopped(stop.clone());
    tokio::pin!(stopping);
    loop {
        let stream = tokio::select! {
            biased;
            () = &mut stopping => break,
            stream = accept(&listener, &permits, limits, HTTP_FIRST_BYTES) => stream,
        };
        let (router, tls, http1, stop, open) = (
            router.clone(),
            tls.clone(),
            http1.clone(),
            stop.clone(),
            open_tx.clone(),
        );
        tokio::spawn(async move {
            let _open = open;
            let Some(tls) = tls else {
                return serve_connection(stream, router, limits, &http1, stop).await;
            };
            let handshake = tokio::time::timeout(limits.header_read_timeout, tls.accept(stream));
            let stream = tokio::select! {
                done = handshake => match done {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(e)) => {
                        tracing::debug!("TLS handshake failed: {e}");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!("TLS handshake timed out");
                        return;
                    }
                },
                () = stopped(stop.clone()) => return,
            };
            serve_connection(stream, router, limits, &http1, stop).await;
        });
    }
    // New connections are refused from here; the open ones finish what they are doing.
    drop(listener);
    drop(open_tx);
    let _ = open_rx.recv().await;
    Ok(())
}

/// One HTTP/1 connection, until it closes or, after the stop, finishes its request in flight.
async fn serve_connection<I>(
    io: I,
    router: axum::Router,
    limits: ConnectionLimits,
    http1: &hyper::server::conn::http1::Builder,
    stop: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let timeout = limits.request_timeout;
    let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
        within(timeout, router.clone(), request)
    });
    let connection = http1.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let served = tokio::select! {
        served = connection.as_mut() => served,
        () = stopped(stop) => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(e) = served {
        tracing::debug!("HTTP connection closed: {e}");
    }
}

/// `request` through `router`, its body read and its answer within `timeout`, else
/// `408 Request Timeout` (and the connection closes).
async fn within(
    timeout: Duration,
    mut router: axum::Router,
    request: http::Request<Incoming>,
) -> Result<axum::response::Response, Infallible> {
    use axum::response::IntoResponse;
    // A `Router` is always ready (axum's documentation of `Router`'s `Service` impl).
    let answer = tower::Service::call(&mut router, request);
    match tokio::time::timeout(timeout, answer).await {
        Ok(response) => response,
        Err(_) => Ok((
            http::StatusCode::REQUEST_TIMEOUT,
            [(http::header::CONNECTION, "close")],
            format!(
                "request timeout: the request's body and its answer must finish within {timeout:?}\n"
            ),
        )
            .into_response()),
    }
}

/// The gRPC listener's connections, each bounded as the HTTP listener's are.
fn incoming(
    listener: TcpListener,
    limits: ConnectionLimits,
) -> impl futures_util::Stream<Item = io::Result<Bounded<TcpStream>>> {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    futures_util::stream::unfold((listener, permits), move |(listener, permits)| async move {
        let stream = accept(&listener, &permits, limits, GRPC_FIRST_BYTES).await;
        Some((Ok(stream), (listener, permits)))
    })
}

/// The next connection, once one of `permits` is free: the cap waits, and the kernel's backlog
/// holds the connections that come meanwhile.
async fn accept(
    listener: &TcpListener,
    permits: &Arc<Semaphore>,
    limits: ConnectionLimits,
    first_bytes: usize,
) -> Bounded<TcpStream> {
    // The semaphore is never closed.
    let Ok(permit) = permits.clone().acquire_owned().await else {
        return std::future::pending().await;
    };
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                return Bounded::new(stream, permit, limits, first_bytes);
            }
            // One connection's failure: the next may be fine.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionAborted
                        | io::ErrorKind::ConnectionReset
                        | io::ErrorKind::ConnectionRefused
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => {
                tracing::warn!("cannot accept a connection: {e}; retrying");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

/// A connection with its bounds: it holds one of its listener's permits until it is dropped,
/// must send its first bytes ([`GRPC_FIRST_BYTES`], [`HTTP_FIRST_BYTES`]) within the header
/// read timeout, and is closed (an
/// error `TimedOut`) when no byte moves either way for the idle timeout.
struct Bounded<S> {
    io: S,
    _permit: OwnedSemaphorePermit,
    /// The first bytes still due before the first deadline.
    first_bytes: usize,
    /// The first bytes' deadline, then the idle one from the last byte moved.
    first_deadline: Instant,
    last_moved: Instant,
    idle: Duration,
    timer: Pin<Box<Sleep>>,
}

impl<S> Bounded<S> {
    fn new(
        io: S,
        permit: OwnedSemaphorePermit,
        limits: ConnectionLimits,
        first_bytes: usize,
    ) -> Bounded<S> {
        let now = Instant::now();
        let first_deadline = now + limits.header_read_timeout;
        Bounded {
            io,
            _permit: permit,
            first_bytes,
            first_deadline,
            last_moved: now,
            idle: limits.idle_timeout,
            timer: Box::pin(tokio::time::sleep_until(first_deadline)),
        }
    }

    fn deadline(&self) -> Instant {
        if self.first_bytes > 0 {
            self.first_deadline
        } else {
            self.last_moved + self.idle
        }
    }

    fn moved(&mut self, read: usize, written: usize) {
        if read + written > 0 {
            self.first_bytes = self.first_bytes.saturating_sub(read);
            self.last_moved = Instant::now();
        }
    }

    /// Whether the deadline has passed; if not, the timer is set to wake this task at it.
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> bool {
        // The timer is moved to the deadline only here, when the I/O waits, not on each byte.
        let deadline = self.deadline();
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        self.timer.as_mut().poll(cx).is_ready()
    }

    fn expired(&self) -> io::Error {
        let what = if self.first_bytes > 0 {
            "the connection's first bytes did not arrive within the header read timeout"
        } else {
            "no byte moved within the idle timeout"
        };
        io::Error::new(io::ErrorKind::TimedOut, what)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Bounded<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                this.moved(buf.filled().len() - before, 0);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending if this.poll_expired(cx) => Poll::Ready(Err(this.expired())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S> Bounded<S> {
    /// A write's outcome: bytes that moved keep the connection alive; a write that waits past
    /// the deadline fails.
    fn wrote(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match polled {
            Poll::Ready(Ok(n)) => {
                self.moved(0, n);
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending if self.poll_expired(cx) => Poll::Ready(Err(self.expired())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Bounded<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.wrote(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.wrote(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl<S: tonic::transport::server::Connected> tonic::transport::server::Connected for Bounded<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

/// Reloads `service`'s config when a file under its paths changes (the directories around
/// them are watched, so that Kubernetes' swap of a `ConfigMap`'s `..data` link is seen) and on
/// SIGHUP, until the returned guard is dropped.
///
/// # Errors
///
/// The file watcher could not start.
pub fn watch_config<B: ServiceBackend>(service: &Service<B>) -> Result<ConfigWatch, String> {
    use notify::{RecursiveMode, Watcher};

    let (tx, mut rx) = mpsc::channel::<()>(1);
    let on_event = tx.clone();
    let named: Vec<std::ffi::OsString> = service
        .paths()
        .iter()
        .filter(|p| !p.is_dir())
        .filter_map(|p| p.file_name().map(ToOwned::to_owned))
        .collect();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        // Only the config's own files count: a log or an editor's swap file written beside them
        // must not reload (a log of the reload would reload again, without end).
        if !event.kind.is_access() && event.paths.iter().any(|p| is_config_path(p, &named)) {
            // A full channel means a reload is already due.
            let _ = on_event.try_send(());
        }
    })
    .map_err(|e| format!("cannot watch the config: {e}"))?;
    for dir in watched_dirs(service.paths()) {
        watcher
            .watch(&dir, RecursiveMode::NonRecursive)
            .map_err(|e| format!("cannot watch {}: {e}", dir.display()))?;
    }
    let reloader = service.clone();
    let task = tokio::spawn(async move {
        while rx.recv().await.is_some() {
            // Editors and ConfigMaps write in several steps: let them settle.
            tokio::time::sleep(Duration::from_millis(100)).await;
            while rx.try_recv().is_ok() {}
            let _ = reloader.reload();
        }
    });
    // SIGHUP is registered before this returns, so that none finds the default (which ends
    // the process).
    #[cfg(unix)]
    let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|e| format!("cannot listen for SIGHUP: {e}"))?;
    let hup = tokio::spawn(async move {
        #[cfg(unix)]
        while hangups.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading the config");
            let _ = tx.send(()).await;
        }
        #[cfg(not(unix))]
        drop(tx);
    });
    Ok(ConfigWatch {
        _watcher: Box::new(watcher),
        tasks: vec![task, hup],
    })
}

/// Stops watching when dropped.
pub struct ConfigWatch {
    _watcher: Box<dyn notify::Watcher + Send>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for ConfigWatch {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// A path whose change may change the config: a file named in the config's paths, a `.yaml`
/// or `.yml` file, or Kubernetes' `..data` link and its `..<timestamp>` directories.
fn is_config_path(path: &Path, named: &[std::ffi::OsString]) -> bool {
    let Some(name) = path.file_name() else {
        return false;
    };
    if named.iter().any(|n| n == name) {
        return true;
    }
    let name = name.to_string_lossy();
    name.starts_with("..") || name.ends_with(".yaml") || name.ends_with(".yml")
}

fn watched_dirs(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = paths
        .iter()
        .map(|p| {
            if p.is_dir() {
                p.clone()
            } else {
                p.parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .map_or_else(|| Path::new(".").to_path_buf(), Path::to_path_buf)
            }
        })
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_configs_own_files_reload() {
        let named = vec![std::ffi::OsString::from("limits.conf")];
        for path in [
            "/c/ratelimit.yaml",
            "/c/x.yml",
            "/c/..data",
            "/c/..2026_12_02",
            "/c/limits.conf",
        ] {
            assert!(is_config_path(Path::new(path), &named), "{path}");
        }
        for path in [
            "/c/serve.log",
            "/c/.ratelimit.yaml.swp",
            "/c/notes.txt",
            "/",
        ] {
            assert!(!is_config_path(Path::new(path), &named), "{path}");
        }
    }
}
