//! `slidewin serve`: the rate-limit service, with its flags. The service is slidewin-server's.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::telemetry::{Logs, Otlp, OtlpArgs, Telemetry};
use clap::{Args, ValueEnum};
use http::HeaderName;
use slidewin_server::{
    AdminHost, AdminToken, AnswerOptions, BackendChoice, Bounds, ConnectionLimits, FailurePolicy,
    MetricsListener, RedisTls, ResponseHeaders, RunOptions, ServeOptions, TlsFiles, Unit,
};

// The doc comments are the --help text, read in a terminal, not rendered as Markdown.
#[allow(clippy::doc_markdown)]
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Read envoy ratelimit's environment variables (RUNTIME_ROOT, PORT, GRPC_PORT,
    /// REDIS_URL, USE_PROMETHEUS, ...) with their meanings and defaults, as flags given
    /// before these: a flag given here wins. What slidewin does not use is named in a
    /// warning; what it cannot honour stops the start. The same as running the binary under
    /// the name `ratelimit`.
    #[arg(long)]
    pub(crate) envoy_env: bool,
    /// A config file or directory (its .yaml and .yml files), in envoy ratelimit's format;
    /// repeat for more. Without one, a built-in example runs. Reloaded when a file changes
    /// and on SIGHUP.
    #[arg(long, env = "SLIDEWIN_CONFIG", value_delimiter = ',')]
    config: Vec<PathBuf>,
    /// Where Envoy's RLS v3 gRPC listens.
    #[arg(long, env = "SLIDEWIN_GRPC_ADDR", default_value = "127.0.0.1:8081")]
    grpc_addr: SocketAddr,
    /// Where the HTTP API (/json, /healthcheck, /healthz, /api/*, /metrics) and the dashboard listen.
    #[arg(long, env = "SLIDEWIN_HTTP_ADDR", default_value = "127.0.0.1:8080")]
    http_addr: SocketAddr,
    /// Serve the dashboard, /api/* and /metrics here instead, apart from /json and health
    /// (envoy ratelimit's debug port).
    #[arg(long, env = "SLIDEWIN_ADMIN_ADDR")]
    admin_addr: Option<SocketAddr>,
    /// Serve Prometheus's metrics alone here too, with no token or host check: bind it where
    /// only the scraper reaches (envoy ratelimit's PROMETHEUS_ADDR).
    #[arg(long, env = "SLIDEWIN_METRICS_ADDR")]
    metrics_addr: Option<SocketAddr>,
    /// The path of the metrics on --metrics-addr.
    #[arg(
        long,
        env = "SLIDEWIN_METRICS_PATH",
        default_value = "/metrics",
        requires = "metrics_addr"
    )]
    metrics_path: String,
    /// Keep the counts in a Redis server (redis://host:port) instead of in memory. A Redis
    /// down at start does not stop the service: it answers by --failure-policy until Redis does.
    #[arg(long, env = "SLIDEWIN_REDIS", conflicts_with = "redis_cluster")]
    redis: Option<String>,
    /// Keep the counts in a Redis Cluster: its seed nodes, host:port,host:port. As with
    /// --redis, a cluster down at start does not stop the service.
    #[arg(long, env = "SLIDEWIN_REDIS_CLUSTER", value_delimiter = ',')]
    redis_cluster: Vec<String>,
    /// Keep the counts in the primary Redis Sentinel names: the primary's name, then the
    /// sentinels, as mymaster,host:26379,host:26379 (a sentinel may be a redis:// URL with
    /// the sentinels' password; rediss:// for TLS to the sentinels and the primary). After a
    /// failover the sentinels are asked again.
    #[arg(
        long,
        env = "SLIDEWIN_REDIS_SENTINEL",
        value_delimiter = ',',
        conflicts_with_all = ["redis", "redis_cluster"]
    )]
    redis_sentinel: Vec<String>,
    /// The password (or user:password) of the primary that --redis-sentinel finds. A flag
    /// shows in `ps`: prefer the environment variable.
    #[arg(
        long,
        env = "SLIDEWIN_REDIS_PRIMARY_AUTH",
        hide_env_values = true,
        requires = "redis_sentinel"
    )]
    redis_primary_auth: Option<String>,
    /// Redis over TLS (a rediss:// URL, rediss:// cluster seeds or sentinels): trust these PEM
    /// certificate authorities instead of the system's. A password or an ACL user goes in the
    /// URL: rediss://user:password@host:6380/.
    #[arg(long, env = "SLIDEWIN_REDIS_CA")]
    redis_ca: Option<PathBuf>,
    /// Redis over TLS: present this PEM client certificate chain, for a Redis that verifies
    /// its clients; needs --redis-key.
    #[arg(long, env = "SLIDEWIN_REDIS_CERT", requires = "redis_key")]
    redis_cert: Option<PathBuf>,
    /// The PEM private key of --redis-cert.
    #[arg(long, env = "SLIDEWIN_REDIS_KEY", requires = "redis_cert")]
    redis_key: Option<PathBuf>,
    /// What Redis's keys start with, instead of slidewin: services sharing a Redis under
    /// different prefixes share no counts.
    #[arg(long, env = "SLIDEWIN_REDIS_KEY_PREFIX")]
    redis_key_prefix: Option<String>,
    /// How many of Redis's denials are kept and answered again until their wait ends,
    /// without asking Redis: a key Redis denied with nothing left stays denied until then
    /// (counts only grow), so a flood on it costs Redis one call per wait. 0 keeps none (a
    /// Redis that loses its counts on a restart then admits at once).
    #[arg(long, env = "SLIDEWIN_REDIS_DENIAL_CACHE", default_value_t = slidewin_store::Redis::DEFAULT_DENIAL_CACHE)]
    redis_denial_cache: usize,
    /// What to answer while Redis is down: open admits, closed denies.
    #[arg(long, env = "SLIDEWIN_FAILURE_POLICY", value_enum, default_value_t = Policy::Open)]
    failure_policy: Policy,
    /// The most keys a rule holds in memory; a new key past it is refused (and counted)
    /// until keys go idle.
    #[arg(long, env = "SLIDEWIN_MAX_KEYS", default_value_t = 1_000_000)]
    max_keys: usize,
    /// The memory every rule's keys may hold together (in memory): bytes, or with KiB, MiB
    /// or GiB. Past it a new key, or an admission that would grow a sliding log, is over the
    /// limit (and counted) until keys go idle. Leave room for the rest of the process.
    #[arg(long, env = "SLIDEWIN_MAX_MEMORY", default_value = "1GiB", value_parser = bytes)]
    max_memory: usize,
    /// Whether a descriptor's own limit (envoy's RateLimitDescriptor.limit) applies: on, as in
    /// envoy ratelimit; off ignores it (counted) and the config decides. Turn it off unless
    /// your Envoy routes set limits: any client of the ports may send one.
    #[arg(long, env = "SLIDEWIN_REQUEST_OVERRIDES", value_enum, default_value_t = OnOff::On)]
    request_overrides: OnOff,
    /// The longest unit a descriptor's own limit may have (second, minute, hour, day, week,
    /// month, year); a longer one is over the limit, saying why.
    #[arg(long, env = "SLIDEWIN_MAX_OVERRIDE_UNIT", default_value = "day", value_parser = unit)]
    max_override_unit: Unit,
    /// Speak TLS on both listeners with this PEM certificate chain (leaf first); needs
    /// --tls-key.
    #[arg(long, env = "SLIDEWIN_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, env = "SLIDEWIN_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// TLS on the gRPC listener only: the HTTP, admin and metrics listeners speak plain text
    /// (envoy ratelimit's GRPC_SERVER_USE_TLS).
    #[arg(long, env = "SLIDEWIN_TLS_ONLY_GRPC", requires = "tls_cert")]
    tls_only_grpc: bool,
    /// Mutual TLS: every client must present a certificate that chains to one of these PEM
    /// certificate authorities, on both listeners; one without is refused in the handshake.
    /// Needs --tls-cert.
    #[arg(long, env = "SLIDEWIN_TLS_CLIENT_CA", requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// The most connections open at once on each listener; past it, new ones wait until one
    /// closes (an idle HTTP connection is closed after 10 s, a gRPC one with no call after 60 s).
    #[arg(long, env = "SLIDEWIN_MAX_CONNECTIONS", default_value_t = ConnectionLimits::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// The most calls (gRPC calls and POST /json requests) in flight at once across every
    /// connection; past it a call is refused at once (RESOURCE_EXHAUSTED, or 503).
    #[arg(long, env = "SLIDEWIN_MAX_CALLS_IN_FLIGHT", default_value_t = ConnectionLimits::DEFAULT_MAX_CALLS_IN_FLIGHT)]
    max_calls_in_flight: usize,
    /// On SIGTERM, how long health fails (/healthcheck 500, gRPC NOT_SERVING) while the
    /// listeners still answer, before they stop accepting: a load balancer's time to stop
    /// sending. Seconds (5, 0.5) or milliseconds (500ms).
    #[arg(long, env = "SLIDEWIN_DRAIN_DELAY", default_value = "0", value_parser = seconds)]
    drain_delay: Duration,
    /// After the drain delay, how long the calls in flight may take to finish before the
    /// connections still open are closed and the process exits: seconds (5, 0.5) or
    /// milliseconds (500ms).
    #[arg(long, env = "SLIDEWIN_DRAIN_TIMEOUT", default_value = "5", value_parser = seconds)]
    drain_timeout: Duration,
    /// Send a gRPC connection a GOAWAY once it is this old (give or take a tenth), so that
    /// clients reconnect and spread over the replicas: seconds (86400) or milliseconds. Its
    /// calls are answered first.
    #[arg(long, env = "SLIDEWIN_GRPC_MAX_CONNECTION_AGE", value_parser = age)]
    grpc_max_connection_age: Option<Duration>,
    /// Answer OK to every request over a limit (its descriptors still say OVER_LIMIT), and
    /// count it: a config tried without denying anyone (envoy ratelimit's SHADOW_MODE).
    #[arg(long, env = "SLIDEWIN_SHADOW_MODE")]
    shadow_mode: bool,
    /// The headers an answer asks Envoy to add: draft (RateLimit-Policy and RateLimit, and
    /// Retry-After when denied), envoy (envoy ratelimit's three, named by
    /// --envoy-header-names), or none.
    #[arg(long, env = "SLIDEWIN_RESPONSE_HEADERS", value_enum, default_value_t = Headers::Draft)]
    response_headers: Headers,
    /// The names of --response-headers envoy's three headers: the limit, what is left of it,
    /// and the seconds until it is full again.
    #[arg(
        long,
        env = "SLIDEWIN_ENVOY_HEADER_NAMES",
        value_delimiter = ',',
        default_value = "RateLimit-Limit,RateLimit-Remaining,RateLimit-Reset"
    )]
    envoy_header_names: Vec<String>,
    /// A request within its limit is counted as near it (slidewin_near_limit_total) past this
    /// share of it: above 0, at most 1.
    #[arg(long, env = "SLIDEWIN_NEAR_LIMIT_RATIO", default_value = "0.8", value_parser = ratio)]
    near_limit_ratio: u16,
    /// Name the binding descriptor's partition in RateLimit (the draft's pk) by an HMAC of its
    /// counter key under the secret in this file (at least 16 bytes; whitespace around it
    /// ignored; the same file on every replica).
    #[arg(long, env = "SLIDEWIN_PARTITION_KEY_SECRET_FILE")]
    partition_key_secret_file: Option<PathBuf>,
    /// Show the limits' hits and the config loads under envoy ratelimit's Prometheus names
    /// too (ratelimit_service_rate_limit_over_limit{domain,key1,key2}, ...), so that its
    /// dashboards and alerts keep working.
    #[arg(long, env = "SLIDEWIN_ENVOY_METRIC_NAMES")]
    envoy_metric_names: bool,
    /// Let a domain be spread over several config files (envoy ratelimit's
    /// MERGE_DOMAIN_CONFIG): their top-level descriptors join; one defined in two files is
    /// refused.
    #[arg(long, env = "SLIDEWIN_MERGE_DOMAINS")]
    merge_domains: bool,
    /// Pass health checks while the backend is down and --failure-policy answers for it
    /// (/healthcheck 200 "OK: degraded"); without it they fail, so a load balancer prefers a
    /// replica that decides exactly.
    #[arg(long, env = "SLIDEWIN_READY_WHEN_DEGRADED")]
    ready_when_degraded: bool,
    /// Close the dashboard, /api/* and /metrics.
    #[arg(long, env = "SLIDEWIN_NO_ADMIN")]
    no_admin: bool,
    /// Require this token for the dashboard, /api/* and /metrics (not for /json, the health routes or
    /// gRPC): programs send Authorization: Bearer TOKEN; a browser opens /?token=TOKEN once and
    /// keeps a cookie. At least 16 characters. A flag shows in `ps`: prefer the environment
    /// variable or --admin-token-file.
    #[arg(
        long,
        env = "SLIDEWIN_ADMIN_TOKEN",
        hide_env_values = true,
        conflicts_with = "admin_token_file"
    )]
    admin_token: Option<String>,
    /// Read the admin token from this file (whitespace around it ignored; keep it chmod 600).
    #[arg(long, env = "SLIDEWIN_ADMIN_TOKEN_FILE")]
    admin_token_file: Option<PathBuf>,
    /// Without an admin token, the dashboard, /api/* and /metrics answer only requests for a
    /// loopback host (localhost, 127.0.0.1, [::1]), against DNS rebinding: also answer this
    /// name or address (no port), as in --admin-host slidewin.internal. Repeat, or separate
    /// with commas. A token makes the check unnecessary.
    #[arg(
        long = "admin-host",
        value_name = "NAME",
        env = "SLIDEWIN_ADMIN_HOSTS",
        value_delimiter = ','
    )]
    admin_hosts: Vec<AdminHost>,
    #[command(flatten)]
    otlp: OtlpArgs,
    /// Log lines as JSON instead of text.
    #[arg(long, env = "SLIDEWIN_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// What to log: a tracing filter, as `info` or `slidewin_server=debug`.
    #[arg(long, env = "SLIDEWIN_LOG", default_value = "info")]
    log: String,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum OnOff {
    On,
    Off,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Headers {
    Draft,
    Envoy,
    None,
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

/// Serves as `args` say, after logging `warnings` (what `--envoy-env` found and does not use).
pub(crate) fn run(args: ServeArgs, warnings: Vec<String>) -> ExitCode {
    let otlp = match Otlp::from_args(&args.otlp, |name| std::env::var(name).ok()) {
        Ok(otlp) => otlp,
        Err(e) => {
            eprintln!("slidewin serve: {e}");
            return ExitCode::from(2);
        }
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
    // The exporter's channel runs on the runtime: built inside it.
    let logs = Logs {
        filter: &args.log,
        json: matches!(args.log_format, LogFormat::Json),
    };
    let telemetry = match runtime.block_on(async { Telemetry::init(&logs, otlp) }) {
        Ok(telemetry) => telemetry,
        Err(e) => {
            eprintln!("slidewin serve: {e}");
            return ExitCode::from(2);
        }
    };
    for warning in warnings {
        tracing::warn!("envoy ratelimit's environment: {warning}");
    }
    let options = match options(args) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("slidewin serve: {e}");
            return ExitCode::from(2);
        }
    };
    let served = runtime.block_on(slidewin_server::run(options));
    telemetry.shutdown();
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("slidewin serve: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The service's options as `args` say, the files they name read; an error says which
/// argument is wrong.
fn options(args: ServeArgs) -> Result<RunOptions, String> {
    let admin_token = match (&args.admin_token, &args.admin_token_file) {
        (Some(token), _) => AdminToken::new(token).map(Some),
        (None, Some(path)) => AdminToken::from_file(path).map(Some),
        (None, None) => Ok(None),
    }
    .map_err(|e| e.to_string())?;
    let redis_tls = redis_tls(
        args.redis_ca.as_deref(),
        args.redis_cert.as_deref().zip(args.redis_key.as_deref()),
    )?;
    let answers = answers(&args)?;
    let metrics = args
        .metrics_addr
        .map(|addr| MetricsListener::new(addr, &args.metrics_path))
        .transpose()
        .map_err(|e| format!("--metrics-path: {e}"))?;
    let serve = serve_options(&args, metrics);
    Ok(RunOptions {
        config: args.config,
        serve,
        backend: backend(
            args.redis,
            args.redis_cluster,
            &args.redis_sentinel,
            args.redis_primary_auth,
        ),
        failure_policy: match args.failure_policy {
            Policy::Open => FailurePolicy::Open,
            Policy::Closed => FailurePolicy::Closed,
        },
        ready_when_degraded: args.ready_when_degraded,
        merge_domains: args.merge_domains,
        redis_tls,
        redis_key_prefix: args.redis_key_prefix,
        redis_denial_cache: args.redis_denial_cache,
        answers,
        envoy_metric_names: args.envoy_metric_names,
        max_keys: args.max_keys,
        max_memory: args.max_memory,
        bounds: Bounds {
            request_overrides: matches!(args.request_overrides, OnOff::On),
            max_override_unit: args.max_override_unit,
            ..Bounds::default()
        },
        admin_token,
        admin_hosts: args.admin_hosts,
    })
}

/// The listeners as `args` say: addresses, connection limits and TLS.
fn serve_options(args: &ServeArgs, metrics: Option<MetricsListener>) -> ServeOptions {
    ServeOptions {
        grpc_addr: args.grpc_addr,
        http_addr: args.http_addr,
        admin: !args.no_admin,
        admin_addr: args.admin_addr,
        metrics,
        limits: ConnectionLimits {
            max_connections: args.max_connections,
            max_calls_in_flight: args.max_calls_in_flight,
            drain_delay: args.drain_delay,
            drain_timeout: args.drain_timeout,
            max_connection_age: args.grpc_max_connection_age,
            ..ConnectionLimits::default()
        },
        tls: match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: args.tls_client_ca.clone(),
                only_grpc: args.tls_only_grpc,
            }),
            _ => None,
        },
    }
}

