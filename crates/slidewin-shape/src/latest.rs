//! [`Latest`]: restart coordination, the newest call on a key cancels the older one in flight.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use tokio::task::AbortHandle;

use crate::runtime::{Runtime, Task};

/// Restart coordination: a call on a key aborts the key's call still in flight (queued or
/// running) on the runtime. The older call's future is dropped where it stands and its caller
/// gets [`Cancelled`](crate::Cancelled); the newest one runs.
///
/// Aborting drops a future; it cannot take back work the future handed elsewhere (a request
/// already sent, a thread already started) whose result may still arrive. For that, number the
/// calls with a [`SequenceGuard`](crate::SequenceGuard) and keep only results newer than the
/// newest accepted.
///
/// A key is held only while its call is in flight.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin_shape::{Cancelled, Latest, Runtime};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = Runtime::new(4)?;
/// let search = Latest::new(&rt);
/// let slow = |q: &'static str| async move {
///     tokio::time::sleep(Duration::from_millis(200)).await;
///     q
/// };
/// let first = search.call("box", slow("ru"));
/// tokio::time::sleep(Duration::from_millis(50)).await;
/// let second = search.call("box", slow("rust")); // aborts the first, in flight
/// assert_eq!(first.await, Err(Cancelled));
/// assert_eq!(second.await, Ok("rust"));
/// assert!(search.is_empty());
/// # Ok(()) }
/// ```
pub struct Latest<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for Latest<K> {
    fn clone(&self) -> Self {
        Latest {
            shared: Arc::clone(&self.shared),
        }
    }
}

struct Shared<K> {
    runtime: Runtime,
    state: Mutex<State<K>>,
}

struct State<K> {
    /// A key's newest call: its generation, and its task's handle once it is spawned.
    in_flight: HashMap<K, (u64, Option<AbortHandle>)>,
    next_generation: u64,
}

impl<K> Shared<K> {
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Inside each call's task: when the task ends (done or aborted), its key is let go, unless a
/// newer call has taken it.
struct Leave<K: Hash + Eq> {
    shared: Weak<Shared<K>>,
    key: Option<K>,
    generation: u64,
}

impl<K: Hash + Eq> Drop for Leave<K> {
    fn drop(&mut self) {
        let (Some(shared), Some(key)) = (self.shared.upgrade(), self.key.take()) else {
            return;
        };
        let mut state = shared.lock();
        if state
            .in_flight
            .get(&key)
            .is_some_and(|(generation, _)| *generation == self.generation)
        {
            state.in_flight.remove(&key);
            if state.in_flight.is_empty() {
                state.in_flight = HashMap::new();
            } else if state.in_flight.len() * 4 < state.in_flight.capacity() {
                let len = state.in_flight.len();
                state.in_flight.shrink_to(len * 2);
            }
        }
    }
}

impl<K> Latest<K>
where
    K: Hash + Eq + Clone + Send + 'static,
{
    /// Restart coordination for calls run on `runtime`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = slidewin_shape::Runtime::new(4)?;
    /// let latest = slidewin_shape::Latest::<String>::new(&rt);
    /// assert!(latest.is_empty());
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn new(runtime: &Runtime) -> Latest<K> {
        Latest {
            shared: Arc::new(Shared {
                runtime: runtime.clone(),
                state: Mutex::new(State {
                    in_flight: HashMap::new(),
                    next_generation: 0,
                }),
            }),
        }
    }

    /// Runs `future` on the runtime as `key`'s call, aborting the key's call in flight, if
    /// any.
    ///
    /// ```
    /// use slidewin_shape::{Cancelled, Latest, Runtime};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let latest = Latest::new(&rt);
    /// let old = latest.call(7, std::future::pending::<&str>());
    /// let new = latest.call(7, async { "fresh" });
    /// assert_eq!((old.await, new.await), (Err(Cancelled), Ok("fresh")));
    /// # Ok(()) }
    /// ```
    pub fn call<F>(&self, key: K, future: F) -> Task<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (generation, older) = {
            let mut state = self.shared.lock();
            let generation = state.next_generation;
            state.next_generation += 1;
            let older = state.in_flight.insert(key.clone(), (generation, None));
            (generation, older)
        };
        // An older call whose task is not spawned yet has no handle; its `call` sees that its
        // entry was taken and aborts it itself.
        if let Some((_, Some(older))) = older {
            older.abort();
        }
        // Spawned without the lock held: a task dropped at once (its tokio runtime is shutting
        // down) takes the lock in `Leave::drop`.
        let leave = Leave {
            shared: Arc::downgrade(&self.shared),
            key: Some(key.clone()),
            generation,
        };
        let task = self.shared.runtime.run(async move {
            let _leave = leave;
            future.await
        });
        let superseded = {
            let mut state = self.shared.lock();
            match state.in_flight.get_mut(&key) {
                Some((g, handle)) if *g == generation => {
                    *handle = Some(task.abort_handle());
                    false
                }
                // A newer call or `cancel` took the key meanwhile (or the task has already
                // ended, and aborting it does nothing).
                _ => true,
            }
        };
        if superseded {
            task.abort();
        }
        task
    }

    /// Aborts `key`'s call in flight, if any: whether there was one.
    ///
    /// ```
    /// use slidewin_shape::{Cancelled, Latest, Runtime};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let latest = Latest::new(&rt);
    /// let call = latest.call("k", std::future::pending::<()>());
    /// assert!(latest.cancel(&"k"));
    /// assert_eq!(call.await, Err(Cancelled));
    /// assert!(!latest.cancel(&"k"));
    /// # Ok(()) }
    /// ```
    pub fn cancel(&self, key: &K) -> bool {
        let older = self.shared.lock().in_flight.remove(key);
        match older {
            Some((_, handle)) => {
                // Without a handle, the call being made sees its entry gone and aborts.
                if let Some(handle) = handle {
                    handle.abort();
                }
                true
            }
            None => false,
        }
    }

    /// How many keys have a call in flight.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = slidewin_shape::Runtime::new(4)?;
    /// let latest = slidewin_shape::Latest::new(&rt);
    /// let _call = latest.call(1, std::future::pending::<()>());
    /// assert_eq!(latest.len(), 1);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        self.shared.lock().in_flight.len()
    }

    /// Whether no key has a call in flight.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = slidewin_shape::Runtime::new(4)?;
    /// assert!(slidewin_shape::Latest::<u8>::new(&rt).is_empty());
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K> fmt::Debug for Latest<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Latest").finish_non_exhaustive()
    }
}
