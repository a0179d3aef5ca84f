//! [`AdaptiveLimit`]: shed load with a concurrency limit that follows the latency of what is
//! behind it (AIMD), with the time as a parameter.
//!
//! A limit `L`, between [`min`](AdaptiveLimitBuilder::min) and
//! [`max`](AdaptiveLimitBuilder::max), starts at [`initial`](AdaptiveLimitBuilder::initial):
//!
//! * [`try_acquire`](AdaptiveLimit::try_acquire) admits a call while fewer than `floor(L)`
//!   are in flight, and otherwise sheds it ([`Shed`]);
//! * each admitted call's [`Token`] reports how it went ([`Token::done`]):
//!   - **slow** (its latency strictly above the builder's `slower_than`) or **failed**: `L` is
//!     multiplied by the [`backoff`](AdaptiveLimitBuilder::backoff) ratio (0.9), at most once
//!     per [`cooldown`](AdaptiveLimitBuilder::cooldown), so that the calls admitted under the
//!     old limit do not cut the new one again (TCP cuts its window once per round trip);
//!   - **fast**, and the limit in use (at least half of `floor(L)` in flight, this call
//!     included): `L` grows by `1 / L`, so by about 1 per `L` calls: one per round of a full
//!     limit, as TCP's congestion avoidance;
//!   - a token dropped without a report is a failed call (a cancelled request: a client gave
//!     up waiting), at the time it was acquired.
//!
//! Each report that moves `floor(L)` returns a [`Change`], for the caller to log.
//!
//! # Why AIMD, and not the gradient method
//!
//! Netflix's concurrency-limits and Envoy's adaptive concurrency filter estimate the latency
//! with no queueing (a minimum RTT over a window, sampled afresh now and then by dropping the
//! limit to a few calls) and set the limit from the ratio of that to the latest latency. That
//! needs a running minimum, a smoothed sample and a periodic re-measurement phase in which
//! the service is throttled on purpose: more state to keep consistent without a lock, and
//! behaviour that is harder to predict and test. AIMD needs one number and a threshold the
//! operator already knows (the latency the service promises), reacts to errors as well as to
//! latency, and is what Netflix's `AIMDLimit` and TCP do; its known weakness, a limit that
//! saws around the point where calls turn slow, is bounded by the cooldown.
//! Where the limit grows unused (a quiet service), it stops growing at twice the demand, as
//! Netflix's `AIMDLimit` does, so that a burst after a quiet hour still meets a real limit.
//!
//! # Threads
//!
//! `Send + Sync`, with no lock: the calls in flight are one atomic counter, raised by
//! compare-and-swap only while below the limit, so it never passes `floor(L)` as read by the
//! admission; `L` is an `f64` in an atomic word, moved by compare-and-swap; the cooldown is
//! the time of the next allowed cut, claimed by compare-and-swap, so that of failures racing
//! within one cooldown exactly one cuts. (A limit cut while calls are in flight can leave
//! more in flight than the new limit: they are not recalled, and no new call is admitted until
//! enough of them end.)
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use slidewin::Moment;
//! use slidewin::shed::AdaptiveLimit;
//!
//! let limit = AdaptiveLimit::builder(Duration::from_millis(100)).initial(2).build()?;
//! let a = limit.try_acquire(Moment::ZERO)?;
//! let b = limit.try_acquire(Moment::ZERO)?;
//! let shed = limit.try_acquire(Moment::ZERO).unwrap_err();
//! assert_eq!(shed.to_string(), "shed: 2 calls in flight, at the limit of 2");
//!
//! // Two fast calls: 2 + 1/2, then + 1/2.5: the limit reaches 2.9, still 2 calls.
//! assert!(a.done(Moment::from_millis(20), Duration::from_millis(20), true).is_none());
//! assert!(b.done(Moment::from_millis(30), Duration::from_millis(30), true).is_none());
//! // One more, in flight with another: 3.24..., so 3 calls.
//! let (c, _d) = (limit.try_acquire(Moment::from_millis(40))?, limit.try_acquire(Moment::from_millis(40))?);
//! let grew = c.done(Moment::from_millis(50), Duration::from_millis(10), true).unwrap();
//! assert_eq!(grew.to_string(), "limit 2 -> 3 at 50ms: a fast call");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod config;
mod token;

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering};

use std::fmt;
use std::time::Duration;

use crate::time::{Clock, Moment};
use config::Config;
pub use config::{AdaptiveLimitBuilder, MAX_LIMIT, ShedConfigError};
pub use token::{Cause, Change, Shed, Token};

