//! The slidewin rate-limit service.

pub use slidewin_redis::FailurePolicy;

mod backend;
mod config;
mod config_view;
mod dashboard;
mod engine;
mod metrics;
mod run;
mod serve;
mod service;
mod snapshot;
mod top;

pub use backend::{RedisService, ServiceBackend};
pub use config::{
    Config, ConfigFileError, DEFAULT_ALGORITHM, Descriptor, Domain, Enforce, Limit, MAX_FILE_BYTES,
    Unit,
};
pub use dashboard::dashboard_router;
pub use engine::{
    Bounds, Code, CurrentLimit, DescriptorStatus, Engine, Entry, RateLimitRequest,
    RateLimitResponse, RequestDescriptor, RequestError,
};
pub use metrics::Metrics;
pub use run::{BackendChoice, EXAMPLE_CONFIG, RunOptions, run};
pub use serve::{ConfigWatch, Listeners, ServeOptions, serve, watch_config};
pub use service::{LoadTally, MAX_BODY_BYTES, Service};
pub use snapshot::{
    BackendStatus, ConfigStatus, LoadError, PerSecond, RuleStats, Snapshot, SnapshotSource, TopKey,
    Totals,
};
