//! The gRPC listener's connections.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::{Instant, Sleep};
use tonic_health::pb::health_server::{Health, HealthServer};

use super::metered::{BodyBytes, Metered};
use super::{CallCap, ConnectionLimits, Phase, Protocol, stopped};

/// A gRPC answer, as a tower service of HTTP/2 requests gives it.
type GrpcAnswer = http::Response<tonic::body::Body>;

/// A call's request, its body due within the header read timeout.
pub(crate) type GrpcRequest = http::Request<FirstMessage>;

/// The standard gRPC health service's methods: its path's prefix, and its one stream.
const HEALTH: &str = "/grpc.health.v1.Health/";
const HEALTH_WATCH: &str = "/grpc.health.v1.Health/Watch";

/// The most bytes of a health request's message: a service name, which is short.
const HEALTH_MESSAGE_BYTES: usize = 4 << 10;

/// The gRPC listener's connections: hyper's HTTP/2 with keep-alive pings and a cap on
/// concurrent streams, each call's message due within the header read timeout and its answer
/// within the request timeout, and a graceful close (`GOAWAY`) once no call has been in flight
/// for the idle timeout. A call past the cap on calls in flight is answered
/// `RESOURCE_EXHAUSTED` at once.
///
/// The health service's calls (`grpc.health.v1.Health`) go to `health` instead, outside the
/// cap on calls: a probe must be answered when the service is full. A `Check` must be answered
/// within the request timeout; a `Watch`, which lasts as long as its client likes, takes one
/// of [`ConnectionLimits::MAX_HEALTH_WATCHES`] places instead.
pub(super) struct GrpcConnections<S, H> {
    calls: S,
    health: H,
    watches: Arc<Semaphore>,
    http2: hyper::server::conn::http2::Builder<TokioExecutor>,
    limits: ConnectionLimits,
    cap: Arc<CallCap>,
}

impl<S: Clone, H: Clone> Clone for GrpcConnections<S, H> {
    fn clone(&self) -> GrpcConnections<S, H> {
        GrpcConnections {
            calls: self.calls.clone(),
            health: self.health.clone(),
            watches: Arc::clone(&self.watches),
            http2: self.http2.clone(),
            limits: self.limits,
            cap: Arc::clone(&self.cap),
        }
    }
}

impl<S, T> GrpcConnections<S, HealthServer<T>>
where
    T: Health,
{
    pub(super) fn new(
        calls: S,
        health: HealthServer<T>,
        limits: ConnectionLimits,
        cap: Arc<CallCap>,
    ) -> GrpcConnections<S, HealthServer<T>> {
        let mut http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        http2
            .timer(TokioTimer::new())
            .max_concurrent_streams(limits.max_concurrent_streams)
            .keep_alive_interval(limits.http2_keepalive_interval)
            .keep_alive_timeout(limits.http2_keepalive_timeout);
        GrpcConnections {
            calls,
            health: health.max_decoding_message_size(HEALTH_MESSAGE_BYTES),
            watches: Arc::new(Semaphore::new(ConnectionLimits::MAX_HEALTH_WATCHES)),
            http2,
            limits,
            cap,
        }
    }
}

