//! Listening: the gRPC and HTTP listeners, each connection's bounds, optional TLS, reloads on a
//! file change or SIGHUP, and a graceful stop.
//!
//! Both listeners take connections through one accept loop of ours and serve them on hyper
//! (HTTP/1 for the HTTP API, HTTP/2 for gRPC, with tonic's unary machinery behind it), so
//! that each connection is bounded whatever it sends (see [`ConnectionLimits`]):
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
//!   then `408 Request Timeout`; a gRPC call gets the same (or its client's `grpc-timeout`,
//!   if sooner), then `CANCELLED`;
//! - gRPC's HTTP/2 gets keep-alive pings and a cap on concurrent streams, and a gRPC
//!   connection with no call in flight for the idle timeout gets a graceful close: a `GOAWAY`,
//!   then the close once the calls the client sent before it saw the `GOAWAY` are answered, so
//!   a client such as Envoy reconnects without losing a call. A connection whose client
//!   answers the pings but makes no call (so bytes keep moving) is thus bounded too; one with
//!   calls in flight is never cut by it. (tonic's own server is not used: in tonic 0.14,
//!   `max_connection_age` is the only such bound, and it cuts the calls in flight without a
//!   `GOAWAY` when given a grace period, and closes busy connections too.)

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

use crate::backend::ServiceBackend;
use crate::service::Service;
use crate::service::grpc::Rls;

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
    /// A connection with no byte moving either way for this long is closed, and a gRPC
    /// connection with no call in flight for this long gets a `GOAWAY` and closes. At least
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

/// TLS, read and checked: rustls' acceptor for each listener, offering HTTP/1.1 on one and
/// HTTP/2 on the other (ALPN).
struct Tls {
    http: TlsAcceptor,
    grpc: TlsAcceptor,
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
        let mut grpc = config.clone();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        grpc.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Tls {
            http: TlsAcceptor::from(Arc::new(config)),
            grpc: TlsAcceptor::from(Arc::new(grpc)),
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
    let draining = service.clone();
    let http = listen(
        listeners.http,
        limits,
        HTTP_FIRST_BYTES,
        http_tls,
        Http::new(service.router(admin), limits),
        stop_rx.clone(),
    );
    let grpc = listen(
        listeners.grpc,
        limits,
        GRPC_FIRST_BYTES,
        grpc_tls,
        GrpcConnections::new(Rls::new(service), limits),
        stop_rx,
    );
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!("shutting down: no new connections; finishing the checks in flight");
        draining.drain();
        let _ = stop_tx.send(true);
    });
    tokio::join!(http, grpc);
    Ok(())
}

/// Completes when the stop is sent (or its sender is gone).
async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

/// How a listener serves one connection once it is accepted (and through TLS, if any), until
/// it closes or, after the stop, has finished what it was doing.
trait Protocol: Clone + Send + 'static {
    fn serve<I>(self, io: I, stop: watch::Receiver<bool>) -> impl Future<Output = ()> + Send
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static;
}

/// A listener: our accept loop under the connection cap, the TLS handshake within the header
/// read timeout, each connection in a task of its own; on the stop, no new connection, and
/// it returns once the open ones have closed.
async fn listen<P: Protocol>(
    listener: TcpListener,
    limits: ConnectionLimits,
    first_bytes: usize,
    tls: Option<TlsAcceptor>,
    protocol: P,
    stop: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    // Each connection holds a sender; when all are dropped, `recv` answers `None`.
    let (open_tx, mut open_rx) = mpsc::channel::<Infallible>(1);
    let stopping = stopped(stop.clone());
    tokio::pin!(stopping);
    loop {
        let stream = tokio::select! {
            biased;
            () = &mut stopping => break,
            stream = accept(&listener, &permits, limits, first_bytes) => stream,
        };
        let (protocol, tls, stop, open) =
            (protocol.clone(), tls.clone(), stop.clone(), open_tx.clone());
        tokio::spawn(async move {
            let _open = open;
            let Some(tls) = tls else {
                return protocol.serve(stream, stop).await;
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
            protocol.serve(stream, stop).await;
        });
    }
    // New connections are refused from here; the open ones finish what they are doing.
    drop(listener);
    drop(open_tx);
    let _ = open_rx.recv().await;
}

/// The HTTP listener's connections: hyper's HTTP/1 with a header read timeout, each request
/// under the request timeout.
#[derive(Clone)]
struct Http {
    router: axum::Router,
    http1: hyper::server::conn::http1::Builder,
    request_timeout: Duration,
}

impl Http {
    fn new(router: axum::Router, limits: ConnectionLimits) -> Http {
        let mut http1 = hyper::server::conn::http1::Builder::new();
        http1
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .keep_alive(true);
        Http {
            router,
            http1,
            request_timeout: limits.request_timeout,
        }
    }
}

impl Protocol for Http {
    async fn serve<I>(self, io: I, stop: watch::Receiver<bool>)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (timeout, router) = (self.request_timeout, self.router);
        let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
            within(timeout, router.clone(), request)
        });
        let connection = self.http1.serve_connection(TokioIo::new(io), service);
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

