//! `slidewin serve`: the rate-limit service, with its flags. The service is slidewin-server's.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use slidewin_server::{BackendChoice, Bounds, FailurePolicy, RunOptions, ServeOptions};

// The doc comments are the --help text, read in a terminal, not rendered as Markdown.
#[allow(clippy::doc_markdown)]
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// A config file or directory (its .yaml and .yml files), in envoy ratelimit's format;
    /// repeat for more. Without one, a built-in example runs. Reloaded when a file changes
    /// and on SIGHUP.
    #[arg(long, env = "SLIDEWIN_CONFIG", value_delimiter = ',')]
    config: Vec<PathBuf>,
    /// Where Envoy's RLS v3 gRPC listens.
    #[arg(long, env = "SLIDEWIN_GRPC_ADDR", default_value = "127.0.0.1:8081")]
    grpc_addr: SocketAddr,
    /// Where the HTTP API (/json, /healthz, /api/*, /metrics) and the dashboard listen.
    #[arg(long, env = "SLIDEWIN_HTTP_ADDR", default_value = "127.0.0.1:8080")]
    http_addr: SocketAddr,
    /// Keep the counts in a Redis server (redis://host:port) instead of in memory.
    #[arg(long, env = "SLIDEWIN_REDIS", conflicts_with = "redis_cluster")]
    redis: Option<String>,
    /// Keep the counts in a Redis Cluster: its seed nodes, host:port,host:port.
    #[arg(long, env = "SLIDEWIN_REDIS_CLUSTER", value_delimiter = ',')]
    redis_cluster: Vec<String>,
    /// What to answer while Redis is down: open admits, closed denies.
    #[arg(long, env = "SLIDEWIN_FAILURE_POLICY", value_enum, default_value_t = Policy::Open)]
    failure_policy: Policy,
    /// The most keys a rule holds in memory; a new key past it is refused (and counted)
    /// until keys go idle.
    #[arg(long, env = "SLIDEWIN_MAX_KEYS", default_value_t = 1_000_000)]
    max_keys: usize,
    /// Close the dashboard, /api/* and /metrics.
    #[arg(long, env = "SLIDEWIN_NO_ADMIN")]
    no_admin: bool,
    /// Log lines as JSON instead of text.
    #[arg(long, env = "SLIDEWIN_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// What to log: a tracing filter, as `info` or `slidewin_server=debug`.
    #[arg(long, env = "SLIDEWIN_LOG", default_value = "info")]
    log: String,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Policy {
    Open,
    Closed,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

pub(crate) fn run(args: ServeArgs) -> ExitCode {
    let filter = match tracing_subscriber::EnvFilter::try_new(&args.log) {
        Ok(filter) => filter,
        Err(e) => {
            eprintln!("slidewin serve: --log {}: {e}", args.log);
            return ExitCode::from(2);
        }
    };
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    let backend = match (args.redis, args.redis_cluster.is_empty()) {
        (Some(url), _) => BackendChoice::Redis(url),
        (None, false) => BackendChoice::RedisCluster(args.redis_cluster),
        (None, true) => BackendChoice::Memory,
    };
    let options = RunOptions {
        config: args.config,
        serve: ServeOptions {
            grpc_addr: args.grpc_addr,
            http_addr: args.http_addr,
            admin: !args.no_admin,
        },
        backend,
        failure_policy: match args.failure_policy {
            Policy::Open => FailurePolicy::Open,
            Policy::Closed => FailurePolicy::Closed,
        },
        max_keys: args.max_keys,
        bounds: Bounds::default(),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("slidewin serve: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(slidewin_server::run(options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("slidewin serve: {e}");
            ExitCode::FAILURE
        }
    }
}