impl<S, H> Protocol for GrpcConnections<S, H>
where
    S: tower::Service<GrpcRequest, Response = GrpcAnswer, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send,
    H: tower::Service<http::Request<Incoming>, Response = GrpcAnswer, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    H::Future: Send,
{
    async fn serve<I>(self, io: I, stop: watch::Receiver<Phase>)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let limits = self.limits;
        let activity = Arc::new(Activity::new(limits.request_timeout / 2, self.cap));
        let calls_seen = Arc::clone(&activity);
        let (calls, health, watches) = (self.calls, self.health, self.watches);
        let deadlines = Deadlines::of(&limits);
        let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
            // A health call is not a call in flight: a watch lasts, and a probe is answered
            // however full the service is.
            let mut call =
                (!request.uri().path().starts_with(HEALTH)).then(|| InFlight::start(&calls_seen));
            let placed = call.as_mut().is_some_and(InFlight::take_place);
            let (calls, health, watches) = (calls.clone(), health.clone(), Arc::clone(&watches));
            async move {
                let (answer, held) = match call {
                    // Boxed: a call's task holds its future, and a health call's is the larger.
                    None => Box::pin(health_answer(health, &watches, request, deadlines)).await,
                    Some(call) if placed => {
                        let bodies = Arc::clone(&call.activity.cap.bodies);
                        let answer = answer(calls, request, deadlines, bodies).await;
                        (answer, Held::Call { _place: call })
                    }
                    Some(call) => {
                        let cap = &call.activity.cap;
                        let refused = tonic::Status::resource_exhausted(cap.refusal());
                        (refused.into_http(), Held::Call { _place: call })
                    }
                };
                Ok::<_, Infallible>(answer.map(|body| Counted { body, _held: held }))
            }
        });
        let connection = self.http2.serve_connection(TokioIo::new(io), service);
        tokio::pin!(connection);
        let stopping = stopped(stop);
        tokio::pin!(stopping);
        // Until the connection ends, the stop comes, or no call has been in flight for the
        // idle timeout: then `GOAWAY`, and the calls in flight (and any the client sent
        // before it saw the `GOAWAY`) are answered before the connection closes. The calls
        // only count themselves (atomics); this task looks when its timers say the connection
        // may have gone idle, or an answer may have gone untaken, and sets them again.
        let idle = tokio::time::sleep(limits.idle_timeout);
        tokio::pin!(idle);
        let stalls = tokio::time::sleep_until(activity.next_epoch());
        tokio::pin!(stalls);
        let aged = aged(limits.max_connection_age);
        tokio::pin!(aged);
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
                        Some(since) if since + limits.idle_timeout <= now => {
                            tracing::debug!("gRPC connection idle: closing it (GOAWAY)");
                            connection.as_mut().graceful_shutdown();
                            break connection.await;
                        }
                        Some(since) => idle.as_mut().reset(since + limits.idle_timeout),
                        // A call in flight: it cannot have ended an idle timeout ago.
                        None => idle.as_mut().reset(now + limits.idle_timeout),
                    }
                }
                () = &mut aged => {
                    tracing::debug!("gRPC connection at its max age: closing it (GOAWAY)");
                    connection.as_mut().graceful_shutdown();
                    // Its calls finish within the request timeout; a health watch would not.
                    match tokio::time::timeout(limits.request_timeout, connection.as_mut()).await {
                        Ok(served) => break served,
                        Err(_) => return,
                    }
                }
                () = &mut stalls => {
                    if activity.has_stalled() {
                        // An answer its client has not taken within the request timeout (a
                        // flow-control window kept shut): no graceful close can finish it.
                        tracing::debug!(
                            "gRPC connection closed: an answer was not taken within the \
                             request timeout"
                        );
                        activity.cap.stalled.inc();
                        return;
                    }
                    stalls.as_mut().reset(activity.next_epoch());
                }
            }
        };
        if let Err(e) = served {
            tracing::debug!("gRPC connection closed: {e}");
        }
    }
}

/// Completes when a connection is `max_age` old, give or take a tenth; never without one.
async fn aged(max_age: Option<Duration>) {
    let Some(age) = max_age else {
        return std::future::pending().await;
    };
    // A fraction in [0.9, 1.1) from std's randomly keyed hasher: no two connections alike.
    let random = std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), Instant::now());
    #[allow(clippy::cast_precision_loss)] // 53 bits of randomness are plenty
    let fraction = 0.9 + 0.2 * (random >> 11) as f64 / (1u64 << 53) as f64;
    let jittered = Duration::try_from_secs_f64(age.as_secs_f64() * fraction).unwrap_or(age);
    tokio::time::sleep(jittered).await;
}

