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

mod events;

use std::fmt;
use std::time::Duration;

use crate::error::ConfigError;
use crate::slide_vec::{SlideVec, gallop};
use crate::time::{Clock, Moment, duration_nanos};

pub use events::Events;

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

#[cfg(test)]
mod tests;
