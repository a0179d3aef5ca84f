//! An exact sliding window of events: [`EventWindow`] keeps every event of the last `span`,
//! each with a payload, and hands each one to a handler when it leaves.
//!
//! Pick it when each event matters (who failed to log in, and when) or a count must be exact.
//! It holds every live event; when figures are enough (a sum, a rate, a mean, request counts),
//! the bucketed structures of [`stats`](crate::stats) hold a bucket's worth instead. For rate
//! limits, see the limiters (a sliding log is an event window of admissions).
//!
//! | type | what it is |
//! |---|---|
//! | [`EventWindow`] | the window: `record`, `expire` with a handler, `count_in`, memory given back after a burst |
//! | [`Events`] | an iterator over a window's events, oldest first |
//!
//! # Example
//!
//! A login throttle: refuse a user after 3 failures in the last 10 seconds.
//!
//! ```
//! use std::time::Duration;
//! use slidewin::{EventWindow, Moment};
//!
//! let mut failures = EventWindow::new(Duration::from_secs(10))?;
//! for s in [1, 4, 9] {
//!     failures.record(Moment::from_secs(s), "mallory");
//! }
//! let refused = |w: &EventWindow<&str>, now| w.count_in(now) >= 3;
//! assert!(refused(&failures, Moment::from_secs(10)));
//! assert!(!refused(&failures, Moment::from_secs(11))); // the failure at 1 s has left
//!
//! let mut forgotten = Vec::new();
//! failures.expire(Moment::from_secs(11), |(t, user)| forgotten.push(format!("{user} at {t}")));
//! assert_eq!(forgotten, ["mallory at 1s"]);
//! # Ok::<(), slidewin::ConfigError>(())
//! ```

use std::fmt;
use std::iter::FusedIterator;
use std::slice;
use std::time::Duration;

use crate::error::ConfigError;
use crate::slide_vec::{SlideVec, gallop};
use crate::time::{Clock, Moment, duration_nanos};

/// An exact sliding window of events: every event of the last `span`, each with a payload.
///
/// An event recorded at `t` is inside the window at `now` when `now - span < t <= now`, the
/// half-open interval `(now - span, now]`. An event exactly `span` old has left. (The array of
/// Perl's `LinkedList::Single` sliding-window example keeps it; we don't, so that the windows
/// ending at `now - span` and at `now` share no event and every structure and backend of
/// slidewin counts the same events.)
///
/// * [`record`](EventWindow::record) adds an event. Events usually arrive in time order and
///   go on the end in O(1); a late one goes into its place by time (ties keep arrival order), so
///   the events are always sorted and the expired ones are always a prefix.
/// * [`expire`](EventWindow::expire) takes every event that has left the window out first,
///   then hands each to a handler, oldest first, by value: the payload is dropped as soon as the
///   handler returns (or kept, if the handler moves it somewhere).
/// * Memory comes back: when a burst expires, the buffer shrinks to fit what is live, with a
///   policy that keeps `record` and `expire` amortized O(1) (see [`capacity`](EventWindow::capacity)).
/// * An optional cap ([`with_max_len`](EventWindow::with_max_len)) bounds the number of events;
///   a record beyond it evicts the oldest.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::{EventWindow, Moment};
///
/// let mut failures = EventWindow::new(Duration::from_secs(10))?;
/// failures.record(Moment::from_secs(1), "alice");
/// failures.record(Moment::from_secs(4), "alice");
/// failures.record(Moment::from_secs(9), "alice");
/// assert_eq!(failures.len(), 3);
///
/// // At 11 s the event of 1 s has left (it is exactly 10 s old); the others have not.
/// let mut forgotten = Vec::new();
/// let n = failures.expire(Moment::from_secs(11), |e| forgotten.push(e));
/// assert_eq!(n, 1);
/// assert_eq!(forgotten, [(Moment::from_secs(1), "alice")]);
/// assert_eq!(failures.count_in(Moment::from_secs(14)), 1); // only 9 s is inside (4 s, 14 s]
/// # Ok::<(), slidewin::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct EventWindow<T> {
    /// The span in nanoseconds; never zero.
    span: u64,
    /// The cap on the number of events; `usize::MAX` when uncapped, which no window reaches.
    /// A plain number, so `record` checks it with one comparison.
    max_len: usize,
    /// Sorted by time; equal times in arrival order.
    events: SlideVec<(Moment, T)>,
    /// No event is later than this; zero when the window is empty. Cheaper to compare with
    /// than the newest event.
    newest_bound: Moment,
}