/// The backend `--redis`, `--redis-cluster` or `--redis-sentinel` names (in that order of
/// precedence), else memory.
fn backend(
    redis: Option<String>,
    cluster: Vec<String>,
    sentinel: &[String],
    primary_auth: Option<String>,
) -> BackendChoice {
    match (redis, cluster.is_empty(), sentinel.split_first()) {
        (Some(url), _, _) => BackendChoice::Redis(url),
        (None, false, _) => BackendChoice::RedisCluster(cluster),
        (None, true, Some((master, sentinels))) => BackendChoice::RedisSentinel {
            master: master.clone(),
            sentinels: sentinels.to_vec(),
            auth: primary_auth,
        },
        (None, true, None) => BackendChoice::Memory,
    }
}

/// How answers are given, as `--shadow-mode`, `--response-headers`, `--envoy-header-names`
/// and `--near-limit-ratio` say.
fn answers(args: &ServeArgs) -> Result<AnswerOptions, String> {
    let headers = match args.response_headers {
        Headers::Draft => ResponseHeaders::Draft,
        Headers::None => ResponseHeaders::None,
        Headers::Envoy => {
            let names: Vec<HeaderName> = args
                .envoy_header_names
                .iter()
                .map(|name| {
                    HeaderName::try_from(name.trim())
                        .map_err(|_| format!("--envoy-header-names: `{name}` is not a header name"))
                })
                .collect::<Result<_, _>>()?;
            let [limit, remaining, reset]: [HeaderName; 3] =
                names.try_into().map_err(|names: Vec<_>| {
                    format!(
                        "--envoy-header-names takes three names, got {}",
                        names.len()
                    )
                })?;
            ResponseHeaders::Envoy {
                limit,
                remaining,
                reset,
            }
        }
    };
    let partition_keys = match &args.partition_key_secret_file {
        Some(path) => Some(
            slidewin_server::partition_keys_from_file(path)
                .map_err(|e| format!("--partition-key-secret-file {e}"))?,
        ),
        None => None,
    };
    Ok(AnswerOptions {
        shadow_mode: args.shadow_mode,
        headers,
        near_limit_permille: args.near_limit_ratio,
        partition_keys,
    })
}

