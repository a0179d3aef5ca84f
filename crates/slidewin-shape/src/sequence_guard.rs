//! [`SequenceGuard`]: numbers calls and keeps only results newer than the newest accepted.

use std::sync::atomic::{AtomicU64, Ordering};

/// A call's number from a [`SequenceGuard`], in the order they were issued.
///
/// ```
/// let guard = slidewin_shape::SequenceGuard::new();
/// let (a, b) = (guard.issue(), guard.issue());
/// assert!(a < b);
/// assert_eq!(b.get(), 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(u64);

impl Ticket {
    /// The number, from 1.
    ///
    /// ```
    /// assert_eq!(slidewin_shape::SequenceGuard::new().issue().get(), 1);
    /// ```
    #[must_use]
    pub fn get(self) -> u64 {
        self.0
    }
}

/// The last line of defence against stale results: give each call a
/// [`Ticket`] when it is made, and when its result comes back, [`accept`](SequenceGuard::accept)
/// it only if no later call's result has been accepted already.
///
/// For work that ignores cancellation: a result that arrives after a newer one was shown is
/// discarded instead of overwriting it. Lock-free; share it with an `Arc`.
///
/// # Example
///
/// ```
/// use slidewin_shape::SequenceGuard;
///
/// let guard = SequenceGuard::new();
/// let ru = guard.issue();
/// let rust = guard.issue();
/// assert!(guard.accept(rust)); // the newer answer came back first: show it
/// assert!(!guard.accept(ru)); // the older one, late: discard it
/// ```
#[derive(Debug, Default)]
pub struct SequenceGuard {
    issued: AtomicU64,
    accepted: AtomicU64,
}

impl SequenceGuard {
    /// A guard that has issued and accepted nothing.
    ///
    /// ```
    /// let guard = slidewin_shape::SequenceGuard::new();
    /// assert_eq!(guard.newest_accepted(), None);
    /// ```
    #[must_use]
    pub fn new() -> SequenceGuard {
        SequenceGuard::default()
    }

    /// The next ticket: later than every ticket issued before.
    ///
    /// ```
    /// let guard = slidewin_shape::SequenceGuard::new();
    /// assert!(guard.issue() < guard.issue());
    /// ```
    pub fn issue(&self) -> Ticket {
        Ticket(self.issued.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// Accepts the result of `ticket`'s call if no result of a later (or the same) ticket was
    /// accepted before: whether to use it.
    ///
    /// ```
    /// let guard = slidewin_shape::SequenceGuard::new();
    /// let t = guard.issue();
    /// assert!(guard.accept(t));
    /// assert!(!guard.accept(t)); // once
    /// ```
    pub fn accept(&self, ticket: Ticket) -> bool {
        self.accepted.fetch_max(ticket.0, Ordering::AcqRel) < ticket.0
    }

    /// Whether `ticket` is the latest issued: no call was made after it.
    ///
    /// ```
    /// let guard = slidewin_shape::SequenceGuard::new();
    /// let t = guard.issue();
    /// assert!(guard.is_latest(t));
    /// guard.issue();
    /// assert!(!guard.is_latest(t));
    /// ```
    #[must_use]
    pub fn is_latest(&self, ticket: Ticket) -> bool {
        self.issued.load(Ordering::Acquire) == ticket.0
    }

    /// The newest ticket accepted so far.
    ///
    /// ```
    /// let guard = slidewin_shape::SequenceGuard::new();
    /// let t = guard.issue();
    /// guard.accept(t);
    /// assert_eq!(guard.newest_accepted(), Some(t));
    /// ```
    #[must_use]
    pub fn newest_accepted(&self) -> Option<Ticket> {
        match self.accepted.load(Ordering::Acquire) {
            0 => None,
            n => Some(Ticket(n)),
        }
    }
}
