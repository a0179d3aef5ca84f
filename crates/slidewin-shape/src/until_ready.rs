//! [`UntilReady`] and [`UntilKeyReady`]: wait on tokio's clock until a limiter admits.

use std::borrow::Borrow;
use std::future::Future;
use std::hash::Hash;
use std::time::Duration;

use slidewin::limit::{Algorithm, LimitError};
use slidewin::{Decision, Keyed, SharedLimiter};

use crate::clock::TokioClock;

mod sealed {
    pub trait Sealed {}
}

impl<A: Algorithm> sealed::Sealed for SharedLimiter<A> {}
impl<K, A: Algorithm> sealed::Sealed for Keyed<K, A> {}

/// `until_ready` on a [`SharedLimiter`]: waits, on tokio's clock, until the limiter admits
/// `cost`, and answers the admitting check (governor's `until_ready`).
///
/// Each check reads `clock`; a denial sleeps its `retry_after`, then checks again, so a waiter
/// that loses the race to another sleeps again. A waiter consumes nothing until it is
/// admitted: dropping the future (a timeout) leaves the quota as it was. Check the limiter
/// only with this clock's times (its `check_now(&clock, ..)`), so that they are on one
/// timeline.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::SharedLimiter;
/// use slidewin::limit::Gcra;
/// use slidewin_shape::{TokioClock, UntilReady};
/// use tokio::time::Instant;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let clock = TokioClock::new();
/// let limiter = SharedLimiter::new(Gcra::new("4/s burst 1".parse()?)?);
/// let start = Instant::now();
/// for _ in 0..3 {
///     assert!(limiter.until_ready(&clock, 1).await?.allowed());
/// }
/// assert_eq!(start.elapsed(), Duration::from_millis(500)); // one each 250 ms
/// # Ok(()) }
/// ```
pub trait UntilReady: sealed::Sealed {
    /// What a check answers: the algorithm's output, a `Decision` (or `Decisions` for a
    /// rule set).
    type Output;

    /// Waits until `cost` is admitted at `clock`'s time, and answers that check.
    ///
    /// # Errors
    ///
    /// At once, without waiting: [`LimitError::CostTooHigh`] when `cost` can never be
    /// admitted.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::SharedLimiter;
    /// use slidewin::limit::{LimitError, SlidingLog};
    /// use slidewin_shape::{TokioClock, UntilReady};
    /// use tokio::time::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let clock = TokioClock::new();
    /// let limiter = SharedLimiter::new(SlidingLog::new("3 per 10 seconds".parse()?)?);
    /// let start = Instant::now();
    /// limiter.until_ready(&clock, 3).await?;
    /// let decision = limiter.until_ready(&clock, 1).await?;
    /// assert_eq!(start.elapsed(), Duration::from_secs(10)); // when the first three left
    /// assert_eq!(decision.remaining(), 2); // the three at 0 s have left
    /// assert_eq!(
    ///     limiter.until_ready(&clock, 4).await.unwrap_err(),
    ///     LimitError::CostTooHigh { cost: 4, max: 3 }
    /// );
    /// # Ok(()) }
    /// ```
    fn until_ready<'a>(
        &'a self,
        clock: &'a TokioClock,
        cost: u64,
    ) -> impl Future<Output = Result<Self::Output, LimitError>> + Send + 'a;
}

impl<A: Algorithm> UntilReady for SharedLimiter<A> {
    type Output = A::Output;

    fn until_ready<'a>(
        &'a self,
        clock: &'a TokioClock,
        cost: u64,
    ) -> impl Future<Output = Result<A::Output, LimitError>> + Send + 'a {
        until_admitted(move || self.check_now(clock, cost))
    }
}

/// `until_key_ready` on a [`Keyed`] limiter: waits, on tokio's clock, until the limiter admits
/// `cost` for one key, and answers the admitting check (governor's `until_key_ready`).
///
/// As [`UntilReady`], per key: keys wait independently, and a waiter consumes nothing until
/// it is admitted.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::Keyed;
/// use slidewin::limit::Gcra;
/// use slidewin_shape::{TokioClock, UntilKeyReady};
/// use tokio::time::Instant;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let clock = TokioClock::new();
/// let per_user = Keyed::<String, _>::new(Gcra::new("1/s".parse()?)?);
/// let start = Instant::now();
/// per_user.until_key_ready("ann", &clock, 1).await?;
/// per_user.until_key_ready("bob", &clock, 1).await?; // another key: no wait
/// assert_eq!(start.elapsed(), Duration::ZERO);
/// per_user.until_key_ready("ann", &clock, 1).await?;
/// assert_eq!(start.elapsed(), Duration::from_secs(1));
/// # Ok(()) }
/// ```
pub trait UntilKeyReady<K>: sealed::Sealed {
    /// What a check answers: the algorithm's output, a `Decision` (or `Decisions` for a
    /// rule set).
    type Output;

    /// Waits until `cost` is admitted for `key` at `clock`'s time, and answers that check.
    ///
    /// # Errors
    ///
    /// At once, without waiting: [`LimitError::CostTooHigh`] when `cost` can never be
    /// admitted; [`LimitError::KeysFull`] when `key` is new and the limiter's cap of keys is
    /// held by keys being limited (how long that lasts depends on other keys: the caller
    /// decides whether to retry).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Keyed;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_shape::{TokioClock, UntilKeyReady};
    /// use tokio::time::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let clock = TokioClock::new();
    /// let login = Keyed::<String, _>::new(RuleSet::new([
    ///     Rule::new("second", Kind::SlidingLog, "2/s".parse()?)?,
    ///     Rule::new("minute", Kind::SlidingLog, "3/minute".parse()?)?,
    /// ])?);
    /// let start = Instant::now();
    /// for _ in 0..4 {
    ///     login.until_key_ready("ann", &clock, 1).await?;
    /// }
    /// // The third waited for the second's rule (1 s), the fourth for the minute's.
    /// assert_eq!(start.elapsed(), Duration::from_secs(60));
    /// # Ok(()) }
    /// ```
    fn until_key_ready<'a, Q>(
        &'a self,
        key: &'a Q,
        clock: &'a TokioClock,
        cost: u64,
    ) -> impl Future<Output = Result<Self::Output, LimitError>> + Send + 'a
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + Sync + ?Sized;
}

impl<K, A> UntilKeyReady<K> for Keyed<K, A>
where
    K: Hash + Eq + Send,
    A: Algorithm,
{
    type Output = A::Output;

    fn until_key_ready<'a, Q>(
        &'a self,
        key: &'a Q,
        clock: &'a TokioClock,
        cost: u64,
    ) -> impl Future<Output = Result<A::Output, LimitError>> + Send + 'a
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + Sync + ?Sized,
    {
        until_admitted(move || self.check_now(key, clock, cost))
    }
}

/// Checks until a check admits, sleeping each denial's `retry_after` in between.
async fn until_admitted<O>(
    mut check: impl FnMut() -> Result<O, LimitError> + Send,
) -> Result<O, LimitError>
where
    O: AsRef<Decision>,
{
    loop {
        let retry_after = {
            let out = check()?;
            match out.as_ref().retry_after() {
                None => return Ok(out),
                Some(wait) => wait,
            }
        };
        // A denial always names a wait; at least a nanosecond, so that no loop spins in place.
        tokio::time::sleep(retry_after.max(Duration::from_nanos(1))).await;
    }
}
