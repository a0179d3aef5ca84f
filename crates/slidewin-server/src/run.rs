//! `slidewin serve`: from options to a running service.

use std::path::PathBuf;
use std::sync::Arc;

use slidewin::time::MonotonicClock;
use slidewin_http::{Memory, Redis};
use slidewin_redis::{FailurePolicy, RedisLimiter};

use crate::backend::ServiceBackend;
use crate::config::Config;
use crate::engine::{Bounds, Engine};
use crate::metrics::Metrics;
use crate::serve::{Listeners, ServeOptions, serve, watch_config};
use crate::service::Service;

/// The built-in config `slidewin serve` runs with when given none.
pub const EXAMPLE_CONFIG: &str = include_str!("../config/example.yaml");

/// Where the counts are kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum BackendChoice {
    /// In this process: the default.
    #[default]
    Memory,
    /// One Redis server, by URL.
    Redis(String),
    /// A Redis Cluster, by its seed nodes (`host:port`).
    RedisCluster(Vec<String>),
}

/// Everything `slidewin serve` is told.
///
/// ```
/// use slidewin_server::RunOptions;
/// let options = RunOptions::default();
/// assert!(options.config.is_empty() && options.serve.admin);
/// ```
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Config files or directories; none runs [`EXAMPLE_CONFIG`].
    pub config: Vec<PathBuf>,
    /// Listeners and admin surfaces.
    pub serve: ServeOptions,
    /// The store.
    pub backend: BackendChoice,
    /// What Redis answers while it is down.
    pub failure_policy: FailurePolicy,
    /// The cap on live keys per rule, in memory.
    pub max_keys: usize,
    /// The bounds on a request.
    pub bounds: Bounds,
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            config: Vec::new(),
            serve: ServeOptions::default(),
            backend: BackendChoice::Memory,
            failure_policy: FailurePolicy::Open,
            max_keys: Memory::DEFAULT_MAX_KEYS,
            bounds: Bounds::default(),
        }
    }
}

/// Loads the config, connects the backend, listens, prints where, and serves until SIGTERM
/// or Ctrl-C.
///
/// # Errors
///
/// A config, a backend or a listener that failed, said in words.
pub async fn run(options: RunOptions) -> Result<(), String> {
    let config = if options.config.is_empty() {
        Config::parse(EXAMPLE_CONFIG, "<built-in example>").map_err(|e| e.to_string())?
    } else {
        Config::load(&options.config).map_err(|e| e.to_string())?
    };
    if options.max_keys == 0 {
        return Err("--max-keys 0: a rule must be able to hold a key".to_owned());
    }
    match &options.backend {
        BackendChoice::Memory => {
            let backend = Memory::new().with_max_keys(options.max_keys);
            start(backend, config, options).await
        }
        BackendChoice::Redis(url) => {
            let limiter = RedisLimiter::connect(url)
                .await
                .map_err(|e| format!("--redis {url}: {e}"))?
                .with_failure_policy(options.failure_policy);
            let backend =
                crate::RedisService::new(Redis::new(limiter), false, options.failure_policy);
            start(backend, config, options).await
        }
        BackendChoice::RedisCluster(nodes) => {
            let seeds: Vec<&str> = nodes.iter().map(String::as_str).collect();
            let limiter = RedisLimiter::connect_cluster(&seeds)
                .await
                .map_err(|e| format!("--redis-cluster {}: {e}", nodes.join(",")))?
                .with_failure_policy(options.failure_policy);
            let backend =
                crate::RedisService::new(Redis::new(limiter), true, options.failure_policy);
            start(backend, config, options).await
        }
    }
}

async fn start<B: ServiceBackend>(
    backend: B,
    config: Config,
    options: RunOptions,
) -> Result<(), String> {
    let engine = Engine::new(
        backend,
        config,
        Arc::new(MonotonicClock),
        options.bounds,
        Metrics::new(),
    )?;
    let service = Service::new(engine, options.config.clone());
    let listeners = Listeners::bind(&options.serve)
        .await
        .map_err(|e| e.to_string())?;
    let (grpc, http) = (
        listeners.grpc_addr().map_err(|e| e.to_string())?,
        listeners.http_addr().map_err(|e| e.to_string())?,
    );
    let _watch = if options.config.is_empty() {
        // SIGHUP's default would end the process: with nothing to reload, it is only logged.
        ignore_hangups();
        None
    } else {
        Some(watch_config(&service)?)
    };
    let backend = service.engine().backend();
    tracing::info!(%grpc, %http, backend = backend.kind(), "slidewin serve is listening");
    println!(
        "slidewin serve: {} backend, config {}",
        backend.kind(),
        if options.config.is_empty() {
            "built-in example".to_owned()
        } else {
            options
                .config
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    println!("  Envoy RLS gRPC  {grpc}");
    if options.serve.admin {
        println!("  dashboard       http://{http}/");
    }
    println!("  try it:");
    println!(
        "    curl -i http://{http}/json -d '{{\"domain\":\"example\",\"descriptors\":[{{\"entries\":[{{\"key\":\"client\",\"value\":\"ann\"}}]}}]}}'"
    );
    serve(service, listeners, options.serve.admin, shutdown_signal())
        .await
        .map_err(|e| e.to_string())
}

/// Logs each SIGHUP, and does nothing else.
fn ignore_hangups() {
    // Registered here, before the service says it is up, so no early SIGHUP finds the default.
    #[cfg(unix)]
    if let Ok(mut hangups) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
    {
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                tracing::info!("SIGHUP: the built-in config has no file to reload");
            }
        });
    }
}

/// SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