/// A health call's answer by `health`: a `Watch` with one of `watches` (or
/// `RESOURCE_EXHAUSTED` when none is left), held until its stream ends; a `Check` within the
/// request timeout. Either way the request's message must arrive within the request timeout.
async fn health_answer<H>(
    mut health: H,
    watches: &Arc<Semaphore>,
    request: http::Request<Incoming>,
    deadlines: Deadlines,
) -> (GrpcAnswer, Held)
where
    H: tower::Service<http::Request<Incoming>, Response = GrpcAnswer, Error = Infallible>,
{
    let held = if request.uri().path() == HEALTH_WATCH {
        match Arc::clone(watches).try_acquire_owned() {
            Ok(place) => Held::Watch { _place: place },
            Err(_) => {
                let max = ConnectionLimits::MAX_HEALTH_WATCHES;
                let full = tonic::Status::resource_exhausted(format!(
                    "{max} health watches are open (ConnectionLimits::MAX_HEALTH_WATCHES): \
                     close one, or poll with Check"
                ));
                return (full.into_http(), Held::Nothing);
            }
        }
    } else {
        Held::Nothing
    };
    let timeout = deadlines.request;
    // tonic-health's server is always ready; a Watch answers its head once it has read the
    // request, and streams after.
    match tokio::time::timeout(timeout, health.call(request)).await {
        Ok(Ok(answer)) => (answer, held),
        Err(_) => {
            let late =
                format!("request timeout: a health call must be answered within {timeout:?}");
            (tonic::Status::cancelled(late).into_http(), Held::Nothing)
        }
    }
}

/// What a call's future needs of the [`ConnectionLimits`]: each call's task holds it, so it
/// holds no more.
#[derive(Clone, Copy)]
struct Deadlines {
    /// Its message is due within this (the header read timeout).
    message: Duration,
    /// Its answer is due within this (the request timeout).
    request: Duration,
}

impl Deadlines {
    fn of(limits: &ConnectionLimits) -> Deadlines {
        Deadlines {
            message: limits.header_read_timeout,
            request: limits.request_timeout,
        }
    }
}

/// `request`'s answer by `calls`, its message due within the header read timeout, and the
/// answer within the request timeout or the client's own sooner `grpc-timeout`.
async fn answer<S>(
    mut calls: S,
    request: http::Request<Incoming>,
    deadlines: Deadlines,
    bodies: Arc<BodyBytes>,
) -> GrpcAnswer
where
    S: tower::Service<GrpcRequest, Response = GrpcAnswer, Error = Infallible>,
{
    let timeout = deadlines.request;
    // The client's own deadline, when sooner: it will not wait longer.
    let theirs = client_deadline(request.headers()).filter(|&t| t < timeout);
    let within = deadlines.message;
    let request = request.map(|body| FirstMessage::new(body, within, bodies));
    // The service is always ready (`Rls`: a function of the request).
    match tokio::time::timeout(theirs.unwrap_or(timeout), calls.call(request)).await {
        Ok(Ok(answer)) => answer,
        Err(_) => tonic::Status::cancelled(match theirs {
            Some(t) => format!("deadline: the client's grpc-timeout ({t:?}) passed"),
            None => format!("request timeout: a call must be answered within {timeout:?}"),
        })
        .into_http(),
    }
}

/// A call's request body, which must end (its one message sent) within the header read
/// timeout from the call's start; past it, the body fails with `DEADLINE_EXCEEDED`, which
/// tonic's unary machinery answers. The timer is set only if the body is not there at once.
pub(crate) struct FirstMessage {
    body: Metered<Incoming>,
    deadline: Instant,
    within: Duration,
    timer: Option<Pin<Box<Sleep>>>,
}

impl FirstMessage {
    fn new(body: Incoming, within: Duration, bodies: Arc<BodyBytes>) -> FirstMessage {
        FirstMessage {
            body: Metered::new(body, bodies, |full| {
                Box::new(tonic::Status::resource_exhausted(full.to_string()))
            }),
            deadline: Instant::now() + within,
            within,
            timer: None,
        }
    }
}

