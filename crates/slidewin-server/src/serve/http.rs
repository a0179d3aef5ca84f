//! The HTTP listener's connections.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

use futures_util::future::Either;

use super::metered::Metered;
use super::{CallCap, ConnectionLimits, Phase, Protocol, stopped};

/// The HTTP listener's connections: hyper's HTTP/1 with a header read timeout, each request
/// under the request timeout.
/// `POST /json` (the data plane) takes a place under the cap on calls in flight; the admin
/// routes and health do not.
#[derive(Clone)]
pub(super) struct Http {
    router: axum::Router,
    http1: hyper::server::conn::http1::Builder,
    request_timeout: Duration,
    cap: Arc<CallCap>,
}

impl Http {
    pub(super) fn new(router: axum::Router, limits: ConnectionLimits, cap: Arc<CallCap>) -> Http {
        let mut http1 = hyper::server::conn::http1::Builder::new();
        http1
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .keep_alive(true);
        Http {
            router,
            http1,
            request_timeout: limits.request_timeout,
            cap,
        }
    }
}

impl Protocol for Http {
    async fn serve<I>(self, io: I, stop: watch::Receiver<Phase>)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (timeout, router, cap) = (self.request_timeout, self.router, self.cap);
        let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
            let place = if request.uri().path() == "/json" {
                match Place::take(&cap) {
                    Some(place) => Some(place),
                    None => return Either::Left(std::future::ready(Ok(shed(&cap)))),
                }
            } else {
                None
            };
            let router = router.clone();
            // A data-plane body is counted against the bound on bodies in flight as it comes.
            let request = request.map(|body| match &place {
                Some(place) => {
                    axum::body::Body::new(Metered::new(body, Arc::clone(&place.0.bodies), |full| {
                        Box::new(full)
                    }))
                }
                None => axum::body::Body::new(body),
            });
            Either::Right(async move {
                let answer = within(timeout, router, request).await;
                drop(place);
                answer
            })
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

/// A data-plane request's place under the cap on calls in flight, given back when dropped.
struct Place(Arc<CallCap>);

impl Place {
    fn take(cap: &Arc<CallCap>) -> Option<Place> {
        cap.take(false).then(|| Place(Arc::clone(cap)))
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.0.give_back();
    }
}

/// The answer to a data-plane request past the cap on calls in flight: `503`, at once.
fn shed(cap: &CallCap) -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        http::StatusCode::SERVICE_UNAVAILABLE,
        [
            (http::header::CONTENT_TYPE, "application/json"),
            (http::header::RETRY_AFTER, "1"),
        ],
        serde_json::json!({ "error": cap.refusal() }).to_string(),
    )
        .into_response()
}

/// `request` through `router`, its body read and its answer within `timeout`, else
/// `408 Request Timeout` (and the connection closes).
async fn within(
    timeout: Duration,
    mut router: axum::Router,
    request: http::Request<axum::body::Body>,
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
