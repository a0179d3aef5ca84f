//! [`BackendError`]: a check a backend could not decide.

use std::fmt;

use slidewin::limit::LimitError;

/// A check a backend could not decide.
///
/// ```
/// use slidewin_store::BackendError;
/// let err = BackendError::CostTooHigh { cost: 20, max: 10 };
/// assert_eq!(err.to_string(), "a cost of 20 can never be admitted: the most at once is 10");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendError {
    /// The cost is more than the rules ever admit at once.
    CostTooHigh {
        /// The cost asked for.
        cost: u64,
        /// The most the rules admit at once.
        max: u64,
    },
    /// The store holds its cap of keys, none idle: a new key must wait.
    KeysFull {
        /// The cap.
        cap: usize,
    },
    /// The stores' memory budget ([`Memory::with_max_memory`](crate::Memory::with_max_memory)) is spent: a new key, or a key's
    /// growth, must wait.
    MemoryFull {
        /// The budget, in bytes.
        max_bytes: usize,
    },
    /// The store could not answer, and no failure policy answers for it.
    Unavailable {
        /// What failed (for logs: it may name internal addresses).
        detail: String,
    },
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendError::CostTooHigh { cost, max } => LimitError::CostTooHigh {
                cost: *cost,
                max: *max,
            }
            .fmt(f),
            BackendError::KeysFull { cap } => LimitError::KeysFull { cap: *cap }.fmt(f),
            BackendError::MemoryFull { max_bytes } => LimitError::MemoryFull {
                max_bytes: *max_bytes,
            }
            .fmt(f),
            BackendError::Unavailable { detail } => {
                write!(f, "the rate limit store could not answer: {detail}")
            }
        }
    }
}

impl std::error::Error for BackendError {}

impl From<LimitError> for BackendError {
    fn from(err: LimitError) -> BackendError {
        match err {
            LimitError::CostTooHigh { cost, max } => BackendError::CostTooHigh { cost, max },
            LimitError::KeysFull { cap } => BackendError::KeysFull { cap },
            LimitError::MemoryFull { max_bytes } => BackendError::MemoryFull { max_bytes },
            // A variant the core adds later: still an error, named.
            other => BackendError::Unavailable {
                detail: other.to_string(),
            },
        }
    }
}