impl<T> EventWindow<T> {
    /// An empty window of the given span.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroSpan`] for a zero span, [`ConfigError::SpanTooLong`] for a span past
    /// 584 years.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{ConfigError, EventWindow};
    ///
    /// let w = EventWindow::<u32>::new(Duration::from_millis(1_500))?;
    /// assert_eq!(w.span(), Duration::from_millis(1_500));
    /// assert!(w.is_empty());
    /// assert_eq!(EventWindow::<u32>::new(Duration::ZERO).unwrap_err(), ConfigError::ZeroSpan);
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn new(span: Duration) -> Result<EventWindow<T>, ConfigError> {
        let nanos = duration_nanos(span).ok_or(ConfigError::SpanTooLong { span })?;
        if nanos == 0 {
            return Err(ConfigError::ZeroSpan);
        }
        Ok(EventWindow {
            span: nanos,
            max_len: usize::MAX,
            events: SlideVec::new(),
            newest_bound: Moment::ZERO,
        })
    }

    /// An empty window of the given span that holds at most `max_len` events: a record beyond
    /// the cap evicts the oldest event (see [`record`](EventWindow::record)).
    ///
    /// # Errors
    ///
    /// As [`new`](EventWindow::new), and [`ConfigError::ZeroMaxLen`] for a cap of zero.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{EventWindow, Moment};
    ///
    /// let mut w = EventWindow::with_max_len(Duration::from_secs(60), 2)?;
    /// assert_eq!(w.record(Moment::from_secs(1), 'a'), None);
    /// assert_eq!(w.record(Moment::from_secs(2), 'b'), None);
    /// assert_eq!(w.record(Moment::from_secs(3), 'c'), Some((Moment::from_secs(1), 'a')));
    /// assert_eq!(w.max_len(), Some(2));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    pub fn with_max_len(span: Duration, max_len: usize) -> Result<EventWindow<T>, ConfigError> {
        if max_len == 0 {
            return Err(ConfigError::ZeroMaxLen);
        }
        let mut window = EventWindow::new(span)?;
        window.max_len = max_len;
        Ok(window)
    }

    /// The span of the window.
    ///
    /// ```
    /// use std::time::Duration;
    /// let w = slidewin::EventWindow::<()>::new(Duration::from_secs(10))?;
    /// assert_eq!(w.span(), Duration::from_secs(10));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn span(&self) -> Duration {
        Duration::from_nanos(self.span)
    }

    /// The cap on the number of events, if there is one (a cap of `usize::MAX` is none).
    ///
    /// ```
    /// use std::time::Duration;
    /// let w = slidewin::EventWindow::<()>::new(Duration::from_secs(10))?;
    /// assert_eq!(w.max_len(), None);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn max_len(&self) -> Option<usize> {
        (self.max_len != usize::MAX).then_some(self.max_len)
    }

    /// Records an event at `t`.
    ///
    /// An event older than the newest goes into its place by time, after any event with the
    /// same time. If the window has a cap and is full, the oldest event (which may be this one)
    /// is evicted and returned; otherwise `None`. Use [`record_with`](EventWindow::record_with)
    /// to hand evictions to the same handler as [`expire`](EventWindow::expire).
    ///
    /// Amortized O(1) in time order; a late event costs a binary search and a shift of the
    /// events after it.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{EventWindow, Moment};
    ///
    /// let mut w = EventWindow::new(Duration::from_secs(60))?;
    /// w.record(Moment::from_secs(5), "late");
    /// w.record(Moment::from_secs(3), "early");
    /// w.record(Moment::from_secs(5), "later, same time");
    /// let order: Vec<_> = w.iter().map(|(_, p)| *p).collect();
    /// assert_eq!(order, ["early", "late", "later, same time"]);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[inline]
    pub fn record(&mut self, t: Moment, payload: T) -> Option<(Moment, T)> {
        // No call on this path (`has_room` rules out growth), so a caller's loop can keep the
        // window in registers.
        if t >= self.newest_bound && self.events.len() < self.max_len && self.events.has_room() {
            self.newest_bound = t;
            self.events.push((t, payload));
            None
        } else {
            self.record_slow(t, payload)
        }
    }

    /// `record` for a late event or a full window, out of line so that the common path stays
    /// small enough to inline.
    #[inline(never)]
    fn record_slow(&mut self, t: Moment, payload: T) -> Option<(Moment, T)> {
        if t < self.newest_bound {
            let at = self.events.as_slice().partition_point(|(e, _)| *e <= t);
            self.events.insert(at, (t, payload));
        } else {
            self.newest_bound = t;
            self.events.push((t, payload));
        }
        if self.events.len() > self.max_len {
            self.events.pop_front()
        } else {
            None
        }
    }

    /// [`record`](EventWindow::record) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{EventWindow, Moment};
    ///
    /// let clock = ManualClock::new(Moment::from_secs(3));
    /// let mut w = EventWindow::new(Duration::from_secs(10))?;
    /// w.record_now(&clock, "login");
    /// assert_eq!(w.newest(), Some((Moment::from_secs(3), &"login")));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[inline]
    pub fn record_now(&mut self, clock: &impl Clock, payload: T) -> Option<(Moment, T)> {
        self.record(clock.now(), payload)
    }

    /// Records an event at `t` as [`record`](EventWindow::record) does, and hands an event
    /// evicted by the cap to `handler`. Returns how many were evicted (0 or 1).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{EventWindow, Moment};
    ///
    /// let mut w = EventWindow::with_max_len(Duration::from_secs(60), 1)?;
    /// let mut gone = Vec::new();
    /// w.record_with(Moment::from_secs(1), 'a', |e| gone.push(e));
    /// let n = w.record_with(Moment::from_secs(2), 'b', |e| gone.push(e));
    /// assert_eq!((n, gone), (1, vec![(Moment::from_secs(1), 'a')]));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    pub fn record_with<F: FnOnce((Moment, T))>(
        &mut self,
        t: Moment,
        payload: T,
        handler: F,
    ) -> usize {
        match self.record(t, payload) {
            Some(evicted) => {
                handler(evicted);
                1
            }
            None => 0,
        }
    }

    /// [`record_with`](EventWindow::record_with) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{EventWindow, Moment};
    ///
    /// let clock = ManualClock::new(Moment::from_secs(1));
    /// let mut w = EventWindow::with_max_len(Duration::from_secs(60), 1)?;
    /// let mut gone = Vec::new();
    /// w.record_with_now(&clock, 'a', |e| gone.push(e));
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(w.record_with_now(&clock, 'b', |e| gone.push(e)), 1);
    /// assert_eq!(gone, [(Moment::from_secs(1), 'a')]);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    pub fn record_with_now<F: FnOnce((Moment, T))>(
        &mut self,
        clock: &impl Clock,
        payload: T,
        handler: F,
    ) -> usize {
        self.record_with(clock.now(), payload, handler)
    }

    /// Removes every event that has left the window at `now` (every event with
    /// `t <= now - span`), hands each to `handler` oldest first, and returns how many.
    ///
    /// All of them are out of the window before the handler sees the first, so a handler that
    /// panics leaves the window consistent (the expired events it had not seen yet are dropped
    /// during the unwind). Each payload is the handler's to keep or drop; one that is not kept
    /// is dropped before the next event is handed over. Time may go backwards: an earlier `now`
    /// simply expires nothing new.
    ///
    /// Amortized O(1) per expired event, and O(1) when nothing has expired. When a burst has
    /// expired the buffer shrinks (see [`capacity`](EventWindow::capacity)).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{EventWindow, Moment};
    ///
    /// let mut w = EventWindow::new(Duration::from_secs(10))?;
    /// for s in 0..5 {
    ///     w.record(Moment::from_secs(s), s);
    /// }
    /// let mut seen = Vec::new();
    /// assert_eq!(w.expire(Moment::from_secs(12), |(_, s)| seen.push(s)), 3); // 0, 1, 2 are <= 2 s
    /// assert_eq!(seen, [0, 1, 2]);
    /// assert_eq!(w.oldest(), Some((Moment::from_secs(3), &3)));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[inline]
    pub fn expire<F: FnMut((Moment, T))>(&mut self, now: Moment, handler: F) -> usize {
        let expired = self.expired_len(now);
        if expired > 0 {
            if expired == self.events.len() {
                self.newest_bound = Moment::ZERO;
            }
            self.events.take_front(expired, handler);
        }
        expired
    }

    /// [`expire`](EventWindow::expire) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{EventWindow, Moment};
    ///
    /// let clock = ManualClock::new(Moment::ZERO);
    /// let mut w = EventWindow::new(Duration::from_secs(10))?;
    /// w.record_now(&clock, 1);
    /// clock.advance(Duration::from_secs(10));
    /// let mut seen = Vec::new();
    /// assert_eq!(w.expire_now(&clock, |(_, x)| seen.push(x)), 1); // exactly 10 s old: gone
    /// assert_eq!(seen, [1]);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[inline]
    pub fn expire_now<F: FnMut((Moment, T))>(&mut self, clock: &impl Clock, handler: F) -> usize {
        self.expire(clock.now(), handler)
    }

    /// How many events are inside the window at `now`, `(now - span, now]`, without removing
    /// anything. Events newer than `now` are not counted. O(log n).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{EventWindow, Moment};
    ///
    /// let mut w = EventWindow::new(Duration::from_secs(10))?;
    /// for s in [0, 5, 10, 15] {
    ///     w.record(Moment::from_secs(s), ());
    /// }
    /// assert_eq!(w.count_in(Moment::from_secs(10)), 2); // (0 s, 10 s]: 5 and 10
    /// assert_eq!(w.count_in(Moment::from_secs(3)), 1); // only 0 s; 5 s is in the future
    /// assert_eq!(w.len(), 4); // nothing was removed
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn count_in(&self, now: Moment) -> usize {
        let events = self.events.as_slice();
        let up_to_now = events.partition_point(|(t, _)| *t <= now);
        let expired = self
            .cutoff(now)
            .map_or(0, |cutoff| events.partition_point(|(t, _)| *t <= cutoff));
        up_to_now - expired
    }

    /// [`count_in`](EventWindow::count_in) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::time::ManualClock;
    /// use slidewin::{EventWindow, Moment};
    ///
    /// let clock = ManualClock::new(Moment::from_secs(5));
    /// let mut w = EventWindow::new(Duration::from_secs(10))?;
    /// w.record(Moment::from_secs(1), ());
    /// w.record(Moment::from_secs(4), ());
    /// assert_eq!(w.count_in_now(&clock), 2);
    /// clock.set(Moment::from_secs(12));
    /// assert_eq!(w.count_in_now(&clock), 1); // (2 s, 12 s]
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn count_in_now(&self, clock: &impl Clock) -> usize {
        self.count_in(clock.now())
    }

    /// How many events the window holds.
    ///
    /// ```
    /// use std::time::Duration;
    /// let mut w = slidewin::EventWindow::new(Duration::from_secs(1))?;
    /// w.record(slidewin::Moment::ZERO, ());
    /// assert_eq!(w.len(), 1);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether the window holds no event.
    ///
    /// ```
    /// use std::time::Duration;
    /// let w = slidewin::EventWindow::<()>::new(Duration::from_secs(1))?;
    /// assert!(w.is_empty());
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.events.len() == 0
    }

    /// The oldest event, if any.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{EventWindow, Moment};
    /// let mut w = EventWindow::new(Duration::from_secs(10))?;
    /// w.record(Moment::from_secs(2), 'b');
    /// w.record(Moment::from_secs(1), 'a');
    /// assert_eq!(w.oldest(), Some((Moment::from_secs(1), &'a')));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn oldest(&self) -> Option<(Moment, &T)> {
        self.events.as_slice().first().map(|(t, p)| (*t, p))
    }

    /// The newest event, if any (the last recorded among equal times).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{EventWindow, Moment};
    /// let mut w = EventWindow::new(Duration::from_secs(10))?;
    /// w.record(Moment::from_secs(2), 'b');
    /// w.record(Moment::from_secs(1), 'a');
    /// assert_eq!(w.newest(), Some((Moment::from_secs(2), &'b')));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn newest(&self) -> Option<(Moment, &T)> {
        self.events.as_slice().last().map(|(t, p)| (*t, p))
    }

    /// The events, oldest first.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{EventWindow, Moment};
    /// let mut w = EventWindow::new(Duration::from_secs(10))?;
    /// w.record(Moment::from_secs(1), "a");
    /// w.record(Moment::from_secs(2), "b");
    /// let all: Vec<_> = w.iter().collect();
    /// assert_eq!(all, [(Moment::from_secs(1), &"a"), (Moment::from_secs(2), &"b")]);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    pub fn iter(&self) -> Events<'_, T> {
        Events {
            inner: self.events.as_slice().iter(),
        }
    }

    /// Drops every event, without a handler, and gives the memory back.
    ///
    /// ```
    /// use std::time::Duration;
    /// let mut w = slidewin::EventWindow::new(Duration::from_secs(1))?;
    /// w.record(slidewin::Moment::ZERO, ());
    /// w.clear();
    /// assert!(w.is_empty());
    /// assert_eq!(w.capacity(), 0);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    pub fn clear(&mut self) {
        self.events.clear();
        self.newest_bound = Moment::ZERO;
    }

    /// How many events the buffer has room for without reallocating, counting the room that
    /// expired events left at its front until it is reused. When
    /// [`expire`](EventWindow::expire) returns it is at most `max(8, 8 * len())`: the buffer
    /// follows the live events down after a burst.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{EventWindow, Moment};
    /// let mut w = EventWindow::new(Duration::from_secs(1))?;
    /// for i in 0..100_000 {
    ///     w.record(Moment::ZERO, i);
    /// }
    /// w.record(Moment::from_secs(5), -1);
    /// w.expire(Moment::from_secs(5), drop);
    /// assert_eq!(w.len(), 1);
    /// assert!(w.capacity() <= 8);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.events.capacity()
    }

    /// Events at or before this moment have left the window at `now`; `None` while `now` is
    /// less than one span from the origin (nothing can have left yet).
    fn cutoff(&self, now: Moment) -> Option<Moment> {
        now.as_nanos()
            .checked_sub(self.span)
            .map(Moment::from_nanos)
    }

    /// The length of the expired prefix at `now`.
    // Always inlined into `expire`, the hot path of a window that expires often; the compiler
    // does not do it on its own.
    #[inline(always)]
    fn expired_len(&self, now: Moment) -> usize {
        match self.cutoff(now) {
            Some(cutoff) => gallop(self.events.as_slice(), |e| e.0 <= cutoff),
            None => 0,
        }
    }
}

