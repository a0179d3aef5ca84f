//! The slidewin rate-limit service: Envoy RLS v3 gRPC, envoy ratelimit's `POST /json` and YAML
//! config, Prometheus metrics and a live dashboard, on exact sliding windows in memory or Redis.
//!
//! The crate's README (below, compiled as a test) tells how to run and embed it.
//!
//! It exports what `slidewin serve` and a program that embeds the service use, and no more:
//! [`run`] and its options; the [`Engine`] with its [`Config`] and request types; the
//! [`Endpoints`] and [`serve`] with its listeners and bounds; [`Snapshot`], what
//! `GET /api/stats` answers. Each fixed bound is a constant of what it bounds
//! ([`Config::MAX_FILE_BYTES`], [`Bounds::MAX_BODY_BYTES`], [`ConnectionLimits::DEFAULT_MAX_CONNECTIONS`]).

pub use slidewin_redis::{FailurePolicy, RedisTls};

mod access;
mod config;
mod config_nesting;
mod config_read;
mod config_view;
mod dashboard;
mod endpoints;
mod engine;
mod error;
mod metrics;
mod overrides;
mod redis;
mod run;
mod serve;
mod snapshot;
mod top;
mod watch;

pub use access::{
    AdminHost, AdminHostError, AdminToken, AdminTokenError, partition_keys_from_file,
};
pub use config::{Config, ConfigFileError, Unit};
pub use endpoints::health::Health;
pub use endpoints::{Endpoints, LoadTally};
pub use engine::{
    AnswerOptions, Bounds, Code, CurrentLimit, DescriptorStatus, Engine, Entry, LimitOverride,
    RateLimitRequest, RateLimitResponse, RequestDescriptor, RequestError, ResponseHeaders,
    SPAN_TARGET, join_callers_traces,
};
pub use error::Error;
pub use metrics::Metrics;
pub use redis::{connect_redis, connect_redis_cluster, connect_redis_sentinel};
pub use run::{BackendChoice, RunOptions, run};
pub use serve::{ConnectionLimits, Listeners, MetricsListener, ServeOptions, TlsFiles, serve};
pub use snapshot::{
    BackendStatus, ConfigStatus, LimitStats, LoadError, PerSecond, RuleStats, Snapshot, TopKey,
    Totals,
};
pub use watch::{ConfigWatch, watch_config};

// The README's examples are compiled as tests too.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
