//! [`Runtime`]: runs tasks on tokio with at most `concurrency` at once, counts them, and
//! reports [`Event`]s. [`Task`] is the handle to one task.

use std::fmt;
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, ready};

use tokio::runtime::Handle;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::{AbortHandle, JoinHandle};

use crate::error::{Cancelled, ShapeConfigError};
use crate::event::{Event, Events, Outcome, Subscription, TaskId};

/// The event capacity of [`Runtime::new`]: how far a subscriber may fall behind before it
/// loses the oldest events.
///
/// ```
/// assert_eq!(slidewin_shape::DEFAULT_EVENT_CAPACITY, 256);
/// ```
pub const DEFAULT_EVENT_CAPACITY: usize = 256;

/// A small task runtime on tokio: at most `concurrency` tasks run at once, the rest wait in
/// registration order; [`inspect`](Runtime::inspect) counts them and
/// [`subscribe`](Runtime::subscribe) reports every step as an [`Event`].
///
/// The shapers ([`Debouncer`](crate::Debouncer), [`Throttler`](crate::Throttler),
/// [`delay`](crate::delay()), [`Latest`](crate::Latest)) dispatch through a runtime, so a call
/// they merge away or cancel before it runs never takes a slot and never appears in it.
///
/// A `Runtime` is a cheap handle: clones share the same slots, counts and events. Its tasks
/// run on the tokio runtime it was made in (or was given), and the time it reads is tokio's, so
/// `tokio::time::pause()` works in tests.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin_shape::{Runtime, Stats};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = Runtime::new(2)?;
/// let tasks: Vec<_> = (0..3)
///     .map(|i| rt.run(async move {
///         tokio::time::sleep(Duration::from_millis(100)).await;
///         i
///     }))
///     .collect();
/// tokio::task::yield_now().await;
/// assert_eq!(rt.inspect(), Stats { registered: 3, queued: 1, running: 2, finished: 0 });
/// let mut results = Vec::new();
/// for task in tasks {
///     results.push(task.await?);
/// }
/// assert_eq!(results, [0, 1, 2]);
/// assert_eq!(rt.inspect(), Stats { registered: 3, queued: 0, running: 0, finished: 3 });
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    handle: Handle,
    concurrency: usize,
    slots: Arc<Semaphore>,
    next_id: AtomicU64,
    // One lock for the counts, held while the matching event is sent, so that the counts and
    // the event stream always agree on the order of things.
    stats: Mutex<Stats>,
    events: Events,
}

/// A snapshot of a [`Runtime`]'s task counts ([`Runtime::inspect`]).
///
/// `registered` and `finished` count since the runtime was made; `queued` and `running` are
/// the tasks waiting for a slot and holding one now. Always
/// `registered == queued + running + finished`.
///
/// ```
/// use slidewin_shape::{Runtime, Stats};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = Runtime::new(1)?;
/// assert_eq!(rt.inspect(), Stats::default());
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Tasks that entered the runtime.
    pub registered: u64,
    /// Tasks waiting for a slot.
    pub queued: usize,
    /// Tasks holding a slot.
    pub running: usize,
    /// Tasks that ended: completed, panicked or aborted.
    pub finished: u64,
}