/// Shows the span, the cap and the events, oldest first.
///
/// ```
/// use std::time::Duration;
/// use slidewin::{EventWindow, Moment};
/// let mut w = EventWindow::new(Duration::from_secs(10))?;
/// w.record(Moment::from_secs(1), 'a');
/// assert_eq!(
///     format!("{w:?}"),
///     "EventWindow { span: 10s, max_len: None, events: [(Moment(1s), 'a')] }"
/// );
/// # Ok::<(), slidewin::ConfigError>(())
/// ```
impl<T: fmt::Debug> fmt::Debug for EventWindow<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventWindow")
            .field("span", &self.span())
            .field("max_len", &self.max_len())
            .field("events", &self.events)
            .finish()
    }
}

impl<'a, T> IntoIterator for &'a EventWindow<T> {
    type Item = (Moment, &'a T);
    type IntoIter = Events<'a, T>;

    fn into_iter(self) -> Events<'a, T> {
        self.iter()
    }
}

/// The events of an [`EventWindow`], oldest first; from [`EventWindow::iter`].
///
/// ```
/// use std::time::Duration;
/// use slidewin::{EventWindow, Moment};
/// let mut w = EventWindow::new(Duration::from_secs(10))?;
/// w.record(Moment::from_secs(1), 'a');
/// w.record(Moment::from_secs(2), 'b');
/// let mut it = w.iter();
/// assert_eq!(it.len(), 2);
/// assert_eq!(it.next_back(), Some((Moment::from_secs(2), &'b')));
/// # Ok::<(), slidewin::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Events<'a, T> {
    inner: slice::Iter<'a, (Moment, T)>,
}

