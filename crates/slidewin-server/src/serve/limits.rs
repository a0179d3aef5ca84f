//! Each connection's bounds, and their defaults.

use std::time::Duration;

use crate::error::Error;

/// The first bytes a gRPC connection must send within the header read timeout: the length of
/// HTTP/2's preface (`PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`), which every client sends first (and
/// a TLS `ClientHello` is longer).
pub(super) const GRPC_FIRST_BYTES: usize = 24;

/// An HTTP/1 connection's first byte is due within the header read timeout (hyper bounds the
/// whole head, and a request may be shorter than HTTP/2's preface: `GET / HTTP/1.0`).
pub(super) const HTTP_FIRST_BYTES: usize = 1;

/// How long the accept loop rests after an error that is not one connection's (the process
/// is out of file descriptors, say), so that it does not spin.
pub(super) const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

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
/// assert!(zero.validate().unwrap_err().to_string().contains("max_connections"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// A new connection's first bytes (on gRPC, HTTP/2's 24-byte preface), a TLS handshake,
    /// each HTTP/1 request's head (also awaited on an idle keep-alive connection) and each
    /// gRPC call's message must arrive within it, or the connection is closed (the call gets
    /// `DEADLINE_EXCEEDED`): the slowloris bound. [`ConnectionLimits::DEFAULT_HEADER_READ_TIMEOUT`].
    pub header_read_timeout: Duration,
    /// An HTTP request's body read and answer, or a gRPC call, must finish within it: HTTP
    /// answers `408 Request Timeout`, gRPC `CANCELLED`. A gRPC answer the client has not
    /// taken (its flow-control window kept shut) by then gets its connection closed, within
    /// half this again. [`ConnectionLimits::DEFAULT_REQUEST_TIMEOUT`].
    pub request_timeout: Duration,
    /// A connection with no byte moving either way for this long is closed, and a gRPC
    /// connection with no call in flight for this long gets a `GOAWAY` and closes. At least
    /// `request_timeout`, so that a request in flight is never cut by it.
    /// [`ConnectionLimits::DEFAULT_IDLE_TIMEOUT`].
    pub idle_timeout: Duration,
    /// The most connections open at once on each listener; past it, a new connection waits
    /// (in the kernel's backlog) until one closes. [`ConnectionLimits::DEFAULT_MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// The most gRPC calls in flight on one connection. [`ConnectionLimits::DEFAULT_MAX_CONCURRENT_STREAMS`].
    pub max_concurrent_streams: u32,
    /// The most calls in flight at once across every connection of both listeners: gRPC
    /// calls, and `POST /json` requests. Past it a call is shed at once, `RESOURCE_EXHAUSTED`
    /// on gRPC and `503` on HTTP, and counted in `slidewin_calls_shed_total`.
    /// [`ConnectionLimits::DEFAULT_MAX_CALLS_IN_FLIGHT`].
    pub max_calls_in_flight: usize,
    /// The most bytes the request bodies of the calls in flight (gRPC messages, `POST /json`
    /// bodies) hold together, as they are read: past it, the call whose body would go over
    /// is refused (`RESOURCE_EXHAUSTED`, or `503`). A body may hold 1 MiB, so without it a
    /// client trickling its bodies could make the service hold the cap on calls times that.
    /// [`ConnectionLimits::DEFAULT_MAX_BODY_BYTES_IN_FLIGHT`].
    pub max_body_bytes_in_flight: usize,
    /// On the stop, how long health fails (`500`, gRPC `NOT_SERVING`) while the listeners
    /// still accept and answer, before the drain begins: a load balancer's time to see it and
    /// stop sending (its probe interval times the failures it waits for; Kubernetes also needs
    /// the time to remove the endpoint). [`ConnectionLimits::DEFAULT_DRAIN_DELAY`].
    pub drain_delay: Duration,
    /// After the drain delay: how long calls in flight may take to finish, the listeners
    /// closed, before the connections still open are closed; 0 closes them at once.
    /// [`ConnectionLimits::DEFAULT_DRAIN_TIMEOUT`].
    pub drain_timeout: Duration,
    /// gRPC's HTTP/2 pings a quiet connection this often.
    /// [`ConnectionLimits::DEFAULT_HTTP2_KEEPALIVE_INTERVAL`].
    pub http2_keepalive_interval: Duration,
    /// An unanswered ping closes its connection after this long.
    /// [`ConnectionLimits::DEFAULT_HTTP2_KEEPALIVE_TIMEOUT`].
    pub http2_keepalive_timeout: Duration,
    /// A gRPC connection open this long (give or take a tenth, so that a fleet's connections
    /// do not all age at once) gets a `GOAWAY`: its client reconnects, perhaps to another
    /// replica, so a long-lived Envoy connection does not pin its load to one. Its calls in
    /// flight are answered first; a health `Watch` on it is cut one request timeout later.
    /// `None`, the default, lets a busy connection live as long as it likes (an idle one still
    /// closes after the idle timeout). envoy ratelimit's `GRPC_MAX_CONNECTION_AGE`.
    pub max_connection_age: Option<Duration>,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: ConnectionLimits::DEFAULT_HEADER_READ_TIMEOUT,
            request_timeout: ConnectionLimits::DEFAULT_REQUEST_TIMEOUT,
            idle_timeout: ConnectionLimits::DEFAULT_IDLE_TIMEOUT,
            max_connections: ConnectionLimits::DEFAULT_MAX_CONNECTIONS,
            max_concurrent_streams: ConnectionLimits::DEFAULT_MAX_CONCURRENT_STREAMS,
            max_calls_in_flight: ConnectionLimits::DEFAULT_MAX_CALLS_IN_FLIGHT,
            max_body_bytes_in_flight: ConnectionLimits::DEFAULT_MAX_BODY_BYTES_IN_FLIGHT,
            drain_delay: ConnectionLimits::DEFAULT_DRAIN_DELAY,
            drain_timeout: ConnectionLimits::DEFAULT_DRAIN_TIMEOUT,
            http2_keepalive_interval: ConnectionLimits::DEFAULT_HTTP2_KEEPALIVE_INTERVAL,
            http2_keepalive_timeout: ConnectionLimits::DEFAULT_HTTP2_KEEPALIVE_TIMEOUT,
            max_connection_age: None,
        }
    }
}

