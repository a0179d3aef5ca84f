//! Listening: the gRPC and HTTP listeners, each connection's bounds and all calls' together,
//! optional TLS, and a stop that finishes within its drain.
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
//! - a gRPC call's message must come within the header read timeout (else
//!   `DEADLINE_EXCEEDED`), and an answer its client does not take (its flow-control window
//!   kept shut) gets its connection closed within one and a half request timeouts.
//!
//! And every connection of both listeners together: at most
//! [`ConnectionLimits::max_calls_in_flight`] calls (gRPC, and `POST /json`) in flight, their
//! bodies at most [`ConnectionLimits::max_body_bytes_in_flight`] bytes; a call past either is
//! shed at once (`RESOURCE_EXHAUSTED`, `503`). On the stop, the service drains, the listeners
//! stop accepting, and the connections still open after
//! [`ConnectionLimits::drain_timeout`] are closed.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_rustls::TlsAcceptor;

use crate::endpoints::Endpoints;
use crate::endpoints::grpc::Rls;
use slidewin_store::Backend;

mod bounded;
mod client_cas;
mod grpc;
mod http;
mod limits;
mod metered;
mod tls;

use bounded::accept;
use grpc::GrpcConnections;
pub(crate) use grpc::GrpcRequest;
use http::Http;
pub use limits::ConnectionLimits;
use limits::{GRPC_FIRST_BYTES, HTTP_FIRST_BYTES};
pub(crate) use metered::bodies_full;
use tls::Tls;

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
    /// Serve the dashboard, `/api/*` and `/metrics` on a listener of their own at this
    /// address, so that the HTTP listener, which Envoy and the probes reach, serves only
    /// `POST /json` and health (envoy ratelimit's debug port). `None`, the default: on the
    /// HTTP listener. Nothing listens there when `admin` is false.
    pub admin_addr: Option<SocketAddr>,
    /// Prometheus's metrics alone, on a listener of their own (envoy ratelimit's
    /// `PROMETHEUS_ADDR`), answered without the admin token or the host check: bind it where
    /// only the scraper reaches. `None`, the default, opens none.
    pub metrics: Option<MetricsListener>,
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
            admin_addr: None,
            metrics: None,
            limits: ConnectionLimits::default(),
            tls: None,
        }
    }
}

/// A certificate chain and its private key, PEM files, for TLS on both listeners; and, for
/// mutual TLS, the certificate authorities a client's certificate must chain to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first (PEM `CERTIFICATE` blocks).
    pub cert: PathBuf,
    /// The leaf's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// With it, every client must present a certificate that chains to one of these
    /// authorities (PEM `CERTIFICATE` blocks), on both listeners: one without, or with another,
    /// is refused in the handshake. `None`, the default, asks for no client certificate.
    pub client_ca: Option<PathBuf>,
    /// TLS on the gRPC listener only (envoy ratelimit's `GRPC_SERVER_USE_TLS`): the others
    /// speak plain text, so that HTTP probes need no certificate. `false`: on every listener.
    pub only_grpc: bool,
}

/// A listener for Prometheus alone: its address and the path of the metrics.
///
/// ```
/// use slidewin_server::MetricsListener;
/// let metrics = MetricsListener::new("0.0.0.0:9090".parse()?, "/metrics")?;
/// assert_eq!(metrics.path(), "/metrics");
/// for bad in ["metrics", "/a/{b}", "/a b", "", &format!("/{}", "m".repeat(256))] {
///     assert!(MetricsListener::new("0.0.0.0:9090".parse()?, bad).is_err(), "{bad}");
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricsListener {
    /// Where it listens.
    pub addr: SocketAddr,
    path: String,
}

impl MetricsListener {
    /// The longest path: 256 bytes.
    pub const MAX_PATH_BYTES: usize = 256;

