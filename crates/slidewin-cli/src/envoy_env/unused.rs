//! envoy ratelimit's variables that slidewin does not use (named in a warning) and those
//! whose meaning it cannot keep (refused), with why.

/// Variables that only tune envoy ratelimit's own clients and stats: named in a warning when
/// set, and not used.
pub(super) const TUNING: &[(&str, &str)] = &[
    (
        "REDIS_POOL_SIZE",
        "slidewin multiplexes one connection per Redis node",
    ),
    (
        "REDIS_POOL_ON_EMPTY_BEHAVIOR",
        "slidewin multiplexes one connection per Redis node",
    ),
    (
        "REDIS_POOL_ON_EMPTY_WAIT_DURATION",
        "slidewin multiplexes one connection per Redis node",
    ),
    (
        "REDIS_PIPELINE_WINDOW",
        "slidewin batches the checks in flight on its own",
    ),
    (
        "REDIS_PIPELINE_LIMIT",
        "slidewin batches the checks in flight on its own",
    ),
    (
        "REDIS_CLUSTER_PIPELINE_PARALLELISM",
        "slidewin batches the checks in flight on its own",
    ),
    (
        "REDIS_TIMEOUT",
        "slidewin waits 1 s for Redis, then answers by --failure-policy",
    ),
    (
        "REDIS_STARTUP_INITIAL_INTERVAL",
        "slidewin starts without Redis and probes it",
    ),
    (
        "REDIS_STARTUP_MAX_INTERVAL",
        "slidewin starts without Redis and probes it",
    ),
    (
        "REDIS_STARTUP_MAX_ELAPSED_TIME",
        "slidewin starts without Redis and probes it",
    ),
    (
        "REDIS_PERSECOND",
        "per-second limits are kept in REDIS_URL's Redis with the others",
    ),
    (
        "REDIS_PERSECOND_URL",
        "per-second limits are kept in REDIS_URL's Redis with the others",
    ),
    (
        "EXPIRATION_JITTER_MAX_SECONDS",
        "a sliding log's key expires when its last stamp does",
    ),
    (
        "STATSD_HOST",
        "slidewin's metrics are Prometheus's (USE_PROMETHEUS)",
    ),
    (
        "STATSD_PORT",
        "slidewin's metrics are Prometheus's (USE_PROMETHEUS)",
    ),
    (
        "USE_DOG_STATSD",
        "slidewin's metrics are Prometheus's (USE_PROMETHEUS)",
    ),
    (
        "USE_DOG_STATSD_MOGRIFIERS",
        "slidewin's metrics are Prometheus's (USE_PROMETHEUS)",
    ),
    ("EXTRA_TAGS", "slidewin's metrics carry no extra labels"),
    (
        "STATS_FLUSH_INTERVAL",
        "Prometheus reads the metrics when it scrapes",
    ),
    (
        "DISABLE_STATS",
        "slidewin always counts; leave USE_PROMETHEUS off not to serve them",
    ),
    (
        "PROMETHEUS_MAPPER_YAML",
        "slidewin's metrics have their own names",
    ),
    (
        "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS",
        "slidewin's times are in seconds",
    ),
    (
        "GRPC_MAX_CONNECTION_AGE_GRACE",
        "an aged connection's calls are answered, then it closes",
    ),
    (
        "RESPONSE_DYNAMIC_METADATA",
        "slidewin sets no dynamic metadata",
    ),
    (
        "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
        "slidewin starts only with a config loaded",
    ),
];

/// Variables whose meaning slidewin cannot keep when they are set to anything but these
/// values: the start stops, naming them.
pub(super) const REFUSED: &[(&str, &[&str], &str)] = &[
    (
        "BACKEND_TYPE",
        &["redis"],
        "slidewin keeps counts in Redis or in memory",
    ),
    (
        "CONFIG_TYPE",
        &["file"],
        "slidewin reads its config from files",
    ),
    (
        "GRPC_UDS",
        &[""],
        "slidewin's gRPC listens on TCP (GRPC_HOST, GRPC_PORT)",
    ),
    (
        "GRPC_CLIENT_TLS_SAN",
        &[""],
        "slidewin does not check a client certificate's SAN",
    ),
    (
        "QUOTA_MODE",
        &["false"],
        "set quota_mode on the descriptors instead",
    ),
    (
        "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION",
        &["false"],
        "slidewin always verifies it",
    ),
    (
        "FORCE_START_WITHOUT_INITIAL_CONFIG",
        &["false"],
        "slidewin starts only with a config",
    ),
];
