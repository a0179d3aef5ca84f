//! `slidewin serve`: from options to a running service.

use std::path::PathBuf;
use std::sync::Arc;

use slidewin::time::UnixMonotonicClock;
use slidewin_redis::{FailurePolicy, RedisTls};
use slidewin_store::Memory;

use crate::access::{AdminHost, AdminToken};
use slidewin_store::{Backend, BackendState};

use crate::config::Config;
use crate::config_read::Reader;
use crate::endpoints::Endpoints;
use crate::engine::{AnswerOptions, Bounds, Engine};
use crate::error::Error;
use crate::metrics::Metrics;
use crate::redis::{connect_redis, connect_redis_cluster};
use crate::serve::{Listeners, ServeOptions, serve};
use crate::watch::watch_config;

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
    /// The primary Redis Sentinel names (see [`connect_redis_sentinel`](crate::connect_redis_sentinel)).
    RedisSentinel {
        /// The name the sentinels know the primary by.
        master: String,
        /// The sentinels (`host:port`, or URLs carrying the sentinels' password).
        sentinels: Vec<String>,
        /// The primary's `password` or `user:password`.
        auth: Option<String>,
    },
}

/// Everything `slidewin serve` is told.
///
/// ```
/// use slidewin_server::RunOptions;
/// let options = RunOptions {
///     // `--admin-host slidewin.internal`: the open dashboard answers that name too.
///     admin_hosts: vec!["slidewin.internal".parse()?],
///     ..RunOptions::default()
/// };
/// assert!(options.config.is_empty() && options.serve.admin);
/// # Ok::<(), slidewin_server::AdminHostError>(())
/// ```
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Config files or directories; none runs [`Config::EXAMPLE`].
    pub config: Vec<PathBuf>,
    /// Listeners and admin surfaces.
    pub serve: ServeOptions,
    /// The store.
    pub backend: BackendChoice,
    /// What Redis answers while it is down.
    pub failure_policy: FailurePolicy,
    /// What Redis's keys start with, instead of `slidewin` (see
    /// [`Redis::with_key_prefix`](slidewin_store::Redis::with_key_prefix)): services that
    /// share a Redis under different prefixes share no counts.
    pub redis_key_prefix: Option<String>,
    /// How many of Redis's denials are kept and answered again until they end
    /// ([`Redis::with_denial_cache`](slidewin_store::Redis::with_denial_cache)); 0 keeps none.
    pub redis_denial_cache: usize,
    /// The certificates for Redis over TLS (`rediss://`); `None` trusts the system's
    /// authorities and sends no client certificate.
    pub redis_tls: Option<RedisTls>,
    /// Whether a domain may be spread over several config files
    /// ([`Config::load_merging_domains`], envoy ratelimit's `MERGE_DOMAIN_CONFIG`).
    pub merge_domains: bool,
    /// Whether health passes while a failure policy answers for a backend that is down
    /// ([`Endpoints::with_ready_when_degraded`]); by default it fails.
    pub ready_when_degraded: bool,
    /// The cap on live keys per rule, in memory.
    pub max_keys: usize,
    /// The bytes every rule's keys may hold together, in memory ([`RunOptions::DEFAULT_MAX_MEMORY`]).
    pub max_memory: usize,
    /// The bounds on a request.
    pub bounds: Bounds,
    /// How answers are given: the global shadow mode, the headers, near the limit.
    pub answers: AnswerOptions,
    /// The metrics under envoy ratelimit's names too ([`Metrics::with_envoy_names`]).
    pub envoy_metric_names: bool,
    /// What the admin surfaces (the dashboard, `/api/*`, `/metrics`) require; none: they
    /// are open, to requests for a loopback host or one of `admin_hosts`.
    pub admin_token: Option<AdminToken>,
    /// The hosts besides the loopback ones that the admin surfaces answer without a token
    /// ([`Endpoints::with_admin_hosts`]).
    pub admin_hosts: Vec<AdminHost>,
}