    /// A listener at `addr` serving the metrics at `path`.
    ///
    /// # Errors
    ///
    /// A path that does not start with `/`, is longer than [`MetricsListener::MAX_PATH_BYTES`],
    /// or holds anything but letters, digits and `/._-~`.
    pub fn new(addr: SocketAddr, path: &str) -> Result<MetricsListener, crate::Error> {
        let plain = |c: char| c.is_ascii_alphanumeric() || "/._-~".contains(c);
        if !path.starts_with('/') || path.len() > Self::MAX_PATH_BYTES || !path.chars().all(plain) {
            return Err(crate::Error::setting(
                "metrics_path",
                format!(
                    "the metrics path must start with / and hold at most {} letters, digits or \
                     /._-~ (MetricsListener::MAX_PATH_BYTES); got {:?}",
                    Self::MAX_PATH_BYTES,
                    path.chars().take(64).collect::<String>()
                ),
            ));
        }
        Ok(MetricsListener {
            addr,
            path: path.to_owned(),
        })
    }

    /// The path of the metrics.
    #[must_use]
    pub fn path(&self) -> &str {
        &self.path
    }
}

/// Bound listeners, ready to serve.
pub struct Listeners {
    grpc: TcpListener,
    http: TcpListener,
    admin: Option<TcpListener>,
    metrics: Option<(TcpListener, String)>,
    limits: ConnectionLimits,
    tls: Option<Tls>,
}

impl Listeners {
    /// Checks the limits, reads the TLS files if any, and binds every address.
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
            admin: match options.admin_addr.filter(|_| options.admin) {
                Some(addr) => Some(
                    TcpListener::bind(addr)
                        .await
                        .map_err(named("admin", addr))?,
                ),
                None => None,
            },
            metrics: match &options.metrics {
                Some(metrics) => Some((
                    TcpListener::bind(metrics.addr)
                        .await
                        .map_err(named("metrics", metrics.addr))?,
                    metrics.path.clone(),
                )),
                None => None,
            },
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

    /// The admin listener's address, if the admin surfaces have one of their own.
    ///
    /// # Errors
    ///
    /// The socket's error.
    pub fn admin_addr(&self) -> io::Result<Option<SocketAddr>> {
        self.admin.as_ref().map(TcpListener::local_addr).transpose()
    }

    /// The metrics listener's address, if there is one.
    ///
    /// # Errors
    ///
    /// The socket's error.
    pub fn metrics_addr(&self) -> io::Result<Option<SocketAddr>> {
        self.metrics
            .as_ref()
            .map(|(listener, _)| listener.local_addr())
            .transpose()
    }

    /// Whether the gRPC listener speaks TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Whether the HTTP listeners (and the admin and metrics ones) speak TLS too.
    pub fn is_http_tls(&self) -> bool {
        self.tls.as_ref().is_some_and(|tls| tls.http.is_some())
    }
}