/// The certificates `--redis-ca`, `--redis-cert` and `--redis-key` name, read; none given,
/// `None`.
fn redis_tls(
    ca: Option<&std::path::Path>,
    client: Option<(&std::path::Path, &std::path::Path)>,
) -> Result<Option<RedisTls>, String> {
    let read = |path: &std::path::Path| {
        std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    if ca.is_none() && client.is_none() {
        return Ok(None);
    }
    Ok(Some(RedisTls {
        ca: ca.map(read).transpose()?,
        client: client
            .map(|(cert, key)| Ok::<_, String>((read(cert)?, read(key)?)))
            .transpose()?,
    }))
}

/// A duration as `--drain-timeout` takes it: seconds (`5`, `0.5`, `5s`) or milliseconds
/// (`500ms`), at most a day.
fn seconds(text: &str) -> Result<Duration, String> {
    within(text, 86_400.0)
}

/// Seconds or milliseconds, from 0 to `most` seconds.
fn within(text: &str, most: f64) -> Result<Duration, String> {
    let (number, scale) = match text.strip_suffix("ms") {
        Some(number) => (number, 1e-3),
        None => (text.strip_suffix('s').unwrap_or(text), 1.0),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a duration: give seconds (5, 0.5) or 500ms"))?;
    let secs = value * scale;
    if !(0.0..=most).contains(&secs) {
        let most_text = if most > 86_400.0 { "366 days" } else { "a day" };
        return Err(format!(
            "`{text}` is out of range: from 0 to {most_text} ({most} seconds)"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A connection's age as `--grpc-max-connection-age` takes it: as `--drain-timeout`, up to
/// a year.
fn age(text: &str) -> Result<Duration, String> {
    within(text, 366.0 * 86_400.0)
}

/// A share as `--near-limit-ratio` takes it (0.8), in thousandths.
fn ratio(text: &str) -> Result<u16, String> {
    match text.trim().parse::<f64>() {
        // In (0, 1], so the cast holds 1 to 1000.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Ok(share) if share > 0.0 && share <= 1.0 => Ok((share * 1000.0).round().max(1.0) as u16),
        _ => Err(format!(
            "`{text}` is not a share: give a number above 0, at most 1 (0.8)"
        )),
    }
}

/// A unit as `--max-override-unit` takes it: envoy's, in any case.
fn unit(text: &str) -> Result<Unit, String> {
    Unit::from_name(&text.to_ascii_lowercase()).ok_or_else(|| {
        format!("`{text}` is no unit: second, minute, hour, day, week, month or year")
    })
}

/// A size as `--max-memory` takes it: bytes, or a whole number of KiB, MiB or GiB.
fn bytes(text: &str) -> Result<usize, String> {
    let (number, scale) = [("GiB", 1usize << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)]
        .into_iter()
        .find_map(|(suffix, scale)| text.strip_suffix(suffix).map(|n| (n, scale)))
        .unwrap_or((text, 1));
    number
        .trim()
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("`{text}` is not a size: give bytes, or KiB, MiB or GiB (512MiB)"))
}

#[cfg(test)]
mod tests {
    use super::seconds;
    use std::time::Duration;

    #[test]
    fn sizes_and_units_are_read_as_the_help_says() {
        use super::{bytes, unit};
        assert_eq!(bytes("1GiB"), Ok(1 << 30));
        assert_eq!(bytes("512MiB"), Ok(512 << 20));
        assert_eq!(bytes("64KiB"), Ok(64 << 10));
        assert_eq!(bytes("1000"), Ok(1000));
        for bad in ["", "GiB", "1.5GiB", "-1", "1GB", "99999999999999999999GiB"] {
            assert!(bytes(bad).is_err(), "{bad}");
        }
        assert_eq!(unit("DAY"), Ok(slidewin_server::Unit::Day));
        assert!(unit("fortnight").unwrap_err().contains("fortnight"));
    }

    #[test]
    fn drain_timeouts_are_read_in_seconds_or_milliseconds() {
        assert_eq!(seconds("5"), Ok(Duration::from_secs(5)));
        assert_eq!(seconds("0"), Ok(Duration::ZERO));
        assert_eq!(seconds("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(seconds("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(seconds("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["", "s", "-1", "NaN", "inf", "1e9", "5m", "ten"] {
            assert!(seconds(bad).is_err(), "{bad}");
        }
        assert!(seconds("1e9").unwrap_err().contains("a day"));
    }
}
