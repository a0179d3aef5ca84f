//! [`MemoryBudget`]: bytes that keyed limiters share, so that the memory their keys hold is
//! bounded in bytes, not only in keys.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::limit::CachePadded;

/// A number of bytes that [`Keyed`](crate::Keyed) limiters share
/// ([`Keyed::with_memory_budget`](crate::Keyed::with_memory_budget)): what their keys hold, a
/// key's entry, its own heap and its state's (a sliding log's stamps), is taken from it as the
/// key comes and as its state grows, and given back as the state shrinks and the key goes.
///
/// When the budget is spent, a new key is refused, and so is an admission that would grow a
/// key's state, both with [`LimitError::MemoryFull`](crate::limit::LimitError::MemoryFull):
/// a denial still comes as a denial, and every other check is unchanged. So the memory of
/// every limiter on one budget stays within it (a table's own growth is counted as twice each
/// entry's size, the most a table that doubles holds), whatever the keys and whatever their
/// clients send, and the refusals lift as keys go quiet.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use slidewin::{Keyed, Moment};
/// use slidewin::limit::{LimitError, MemoryBudget, SlidingLog};
///
/// let budget = Arc::new(MemoryBudget::new(1_000));
/// let limiter = Keyed::<u64, _>::new(SlidingLog::new("5/minute".parse()?)?)
///     .with_memory_budget(Arc::clone(&budget), |_| 0);
/// let mut admitted = 0;
/// for key in 0..100 {
///     match limiter.check(&key, Moment::ZERO, 1) {
///         Ok(decision) => admitted += usize::from(decision.allowed()),
///         Err(LimitError::MemoryFull { max_bytes }) => assert_eq!(max_bytes, 1_000),
///         Err(other) => return Err(other.into()),
///     }
/// }
/// assert!(admitted > 0 && admitted < 100);
/// assert!(budget.used_bytes() <= budget.max_bytes());
/// drop(limiter);
/// assert_eq!(budget.used_bytes(), 0); // a limiter dropped gives back all it held
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct MemoryBudget {
    max: usize,
    used: CachePadded<AtomicUsize>,
}

impl MemoryBudget {
    /// A budget of `max_bytes`, none of it taken.
    #[must_use]
    pub fn new(max_bytes: usize) -> MemoryBudget {
        MemoryBudget {
            max: max_bytes,
            used: CachePadded(AtomicUsize::new(0)),
        }
    }

    /// The bytes it holds at most.
    ///
    /// ```
    /// assert_eq!(slidewin::limit::MemoryBudget::new(64).max_bytes(), 64);
    /// ```
    #[must_use]
    pub fn max_bytes(&self) -> usize {
        self.max
    }

    /// The bytes the limiters on it hold now.
    ///
    /// ```
    /// assert_eq!(slidewin::limit::MemoryBudget::new(64).used_bytes(), 0);
    /// ```
    #[must_use]
    pub fn used_bytes(&self) -> usize {
        self.used.0.load(Ordering::Relaxed)
    }

    /// Takes `bytes`, if they are free.
    fn take(&self, bytes: usize) -> bool {
        self.used
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(bytes).filter(|&sum| sum <= self.max)
            })
            .is_ok()
    }

    /// Takes `bytes` whether or not they are free: what a state came to hold beyond what was
    /// foreseen (never, by the algorithms' own accounts).
    fn force(&self, bytes: usize) {
        self.used.0.fetch_add(bytes, Ordering::Relaxed);
    }

    fn give_back(&self, bytes: usize) {
        self.used.0.fetch_sub(bytes, Ordering::Relaxed);
    }
}

impl fmt::Debug for MemoryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryBudget")
            .field("max_bytes", &self.max)
            .field("used_bytes", &self.used_bytes())
            .finish()
    }
}

/// What a keyed limiter on a budget keeps: the budget, how to weigh a key, and what it holds of
/// the budget, given back when the limiter is dropped.
pub(crate) struct OnBudget<K> {
    pub(crate) shared: std::sync::Arc<MemoryBudget>,
    /// The heap bytes a key holds (a `String`'s text, say).
    key_heap: fn(&K) -> usize,
    held: AtomicUsize,
}

impl<K> OnBudget<K> {
    pub(crate) fn new(
        shared: std::sync::Arc<MemoryBudget>,
        key_heap: fn(&K) -> usize,
    ) -> OnBudget<K> {
        OnBudget {
            shared,
            key_heap,
            held: AtomicUsize::new(0),
        }
    }

    pub(crate) fn key_heap(&self) -> fn(&K) -> usize {
        self.key_heap
    }

    /// What `key` holds on the heap, with a state of `state_heap` bytes there.
    pub(crate) fn weigh(&self, key: &K, state_heap: usize) -> usize {
        (self.key_heap)(key) + state_heap
    }

    pub(crate) fn take(&self, bytes: usize) -> bool {
        let taken = self.shared.take(bytes);
        if taken {
            self.held.fetch_add(bytes, Ordering::Relaxed);
        }
        taken
    }

    pub(crate) fn give_back(&self, bytes: usize) {
        self.held.fetch_sub(bytes, Ordering::Relaxed);
        self.shared.give_back(bytes);
    }

    /// A state accounted at `accounted` bytes now holds `holds`.
    pub(crate) fn settle(&self, accounted: usize, holds: usize) {
        if holds < accounted {
            self.give_back(accounted - holds);
        } else if holds > accounted {
            self.held.fetch_add(holds - accounted, Ordering::Relaxed);
            self.shared.force(holds - accounted);
        }
    }
}

impl<K> Drop for OnBudget<K> {
    fn drop(&mut self) {
        self.shared.give_back(*self.held.get_mut());
    }
}

impl<K> fmt::Debug for OnBudget<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnBudget")
            .field("shared", &self.shared)
            .field("held", &self.held.load(Ordering::Relaxed))
            .finish()
    }
}