impl<'a, T> Iterator for Events<'a, T> {
    type Item = (Moment, &'a T);

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|(t, p)| (*t, p))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<T> DoubleEndedIterator for Events<'_, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner.next_back().map(|(t, p)| (*t, p))
    }
}

impl<T> ExactSizeIterator for Events<'_, T> {}

impl<T> FusedIterator for Events<'_, T> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slide_vec::MIN_CAPACITY;
    use std::cell::RefCell;
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::rc::Rc;

    fn secs(s: u64) -> Moment {
        Moment::from_secs(s)
    }

    fn window<T>(span_secs: u64) -> EventWindow<T> {
        EventWindow::new(Duration::from_secs(span_secs)).unwrap()
    }

    fn times<T>(w: &EventWindow<T>) -> Vec<Moment> {
        w.iter().map(|(t, _)| t).collect()
    }

    /// What must hold after any operation: sorted by time, the cap respected, `oldest`,
    /// `newest` and `len` agreeing with the contents.
    fn assert_invariants<T: PartialEq + fmt::Debug>(w: &EventWindow<T>) {
        let all: Vec<_> = w.iter().collect();
        assert!(all.windows(2).all(|p| p[0].0 <= p[1].0), "not sorted");
        assert_eq!(all.len(), w.len());
        assert_eq!(w.is_empty(), all.is_empty());
        assert_eq!(w.oldest(), all.first().copied());
        assert_eq!(w.newest(), all.last().copied());
        assert_eq!(w.iter().rev().count(), w.len());
        assert!(w.newest().is_none_or(|(t, _)| t <= w.newest_bound));
        if w.is_empty() {
            assert_eq!(w.newest_bound, Moment::ZERO);
        }
        if let Some(max) = w.max_len() {
            assert!(w.len() <= max, "{} events over the cap {max}", w.len());
        }
    }

    /// After `expire`, the buffer's capacity follows the shrink policy.
    fn assert_capacity_policy<T>(w: &EventWindow<T>) {
        assert!(
            w.capacity() <= MIN_CAPACITY.max(8 * w.len()),
            "capacity {} for {} live events",
            w.capacity(),
            w.len()
        );
    }

    #[test]
    fn zero_and_overlong_spans_are_errors_naming_the_value() {
        assert_eq!(
            EventWindow::<()>::new(Duration::ZERO).unwrap_err(),
            ConfigError::ZeroSpan
        );
        let err = EventWindow::<()>::new(Duration::MAX).unwrap_err();
        assert_eq!(
            err,
            ConfigError::SpanTooLong {
                span: Duration::MAX
            }
        );
        assert!(err.to_string().contains(&format!("{:?}", Duration::MAX)));
        assert_eq!(
            EventWindow::<()>::with_max_len(Duration::from_secs(1), 0).unwrap_err(),
            ConfigError::ZeroMaxLen
        );
        // The shortest and the longest spans work.
        assert!(EventWindow::<()>::new(Duration::from_nanos(1)).is_ok());
        assert!(EventWindow::<()>::new(Duration::from_nanos(u64::MAX)).is_ok());
    }

    #[test]
    fn the_event_exactly_one_span_old_leaves() {
        let mut w = window(10);
        w.record(secs(5), 'a');
        w.record(secs(6), 'b');
        assert_eq!(w.count_in(secs(15)), 1, "5 s is not inside (5 s, 15 s]");
        assert_eq!(w.expire(secs(14), drop), 0, "5 s is inside (4 s, 14 s]");
        let mut gone = Vec::new();
        assert_eq!(w.expire(secs(15), |e| gone.push(e)), 1);
        assert_eq!(gone, [(secs(5), 'a')]);
        assert_eq!(times(&w), [secs(6)]);
        // One nanosecond short of the boundary keeps it.
        assert_eq!(w.expire(secs(16) - Duration::from_nanos(1), drop), 0);
        assert_eq!(w.expire(secs(16), drop), 1);
        assert_invariants(&w);
    }

    #[test]
    fn empty_window_and_expire_on_empty() {
        let mut w = window::<u8>(10);
        assert_invariants(&w);
        assert_eq!(
            w.expire(Moment::MAX, |_| panic!("no event to hand over")),
            0
        );
        assert_eq!(w.count_in(Moment::MAX), 0);
        assert_eq!(w.oldest(), None);
        assert_eq!(w.newest(), None);
        assert_eq!(w.iter().next(), None);
        assert_invariants(&w);
    }

    #[test]
    fn one_element() {
        let mut w = window(1);
        w.record(secs(3), "x");
        assert_eq!(w.oldest(), w.newest());
        assert_eq!(w.count_in(secs(3)), 1);
        assert_eq!(w.count_in(secs(2)), 0, "not yet recorded at 2 s");
        assert_eq!(w.count_in(secs(4)), 0);
        assert_eq!(w.expire(secs(3), drop), 0);
        assert_eq!(w.expire(secs(4), drop), 1);
        assert!(w.is_empty());
    }

    #[test]
    fn equal_timestamps_keep_arrival_order_and_leave_together() {
        let mut w = window(10);
        for p in 0..5 {
            w.record(secs(1), p);
        }
        w.record(secs(0), -1); // late, before all of them
        w.record(secs(1), 5); // late relative to nothing: same time as the newest
        let order: Vec<i32> = w.iter().map(|(_, p)| *p).collect();
        assert_eq!(order, [-1, 0, 1, 2, 3, 4, 5]);
        assert_eq!(w.count_in(secs(10)), 6);
        let mut gone = Vec::new();
        assert_eq!(w.expire(secs(11), |(_, p)| gone.push(p)), 7);
        assert_eq!(gone, [-1, 0, 1, 2, 3, 4, 5]);
        assert_invariants(&w);
    }

    #[test]
    fn out_of_order_records_go_into_place() {
        let mut w = window(100);
        for s in [10, 30, 20, 5, 30, 25, 40] {
            w.record(secs(s), s);
            assert_invariants(&w);
        }
        assert_eq!(times(&w), [5, 10, 20, 25, 30, 30, 40].map(secs).to_vec());
        // The expired events are exactly the prefix older than the cutoff.
        let mut gone = Vec::new();
        assert_eq!(w.expire(secs(125), |(t, _)| gone.push(t)), 4);
        assert_eq!(gone, [5, 10, 20, 25].map(secs).to_vec());
    }

    #[test]
    fn a_record_already_out_of_the_window_leaves_at_the_next_expire() {
        let mut w = window(10);
        w.record(secs(100), 'n');
        assert_eq!(w.expire(secs(100), drop), 0);
        w.record(secs(1), 'o'); // 99 s late
        assert_eq!(w.count_in(secs(100)), 1);
        let mut gone = Vec::new();
        assert_eq!(w.expire(secs(100), |(_, p)| gone.push(p)), 1);
        assert_eq!(gone, ['o']);
    }

    #[test]
    fn a_jump_far_ahead_empties_everything() {
        let mut w = window(10);
        for i in 0..1_000 {
            w.record(Moment::from_millis(i), i);
        }
        assert_eq!(w.expire(Moment::MAX, drop), 1_000);
        assert!(w.is_empty());
        assert_capacity_policy(&w);
        // ... and the window works afterwards.
        w.record(Moment::MAX, 7);
        assert_eq!(w.count_in(Moment::MAX), 1);
    }

    #[test]
    fn time_going_backwards_expires_nothing_new() {
        let mut w = window(10);
        for s in 0..20 {
            w.record(secs(s), s);
        }
        assert_eq!(w.expire(secs(15), drop), 6); // 0..=5
        assert_eq!(w.expire(secs(3), drop), 0);
        assert_eq!(w.count_in(secs(3)), 0, "6..20 are all after 3 s");
        assert_eq!(w.expire(secs(16), drop), 1);
        assert_eq!(w.oldest(), Some((secs(7), &7)));
    }

    #[test]
    fn near_the_origin_nothing_has_left() {
        let mut w = EventWindow::new(Duration::from_nanos(u64::MAX)).unwrap();
        w.record(Moment::ZERO, ());
        assert_eq!(w.expire(Moment::from_secs(1_000_000), drop), 0);
        assert_eq!(w.count_in(Moment::ZERO), 1);
        assert_eq!(w.expire(Moment::MAX, drop), 1);
    }

    #[test]
    fn the_cap_evicts_the_oldest_through_the_handler() {
        let mut w = EventWindow::with_max_len(Duration::from_secs(100), 3).unwrap();
        let mut gone = Vec::new();
        for s in 1..=5 {
            w.record_with(secs(s), s, |e| gone.push(e));
            assert_invariants(&w);
        }
        assert_eq!(gone, [(secs(1), 1), (secs(2), 2)]);
        // A late event older than everything in a full window is itself the oldest.
        assert_eq!(w.record(secs(0), 0), Some((secs(0), 0)));
        // A late event in the middle evicts the front.
        assert_eq!(w.record(secs(4), 40), Some((secs(3), 3)));
        let order: Vec<u64> = w.iter().map(|(_, p)| *p).collect();
        assert_eq!(order, [4, 40, 5]);
    }

    #[test]
    fn memory_comes_back_after_a_burst() {
        let mut w = window(10);
        for i in 0..200_000u64 {
            w.record(Moment::from_nanos(i), i);
        }
        for i in 0..10 {
            w.record(secs(100) + Duration::from_nanos(i), i);
        }
        assert!(w.capacity() >= 200_010);
        assert_eq!(w.expire(secs(105), drop), 200_000);
        assert_eq!(w.len(), 10);
        assert!(w.capacity() <= 20, "capacity {}", w.capacity());
        assert_capacity_policy(&w);
    }

    #[test]
    fn capacity_shrinks_gradually_as_a_window_drains() {
        let mut w = window(1);
        for i in 0..10_000u64 {
            w.record(Moment::from_millis(i), ());
        }
        for i in 0..10_000u64 {
            w.expire(Moment::from_millis(i + 1_000), drop);
            assert_capacity_policy(&w);
        }
        assert!(w.capacity() <= MIN_CAPACITY);
    }

    /// A payload that notes in a shared log when the handler sees it and when it is dropped.
    struct Probe {
        id: u32,
        log: Rc<RefCell<Vec<String>>>,
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            self.log.borrow_mut().push(format!("drop {}", self.id));
        }
    }

    fn probes(n: u32, log: &Rc<RefCell<Vec<String>>>) -> EventWindow<Probe> {
        let mut w = window(10);
        for id in 0..n {
            w.record(
                secs(u64::from(id)),
                Probe {
                    id,
                    log: Rc::clone(log),
                },
            );
        }
        w
    }

    /// `30-lifetime.t` of Perl's `LinkedList::Single` sliding-window example: each expired
    /// payload is dropped after the handler has seen it and before the next is handed over, in
    /// order; nothing live is dropped.
    #[test]
    fn linkedlist_single_lifetime_expired_payloads_drop_in_order_after_the_handler() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut w = probes(6, &log);
        let handler_log = Rc::clone(&log);
        let n = w.expire(secs(13), |(_, p)| {
            handler_log.borrow_mut().push(format!("handle {}", p.id));
        });
        assert_eq!(n, 4);
        assert_eq!(
            *log.borrow(),
            [
                "handle 0", "drop 0", "handle 1", "drop 1", "handle 2", "drop 2", "handle 3",
                "drop 3"
            ]
        );
        log.borrow_mut().clear();
        // A handler may keep a payload: then it lives on.
        let mut kept = Vec::new();
        assert_eq!(w.expire(secs(14), |(_, p)| kept.push(p)), 1);
        assert!(log.borrow().is_empty(), "kept payload was dropped");
        drop(kept);
        assert_eq!(*log.borrow(), ["drop 4"]);
        log.borrow_mut().clear();
        drop(w);
        assert_eq!(*log.borrow(), ["drop 5"]);
    }

    #[test]
    fn linkedlist_single_a_panicking_handler_leaves_the_window_consistent() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut w = probes(6, &log);
        let result = catch_unwind(AssertUnwindSafe(|| {
            w.expire(secs(14), |(_, p)| {
                assert!(p.id != 2, "handler fails on 2");
            })
        }));
        assert!(result.is_err());
        // 0..=4 had expired: all are out, 3 and 4 dropped unseen during the unwind.
        assert_eq!(
            *log.borrow(),
            ["drop 0", "drop 1", "drop 2", "drop 3", "drop 4"]
        );
        assert_eq!(w.len(), 1);
        assert_eq!(w.oldest().map(|(t, p)| (t, p.id)), Some((secs(5), 5)));
        assert_invariants_probe(&w);
        // The window goes on working.
        assert_eq!(w.expire(secs(15), drop), 1);
        assert!(w.is_empty());
    }

    fn assert_invariants_probe(w: &EventWindow<Probe>) {
        let ids: Vec<_> = w.iter().map(|(t, p)| (t, p.id)).collect();
        assert!(ids.windows(2).all(|p| p[0].0 <= p[1].0));
        assert_eq!(ids.len(), w.len());
    }

    /// `40-invariants.t` of the same example, for our structure: the invariants hold after a new window,
    /// records, a partial expire, a full expire, a refill, 50 record-and-expire cycles, a capped
    /// record and an expire on an empty window.
    #[test]
    fn linkedlist_single_invariants_after_every_kind_of_step() {
        let mut w = EventWindow::with_max_len(Duration::from_secs(10), 100).unwrap();
        assert_invariants(&w);
        for s in 0..20 {
            w.record(secs(s), s);
        }
        assert_invariants(&w);
        assert_eq!(w.expire(secs(15), drop), 6);
        assert_invariants(&w);
        assert_capacity_policy(&w);
        assert_eq!(w.expire(secs(100), drop), 14);
        assert_invariants(&w);
        assert_capacity_policy(&w);
        for s in 100..130 {
            w.record(secs(s), s);
        }
        assert_invariants(&w);
        for s in 130..180 {
            w.record(secs(s), s);
            w.expire(secs(s), drop);
            assert_invariants(&w);
            assert_capacity_policy(&w);
            assert_eq!(w.len(), 10);
        }
        for s in 180..400 {
            w.record(secs(179), s);
        }
        assert_eq!(w.len(), 100, "capped");
        assert_invariants(&w);
        assert_eq!(w.expire(secs(1_000), drop), 100);
        assert_eq!(w.expire(secs(1_000), drop), 0);
        assert_invariants(&w);
        assert_capacity_policy(&w);
    }
}