/// Serves `service` on `listeners` until `shutdown` completes; the gRPC listener also answers
/// the standard `grpc.health.v1.Health` (Check and Watch) with [`Endpoints::health`]. Then
/// the stop: health fails ([`Endpoints::drain`]; the dashboard's event streams end), and
/// after [`ConnectionLimits::drain_delay`] both listeners stop accepting, the calls in flight
/// get [`ConnectionLimits::drain_timeout`] to finish, the connections still open are closed,
/// and it returns. Each connection is bounded
/// by the listeners' [`ConnectionLimits`], and the calls of all of them by
/// [`ConnectionLimits::max_calls_in_flight`].
///
/// # Errors
///
/// A listener that failed.
pub async fn serve<B: Backend>(
    service: Endpoints<B>,
    listeners: Listeners,
    admin: bool,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let (phase_tx, phase_rx) = watch::channel(Phase::Serving);
    let limits = listeners.limits;
    // The certificate is read again when its files change, until the service stops.
    let (http_tls, grpc_tls, _rotation) = match listeners.tls {
        Some(tls) => {
            // Serving goes on without it: the certificate read at the bind stays in use.
            let rotation = tls
                .watch()
                .inspect_err(|e| tracing::warn!("{e}: the certificate will not be read again"))
                .ok();
            (tls.http, Some(tls.grpc), rotation)
        }
        None => (None, None, None),
    };
    let service = if http_tls.is_some() {
        service.over_tls()
    } else {
        service
    };
    let draining = service.clone();
    let cap = Arc::new(CallCap::new(&limits, service.engine().metrics()));
    // The standard gRPC health service, kept at the service's health by a task of its own.
    // Set before the first connection is taken, so that no probe sees the library's default.
    let (reporter, health) = tonic_health::server::health_reporter();
    crate::endpoints::health::report_now(&service, &reporter).await;
    let reporting = tokio::spawn(crate::endpoints::health::report(service.clone(), reporter));
    let http_on = |listener, router| {
        listen(
            listener,
            (limits, HTTP_FIRST_BYTES, Arc::clone(&cap)),
            http_tls.clone(),
            Http::new(router, limits, Arc::clone(&cap)),
            phase_rx.clone(),
        )
    };
    // The admin surfaces on the HTTP listener, or on their own; and the metrics alone.
    let (api, admin_apart) = match listeners.admin {
        Some(listener) if admin => (service.api_router(), Some(listener)),
        _ => (service.router(admin), None),
    };
    let others = futures_util::future::join_all(
        admin_apart
            .map(|listener| http_on(listener, service.admin_router()))
            .into_iter()
            .chain(
                listeners
                    .metrics
                    .map(|(listener, path)| http_on(listener, service.metrics_router(&path))),
            ),
    );
    let http = http_on(listeners.http, api);
    let grpc = listen(
        listeners.grpc,
        (limits, GRPC_FIRST_BYTES, Arc::clone(&cap)),
        grpc_tls,
        GrpcConnections::new(Rls::new(service), health, limits, Arc::clone(&cap)),
        phase_rx,
    );
    tokio::spawn(stop_in_phases(shutdown, draining, limits, phase_tx));
    tokio::join!(http, grpc, others);
    reporting.abort();
    Ok(())
}

/// The stop, once `shutdown` completes: health fails at once (`draining`), then after the
/// drain delay the listeners take no new connection ([`Phase::Draining`]), and after the drain
/// timeout the connections still open are cut ([`Phase::Cut`]).
async fn stop_in_phases<B: Backend>(
    shutdown: impl Future<Output = ()>,
    draining: Endpoints<B>,
    limits: ConnectionLimits,
    phase_tx: watch::Sender<Phase>,
) {
    shutdown.await;
    tracing::info!(
        delay = ?limits.drain_delay,
        drain = ?limits.drain_timeout,
        "shutting down: health fails; after the delay, no new connections, and the calls \
         in flight may finish within the drain"
    );
    draining.drain();
    // Health fails first, while the listeners still answer: a load balancer stops
    // sending before the connections close.
    tokio::time::sleep(limits.drain_delay).await;
    let _ = phase_tx.send(Phase::Draining);
    tokio::time::sleep(limits.drain_timeout).await;
    let _ = phase_tx.send(Phase::Cut);
}

/// Where the service is in its stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Serving,
    /// No new connection; those open finish what they are doing.
    Draining,
    /// The drain is over: the connections still open are closed.
    Cut,
}

/// Completes when the stop has begun (or its sender is gone).
async fn stopped(mut rx: watch::Receiver<Phase>) {
    let _ = rx.wait_for(|phase| *phase >= Phase::Draining).await;
}

/// Completes when the drain is over; never while its sender serves.
async fn cut(mut rx: watch::Receiver<Phase>) {
    if rx.wait_for(|phase| *phase == Phase::Cut).await.is_err() {
        // The sender is gone with `serve`: nothing will cut.
        std::future::pending::<()>().await;
    }
}

/// How a listener serves one connection once it is accepted (and through TLS, if any), until
/// it closes or, after the stop, has finished what it was doing.
trait Protocol: Clone + Send + 'static {
    fn serve<I>(self, io: I, stop: watch::Receiver<Phase>) -> impl Future<Output = ()> + Send
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static;
}

