//! [`Leases`]: at most N in flight, each held at most its lease, so none ever leaks.

use std::time::Duration;

use crate::error::ConfigError;
use crate::limit::algorithm::sealed::Enforce;
use crate::limit::algorithm::{Algorithm, Locked};
use crate::limit::sliding_log::{Counted, SlidingLogState};
use crate::limit::{Decision, LimitError, Quota, Reservation, SlidingLog};
use crate::time::Moment;

/// A concurrency limit: at most `limit` units in flight, where a unit is acquired by a check
/// that admits it and held until it is [released](crate::Limiter::release) or until its
/// **lease** ends, whichever comes first. A holder that dies (a proxy killed mid-request, a
/// release lost on the network) leaks nothing beyond its lease: its units leave by themselves
/// `lease` after they were acquired.
///
/// A release names no acquisition (Envoy's `is_negative_hits` carries none): it gives back the
/// oldest units still held, the ones whose leases end first. So after any sequence of
/// acquisitions, releases and holders that never release, the units in flight are at most
/// `limit`, and no unit is held past its lease. A release of more than is held gives back what
/// is held, and a release of units whose leases have ended gives back nothing: a late release
/// never frees room that a newer acquisition holds.
///
/// It is a [`SlidingLog`] whose span is the lease, with releases: the same state (16 bytes an
/// acquisition instant), the same answers. `remaining` is the room left now; `reset_after` is
/// when the newest lease ends; a denial's `retry_after` is when enough leases end if none is
/// released first (a release can only make it sooner).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::{Limiter, Moment};
/// use slidewin::limit::Leases;
///
/// // Two requests in flight at most; a request lives at most 30 s.
/// let mut in_flight = Limiter::new(Leases::new(2, Duration::from_secs(30))?);
/// assert!(in_flight.check(Moment::from_secs(0), 1)?.allowed());
/// assert!(in_flight.check(Moment::from_secs(1), 1)?.allowed());
/// let third = in_flight.check(Moment::from_secs(2), 1)?;
/// assert_eq!(third.retry_after(), Some(Duration::from_secs(28))); // the first lease ends
///
/// // The first request ends: its unit comes back at once.
/// assert_eq!(in_flight.release(Moment::from_secs(3), 1), 1);
/// assert!(in_flight.check(Moment::from_secs(3), 1)?.allowed());
///
/// // Their holders die: no release ever comes, and the leases end by themselves.
/// assert!(in_flight.check(Moment::from_secs(33), 2)?.allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Leases {
    log: SlidingLog,
}

impl Leases {
    /// At most `limit` units in flight, each held at most `lease`.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for a limit of 0 or a lease of 0, as for a [`Quota`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::limit::Leases;
    ///
    /// let leases = Leases::new(10, Duration::from_secs(60))?;
    /// assert_eq!((leases.limit(), leases.lease()), (10, Duration::from_secs(60)));
    /// assert!(Leases::new(0, Duration::from_secs(60)).is_err());
    /// assert!(Leases::new(10, Duration::ZERO).is_err());
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    pub fn new(limit: u64, lease: Duration) -> Result<Leases, ConfigError> {
        Leases::from_quota(Quota::new(limit, lease)?)
    }

    /// At most `quota.limit()` units in flight, each held at most `quota.span()`: `"2 per 30
    /// seconds"` reads as two in flight, leases of 30 seconds.
    ///
    /// # Errors
    ///
    /// [`ConfigError::BurstUnsupported`] for a quota with a burst other than its limit.
    ///
    /// ```
    /// use slidewin::limit::Leases;
    /// assert_eq!(Leases::from_quota("2 per 30s".parse()?)?.limit(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_quota(quota: Quota) -> Result<Leases, ConfigError> {
        Ok(Leases {
            log: SlidingLog::new(quota.without_burst("Leases")?)?,
        })
    }

    /// The most units in flight.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::limit::Leases;
    /// assert_eq!(Leases::new(3, Duration::from_secs(1))?.limit(), 3);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn limit(&self) -> u64 {
        self.log.quota().limit()
    }

    /// The longest a unit is held without a release.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::limit::Leases;
    /// assert_eq!(Leases::new(3, Duration::from_secs(9))?.lease(), Duration::from_secs(9));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn lease(&self) -> Duration {
        self.log.quota().span()
    }

    /// The limit and the lease as a quota: `limit per lease`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::limit::Leases;
    /// let leases = Leases::new(2, Duration::from_secs(30))?;
    /// assert_eq!(leases.quota().to_string(), "2 per 30s");
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn quota(&self) -> Quota {
        self.log.quota()
    }
}

impl Algorithm for Leases {}

/// Every answer is the log's; a release gives back its oldest units.
impl Enforce for Leases {
    type Output = Decision;
    type State = SlidingLogState;
    type Cell = Locked<SlidingLogState>;
    type Pending = Counted;

    #[inline]
    fn fresh(&self) -> SlidingLogState {
        self.log.fresh()
    }

    #[inline(always)]
    fn prepare(
        &self,
        state: &SlidingLogState,
        now: Moment,
        cost: u64,
    ) -> Result<(Decision, Counted), LimitError> {
        self.log.prepare(state, now, cost)
    }

    #[inline(always)]
    fn commit(state: &mut SlidingLogState, pending: Counted, cost: u64) {
        SlidingLog::commit(state, pending, cost);
    }

    fn release(&self, state: &mut SlidingLogState, now: Moment, units: u64) -> u64 {
        self.log.release_oldest(state, now, units)
    }

    #[inline]
    fn counted_at(&self, counted: &Counted, now: Moment) -> Moment {
        self.log.counted_at(counted, now)
    }

    /// As the log's: the units of the reservation's stamp, changed in place (a request that
    /// turned out to hold more or fewer units than it acquired); a stamp released or past its
    /// lease changes nothing.
    fn settle(&self, state: &mut SlidingLogState, reservation: Reservation, actual: u64) -> bool {
        self.log.settle(state, reservation, actual)
    }

    #[inline]
    fn idle_at(&self, state: &SlidingLogState) -> Option<Moment> {
        self.log.idle_at(state)
    }

    #[inline]
    fn sweep_every(&self) -> u64 {
        self.log.sweep_every()
    }

    fn carry(&self, old: &Leases, state: SlidingLogState, now: Moment) -> Option<SlidingLogState> {
        self.log.carry(&old.log, state, now)
    }

    #[inline]
    fn heap_bytes(&self, state: &SlidingLogState) -> usize {
        self.log.heap_bytes(state)
    }

    #[inline]
    fn growth_bytes(&self, state: &SlidingLogState, now: Moment) -> usize {
        self.log.growth_bytes(state, now)
    }
}