impl RunOptions {
    /// The bytes every rule's keys may hold together in memory, by default: 1 GiB. Past it a new
    /// key, or an admission that would grow a sliding log, is over the limit (and counted in
    /// `slidewin_memory_refusals_total`) until keys go idle.
    pub const DEFAULT_MAX_MEMORY: usize = 1 << 30;
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            config: Vec::new(),
            serve: ServeOptions::default(),
            backend: BackendChoice::Memory,
            failure_policy: FailurePolicy::Open,
            redis_tls: None,
            redis_key_prefix: None,
            redis_denial_cache: slidewin_store::Redis::DEFAULT_DENIAL_CACHE,
            ready_when_degraded: false,
            merge_domains: false,
            max_keys: Memory::DEFAULT_MAX_KEYS,
            max_memory: RunOptions::DEFAULT_MAX_MEMORY,
            bounds: Bounds::default(),
            answers: AnswerOptions::default(),
            envoy_metric_names: false,
            admin_token: None,
            admin_hosts: Vec::new(),
        }
    }
}

/// Loads the config, connects the backend, listens, prints where, and serves until SIGTERM
/// or Ctrl-C.
///
/// # Errors
///
/// A config, a backend or a listener that failed, said in words.
pub async fn run(options: RunOptions) -> Result<(), Error> {
    let config = if options.config.is_empty() {
        Config::parse(Config::EXAMPLE, "<built-in example>")
            .map_err(|e| Error::Config(e.to_string()))?
    } else {
        // Off the workers and within a timeout, as every reload: a FIFO or a hung mount in
        // the config's place fails the start by name rather than hanging it.
        let reader = Reader::new(options.config.clone(), Config::READ_TIMEOUT);
        reader.set_merging_domains(options.merge_domains);
        reader.load(Ok).await.map_err(Error::Config)?
    };
    if options.max_keys == 0 {
        return Err(Error::setting(
            "--max-keys",
            "--max-keys 0: a rule must be able to hold a key",
        ));
    }
    if options.max_memory == 0 {
        return Err(Error::setting(
            "--max-memory",
            "--max-memory 0: the keys must be able to hold a byte",
        ));
    }
    match &options.backend {
        BackendChoice::Memory => {
            let backend = Memory::new()
                .with_max_keys(options.max_keys)
                .with_max_memory(options.max_memory);
            start(backend, config, options).await
        }
        BackendChoice::Redis(url) => {
            // The error names the URL, its password hidden: the flag's value is not repeated.
            let backend = connect_redis(url, options.failure_policy, options.redis_tls.as_ref())
                .await
                .map_err(|e| Error::Backend(format!("--redis: {e}")))?;
            let backend = tuned(backend, &options);
            start(backend, config, options).await
        }
        BackendChoice::RedisCluster(nodes) => {
            let urls: Vec<String> = nodes.iter().map(|n| cluster_seed(n)).collect();
            let backend =
                connect_redis_cluster(&urls, options.failure_policy, options.redis_tls.as_ref())
                    .await
                    .map_err(|e| Error::Backend(format!("--redis-cluster: {e}")))?;
            let backend = tuned(backend, &options);
            start(backend, config, options).await
        }
        BackendChoice::RedisSentinel {
            master,
            sentinels,
            auth,
        } => {
            let urls: Vec<String> = sentinels.iter().map(|n| cluster_seed(n)).collect();
            let backend = crate::redis::connect_redis_sentinel(
                master,
                &urls,
                auth.as_deref(),
                options.failure_policy,
                options.redis_tls.as_ref(),
            )
            .await
            .map_err(|e| Error::Backend(format!("--redis-sentinel: {e}")))?;
            let backend = tuned(backend, &options);
            start(backend, config, options).await
        }
    }
}

/// `backend` as the options tune it: its keys under their prefix, if any, and its denials kept.
fn tuned(backend: slidewin_store::Redis, options: &RunOptions) -> slidewin_store::Redis {
    let backend = backend.with_denial_cache(options.redis_denial_cache);
    match &options.redis_key_prefix {
        Some(prefix) => backend.with_key_prefix(prefix),
        None => backend,
    }
}

/// Serves `config` on `backend` as `options` say, until SIGTERM or SIGINT (see [`serve`]).
async fn start<B: Backend>(backend: B, config: Config, options: RunOptions) -> Result<(), Error> {
    let service = endpoints(backend, config, &options)?;
    let listeners = Listeners::bind(&options.serve)
        .await
        .map_err(Error::io(""))?;
    let _watch = if options.config.is_empty() {
        // SIGHUP's default would end the process: with nothing to reload, it is only logged.
        ignore_hangups();
        None
    } else {
        Some(watch_config(&service)?)
    };
    let shutdown = shutdown_signal();
    announce(&service, &listeners, &options)?;
    serve(service, listeners, options.serve.admin, shutdown)
        .await
        .map_err(Error::io(""))
}