/// A gRPC answer, as a tower service of HTTP/2 requests gives it.
type GrpcAnswer = http::Response<tonic::body::Body>;

/// The gRPC listener's connections: hyper's HTTP/2 with keep-alive pings and a cap on
/// concurrent streams, each call under the request timeout, and a graceful close (`GOAWAY`)
/// once no call has been in flight for the idle timeout.
struct GrpcConnections<S> {
    calls: S,
    http2: hyper::server::conn::http2::Builder<TokioExecutor>,
    request_timeout: Duration,
    idle_timeout: Duration,
}

impl<S: Clone> Clone for GrpcConnections<S> {
    fn clone(&self) -> GrpcConnections<S> {
        GrpcConnections {
            calls: self.calls.clone(),
            http2: self.http2.clone(),
            request_timeout: self.request_timeout,
            idle_timeout: self.idle_timeout,
        }
    }
}

impl<S> GrpcConnections<S> {
    fn new(calls: S, limits: ConnectionLimits) -> GrpcConnections<S> {
        let mut http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        http2
            .timer(TokioTimer::new())
            .max_concurrent_streams(limits.max_concurrent_streams)
            .keep_alive_interval(limits.http2_keepalive_interval)
            .keep_alive_timeout(limits.http2_keepalive_timeout);
        GrpcConnections {
            calls,
            http2,
            request_timeout: limits.request_timeout,
            idle_timeout: limits.idle_timeout,
        }
    }
}

impl<S> Protocol for GrpcConnections<S>
where
    S: tower::Service<http::Request<Incoming>, Response = GrpcAnswer, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send,
{
    async fn serve<I>(self, io: I, stop: watch::Receiver<bool>)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let activity = Arc::new(Activity::new());
        let calls_seen = Arc::clone(&activity);
        let (calls, timeout) = (self.calls, self.request_timeout);
        let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
            let call = InFlight::start(&calls_seen);
            let mut calls = calls.clone();
            // The client's own deadline, when sooner: it will not wait longer.
            let theirs = client_deadline(request.headers()).filter(|&t| t < timeout);
            async move {
                // The service is always ready (`Rls`: a function of the request).
                let within = theirs.unwrap_or(timeout);
                let answer = match tokio::time::timeout(within, calls.call(request)).await {
                    Ok(Ok(answer)) => answer,
                    Err(_) => tonic::Status::cancelled(match theirs {
                        Some(t) => format!("deadline: the client's grpc-timeout ({t:?}) passed"),
                        None => {
                            format!("request timeout: a call must be answered within {timeout:?}")
                        }
                    })
                    .into_http(),
                };
                Ok::<_, Infallible>(answer.map(|body| Counted { body, _call: call }))
            }
        });
        let connection = self.http2.serve_connection(TokioIo::new(io), service);
        tokio::pin!(connection);
        let stopping = stopped(stop);
        tokio::pin!(stopping);
        // Until the connection ends, the stop comes, or no call has been in flight for the
        // idle timeout: then `GOAWAY`, and the calls in flight (and any the client sent
        // before it saw the `GOAWAY`) are answered before the connection closes. The calls
        // only count themselves (two atomics); this task looks when its timer says the
        // connection may have gone idle, and sets it again if it has not.
        let idle = tokio::time::sleep(self.idle_timeout);
        tokio::pin!(idle);
        let served = loop {
            tokio::select! {
                served = connection.as_mut() => break served,
                () = &mut stopping => {
                    connection.as_mut().graceful_shutdown();
                    break connection.await;
                }
                () = &mut idle => {
                    let now = Instant::now();
                    match activity.idle_since() {
                        Some(since) if since + self.idle_timeout <= now => {
                            tracing::debug!("gRPC connection idle: closing it (GOAWAY)");
                            connection.as_mut().graceful_shutdown();
                            break connection.await;
                        }
                        Some(since) => idle.as_mut().reset(since + self.idle_timeout),
                        // A call in flight: it cannot have ended an idle timeout ago.
                        None => idle.as_mut().reset(now + self.idle_timeout),
                    }
                }
            }
        };
        if let Err(e) = served {
            tracing::debug!("gRPC connection closed: {e}");
        }
    }
}

