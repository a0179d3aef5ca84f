//! [`Throttler`]: keyed throttle, lodash's `throttle` (debounce with `max_wait = wait`).

use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::time::Duration;

use crate::bucket::Timing;
use crate::debouncer::{DebounceOptions, Debouncer};
use crate::error::ConfigError;
use crate::pending::Pending;
use crate::runtime::Runtime;

/// The options of a [`Throttler`]: lodash's `wait`, `leading` and `trailing` (both default
/// true). `max_wait` is `wait`.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin_shape::ThrottleOptions;
///
/// let opts = ThrottleOptions::new(Duration::from_millis(100)).trailing(false);
/// assert_eq!((opts.get_leading(), opts.get_trailing()), (true, false));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThrottleOptions {
    wait: Duration,
    leading: bool,
    trailing: bool,
}

impl ThrottleOptions {
    /// At most one run per `wait`, at both edges.
    ///
    /// ```
    /// use std::time::Duration;
    /// let opts = slidewin_shape::ThrottleOptions::new(Duration::from_millis(100));
    /// assert_eq!(opts.get_wait(), Duration::from_millis(100));
    /// ```
    #[must_use]
    pub fn new(wait: Duration) -> ThrottleOptions {
        ThrottleOptions {
            wait,
            leading: true,
            trailing: true,
        }
    }

    /// Whether a call on a quiet key runs at once.
    ///
    /// ```
    /// use std::time::Duration;
    /// let opts = slidewin_shape::ThrottleOptions::new(Duration::from_millis(1)).leading(false);
    /// assert!(!opts.get_leading());
    /// ```
    #[must_use]
    pub fn leading(mut self, leading: bool) -> ThrottleOptions {
        self.leading = leading;
        self
    }

    /// Whether the last call of a window runs when the window closes.
    ///
    /// ```
    /// use std::time::Duration;
    /// let opts = slidewin_shape::ThrottleOptions::new(Duration::from_millis(1)).trailing(false);
    /// assert!(!opts.get_trailing());
    /// ```
    #[must_use]
    pub fn trailing(mut self, trailing: bool) -> ThrottleOptions {
        self.trailing = trailing;
        self
    }

    /// The wait.
    ///
    /// ```
    /// use std::time::Duration;
    /// let opts = slidewin_shape::ThrottleOptions::new(Duration::from_millis(7));
    /// assert_eq!(opts.get_wait(), Duration::from_millis(7));
    /// ```
    #[must_use]
    pub fn get_wait(&self) -> Duration {
        self.wait
    }

    /// Whether the leading edge runs.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert!(slidewin_shape::ThrottleOptions::new(Duration::from_millis(7)).get_leading());
    /// ```
    #[must_use]
    pub fn get_leading(&self) -> bool {
        self.leading
    }

    /// Whether the trailing edge runs.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert!(slidewin_shape::ThrottleOptions::new(Duration::from_millis(7)).get_trailing());
    /// ```
    #[must_use]
    pub fn get_trailing(&self) -> bool {
        self.trailing
    }

    fn timing(&self) -> Result<Timing, ConfigError> {
        DebounceOptions::new(self.wait)
            .leading(self.leading)
            .trailing(self.trailing)
            .max_wait(self.wait)
            .timing()
    }
}

/// Keyed throttle: for each key, at most one run per `wait` window that a call opened, at its
/// leading edge and (if another call came in it) at its trailing edge, at the times lodash's
/// `throttle` would run them.
///
/// It is the [`Debouncer`] with `max_wait = wait` and both edges on by default, as lodash
/// defines it, with the same answers ([`Pending`]), per-key operations and events (there are
/// no throttle-specific events; seed 003, §5).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin_shape::{Runtime, Throttler};
/// use tokio::time::{Instant, sleep};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = Runtime::new(4)?;
/// let scroll = Throttler::new(&rt, Duration::from_millis(100))?;
/// let start = Instant::now();
/// let mut answers = Vec::new();
/// for _ in 0..25 {
///     // A frame every 10 ms for 250 ms.
///     answers.push(scroll.call("list", async move { start.elapsed().as_millis() }));
///     sleep(Duration::from_millis(10)).await;
/// }
/// sleep(Duration::from_millis(200)).await;
/// let mut ran = Vec::new();
/// for answer in answers {
///     ran.extend(answer.await);
/// }
/// assert_eq!(ran, [0, 100, 200, 300]); // leading at 0, then one per window
/// # Ok(()) }
/// ```
pub struct Throttler<K, T> {
    inner: Debouncer<K, T>,
}

impl<K, T> Clone for Throttler<K, T> {
    fn clone(&self) -> Self {
        Throttler {
            inner: self.inner.clone(),
        }
    }
}

