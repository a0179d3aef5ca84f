//! Errors, written by hand: [`Cancelled`] for a call that will never give a result, and
//! [`ShapeConfigError`] for a value refused at construction, which names the value.

use std::fmt;

/// The call will never give a result: it was replaced by a newer call in its window, cancelled
/// by [`cancel`](crate::Shaper::cancel), by a [`CancellationToken`](tokio_util::sync::CancellationToken)
/// or by a newer call of a [`Latest`](crate::Latest), or its shaper or runtime was dropped.
///
/// A call that ends in `Cancelled` was never polled, or (for a task that was aborted while it
/// ran) was dropped where it stood.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin_shape::{Cancelled, Debouncer, Runtime};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = Runtime::new(4)?;
/// let search = Debouncer::new(&rt, Duration::from_millis(300))?;
/// let first = search.call("box", async { "r" });
/// let second = search.call("box", async { "ru" }); // replaces the first
/// assert_eq!(first.await, Err(Cancelled));
/// assert_eq!(second.await, Ok("ru"));
/// assert_eq!(Cancelled.to_string(), "the call was cancelled: it was replaced, cancelled or aborted and gives no result");
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cancelled;

impl fmt::Display for Cancelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "the call was cancelled: it was replaced, cancelled or aborted and gives no result",
        )
    }
}

impl std::error::Error for Cancelled {}

/// A shaper or runtime was configured with a value it cannot work with.
///
/// Returned at construction, before anything is built. A shaper's options are checked by
/// [`slidewin::debounce::Debounce::new`], whose error comes wrapped in
/// [`Options`](ShapeConfigError::Options) (and converts into this type with `?`).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin_shape::{ShapeConfigError, DebounceOptions, Debouncer, Runtime};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = Runtime::new(4)?;
/// let opts = DebounceOptions::new(Duration::from_millis(60)).max_wait(Duration::from_millis(30));
/// let err = Debouncer::<&str, ()>::with_options(&rt, opts).unwrap_err();
/// assert_eq!(err, ShapeConfigError::Options(slidewin::ConfigError::MaxWaitShorterThanWait {
///     max_wait: Duration::from_millis(30),
///     wait: Duration::from_millis(60),
/// }));
/// assert_eq!(err.to_string(), "max_wait must be at least wait: got max_wait 30ms and wait 60ms");
/// assert_eq!(Runtime::new(0).unwrap_err(), ShapeConfigError::ZeroConcurrency);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShapeConfigError {
    /// A shaper's options were refused: a zero wait, a wait too long, a `max_wait` shorter
    /// than the wait, or neither edge on. Its message is the inner error's.
    Options(slidewin::ConfigError),
    /// A runtime's concurrency was zero: no task could ever start.
    ZeroConcurrency,
    /// A runtime's concurrency was above what its semaphore can hold.
    ConcurrencyTooHigh {
        /// The concurrency that was given.
        concurrency: usize,
        /// The highest supported concurrency.
        max: usize,
    },
    /// A runtime's event capacity was zero or above what its channel can hold.
    EventCapacity {
        /// The capacity that was given.
        capacity: usize,
    },
    /// [`Runtime::new`](crate::Runtime::new) was called outside a tokio runtime; use
    /// [`Runtime::with_handle`](crate::Runtime::with_handle) there.
    NoTokioRuntime,
}

/// The options' error, as [`ShapeConfigError::Options`].
///
/// ```
/// use slidewin_shape::ShapeConfigError;
/// let err = ShapeConfigError::from(slidewin::ConfigError::NoEdge);
/// assert_eq!(err, ShapeConfigError::Options(slidewin::ConfigError::NoEdge));
/// ```
impl From<slidewin::ConfigError> for ShapeConfigError {
    fn from(err: slidewin::ConfigError) -> ShapeConfigError {
        ShapeConfigError::Options(err)
    }
}

impl fmt::Display for ShapeConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShapeConfigError::Options(err) => fmt::Display::fmt(err, f),
            ShapeConfigError::ZeroConcurrency => {
                f.write_str("the concurrency must be at least 1, got 0")
            }
            ShapeConfigError::ConcurrencyTooHigh { concurrency, max } => write!(
                f,
                "the concurrency must be at most {max}, got {concurrency}"
            ),
            ShapeConfigError::EventCapacity { capacity } => write!(
                f,
                "the event capacity must be from 1 to {}, got {capacity}",
                usize::MAX >> 1
            ),
            ShapeConfigError::NoTokioRuntime => f.write_str(
                "Runtime::new must be called inside a tokio runtime; \
                 outside one, pass a handle to Runtime::with_handle",
            ),
        }
    }
}

impl std::error::Error for ShapeConfigError {}