impl Runtime {
    /// A runtime that runs at most `concurrency` tasks at once, on the current tokio runtime,
    /// with room for [`DEFAULT_EVENT_CAPACITY`] unread events per subscriber.
    ///
    /// # Errors
    ///
    /// [`ShapeConfigError::ZeroConcurrency`], [`ShapeConfigError::ConcurrencyTooHigh`] (above
    /// [`Semaphore::MAX_PERMITS`]), and [`ShapeConfigError::NoTokioRuntime`] outside a tokio runtime.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin_shape::{ShapeConfigError, Runtime};
    ///
    /// assert_eq!(Runtime::new(4).unwrap_err(), ShapeConfigError::NoTokioRuntime); // no tokio here
    /// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
    /// assert_eq!(Runtime::new(0).unwrap_err(), ShapeConfigError::ZeroConcurrency);
    /// assert_eq!(Runtime::new(4)?.concurrency(), 4);
    /// # Ok::<(), ShapeConfigError>(()) })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(concurrency: usize) -> Result<Runtime, ShapeConfigError> {
        Runtime::with_event_capacity(concurrency, DEFAULT_EVENT_CAPACITY)
    }

    /// As [`new`](Runtime::new), with room for `capacity` unread events per subscriber
    /// (rounded up to a power of two by tokio's broadcast channel).
    ///
    /// # Errors
    ///
    /// As [`new`](Runtime::new), and [`ShapeConfigError::EventCapacity`] for a capacity of zero
    /// or above `usize::MAX / 2`.
    ///
    /// ```
    /// use slidewin_shape::{ShapeConfigError, Runtime};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// assert_eq!(
    ///     Runtime::with_event_capacity(1, 0).unwrap_err(),
    ///     ShapeConfigError::EventCapacity { capacity: 0 }
    /// );
    /// # }
    /// ```
    pub fn with_event_capacity(
        concurrency: usize,
        capacity: usize,
    ) -> Result<Runtime, ShapeConfigError> {
        let handle = Handle::try_current().map_err(|_| ShapeConfigError::NoTokioRuntime)?;
        Runtime::build(concurrency, capacity, handle)
    }

    /// A runtime whose tasks and timers live on the tokio runtime of `handle`, so that it can
    /// be made, and its shapers called, from threads outside any tokio runtime.
    ///
    /// # Errors
    ///
    /// [`ShapeConfigError::ZeroConcurrency`] and [`ShapeConfigError::ConcurrencyTooHigh`].
    ///
    /// # Example
    ///
    /// ```
    /// let tokio_rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    /// let rt = slidewin_shape::Runtime::with_handle(2, tokio_rt.handle().clone())?;
    /// let task = rt.run(async { 1 + 1 }); // from a thread outside the runtime
    /// assert_eq!(tokio_rt.block_on(task)?, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_handle(concurrency: usize, handle: Handle) -> Result<Runtime, ShapeConfigError> {
        Runtime::build(concurrency, DEFAULT_EVENT_CAPACITY, handle)
    }

    fn build(
        concurrency: usize,
        capacity: usize,
        handle: Handle,
    ) -> Result<Runtime, ShapeConfigError> {
        if concurrency == 0 {
            return Err(ShapeConfigError::ZeroConcurrency);
        }
        if concurrency > Semaphore::MAX_PERMITS {
            return Err(ShapeConfigError::ConcurrencyTooHigh {
                concurrency,
                max: Semaphore::MAX_PERMITS,
            });
        }
        if capacity == 0 || capacity > usize::MAX >> 1 {
            return Err(ShapeConfigError::EventCapacity { capacity });
        }
        Ok(Runtime {
            inner: Arc::new(Inner {
                handle,
                concurrency,
                slots: Arc::new(Semaphore::new(concurrency)),
                next_id: AtomicU64::new(1),
                stats: Mutex::new(Stats::default()),
                events: Events::new(capacity),
            }),
        })
    }

    /// The most tasks that run at once.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// assert_eq!(slidewin_shape::Runtime::new(3)?.concurrency(), 3);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn concurrency(&self) -> usize {
        self.inner.concurrency
    }

    /// Registers `future` as a task: it starts as soon as a slot is free (tasks start in
    /// registration order), and the returned [`Task`] resolves to its output.
    ///
    /// The task runs whether or not the `Task` is awaited; dropping the `Task` detaches it.
    /// If the future panics, the task ends [`Outcome::Panicked`] and the panic resumes in
    /// whoever awaits the `Task`.
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = slidewin_shape::Runtime::new(1)?;
    /// assert_eq!(rt.run(async { "done" }).await?, "done");
    /// # Ok(()) }
    /// ```
    pub fn run<F>(&self, future: F) -> Task<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let id = self.next_id();
        self.spawn(id, future)
    }

    /// The current counts.
    ///
    /// ```
    /// use slidewin_shape::{Runtime, Stats};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(1)?;
    /// rt.run(async {}).await?;
    /// assert_eq!(rt.inspect(), Stats { registered: 1, queued: 0, running: 0, finished: 1 });
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn inspect(&self) -> Stats {
        *self.inner.lock_stats()
    }

    /// A stream of the events from now on: the runtime's (`Task*`) and its shapers'.
    ///
    /// ```
    /// use slidewin_shape::{Event, Runtime};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(1)?;
    /// let mut events = rt.subscribe();
    /// let id = rt.run(async {}).id();
    /// assert_eq!(events.try_recv(), Some(Event::TaskRegistered { id }));
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn subscribe(&self) -> Subscription {
        self.inner.events.subscribe()
    }

    pub(crate) fn handle(&self) -> &Handle {
        &self.inner.handle
    }

    pub(crate) fn events(&self) -> &Events {
        &self.inner.events
    }

    /// Numbers a task before it is registered, so that a shaper's `Fired` can name it and come
    /// before its `TaskRegistered`.
    pub(crate) fn next_id(&self) -> TaskId {
        TaskId(self.inner.next_id.fetch_add(1, Ordering::Relaxed))
    }

    pub(crate) fn spawn<F>(&self, id: TaskId, future: F) -> Task<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        {
            let mut stats = self.inner.lock_stats();
            stats.registered += 1;
            stats.queued += 1;
            self.inner.events.emit(|| Event::TaskRegistered { id });
        }
        // Made outside the task, so that a task aborted before its first poll (its future is
        // then dropped unpolled) still leaves the counts.
        let life = Life {
            inner: Arc::clone(&self.inner),
            id,
            permit: None,
            outcome: Outcome::Aborted,
        };
        let join = self.inner.handle.spawn(async move {
            let mut life = life;
            let slots = Arc::clone(&life.inner.slots);
            // The semaphore is never closed, so this only waits.
            let Ok(permit) = slots.acquire_owned().await else {
                unreachable!("a runtime never closes its semaphore")
            };
            life.start(permit);
            match catching_panics(future).await {
                Ok(output) => {
                    life.outcome = Outcome::Completed;
                    output
                }
                Err(panic) => {
                    life.outcome = Outcome::Panicked;
                    drop(life);
                    // Tokio catches it again and hands it to the `Task`, which resumes it.
                    panic::resume_unwind(panic)
                }
            }
        });
        Task { id, join }
    }
}