/// A concurrency limit that follows the latency and the errors of the calls it admits (AIMD);
/// see the [module](self) for its rules and why.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::Moment;
/// use slidewin::shed::AdaptiveLimit;
///
/// let limit = AdaptiveLimit::builder(Duration::from_millis(100)).initial(10).build()?;
/// let token = limit.try_acquire(Moment::ZERO)?;
/// assert_eq!(limit.in_flight(), 1);
/// let cut = token.done(Moment::from_millis(300), Duration::from_millis(300), true).unwrap();
/// assert_eq!(cut.to_string(), "limit 10 -> 9 at 300ms: a slow call");
/// assert_eq!((limit.limit(), limit.in_flight()), (9, 0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct AdaptiveLimit {
    config: Config,
    /// The calls admitted and not yet reported.
    in_flight: AtomicU64,
    /// `L`, an `f64`'s bits.
    limit: AtomicU64,
    /// The earliest time of the next cut, in nanoseconds: 0 until the first.
    next_cut: AtomicU64,
}

impl AdaptiveLimit {
    /// A builder: `slower_than` is the latency above which a call is slow (the latency the
    /// service promises, say); see [`AdaptiveLimitBuilder`] for the rest.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::shed::AdaptiveLimit;
    /// let limit = AdaptiveLimit::builder(Duration::from_millis(200)).build()?;
    /// assert_eq!((limit.min(), limit.limit(), limit.max()), (1, 20, 1000));
    /// # Ok::<(), slidewin::shed::ShedConfigError>(())
    /// ```
    pub fn builder(slower_than: Duration) -> AdaptiveLimitBuilder {
        AdaptiveLimitBuilder::new(slower_than)
    }

    fn from_config(config: Config) -> AdaptiveLimit {
        AdaptiveLimit {
            in_flight: AtomicU64::new(0),
            limit: AtomicU64::new(f64::from(config.initial).to_bits()),
            next_cut: AtomicU64::new(0),
            config,
        }
    }

    /// Asks to make a call at `now`: a [`Token`] while fewer than [`limit`](Self::limit)
    /// calls are in flight, to report its outcome with; otherwise [`Shed`].
    ///
    /// # Errors
    ///
    /// [`Shed`] when the call must not be made.
    pub fn try_acquire(&self, now: Moment) -> Result<Token<&AdaptiveLimit>, Shed> {
        AdaptiveLimit::try_acquire_owned(self, now)
    }