/// The engine and its endpoints, as `options` say.
fn endpoints<B: Backend>(
    backend: B,
    config: Config,
    options: &RunOptions,
) -> Result<Endpoints<B>, Error> {
    let engine = Engine::new(
        backend,
        config,
        // Unix time, as calendar quotas date their windows on it; steady, as the windows slide
        // on it.
        Arc::new(UnixMonotonicClock),
        options.bounds,
        if options.envoy_metric_names {
            Metrics::with_envoy_names()
        } else {
            Metrics::new()
        },
    )?
    .with_answers(options.answers.clone());
    let mut service = Endpoints::new(engine, options.config.clone())
        .with_admin_hosts(options.admin_hosts.clone())
        .with_ready_when_degraded(options.ready_when_degraded)
        .with_merging_domains(options.merge_domains);
    if let Some(token) = &options.admin_token {
        service = service.with_admin_token(token.clone());
    }
    Ok(service)
}

/// Where the service listens, what it serves and how to try it: in the log, and on stdout for
/// the operator (and for tools that read the addresses from it).
fn announce<B: Backend>(
    service: &Endpoints<B>,
    listeners: &Listeners,
    options: &RunOptions,
) -> Result<(), Error> {
    let (grpc, http) = (
        listeners.grpc_addr().map_err(Error::io(""))?,
        listeners.http_addr().map_err(Error::io(""))?,
    );
    let backend = service.engine().backend();
    tracing::info!(
        %grpc,
        %http,
        backend = backend.kind().as_str(),
        state = backend.state().as_str(),
        "slidewin serve is listening"
    );
    println!(
        "slidewin serve: {} backend{}, config {}",
        backend.kind(),
        match (backend.state(), backend.failure_policy()) {
            (BackendState::Up, _) | (_, None) => String::new(),
            (state, Some(policy)) =>
                format!(" ({state}: answering by --failure-policy {policy} until it answers)"),
        },
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
    println!(
        "  Envoy RLS gRPC  {grpc}{}",
        if listeners.is_tls() { " (TLS)" } else { "" }
    );
    let scheme = if listeners.is_http_tls() {
        "https"
    } else {
        "http"
    };
    let admin_addr = listeners.admin_addr().map_err(Error::io(""))?;
    if let Some(admin) = admin_addr {
        println!("  HTTP API        {scheme}://{http}/json, /healthcheck");
        println!("  admin           {scheme}://{admin}/");
    }
    if options.serve.admin {
        let token = options.admin_token.as_ref();
        let at = admin_addr.unwrap_or(http);
        for line in crate::access::startup_lines(scheme, at, token, &options.admin_hosts) {
            println!("{line}");
        }
    }
    if let (Some(addr), Some(metrics)) = (
        listeners.metrics_addr().map_err(Error::io(""))?,
        &options.serve.metrics,
    ) {
        println!(
            "  Prometheus      {scheme}://{addr}{} (open: no token)",
            metrics.path()
        );
    }
    println!("  try it:");
    println!(
        "    curl -i {scheme}://{http}/json -H 'content-type: application/json' -d '{{\"domain\":\"example\",\"descriptors\":[{{\"entries\":[{{\"key\":\"client\",\"value\":\"ann\"}}]}}]}}'"
    );
    Ok(())
}

/// A cluster seed or a sentinel as redis-rs takes it: `host:port` (as `--redis-cluster` documents it) gets
/// `redis://`; a URL is kept.
fn cluster_seed(node: &str) -> String {
    if node.contains("://") {
        node.to_owned()
    } else {
        format!("redis://{node}")
    }
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

/// SIGTERM or Ctrl-C. SIGTERM is registered when this is called, not when the future is first
/// polled, so that one sent as soon as the service says it is up finds the handler.
fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    async move {
        #[cfg(unix)]
        if let Some(mut term) = term {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::cluster_seed;

    #[test]
    fn cluster_seeds_may_be_host_port_as_the_flag_says() {
        assert_eq!(cluster_seed("10.0.0.1:7000"), "redis://10.0.0.1:7000");
        assert_eq!(cluster_seed("rediss://a:7000"), "rediss://a:7000");
    }
}
