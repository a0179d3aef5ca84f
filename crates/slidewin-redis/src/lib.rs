//! slidewin's rate limiters on Redis and Redis Cluster: the same answers as in memory, held
//! across every process that shares the Redis.
//!
//! A [`Rule`] is one of slidewin's four algorithms with a quota; a [`RedisLimiter`] runs each
//! check atomically in a Lua script, reading the time from the Redis server so that clients'
//! clocks cannot disagree. Under load, checks that wait for Redis go together as one script
//! call ([`RedisLimiter::with_batch_limit`]); on a cluster, one per node, its keys of many
//! slots. The exact sliding log is seed 001's sorted set done so that
//! concurrent clients can never over-admit: the entries of the last span counted, and added
//! only when admitted, each with a unique member; those one span old or more removed
//! (`ZREMRANGEBYSCORE key 0 now-span`) once the log's time enters a new stretch of its idle
//! time, so that a log holds no entry older than a span and a stretch (about two spans).
//!
//! ```no_run
//! use slidewin_redis::{FailurePolicy, RedisLimiter, Rule};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let redis = RedisLimiter::connect("redis://127.0.0.1:6379/")
//!     .await?
//!     .with_failure_policy(FailurePolicy::Closed);
//! let api = Rule::sliding_log("100/minute".parse()?)?;
//! let decision = redis.check(&api, "client-42", 1).await?;
//! if let Some(why) = decision.made_without_redis() {
//!     eprintln!("Redis is away ({why}): denied to be safe");
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Faults are errors that say which ([`RedisError`]) and where (the URL, its password hidden, or
//! the cluster node): Redis down, a timeout, a cluster node lost. The first one opens the
//! limiter's circuit: while Redis is known to be down, checks answer at once, without waiting
//! for it, and a probe in the background finds it when it is back (see
//! [`RedisLimiter`](RedisLimiter#when-redis-is-down)).

mod batch;
mod circuit;
mod cluster;
mod connection;
mod error;
mod limiter;
mod rule;

pub use circuit::CircuitState;
pub use error::RedisError;
pub use limiter::{Check, FailurePolicy, RedisDecision, RedisLimiter};
pub use rule::{RedisAlgorithm, Rule};

// The README's example is compiled as a test too.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
