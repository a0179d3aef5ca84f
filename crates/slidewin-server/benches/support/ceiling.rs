//! The ceiling of `rls_load`: tonic's own server with a handler that answers OK at once, and
//! the server handle every server under test shares.

use std::net::SocketAddr;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// The ceiling's handler: OK at once.
struct Ceiling;

#[tonic::async_trait]
impl RateLimitService for Ceiling {
    async fn should_rate_limit(
        &self,
        request: tonic::Request<RateLimitRequest>,
    ) -> Result<tonic::Response<RateLimitResponse>, tonic::Status> {
        let ok = DescriptorStatus {
            code: Code::Ok as i32,
            ..Default::default()
        };
        Ok(tonic::Response::new(RateLimitResponse {
            overall_code: Code::Ok as i32,
            statuses: vec![ok; request.get_ref().descriptors.len()],
            ..Default::default()
        }))
    }
}

/// A server under test: its name, where it listens, what stops it, and whether its answers
/// carry limits.
pub(crate) struct Server {
    pub(crate) name: &'static str,
    pub(crate) addr: SocketAddr,
    pub(crate) stop: oneshot::Sender<()>,
    pub(crate) task: tokio::task::JoinHandle<()>,
    pub(crate) limited: bool,
}

/// The ceiling, accepting as `slidewin serve` does (`TCP_NODELAY` on each connection).
pub(crate) async fn ceiling() -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = futures_util::stream::unfold(listener, |listener| async move {
        let accepted = listener.accept().await.map(|(stream, _)| {
            let _ = stream.set_nodelay(true);
            stream
        });
        Some((accepted, listener))
    });
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(RateLimitServiceServer::new(Ceiling))
            .serve_with_incoming_shutdown(incoming, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    Server {
        name: "ceiling",
        addr,
        stop,
        task,
        limited: false,
    }
}
