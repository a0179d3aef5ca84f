//! Listening: the gRPC and HTTP listeners, reloads on a file change or SIGHUP, and a graceful
//! stop.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::backend::ServiceBackend;
use crate::service::grpc::Grpc;
use crate::service::{MAX_BODY_BYTES, Service};

/// Where to listen, and what to show.
///
/// ```
/// use slidewin_server::ServeOptions;
/// let options = ServeOptions::default();
/// assert!(options.grpc_addr.ip().is_loopback() && options.http_addr.ip().is_loopback());
/// ```
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Envoy's RLS gRPC: 127.0.0.1:8081 by default, envoy ratelimit's port.
    pub grpc_addr: SocketAddr,
    /// The HTTP API and dashboard: 127.0.0.1:8080 by default.
    pub http_addr: SocketAddr,
    /// Serve the dashboard, `/api/*` and `/metrics`; `false` closes them.
    pub admin: bool,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            grpc_addr: SocketAddr::from(([127, 0, 0, 1], 8081)),
            http_addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            admin: true,
        }
    }
}

/// Bound listeners, ready to serve.
pub struct Listeners {
    grpc: TcpListener,
    http: TcpListener,
}

impl Listeners {
    /// Binds both addresses.
    ///
    /// # Errors
    ///
    /// An address that cannot be bound, named.
    pub async fn bind(options: &ServeOptions) -> std::io::Result<Listeners> {
        let named = |what: &'static str, addr: SocketAddr| {
            move |e: std::io::Error| {
                std::io::Error::new(e.kind(), format!("cannot listen on {addr} ({what}): {e}"))
            }
        };
        Ok(Listeners {
            grpc: TcpListener::bind(options.grpc_addr)
                .await
                .map_err(named("gRPC", options.grpc_addr))?,
            http: TcpListener::bind(options.http_addr)
                .await
                .map_err(named("HTTP", options.http_addr))?,
        })
    }

    /// The gRPC listener's address.
    ///
    /// # Errors
    ///
    /// The socket's error.
    pub fn grpc_addr(&self) -> std::io::Result<SocketAddr> {
        self.grpc.local_addr()
    }

    /// The HTTP listener's address.
    ///
    /// # Errors
    ///
    /// The socket's error.
    pub fn http_addr(&self) -> std::io::Result<SocketAddr> {
        self.http.local_addr()
    }
}

/// Serves `service` on `listeners` until `shutdown` completes: then both listeners stop
/// accepting, the checks in flight finish, and it returns.
///
/// # Errors
///
/// A listener that failed.
pub async fn serve<B: ServiceBackend>(
    service: Service<B>,
    listeners: Listeners,
    admin: bool,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let router = service.router(admin);
    let http = axum::serve(listeners.http, router).with_graceful_shutdown(stopped(stop_rx.clone()));
    let grpc = tonic::transport::Server::builder()
        .add_service(
            RateLimitServiceServer::new(Grpc {
                service: service.clone(),
            })
            .max_decoding_message_size(MAX_BODY_BYTES),
        )
        .serve_with_incoming_shutdown(
            tokio_stream_incoming(listeners.grpc),
            stopped(stop_rx.clone()),
        );
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!("shutting down: no new connections; finishing the checks in flight");
        let _ = stop_tx.send(true);
    });
    let (http, grpc) = tokio::join!(http.into_future(), grpc);
    http?;
    grpc.map_err(std::io::Error::other)
}

fn tokio_stream_incoming(
    listener: TcpListener,
) -> impl futures_util::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures_util::stream::unfold(listener, |listener| async move {
        let accepted = listener.accept().await.map(|(stream, _)| {
            let _ = stream.set_nodelay(true);
            stream
        });
        Some((accepted, listener))
    })
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

    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
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