    /// [`try_acquire`](Self::try_acquire) at `clock.now()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::shed::AdaptiveLimit;
    /// use slidewin::time::ManualClock;
    /// let limit = AdaptiveLimit::builder(Duration::from_millis(100)).build()?;
    /// assert!(limit.try_acquire_now(&ManualClock::default()).is_ok());
    /// # Ok::<(), slidewin::shed::ShedConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    pub fn try_acquire_now(&self, clock: &impl Clock) -> Result<Token<&AdaptiveLimit>, Shed> {
        self.try_acquire(clock.now())
    }

    /// [`try_acquire`](Self::try_acquire) for a token that holds `holder`, anything that
    /// gives the limit: an `Arc<AdaptiveLimit>`, or a struct of your own holding one, so that
    /// the token can outlive a borrow (in a future, say), as tokio's `acquire_owned`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::shed::AdaptiveLimit;
    /// let limit = Arc::new(AdaptiveLimit::builder(Duration::from_millis(100)).build()?);
    /// let token = AdaptiveLimit::try_acquire_owned(Arc::clone(&limit), Moment::ZERO)?;
    /// std::thread::spawn(move || token.done(Moment::from_millis(5), Duration::from_millis(5), true))
    ///     .join()
    ///     .unwrap();
    /// assert_eq!(limit.in_flight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire); the holder is dropped.
    pub fn try_acquire_owned<R: AsRef<AdaptiveLimit>>(
        holder: R,
        now: Moment,
    ) -> Result<Token<R>, Shed> {
        let this = holder.as_ref();
        let mut in_flight = this.in_flight.load(Ordering::Acquire);
        loop {
            let limit = this.limit();
            if in_flight >= u64::from(limit) {
                return Err(Shed { limit, in_flight });
            }
            match this.in_flight.compare_exchange_weak(
                in_flight,
                in_flight + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(Token::new(holder, now)),
                Err(seen) => in_flight = seen,
            }
        }
    }

    /// A call admitted at `start` ended: counts it out and moves the limit.
    fn report(&self, now: Moment, latency: Duration, ok: bool) -> Option<Change> {
        // With this call: the calls in flight as it ended.
        let in_flight = self.in_flight.fetch_sub(1, Ordering::AcqRel);
        let cause = match (ok, latency > self.config.slower_than) {
            (false, _) => Cause::Failed,
            (true, true) => Cause::Slow,
            (true, false) => Cause::Fast,
        };
        let (from, to) = match cause {
            Cause::Fast => self.grow(in_flight)?,
            Cause::Slow | Cause::Failed => self.cut(now)?,
        };
        let (from, to) = (whole(from), whole(to));
        (from != to).then_some(Change {
            from,
            to,
            at: now,
            cause,
        })
    }

    /// `L + 1/L`, up to `max`, if the limit is in use: the old and new `L`.
    fn grow(&self, in_flight: u64) -> Option<(f64, f64)> {
        let max = f64::from(self.config.max);
        self.update(|l| {
            let used = in_flight.saturating_mul(2) >= u64::from(whole(l));
            used.then(|| (l + 1.0 / l).min(max))
        })
    }

    /// `L * backoff`, down to `min`, if the cooldown since the last cut has passed.
    fn cut(&self, now: Moment) -> Option<(f64, f64)> {
        let now = now.as_nanos();
        let next = now.saturating_add(self.config.cooldown);
        let mut allowed = self.next_cut.load(Ordering::Acquire);
        loop {
            if now < allowed {
                return None;
            }
            match self.next_cut.compare_exchange_weak(
                allowed,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(seen) => allowed = seen,
            }
        }
        let (min, ratio) = (f64::from(self.config.min), self.config.backoff);
        self.update(|l| Some((l * ratio).max(min)))
    }

    /// Moves `L` by `f` (`None`: leave it), atomically: the old and new `L`.
    fn update(&self, f: impl Fn(f64) -> Option<f64>) -> Option<(f64, f64)> {
        let mut bits = self.limit.load(Ordering::Acquire);
        loop {
            let old = f64::from_bits(bits);
            let new = f(old)?;
            match self.limit.compare_exchange_weak(
                bits,
                new.to_bits(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some((old, new)),
                Err(seen) => bits = seen,
            }
        }
    }

    /// The limit: how many calls may be in flight, `floor(L)`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::shed::AdaptiveLimit;
    /// let limit = AdaptiveLimit::builder(Duration::from_millis(100)).initial(7).build()?;
    /// assert_eq!(limit.limit(), 7);
    /// # Ok::<(), slidewin::shed::ShedConfigError>(())
    /// ```
    #[must_use]
    pub fn limit(&self) -> u32 {
        whole(self.estimate())
    }

    /// `L` itself, with the fraction the fast calls have added since it last reached a whole
    /// number.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::shed::AdaptiveLimit;
    /// let limit = AdaptiveLimit::builder(Duration::from_millis(100)).initial(1).build()?;
    /// let token = limit.try_acquire(Moment::ZERO)?;
    /// token.done(Moment::ZERO, Duration::ZERO, true);
    /// assert_eq!(limit.estimate(), 2.0); // 1 + 1/1
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn estimate(&self) -> f64 {
        f64::from_bits(self.limit.load(Ordering::Acquire))
    }

    /// The calls admitted and not yet reported (nor dropped).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::shed::AdaptiveLimit;
    /// let limit = AdaptiveLimit::builder(Duration::from_millis(100)).build()?;
    /// let token = limit.try_acquire(Moment::ZERO)?;
    /// assert_eq!(limit.in_flight(), 1);
    /// drop(token); // a failure
    /// assert_eq!(limit.in_flight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Acquire)
    }

    /// The lowest the limit goes.
    #[must_use]
    pub fn min(&self) -> u32 {
        self.config.min
    }

    /// The highest the limit goes.
    #[must_use]
    pub fn max(&self) -> u32 {
        self.config.max
    }

    /// The latency above which a call is slow.
    #[must_use]
    pub fn slower_than(&self) -> Duration {
        self.config.slower_than
    }
}

/// The limit gives itself to a [`Token`] that borrows it
/// ([`try_acquire_owned`](AdaptiveLimit::try_acquire_owned)).
impl AsRef<AdaptiveLimit> for AdaptiveLimit {
    fn as_ref(&self) -> &AdaptiveLimit {
        self
    }
}

/// `floor(l)`: `l` is within `[min, max]`, so it fits.
fn whole(l: f64) -> u32 {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "L is kept within [1, MAX_LIMIT]"
    )]
    let whole = l as u32;
    whole
}

impl fmt::Debug for AdaptiveLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveLimit")
            .field("limit", &self.estimate())
            .field("in_flight", &self.in_flight())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}
