//! The gRPC listener's connections.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio::time::Instant;

use super::{ConnectionLimits, Protocol, stopped};

/// A gRPC answer, as a tower service of HTTP/2 requests gives it.
type GrpcAnswer = http::Response<tonic::body::Body>;

/// The gRPC listener's connections: hyper's HTTP/2 with keep-alive pings and a cap on
/// concurrent streams, each call under the request timeout, and a graceful close (`GOAWAY`)
/// once no call has been in flight for the idle timeout.
pub(super) struct GrpcConnections<S> {
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
    pub(super) fn new(calls: S, limits: ConnectionLimits) -> GrpcConnections<S> {
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

#[cfg(test)]
mod tests;