impl Inner {
    fn lock_stats(&self) -> MutexGuard<'_, Stats> {
        // Nothing panics while holding it; if something did, the counts are still whole.
        self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Polls `future`, catching a panic so that the task can record it before it goes on.
async fn catching_panics<F: Future>(future: F) -> std::thread::Result<F::Output> {
    let mut future = pin!(future);
    std::future::poll_fn(|cx| {
        match panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => Poll::Ready(Err(panic)),
        }
    })
    .await
}

/// A task's life in the counts: queued, then running (holding a permit), then finished,
/// however it ends (dropping it is how an abort is seen).
struct Life {
    inner: Arc<Inner>,
    id: TaskId,
    permit: Option<OwnedSemaphorePermit>,
    outcome: Outcome,
}

impl Life {
    fn start(&mut self, permit: OwnedSemaphorePermit) {
        self.permit = Some(permit);
        let mut stats = self.inner.lock_stats();
        stats.queued -= 1;
        stats.running += 1;
        let id = self.id;
        self.inner.events.emit(|| Event::TaskStarted { id });
    }
}

impl Drop for Life {
    fn drop(&mut self) {
        {
            let mut stats = self.inner.lock_stats();
            if self.permit.is_some() {
                stats.running -= 1;
            } else {
                stats.queued -= 1;
            }
            stats.finished += 1;
            let (id, outcome) = (self.id, self.outcome);
            self.inner
                .events
                .emit(|| Event::TaskFinished { id, outcome });
        }
        // The slot goes back only now, after the counts: a waiting task never starts while
        // this one still counts as running, so `running` never exceeds the concurrency.
        self.permit = None;
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("concurrency", &self.inner.concurrency)
            .field("stats", &self.inspect())
            .finish_non_exhaustive()
    }
}

/// A task registered in a [`Runtime`]: a future resolving to the task's output, or to
/// [`Cancelled`] if it was aborted (queued or running) or its tokio runtime shut down.
///
/// Dropping a `Task` detaches it: the task still runs. If the task panicked, awaiting the
/// `Task` resumes the panic.
///
/// # Example
///
/// ```
/// use slidewin_shape::{Cancelled, Runtime};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = Runtime::new(1)?;
/// let task = rt.run(std::future::pending::<()>());
/// task.abort();
/// assert_eq!(task.await, Err(Cancelled));
/// # Ok(()) }
/// ```
pub struct Task<T> {
    id: TaskId,
    join: JoinHandle<T>,
}

impl<T> Task<T> {
    /// The task's number in its runtime.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = slidewin_shape::Runtime::new(1)?;
    /// assert_eq!(rt.run(async {}).id().get(), 1);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn id(&self) -> TaskId {
        self.id
    }

    /// Aborts the task: its future is dropped where it stands (or before it starts, if it is
    /// queued) and the `Task` resolves to [`Cancelled`]. Does nothing once it has finished.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = slidewin_shape::Runtime::new(1)?;
    /// let task = rt.run(std::future::pending::<()>());
    /// task.abort();
    /// assert!(task.await.is_err());
    /// # Ok(()) }
    /// ```
    pub fn abort(&self) {
        self.join.abort();
    }

    /// Whether the task has ended.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = slidewin_shape::Runtime::new(1)?;
    /// let task = rt.run(async {});
    /// assert!(!task.is_finished());
    /// tokio::task::yield_now().await;
    /// assert!(task.is_finished());
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.join.is_finished()
    }

    pub(crate) fn abort_handle(&self) -> AbortHandle {
        self.join.abort_handle()
    }
}

impl<T> Future for Task<T> {
    type Output = Result<T, Cancelled>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(match ready!(Pin::new(&mut self.join).poll(cx)) {
            Ok(output) => Ok(output),
            Err(err) if err.is_panic() => panic::resume_unwind(err.into_panic()),
            Err(_) => Err(Cancelled),
        })
    }
}

impl<T> fmt::Debug for Task<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
