//! [`Event`]: what a [`Runtime`](crate::Runtime) and its shapers report, and the
//! [`Subscription`] that receives them.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use slidewin::debounce::Edge;
use tokio::sync::broadcast;

/// A task's number in its [`Runtime`](crate::Runtime), from 1, in registration order.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = slidewin_shape::Runtime::new(1)?;
/// let task = rt.run(async { 7 });
/// assert_eq!(task.id().get(), 1);
/// assert_eq!(task.id().to_string(), "#1");
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId(pub(crate) u64);

impl TaskId {
    /// The number.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = slidewin_shape::Runtime::new(1)?;
    /// assert_eq!(rt.run(async {}).id().get() + 1, rt.run(async {}).id().get());
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// How a task ended (in [`Event::TaskFinished`]).
///
/// ```
/// use slidewin_shape::Outcome;
/// assert_ne!(Outcome::Completed, Outcome::Aborted);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Its future returned.
    Completed,
    /// Its future panicked; the panic goes on to whoever awaits the task.
    Panicked,
    /// It was aborted (by [`Task::abort`](crate::Task::abort), a newer call of a
    /// [`Latest`](crate::Latest), or the tokio runtime shutting down), queued or running.
    Aborted,
}

/// What a [`Runtime`](crate::Runtime) and the shapers on it report, in the order it happened.
///
/// Shaper events carry the key as a readable label (its `Debug` form), made once per key and
/// only while someone is subscribed. A call merged away leaves no trace but `Armed` and
/// `Replaced`: it never became a task, so it has no id. A run is visible twice:
/// as `Fired` (which call, which edge, which task) and as `TaskRegistered`.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin_shape::{Debouncer, Edge, Event, Runtime};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = Runtime::new(4)?;
/// let mut events = rt.subscribe();
/// let d = Debouncer::new(&rt, Duration::from_millis(60))?;
/// let _ = d.call("k", async {});
/// let _ = d.call("k", async {});
/// let key: std::sync::Arc<str> = "\"k\"".into();
/// assert_eq!(events.try_recv(), Some(Event::Armed { key: key.clone() }));
/// assert_eq!(events.try_recv(), Some(Event::Replaced { key: key.clone() }));
/// tokio::time::sleep(Duration::from_millis(61)).await; // the window closed at 60 ms
/// assert!(matches!(events.try_recv(), Some(Event::Fired { edge: Edge::Trailing, .. })));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A task entered the runtime (queued until a slot is free).
    TaskRegistered {
        /// The task.
        id: TaskId,
    },
    /// A task took a slot and began to run.
    TaskStarted {
        /// The task.
        id: TaskId,
    },
    /// A task ended and gave its slot back (if it had one).
    TaskFinished {
        /// The task.
        id: TaskId,
        /// How it ended.
        outcome: Outcome,
    },
    /// A call was buffered for the trailing edge in a key that held no buffered call.
    Armed {
        /// The key's label.
        key: Arc<str>,
    },
    /// A call was buffered in place of the key's buffered call, which ends `Cancelled`.
    Replaced {
        /// The key's label.
        key: Arc<str>,
    },
    /// A call was dispatched to the runtime as task `id`.
    Fired {
        /// The key's label.
        key: Arc<str>,
        /// Why it ran.
        edge: Edge,
        /// The task it became.
        id: TaskId,
    },
    /// A call ended `Cancelled` without being replaced: by
    /// [`cancel`](crate::Shaper::cancel), by dropping its shaper, or on arrival inside a
    /// window when `trailing` is off (it could never run).
    Cancelled {
        /// The key's label.
        key: Arc<str>,
    },
}

/// The sending side, shared by a runtime and its shapers. Events are only built while someone
/// is subscribed (a key's label is formatted at most once, and only then).
pub(crate) struct Events {
    sender: broadcast::Sender<Event>,
    subscribers: Arc<AtomicUsize>,
}

impl Events {
    pub(crate) fn new(capacity: usize) -> Events {
        Events {
            sender: broadcast::channel(capacity).0,
            subscribers: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Whether anyone listens; when not, callers skip building the event.
    #[inline]
    pub(crate) fn observed(&self) -> bool {
        self.subscribers.load(Ordering::Acquire) > 0
    }

    #[inline]
    pub(crate) fn emit(&self, event: impl FnOnce() -> Event) {
        if self.observed() {
            // An error only says that the last subscriber has just left.
            let _ = self.sender.send(event());
        }
    }

    pub(crate) fn subscribe(&self) -> Subscription {
        // Counted before the receiver exists, so no event sent after `subscribe` returns is
        // skipped for want of a subscriber.
        self.subscribers.fetch_add(1, Ordering::AcqRel);
        Subscription {
            receiver: self.sender.subscribe(),
            subscribers: Arc::clone(&self.subscribers),
            missed: 0,
        }
    }
}

/// A stream of a runtime's [`Event`]s, from the moment of [`subscribe`](crate::Runtime::subscribe).
///
/// Events wait in a ring of the runtime's event capacity; a subscriber that falls further
/// behind loses the oldest and can see how many in [`missed`](Subscription::missed).
///
/// # Example
///
/// ```
/// use slidewin_shape::{Event, Runtime};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = Runtime::new(1)?;
/// let mut events = rt.subscribe();
/// let id = rt.run(async {}).id();
/// assert_eq!(events.recv().await, Some(Event::TaskRegistered { id }));
/// assert_eq!(events.recv().await, Some(Event::TaskStarted { id }));
/// # Ok(()) }
/// ```
pub struct Subscription {
    receiver: broadcast::Receiver<Event>,
    subscribers: Arc<AtomicUsize>,
    missed: u64,
}

impl Subscription {
    /// The next event, waiting for it; `None` once the runtime and all its shapers are gone
    /// and every event has been read.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = slidewin_shape::Runtime::new(1)?;
    /// let mut events = rt.subscribe();
    /// drop(rt);
    /// assert_eq!(events.recv().await, None);
    /// # Ok(()) }
    /// ```
    pub async fn recv(&mut self) -> Option<Event> {
        loop {
            match self.receiver.recv().await {
                Ok(event) => return Some(event),
                Err(broadcast::error::RecvError::Lagged(n)) => self.missed += n,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// The next event if one is waiting, without waiting.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = slidewin_shape::Runtime::new(1)?;
    /// let mut events = rt.subscribe();
    /// assert_eq!(events.try_recv(), None);
    /// let _task = rt.run(async {});
    /// assert!(events.try_recv().is_some());
    /// # Ok(()) }
    /// ```
    pub fn try_recv(&mut self) -> Option<Event> {
        loop {
            match self.receiver.try_recv() {
                Ok(event) => return Some(event),
                Err(broadcast::error::TryRecvError::Lagged(n)) => self.missed += n,
                Err(_) => return None,
            }
        }
    }

    /// How many events this subscriber lost by falling more than the event capacity behind.
    ///
    /// ```
    /// use slidewin_shape::Runtime;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::with_event_capacity(1, 2)?;
    /// let mut events = rt.subscribe();
    /// let _tasks: Vec<_> = (0..3).map(|_| rt.run(async {})).collect(); // 3 events, room for 2
    /// while events.try_recv().is_some() {}
    /// assert_eq!(events.missed(), 1);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn missed(&self) -> u64 {
        self.missed
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.subscribers.fetch_sub(1, Ordering::AcqRel);
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("missed", &self.missed)
            .finish_non_exhaustive()
    }
}