impl ConnectionLimits {
    /// How long a connection may take to send its first bytes and an HTTP/1 request its head:
    /// 10 s.
    pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

    /// How long an HTTP request may take, its body read and its answer, and a gRPC call: 30 s.
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

    /// How long a connection may stay with no byte moving either way: 60 s.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

    /// The most connections open at once on each listener: 10,000.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

    /// The most gRPC calls in flight at once on one HTTP/2 connection: 128, nginx's default.
    pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 128;

    /// The most calls (gRPC calls and `POST /json` requests) in flight at once across every
    /// connection: 4,096. A call past it is refused at once.
    pub const DEFAULT_MAX_CALLS_IN_FLIGHT: usize = 4_096;

    /// The most bytes the request bodies of the calls in flight may hold together: 64 MiB. A call
    /// whose body would pass it is refused at once.
    pub const DEFAULT_MAX_BODY_BYTES_IN_FLIGHT: usize = 64 << 20;

    /// How long health fails before the listeners stop accepting, on the stop: 0, at once.
    pub const DEFAULT_DRAIN_DELAY: Duration = Duration::ZERO;

    /// How long the stop lets calls in flight finish before it closes what is left: 5 s.
    pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

    /// How often an HTTP/2 connection is pinged while it is quiet: every 20 s.
    pub const DEFAULT_HTTP2_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(20);

    /// How long a ping may go unanswered before its connection is closed: 10 s.
    pub const DEFAULT_HTTP2_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

    /// The most `grpc.health.v1.Health/Watch` streams open at once on the gRPC listener: 64.
    /// A watch is held open for as long as its client likes, so they are bounded apart from
    /// the calls (which must finish within the request timeout); one past the bound gets
    /// `RESOURCE_EXHAUSTED`.
    pub const MAX_HEALTH_WATCHES: usize = 64;

    /// Checks that every bound bounds something.
    ///
    /// # Errors
    ///
    /// The first bound that is zero (but the drain's delay and timeout, where 0 means at
    /// once), or an
    /// idle timeout shorter than the request timeout, named.
    pub fn validate(&self) -> Result<(), Error> {
        for (name, value) in [
            ("header_read_timeout", self.header_read_timeout),
            ("request_timeout", self.request_timeout),
            ("idle_timeout", self.idle_timeout),
            ("http2_keepalive_interval", self.http2_keepalive_interval),
            ("http2_keepalive_timeout", self.http2_keepalive_timeout),
        ]
        .into_iter()
        .chain(
            self.max_connection_age
                .map(|age| ("max_connection_age", age)),
        ) {
            if value.is_zero() {
                return Err(Error::setting(
                    name,
                    format!("{name} is zero: it must be a positive duration"),
                ));
            }
        }
        if self.max_connections == 0 {
            return Err(Error::setting(
                "max_connections",
                "max_connections is 0: a listener must take at least one",
            ));
        }
        if self.max_concurrent_streams == 0 {
            return Err(Error::setting(
                "max_concurrent_streams",
                "max_concurrent_streams is 0: a connection must carry a call",
            ));
        }
        if self.max_calls_in_flight == 0 {
            return Err(Error::setting(
                "max_calls_in_flight",
                "max_calls_in_flight is 0: the service must take a call",
            ));
        }
        if self.max_body_bytes_in_flight == 0 {
            return Err(Error::setting(
                "max_body_bytes_in_flight",
                "max_body_bytes_in_flight is 0: a call's body must fit",
            ));
        }
        if self.idle_timeout < self.request_timeout {
            return Err(Error::setting(
                "idle_timeout",
                format!(
                    "idle_timeout ({:?}) is shorter than request_timeout ({:?}): it would cut \
                 requests in flight",
                    self.idle_timeout, self.request_timeout
                ),
            ));
        }
        Ok(())
    }
}