/// The cap on calls in flight across every connection of both listeners: a place is taken
/// when a call starts and given back when its answer is sent (or the call is dropped). Its
/// count is the `slidewin_calls_in_flight` gauge itself: one atomic add a call, and one back.
/// It also holds the counters of the connections closed before their calls were done.
pub(super) struct CallCap {
    max: i64,
    in_flight: Gauge,
    shed_grpc: Counter,
    shed_http: Counter,
    /// gRPC connections closed because an answer was not taken within the request timeout.
    stalled: Counter,
    /// Connections still open when the drain was over, closed.
    drained: Counter,
    /// The bytes of the request bodies in flight.
    bodies: Arc<metered::BodyBytes>,
}

impl CallCap {
    fn new(limits: &ConnectionLimits, metrics: &crate::Metrics) -> CallCap {
        let max = limits.max_calls_in_flight;
        CallCap {
            bodies: Arc::new(metered::BodyBytes::new(limits.max_body_bytes_in_flight)),
            max: i64::try_from(max).unwrap_or(i64::MAX),
            in_flight: metrics.calls_in_flight(),
            shed_grpc: metrics.calls_shed("grpc"),
            shed_http: metrics.calls_shed("http"),
            stalled: metrics.connections_cut("unread_answer"),
            drained: metrics.connections_cut("drain_over"),
        }
    }

    /// Takes a place for a call, if one is free; a call refused is counted as shed.
    fn take(&self, grpc: bool) -> bool {
        if self.in_flight.inc() < self.max {
            return true;
        }
        self.in_flight.dec();
        if grpc {
            self.shed_grpc.inc();
        } else {
            self.shed_http.inc();
        }
        false
    }

    fn give_back(&self) {
        self.in_flight.dec();
    }

    /// Why a call was shed, in words.
    fn refusal(&self) -> String {
        format!(
            "overloaded: {} calls are in flight, the most at once (max_calls_in_flight); try \
             again",
            self.max
        )
    }
}

/// A listener: our accept loop under the connection cap, the TLS handshake within the header
/// read timeout, each connection in a task of its own; on the stop, no new connection, and
/// it returns once the open ones have closed, or been closed at the end of the drain.
async fn listen<P: Protocol>(
    listener: TcpListener,
    (limits, first_bytes, cap): (ConnectionLimits, usize, Arc<CallCap>),
    tls: Option<TlsAcceptor>,
    protocol: P,
    phase: watch::Receiver<Phase>,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    // Each connection holds a sender; when all are dropped, `recv` answers `None`.
    let (open_tx, mut open_rx) = mpsc::channel::<Infallible>(1);
    let stopping = stopped(phase.clone());
    tokio::pin!(stopping);
    loop {
        let stream = tokio::select! {
            biased;
            () = &mut stopping => break,
            stream = accept(&listener, &permits, limits, first_bytes) => stream,
        };
        let (protocol, tls, phase, open) = (
            protocol.clone(),
            tls.clone(),
            phase.clone(),
            open_tx.clone(),
        );
        let cap = Arc::clone(&cap);
        tokio::spawn(async move {
            let _open = open;
            let connection = serve_connection(protocol, stream, tls, limits, phase.clone());
            tokio::select! {
                () = connection => {}
                () = cut(phase) => {
                    tracing::debug!("the drain is over: closing a connection still open");
                    cap.drained.inc();
                }
            }
        });
    }
    // New connections are refused from here; the open ones finish what they are doing, or
    // are closed when the drain is over.
    drop(listener);
    drop(open_tx);
    let _ = open_rx.recv().await;
}

/// One connection: its TLS handshake if any, within the header read timeout, then `protocol`.
async fn serve_connection<P: Protocol>(
    protocol: P,
    stream: bounded::Bounded<tokio::net::TcpStream>,
    tls: Option<TlsAcceptor>,
    limits: ConnectionLimits,
    phase: watch::Receiver<Phase>,
) {
    let Some(tls) = tls else {
        return protocol.serve(stream, phase).await;
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
        () = stopped(phase.clone()) => return,
    };
    protocol.serve(stream, phase).await;
}
