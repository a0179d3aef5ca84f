//! slidewin's rate limiters on Redis and Redis Cluster: the same answers as in memory, held
//! across every process that shares the Redis.
//!
//! [`Rules`] are a [`RuleSet`](slidewin::limit::RuleSet) of slidewin's named rules, checked for
//! what Redis can represent; a [`RedisLimiter`] checks a key under all of them in one atomic
//! Lua script call, all-or-nothing, each rule's state under a Redis key of its own. Its
//! methods follow slidewin's time vocabulary: [`check`](RedisLimiter::check) takes an explicit
//! time on the Unix timeline, [`check_now`](RedisLimiter::check_now) reads the Redis server's
//! clock, so that clients' clocks cannot disagree. Under load, checks that wait for Redis go
//! together as one script call ([`RedisLimiter::with_batch_limit`]); on a cluster, one per
//! node, its keys of many slots. The exact sliding log keeps its admission times packed in
//! one string, 7 bytes each (Redis's own docs give a sorted set for this, at about 118 bytes
//! an entry), counted by bisection in the script that appends to it, so that concurrent
//! clients can never over-admit: a time is added only when admitted.
//!
//! ```no_run
//! use slidewin::limit::{Kind, Rule, RuleSet};
//! use slidewin_redis::{FailurePolicy, RedisLimiter, Rules};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let redis = RedisLimiter::connect("redis://127.0.0.1:6379/")
//!     .await?
//!     .with_failure_policy(FailurePolicy::Closed);
//! let login = Rules::new(RuleSet::new([
//!     Rule::new("minute", Kind::SlidingLog, "5/minute".parse()?)?,
//!     Rule::new("hour", Kind::SlidingLog, "20/hour".parse()?)?,
//! ])?)?;
//! let decision = redis.check_now(&login, "alice", 1).await?;
//! if let Some(why) = decision.degraded() {
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
mod connect;
mod connection;
mod error;
mod limiter;
mod rules;
mod sentinel;
#[cfg(feature = "tls")]
mod tls;

pub use circuit::CircuitState;
pub use error::RedisError;
pub use limiter::{Check, FailurePolicy, RedisDecision, RedisLimiter};
pub use rules::Rules;
#[cfg(feature = "tls")]
pub use tls::RedisTls;

// The README's example is compiled as a test too.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