/// The deadline a gRPC client sent with its call (`grpc-timeout`: at most 8 digits and a unit,
/// `H`, `M`, `S`, `m`, `u` or `n`), if it sent a well-formed one.
fn client_deadline(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = value.split_at_checked(value.len().checked_sub(1)?)?;
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // At most 99,999,999: in hours, far from overflowing.
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3_600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// A gRPC connection's calls: how many are in flight, and when the last one ended.
struct Activity {
    opened: Instant,
    in_flight: AtomicUsize,
    /// When the last call ended (its answer sent or the call dropped), in nanoseconds after
    /// `opened`.
    last_end: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            opened: Instant::now(),
            in_flight: AtomicUsize::new(0),
            last_end: AtomicU64::new(0),
        }
    }

    /// Since when no call has been in flight; `None` while one is.
    fn idle_since(&self) -> Option<Instant> {
        (self.in_flight.load(Ordering::Acquire) == 0)
            .then(|| self.opened + Duration::from_nanos(self.last_end.load(Ordering::Acquire)))
    }
}

/// A call in flight on a gRPC connection, counted until it is dropped.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: &Arc<Activity>) -> InFlight {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(Arc::clone(activity))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        let ended = u64::try_from(activity.opened.elapsed().as_nanos()).unwrap_or(u64::MAX);
        // The end is recorded before the count drops, so a count of 0 comes with it.
        activity.last_end.fetch_max(ended, Ordering::AcqRel);
        activity.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A gRPC answer's body, holding its call's place among those in flight until it is sent.
struct Counted {
    body: tonic::body::Body,
    _call: InFlight,
}

impl hyper::body::Body for Counted {
    type Data = hyper::body::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
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

/// A gRPC connection's idle close, the calls that keep it open, the request timeout and the
/// stop, on an in-memory connection under tokio's paused clock: each instant is exact. The
/// client is hyper's HTTP/2 (tonic's channel is one), which answers the server's pings.
#[cfg(test)]
mod grpc_connections {
    use std::sync::Mutex;

    use http_body_util::Empty;
    use hyper::body::Bytes;
    use hyper::client::conn::http2::SendRequest;
    use tokio::task::JoinHandle;

    use super::*;

    const IDLE: Duration = Duration::from_secs(60);

    fn limits() -> ConnectionLimits {
        ConnectionLimits {
            idle_timeout: IDLE,
            request_timeout: IDLE,
            ..ConnectionLimits::default()
        }
    }

    /// A gRPC service whose every call waits for a permit of its gate, then answers `OK`.
    #[derive(Clone)]
    struct Gated(Arc<Semaphore>);

    impl tower::Service<http::Request<Incoming>> for Gated {
        type Response = GrpcAnswer;
        type Error = Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<GrpcAnswer, Infallible>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<Incoming>) -> Self::Future {
            let gate = Arc::clone(&self.0);
            Box::pin(async move {
                gate.acquire().await.expect("the gate stays open").forget();
                Ok(tonic::Status::ok("").into_http())
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
        client: SendRequest<Empty<Bytes>>,
        client_task: JoinHandle<Result<(), hyper::Error>>,
        server: JoinHandle<()>,
        written: Arc<Mutex<Vec<u8>>>,
        stop: watch::Sender<bool>,
    }

    impl Connection {
        async fn open(gate: &Arc<Semaphore>, limits: ConnectionLimits) -> Connection {
            let (ours, theirs) = tokio::io::duplex(64 * 1024);
            let written = Arc::new(Mutex::new(Vec::new()));
            let (stop, stop_rx) = watch::channel(false);
            let tap = Tap {
                io: ours,
                written: Arc::clone(&written),
            };
            let protocol = GrpcConnections::new(Gated(Arc::clone(gate)), limits);
            let server = tokio::spawn(protocol.serve(tap, stop_rx));
            let (client, connection) =
                hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                    .timer(TokioTimer::new())
                    .handshake(TokioIo::new(theirs))
                    .await
                    .expect("the HTTP/2 handshake");
            Connection {
                client,
                client_task: tokio::spawn(connection),
                server,
                written,
                stop,
            }
        }

        /// Starts a call; its answer's `grpc-status`.
        fn call(&mut self) -> JoinHandle<String> {
            self.call_within(None)
        }

        /// Starts a call with a deadline of its own (`grpc-timeout`), if any.
        fn call_within(&mut self, deadline: Option<&'static str>) -> JoinHandle<String> {
            let mut client = self.client.clone();
            tokio::spawn(async move {
                client.ready().await.expect("the connection takes a call");
                let mut request = http::Request::post("http://test/p")
                    .header(http::header::CONTENT_TYPE, "application/grpc");
                if let Some(deadline) = deadline {
                    request = request.header("grpc-timeout", deadline);
                }
                let request = request.body(Empty::new()).unwrap();
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
        connection.stop.send(true).unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!connection.server.is_finished(), "the call holds it open");
        gate.add_permits(1);
        assert_eq!(call.await.unwrap(), "0");
        connection.closed().await;
    }
}