impl<K, T> Throttler<K, T>
where
    K: Hash + Eq + Clone + fmt::Debug + Send + 'static,
    T: Send + 'static,
{
    /// A throttler with lodash's defaults: both edges.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroWait`], [`ConfigError::WaitTooLong`].
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin_shape::{ConfigError, Runtime, Throttler};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let t: Throttler<&str, ()> = Throttler::new(&rt, Duration::from_millis(100))?;
    /// assert_eq!(Throttler::<&str, ()>::new(&rt, Duration::ZERO).unwrap_err(), ConfigError::ZeroWait);
    /// # Ok(()) }
    /// ```
    pub fn new(runtime: &Runtime, wait: Duration) -> Result<Throttler<K, T>, ConfigError> {
        Throttler::with_options(runtime, ThrottleOptions::new(wait))
    }

    /// A throttler with the given options.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroWait`], [`ConfigError::WaitTooLong`], [`ConfigError::NoEdge`].
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin_shape::{Runtime, ThrottleOptions, Throttler};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let opts = ThrottleOptions::new(Duration::from_millis(100)).trailing(false);
    /// let t: Throttler<&str, ()> = Throttler::with_options(&rt, opts)?;
    /// # Ok(()) }
    /// ```
    pub fn with_options(
        runtime: &Runtime,
        options: ThrottleOptions,
    ) -> Result<Throttler<K, T>, ConfigError> {
        Ok(Throttler {
            inner: Debouncer::from_timing(runtime, options.timing()?),
        })
    }

    /// Calls `future` on `key`; see [`Debouncer::call`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin_shape::{Cancelled, Runtime, Throttler};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let t = Throttler::new(&rt, Duration::from_millis(100))?;
    /// let (a, b, c) = (t.call("k", async { 1 }), t.call("k", async { 2 }), t.call("k", async { 3 }));
    /// assert_eq!((a.await, b.await, c.await), (Ok(1), Err(Cancelled), Ok(3)));
    /// # Ok(()) }
    /// ```
    pub fn call<F>(&self, key: K, future: F) -> Pending<T>
    where
        F: Future<Output = T> + Send + 'static,
    {
        self.inner.call(key, future)
    }

    /// Runs `key`'s buffered call now; see [`Debouncer::flush`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin_shape::{Runtime, Throttler};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let t = Throttler::new(&rt, Duration::from_secs(60))?;
    /// let _first = t.call("k", async {}); // leading edge: ran
    /// let _second = t.call("k", async {}); // buffered
    /// assert!(t.flush(&"k"));
    /// # Ok(()) }
    /// ```
    pub fn flush(&self, key: &K) -> bool {
        self.inner.flush(key)
    }

    /// Cancels `key`'s buffered call and forgets the key; see [`Debouncer::cancel`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin_shape::{Runtime, Throttler};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let t = Throttler::new(&rt, Duration::from_secs(60))?;
    /// let _first = t.call("k", async {});
    /// assert!(!t.cancel(&"k")); // nothing buffered, but the key is forgotten
    /// assert!(t.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn cancel(&self, key: &K) -> bool {
        self.inner.cancel(key)
    }

    /// Whether `key` has a call buffered for its trailing edge; see [`Debouncer::pending`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin_shape::{Runtime, Throttler};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let t = Throttler::new(&rt, Duration::from_secs(60))?;
    /// let _first = t.call("k", async {});
    /// assert!(!t.pending(&"k"));
    /// let _second = t.call("k", async {});
    /// assert!(t.pending(&"k"));
    /// # Ok(()) }
    /// ```
    pub fn pending(&self, key: &K) -> bool {
        self.inner.pending(key)
    }

    /// Runs every key's buffered call now; see [`Debouncer::flush_all`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin_shape::{Runtime, Throttler};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let t = Throttler::<u8, ()>::new(&rt, Duration::from_secs(60))?;
    /// assert_eq!(t.flush_all(), 0);
    /// # Ok(()) }
    /// ```
    pub fn flush_all(&self) -> usize {
        self.inner.flush_all()
    }

    /// How many keys hold state; see [`Debouncer::len`].
    ///
    /// ```
    /// use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = slidewin_shape::Runtime::new(1)?;
    /// let t = slidewin_shape::Throttler::<u8, ()>::new(&rt, Duration::from_millis(1))?;
    /// assert_eq!(t.len(), 0);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether no key holds state.
    ///
    /// ```
    /// use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = slidewin_shape::Runtime::new(1)?;
    /// let t = slidewin_shape::Throttler::<u8, ()>::new(&rt, Duration::from_millis(1))?;
    /// assert!(t.is_empty());
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }
}

impl<K, T> fmt::Debug for Throttler<K, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Throttler").field(&self.inner).finish()
    }
}
