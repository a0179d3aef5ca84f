//! The HTTP listener's connections.

use std::convert::Infallible;
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

use super::{ConnectionLimits, Protocol, stopped};

/// The HTTP listener's connections: hyper's HTTP/1 with a header read timeout, each request
/// under the request timeout.
#[derive(Clone)]
pub(super) struct Http {
    router: axum::Router,
    http1: hyper::server::conn::http1::Builder,
    request_timeout: Duration,
}

impl Http {
    pub(super) fn new(router: axum::Router, limits: ConnectionLimits) -> Http {
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
