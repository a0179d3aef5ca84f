//! [`TokioClock`]: slidewin's timeline on tokio's clock.

use std::time::Duration;

use slidewin::{Clock, Moment};
use tokio::time::Instant;

/// A [`Clock`] on tokio's clock: the time since its origin, a tokio [`Instant`]. Under
/// `tokio::time::pause()` it reads the paused clock, so limiters and debouncers driven by it
/// are exact in tests.
///
/// It reads the clock of the tokio runtime it is read in (outside any runtime, the system's
/// monotonic clock). Read every clock of one limiter in one runtime: a paused clock is the
/// runtime's own.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::{Clock, Moment};
/// use slidewin_shape::TokioClock;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let clock = TokioClock::new();
/// assert_eq!(clock.now(), Moment::ZERO);
/// tokio::time::sleep(Duration::from_millis(250)).await;
/// assert_eq!(clock.now(), Moment::from_millis(250)); // paused: exact
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TokioClock {
    origin: Instant,
}

impl TokioClock {
    /// A clock whose origin ([`Moment::ZERO`]) is now, on tokio's clock.
    ///
    /// ```
    /// use slidewin::{Clock, Moment};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// assert_eq!(slidewin_shape::TokioClock::new().now(), Moment::ZERO);
    /// # }
    /// ```
    #[must_use]
    pub fn new() -> TokioClock {
        TokioClock::with_origin(Instant::now())
    }

    /// A clock whose origin ([`Moment::ZERO`]) is `origin`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Clock, Moment};
    /// use slidewin_shape::TokioClock;
    /// use tokio::time::Instant;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let clock = TokioClock::with_origin(Instant::now() - Duration::from_secs(3));
    /// assert_eq!(clock.now(), Moment::from_secs(3));
    /// # }
    /// ```
    #[must_use]
    pub const fn with_origin(origin: Instant) -> TokioClock {
        TokioClock { origin }
    }

    /// The instant that is [`Moment::ZERO`].
    ///
    /// ```
    /// use slidewin_shape::TokioClock;
    /// use tokio::time::Instant;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let start = Instant::now();
    /// assert_eq!(TokioClock::with_origin(start).origin(), start);
    /// # }
    /// ```
    #[must_use]
    pub const fn origin(&self) -> Instant {
        self.origin
    }

    /// The tokio instant of `t`, to sleep until it (`None` where tokio's clock cannot reach).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Clock, Moment};
    /// use slidewin_shape::TokioClock;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let clock = TokioClock::new();
    /// tokio::time::sleep_until(clock.instant(Moment::from_secs(2)).unwrap()).await;
    /// assert_eq!(clock.now(), Moment::from_secs(2));
    /// # }
    /// ```
    #[must_use]
    pub fn instant(&self, t: Moment) -> Option<Instant> {
        self.origin.checked_add(Duration::from_nanos(t.as_nanos()))
    }
}

impl Default for TokioClock {
    /// [`TokioClock::new`].
    fn default() -> TokioClock {
        TokioClock::new()
    }
}

impl Clock for TokioClock {
    /// The time since the origin, on tokio's clock: [`Moment::ZERO`] before it, and
    /// [`Moment::MAX`] 584 years after it.
    fn now(&self) -> Moment {
        let since = Instant::now().saturating_duration_since(self.origin);
        Moment::from_nanos(u64::try_from(since.as_nanos()).unwrap_or(u64::MAX))
    }
}
