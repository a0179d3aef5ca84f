//! A service served on free ports of 127.0.0.1 until the test stops it: what every test that
//! needs real sockets starts the same way.

use std::net::SocketAddr;

use slidewin_server::{Endpoints, Listeners, ServeOptions, serve};
use slidewin_store::Backend;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Options for free ports of 127.0.0.1, the admin surfaces open, every other bound the default.
#[allow(dead_code)] // each test binary uses part of the support
pub(crate) fn local() -> ServeOptions {
    ServeOptions {
        grpc_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        http_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        admin: true,
        ..ServeOptions::default()
    }
}

/// A service being served: its addresses, and a way to stop it.
#[allow(dead_code)] // each test binary uses part of the support
pub(crate) struct Served {
    pub(crate) grpc: SocketAddr,
    pub(crate) http: SocketAddr,
    /// The admin listener's, when the admin surfaces listen apart.
    pub(crate) admin: Option<SocketAddr>,
    /// The metrics listener's, when there is one.
    pub(crate) metrics: Option<SocketAddr>,
    stop: Option<oneshot::Sender<()>>,
    served: Option<JoinHandle<std::io::Result<()>>>,
}

#[allow(dead_code)] // each test binary uses part of the support
impl Served {
    /// Binds `options`' addresses and serves `service` there in a task of its own.
    pub(crate) async fn start<B: Backend>(service: Endpoints<B>, options: &ServeOptions) -> Served {
        let listeners = Listeners::bind(options).await.expect("free ports");
        let (grpc, http) = (
            listeners.grpc_addr().expect("an address"),
            listeners.http_addr().expect("an address"),
        );
        let admin = listeners.admin_addr().expect("an address");
        let metrics = listeners.metrics_addr().expect("an address");
        let (stop, stopped) = oneshot::channel::<()>();
        let served = tokio::spawn(serve(service, listeners, options.admin, async {
            let _ = stopped.await;
        }));
        Served {
            grpc,
            http,
            admin,
            metrics,
            stop: Some(stop),
            served: Some(served),
        }
    }

    /// Tells it to stop, without waiting for it.
    pub(crate) fn signal_stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Whether it has stopped.
    pub(crate) fn is_finished(&self) -> bool {
        self.served.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Stops it and waits until it has stopped cleanly.
    pub(crate) async fn stop(mut self) {
        self.signal_stop();
        if let Some(served) = self.served.take() {
            served
                .await
                .expect("the server task")
                .expect("the server stops cleanly");
        }
    }
}
