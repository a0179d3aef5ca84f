//! Rate limits in one process: four algorithms behind one API.
//!
//! See the crate documentation's "Rate limits" section for the overview.

mod decision;
mod fixed_window;
mod gcra;
mod keyed;
mod limiter;
mod quota;
mod sliding_counter;
mod sliding_log;

use crate::time::Moment;

pub use decision::{Decision, LimitError};
pub use fixed_window::{FixedWindow, FixedWindowState};
pub use gcra::Gcra;
pub use keyed::Keyed;
pub use limiter::{Algorithm, AtomicAlgorithm, AtomicLimiter, Limiter, SharedLimiter};
pub use quota::{Quota, QuotaError};
pub use sliding_counter::{SlidingCounter, SlidingCounterState};
pub use sliding_log::{SlidingLog, SlidingLogState};

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
