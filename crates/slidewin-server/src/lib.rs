//! The slidewin rate-limit service: Envoy RLS v3 gRPC, envoy ratelimit's `POST /json` and YAML
//! config, Prometheus metrics and a live dashboard, on exact sliding windows in memory or Redis.
//!
//! The crate's README (below, compiled as a test) tells how to run and embed it.

pub use slidewin_redis::FailurePolicy;

mod access;
mod backend;
mod config;
mod config_nesting;
mod config_read;
mod config_view;
mod dashboard;
mod engine;
mod error;
mod metrics;
mod overrides;
mod run;
mod serve;
mod service;
mod snapshot;
mod top;
mod watch;

pub use access::{ADMIN_COOKIE, AdminHost, AdminHostError, AdminToken, AdminTokenError};
pub use backend::{RedisService, ServiceBackend};
pub use config::{
    Config, ConfigFileError, DEFAULT_ALGORITHM, Descriptor, Domain, Enforce, Limit, MAX_FILE_BYTES,
    MAX_LOG_LIMIT, Unit,
};
pub use config_nesting::MAX_FLOW_NESTING;
pub use config_read::CONFIG_READ_TIMEOUT;
pub use dashboard::dashboard_router;
pub use engine::{
    Bounds, Code, CurrentLimit, DescriptorStatus, Engine, Entry, LimitOverride, RateLimitRequest,
    RateLimitResponse, RequestDescriptor, RequestError,
};
pub use error::Error;
pub use metrics::Metrics;
pub use overrides::MAX_OVERRIDES;
pub use run::{BackendChoice, DEFAULT_MAX_MEMORY, EXAMPLE_CONFIG, RunOptions, run};
pub use serve::{
    ConnectionLimits, DEFAULT_DRAIN_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT,
    DEFAULT_HTTP2_KEEPALIVE_INTERVAL, DEFAULT_HTTP2_KEEPALIVE_TIMEOUT, DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES_IN_FLIGHT, DEFAULT_MAX_CALLS_IN_FLIGHT, DEFAULT_MAX_CONCURRENT_STREAMS,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_REQUEST_TIMEOUT, Listeners, ServeOptions, TlsFiles, serve,
};
pub use service::{LoadTally, MAX_BODY_BYTES, Service};
pub use snapshot::{
    BackendStatus, ConfigStatus, LoadError, PerSecond, RuleStats, Snapshot, SnapshotSource, TopKey,
    Totals,
};
pub use watch::{ConfigWatch, watch_config};

// The README's examples are compiled as tests too.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