impl hyper::body::Body for FirstMessage {
    type Data = hyper::body::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        let deadline = this.deadline;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        // DEADLINE_EXCEEDED, not CANCELLED: tonic reads a request body's CANCELLED as the
        // client's own end of the stream, and would answer "missing request message".
        let late = tonic::Status::deadline_exceeded(format!(
            "the call's message did not arrive within the header read timeout ({:?})",
            this.within
        ));
        Poll::Ready(Some(Err(Box::new(late))))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
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

/// Epochs a gRPC connection counts its calls in flight by: a ring of four, each half the
/// request timeout.
const EPOCHS: usize = 4;

/// A gRPC connection's calls: how many are in flight, by the epoch (half a request timeout)
/// they started in, and when the last one ended. A call still in flight three epochs on
/// started at least a request timeout ago: its service answered (or was cut) by then, so its
/// answer is waiting for a client that does not take it.
struct Activity {
    opened: Instant,
    epoch: Duration,
    /// Calls in flight, in the slot of the epoch they started in (modulo [`EPOCHS`]).
    in_flight: [AtomicUsize; EPOCHS],
    /// When the last call ended (its answer sent or the call dropped), in nanoseconds after
    /// `opened`.
    last_end: AtomicU64,
    cap: Arc<CallCap>,
}

impl Activity {
    fn new(epoch: Duration, cap: Arc<CallCap>) -> Activity {
        Activity {
            opened: Instant::now(),
            // Never zero (a request timeout of a nanosecond): it divides.
            epoch: epoch.max(Duration::from_nanos(1)),
            in_flight: Default::default(),
            last_end: AtomicU64::new(0),
            cap,
        }
    }

    /// The epoch `at` is in, counted from the connection's start.
    fn epoch_of(&self, at: Instant) -> u128 {
        (at - self.opened).as_nanos() / self.epoch.as_nanos()
    }

    /// When the next epoch begins.
    fn next_epoch(&self) -> Instant {
        let next = self.epoch_of(Instant::now()) + 1;
        let nanos = u64::try_from(next * self.epoch.as_nanos()).unwrap_or(u64::MAX);
        self.opened + Duration::from_nanos(nanos)
    }

    /// Whether a call started three epochs ago is still in flight. Looked at as each epoch
    /// begins, before its slot is used again.
    fn has_stalled(&self) -> bool {
        let slot = (self.epoch_of(Instant::now()) + 1) % EPOCHS as u128;
        self.in_flight[slot as usize].load(Ordering::Acquire) > 0
    }

    /// Since when no call has been in flight; `None` while one is.
    fn idle_since(&self) -> Option<Instant> {
        self.in_flight
            .iter()
            .all(|slot| slot.load(Ordering::Acquire) == 0)
            .then(|| self.opened + Duration::from_nanos(self.last_end.load(Ordering::Acquire)))
    }
}

/// A call in flight on a gRPC connection, counted until it is dropped, and its place under the
/// cap on calls in flight if it took one.
struct InFlight {
    activity: Arc<Activity>,
    slot: usize,
    placed: bool,
}

impl InFlight {
    fn start(activity: &Arc<Activity>) -> InFlight {
        let slot = (activity.epoch_of(Instant::now()) % EPOCHS as u128) as usize;
        activity.in_flight[slot].fetch_add(1, Ordering::AcqRel);
        InFlight {
            activity: Arc::clone(activity),
            slot,
            placed: false,
        }
    }

    /// Takes a place under the cap on calls in flight; `false` if none is free.
    fn take_place(&mut self) -> bool {
        self.placed = self.activity.cap.take(true);
        self.placed
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.activity;
        let ended = u64::try_from(activity.opened.elapsed().as_nanos()).unwrap_or(u64::MAX);
        // The end is recorded before the count drops, so a count of 0 comes with it.
        activity.last_end.fetch_max(ended, Ordering::AcqRel);
        activity.in_flight[self.slot].fetch_sub(1, Ordering::AcqRel);
        if self.placed {
            activity.cap.give_back();
        }
    }
}

/// A gRPC answer's body, holding its call's place among those in flight (or its health
/// watch's place) until it is sent.
struct Counted {
    body: tonic::body::Body,
    _held: Held,
}

/// What an answer holds while it is being sent.
enum Held {
    /// A call's place among those in flight.
    Call { _place: InFlight },
    /// A health watch's place.
    Watch { _place: OwnedSemaphorePermit },
    /// Nothing: a health check.
    Nothing,
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

#[cfg(test)]
mod tests;
