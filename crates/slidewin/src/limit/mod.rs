//! Rate limits: a [`Quota`], an [`Algorithm`] to enforce it, and a holder for its state.
//!
//! # Choosing
//!
//! A [`Quota`] says how much per how long, in code or in the notation people already write
//! (`"100/minute"`, `"5 per 10 seconds"`, `"10/s burst 20"`). An algorithm enforces it:
//!
//! | algorithm | guarantee in any window `(t - span, t]` | state | shared without a lock |
//! |---|---|---|---|
//! | [`SlidingLog`] | **exact**: at most `limit` | a 16-byte stamp per admission in the window (at most `limit`, whatever the costs) | no |
//! | [`SlidingCounter`] | approximate: up to `2 × limit` after a burst at a window's end | 24 bytes | no |
//! | [`FixedWindow`] | `2 × limit` across a window boundary | 16 bytes (one word packed) | yes |
//! | [`Gcra`] | `burst + limit - 1` (a token bucket) | 8 bytes | yes |
//! | [`Calendar`] | `2 × limit` across a calendar boundary (a day, week, month or year in a zone) | 24 bytes | no |
//!
//! A holder keeps the state where it is needed, and every one answers `check(now, cost)` and
//! `peek(now, cost)` (and their `_now` twins, which read a [`Clock`](crate::Clock)) with the same
//! [`Decision`]. A denied request consumes nothing.
//!
//! | holder | for | |
//! |---|---|---|
//! | [`Limiter`] | one owner, `&mut self` | the fastest |
//! | [`SharedLimiter`] | threads, `&self` | lock-free for `Gcra` and `FixedWindow`, a mutex for the others |
//! | [`Keyed`] | a limiter per key (per user, per IP), `&self` | sharded; memory follows the live keys, with an optional exact cap on keys and an optional [`MemoryBudget`] in bytes |
//!
//! Several limits on one key, a login allowed 5 times a minute **and** 20 times an hour, are a
//! [`RuleSet`] of named [`Rule`]s, whose algorithms are chosen at run time ([`Kind`]). It is an
//! algorithm too: a check admits only if every rule does, consumes from all or none, and
//! answers [`Decisions`], one per rule. `slidewin-redis` checks the same rule sets on Redis
//! with the same answers.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use slidewin::{Keyed, Limiter, Moment};
//! use slidewin::limit::{Gcra, Kind, Rule, RuleSet, SlidingLog};
//!
//! // The exact limit: 3 in any 10 seconds.
//! let mut limiter = Limiter::new(SlidingLog::new("3 per 10 seconds".parse()?)?);
//! for _ in 0..3 {
//!     assert!(limiter.check(Moment::from_secs(1), 1)?.allowed());
//! }
//! let denied = limiter.check(Moment::from_secs(4), 1)?;
//! assert_eq!(denied.retry_after(), Some(Duration::from_secs(7))); // at 11 s, 1 s has left
//!
//! // A token bucket per client, in memory that follows the clients being limited.
//! let per_ip = Keyed::<String, _>::new(Gcra::new("10/s burst 20".parse()?)?)
//!     .with_max_keys(100_000)?;
//! assert_eq!(per_ip.check("203.0.113.7", Moment::ZERO, 5)?.remaining(), 15);
//!
//! // Two rules per user, all or nothing.
//! let login = Keyed::<String, _>::new(RuleSet::new([
//!     Rule::new("minute", Kind::SlidingLog, "5/minute".parse()?)?,
//!     Rule::new("hour", Kind::SlidingLog, "20/hour".parse()?)?,
//! ])?);
//! let decisions = login.check("alice", Moment::ZERO, 1)?;
//! assert!(decisions.allowed());
//! assert_eq!(decisions.as_slice().len(), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod algorithm;
mod binding;
mod budget;
mod calendar;
mod decision;
mod fixed_window;
mod gcra;
mod keyed;
mod leases;
mod limiter;
mod quota;
mod reservation;
mod rule;
mod sliding_counter;
mod sliding_log;

use crate::time::Moment;

pub use algorithm::Algorithm;
pub use binding::Binding;
pub use budget::MemoryBudget;
pub use calendar::{Calendar, CalendarQuota, CalendarUnit, CalendarWindow};
pub use decision::{Decision, Decisions, LimitError};
pub use fixed_window::FixedWindow;
pub use gcra::Gcra;
/// What [`Keyed::check_equivalent`] looks a key up by: hashbrown's, re-exported.
pub use hashbrown::Equivalent;
pub use keyed::Keyed;
pub use leases::Leases;
pub use limiter::{Limiter, SharedLimiter};
pub use quota::{ParseQuotaError, Quota};
pub use reservation::Reservation;
pub use rule::{Kind, Rule, RuleSet};
pub use sliding_counter::SlidingCounter;
pub use sliding_log::SlidingLog;

/// A value on cache lines of its own: state that threads write (an atomic, a lock) must not
/// share a line with what they only read (the rules), or every write evicts the readers' copy.
#[derive(Debug, Default)]
#[repr(align(128))]
struct CachePadded<T>(T);

/// Nanoseconds from `now` until `at` (on the timeline), zero if `at` has passed; `u64::MAX`
/// past the end of the timeline.
#[inline]
fn until(at: u128, now: Moment) -> u64 {
    let nanos = at.saturating_sub(u128::from(now.as_nanos()));
    u64::try_from(nanos).unwrap_or(u64::MAX)
}
