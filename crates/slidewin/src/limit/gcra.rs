//! [`Gcra`]: the token bucket as the generic cell rate algorithm, in one word of state.

use std::time::Duration;

use crate::divisor::Divisor;
use crate::error::ConfigError;
use crate::limit::algorithm::sealed::{Enforce, OneWord};
use crate::limit::algorithm::{Algorithm, Word};
use crate::limit::{Decision, LimitError, Quota, Reservation};
use crate::time::Moment;

/// The token bucket, as the generic cell rate algorithm (GCRA): a bucket of `burst` units that
/// refills at `limit` per `span`, kept as one number, the *theoretical arrival time* (TAT) at
/// which the bucket would be full again. 8 bytes of state; lock-free in a
/// [`SharedLimiter`](crate::SharedLimiter).
///
/// With emission interval `T = span / limit` and tolerance `τ = T × (burst - 1)`, a cost `n`
/// is admitted at `now` when `now >= TAT + T × (n - 1) - τ`, and then
/// `TAT = max(TAT, now) + T × n`. `T` is rounded **up** to the nanosecond, so the sustained
/// rate never exceeds the quota (it is below it by at most one nanosecond per unit).
///
/// **It is not a sliding window.** After a quiet spell it admits `burst` at once and then
/// refills while the window still holds them: in a window of one span it can admit up to
/// `burst + limit - 1` (governor issues #16 and #39, where `10/s` let about 15 per second
/// through). With `burst` 1 it spaces requests evenly; [`SlidingLog`](crate::limit::SlidingLog) is
/// the exact limit.
///
/// It admits at most one unit of cost per nanosecond: a quota whose limit is above its span in
/// nanoseconds (`1001/µs`, `18446744073709551615/ns`) is refused with
/// [`ConfigError::Unrepresentable`].
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::{Limiter, Moment};
/// use slidewin::limit::Gcra;
///
/// let mut limiter = Limiter::new(Gcra::new("10/s burst 2".parse()?)?);
/// assert!(limiter.check(Moment::ZERO, 2)?.allowed()); // the burst
/// let denied = limiter.check(Moment::ZERO, 1)?;
/// assert_eq!(denied.retry_after(), Some(Duration::from_millis(100))); // one interval
/// assert!(limiter.check(Moment::from_millis(100), 1)?.allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Gcra {
    quota: Quota,
    /// `T`, in nanoseconds: the span divided by the limit, rounded up. At least 1.
    interval: u64,
    /// `τ = T × (burst - 1)`, in nanoseconds.
    tolerance: u64,
    /// Division by `T` as multiplications (`None` when `T` is 1 ns): `remaining` is on every
    /// check's path, and a division costs more than the rest of a check.
    per_interval: Option<Divisor>,
}

impl Gcra {
    /// The rules of a token bucket for `quota`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Unrepresentable`] for more than one unit of cost per nanosecond, or a
    /// burst that takes longer than 584 years to refill.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::limit::Gcra;
    ///
    /// let rules = Gcra::new("10/s burst 20".parse()?)?;
    /// assert_eq!(rules.quota().burst(), 20);
    /// assert!(Gcra::new("1001/us".parse()?).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(quota: Quota) -> Result<Gcra, ConfigError> {
        let unrepresentable = |reason| ConfigError::Unrepresentable {
            algorithm: "Gcra",
            quota,
            reason,
        };
        if quota.span_nanos() < quota.limit() {
            return Err(unrepresentable(
                "more than one unit of cost per nanosecond: its emission interval \
                 (span / limit) is at least 1ns, so the limit can be at most the span in \
                 nanoseconds",
            ));
        }
        let interval = quota.span_nanos().div_ceil(quota.limit());
        let tolerance = interval
            .checked_mul(quota.burst() - 1)
            .ok_or_else(|| unrepresentable("the burst takes longer than 584 years to refill"))?;
        Ok(Gcra {
            quota,
            interval,
            tolerance,
            per_interval: Divisor::new(interval),
        })
    }

    /// The quota it enforces.
    ///
    /// ```
    /// use slidewin::limit::Gcra;
    /// assert_eq!(Gcra::new("5/s".parse()?)?.quota().burst(), 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The emission interval `T`: the time one unit of cost takes to refill.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::limit::Gcra;
    ///
    /// let rules = Gcra::new("3/s".parse()?)?;
    /// assert_eq!(rules.emission_interval(), Duration::from_nanos(333_333_334)); // rounded up
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn emission_interval(&self) -> Duration {
        Duration::from_nanos(self.interval)
    }

    /// How many more units are admitted at `now` for a bucket whose TAT is `tat`: those `k`
    /// with `tat + T × (k - 1) - τ <= now`.
    #[inline]
    fn remaining(&self, tat: u64, now: u64) -> u64 {
        match now.saturating_add(self.tolerance).checked_sub(tat) {
            Some(room) => self
                .per_interval
                .map_or(room, |d| d.divide(room))
                .saturating_add(1)
                .min(self.quota.burst()),
            None => 0,
        }
    }

    /// The decision, and the TAT after it. Plain 64-bit arithmetic: an overflow can only mean
    /// the end of the timeline (584 years from its origin), where a TAT cannot be recorded, so
    /// a cost that would need one is denied for good.
    #[inline(always)]
    fn decide(&self, tat: u64, now: Moment, cost: u64) -> Result<(Decision, u64), LimitError> {
        let burst = self.quota.burst();
        // A burst is at least 1: a cost of 1, the usual one and often a constant, needs no
        // comparison (the one instruction that governor's loop does not have).
        if cost > 1 && cost > burst {
            return Err(LimitError::CostTooHigh { cost, max: burst });
        }
        let now = now.as_nanos();
        let reset_after = |tat: u64| tat.saturating_sub(now);
        if cost == 0 {
            let decision = Decision::allow_nanos(burst, self.remaining(tat, now), reset_after(tat));
            return Ok((decision, tat));
        }
        // `T × (cost - 1) <= τ`, which fits, since `cost <= burst`.
        let admits_at = tat
            .checked_add(self.interval * (cost - 1))
            .map(|t| t.saturating_sub(self.tolerance));
        let next = (self.interval * (cost - 1))
            .checked_add(self.interval)
            .and_then(|weight| tat.max(now).checked_add(weight));
        match (admits_at, next) {
            (Some(admits_at), Some(next)) if now >= admits_at => {
                let decision =
                    Decision::allow_nanos(burst, self.remaining(next, now), reset_after(next));
                Ok((decision, next))
            }
            (admits_at, next) => {
                let retry_after = match (admits_at, next) {
                    (Some(admits_at), Some(_)) => admits_at.saturating_sub(now),
                    _ => u64::MAX, // never
                };
                let decision = Decision::deny_nanos(
                    burst,
                    self.remaining(tat, now),
                    reset_after(tat),
                    retry_after,
                );
                Ok((decision, tat))
            }
        }
    }
}

impl Algorithm for Gcra {}

impl Enforce for Gcra {
    type Output = Decision;

    #[inline]
    fn sweep_every(&self) -> u64 {
        self.quota.span_nanos()
    }
    /// The theoretical arrival time, in nanoseconds; 0 (or any time past) is a full bucket.
    type State = u64;
    type Cell = Word;

    #[inline]
    fn fresh(&self) -> u64 {
        0
    }

    /// The TAT after an admission.
    type Pending = u64;

    #[inline(always)]
    fn prepare(&self, tat: &u64, now: Moment, cost: u64) -> Result<(Decision, u64), LimitError> {
        self.decide(*tat, now, cost)
    }

    #[inline(always)]
    fn commit(tat: &mut u64, next: u64, _cost: u64) {
        *tat = next;
    }

    /// The bucket keeps what it owes. The TAT stays, or moves later, never earlier:
    ///
    /// * A rate raised (or the same): the TAT stays. The bucket owes the same time, and
    ///   refills at the new rate: `10/s` with 5 units used (a TAT 500 ms ahead) leaves 50 of
    ///   `100/s`, not 95. That is what Redis answers, which keeps the TAT under the rule's name
    ///   and reads it under the new quota, so the backends agree; and it never admits more
    ///   than the units owed, converted, would (`d × T' / T <= d`).
    /// * A rate lowered: the units owed, converted. A TAT `d` nanoseconds ahead of `now` owes
    ///   `d / T` units, which at the new rate take `d × T' / T` (rounded up), more than `d`:
    ///   keeping the TAT would admit units the client already used. At most an empty new
    ///   bucket, `T' × burst'`, the most a bucket of the new quota can owe after its own
    ///   checks. Redis keeps the TAT here too, so it admits sooner than memory, by at most
    ///   that conversion.
    ///
    /// A bucket already full at `now` is fresh (`None`). A TAT more than a whole old bucket
    /// ahead of `now` was set after `now` (a clock gone back): the state's own time is then
    /// somewhere in `[TAT - T × burst, TAT)`, and the carry takes the most restrictive of the
    /// conversions at those times. All in 128 bits or saturating: no quota (up to
    /// `u64::MAX`) or TAT can overflow it.
    fn carry(&self, old: &Gcra, tat: u64, now: Moment) -> Option<u64> {
        let now = now.as_nanos();
        if tat <= now {
            return None;
        }
        // What an empty bucket owes, in nanoseconds, at the old rate and at the new one.
        let old_empty = old.tolerance.saturating_add(old.interval);
        let new_empty = self.tolerance.saturating_add(self.interval);
        // The TAT kept, or the debt at `at` (before `tat`) converted, whichever is later.
        let convert = |at: u64| {
            let owed = u128::from(tat - at) * u128::from(self.interval);
            let owed = owed.div_ceil(u128::from(old.interval));
            let owed = u64::try_from(owed).map_or(new_empty, |owed| owed.min(new_empty));
            at.saturating_add(owed).max(tat)
        };
        if tat - now <= old_empty {
            return Some(convert(now));
        }
        // The clock is behind the state. Before the `max`, the conversion is concave in `at`
        // (the least of two lines), so its highest value over `[tat - old_empty, tat)` is at
        // an end (at most the TAT, as `at` nears it) or at its bend, where the debt converted
        // is a whole new bucket: `at = tat - T × burst'`.
        let earliest = tat - old_empty;
        let bend = old
            .interval
            .checked_mul(self.quota.burst())
            .filter(|&owed| owed < old_empty)
            .map_or(tat, |owed| convert(tat - owed));
        Some(convert(earliest).max(bend))
    }

    /// The TAT moved by the difference, in emission intervals: later by what was used beyond
    /// the estimate (debt: the bucket refills that much later), but never past a span and a
    /// full bucket after the reservation's time (`T × (limit + burst)`: a span's debt, the
    /// sliding log's bound, and Redis's numbers stay exact); earlier by what was not used,
    /// never before the reservation's time plus what it did use (a TAT every later admission
    /// left at least there). An [`unreserved`](Reservation::unreserved) reservation is an
    /// admission of `actual` at its time, past the bucket's size if need be. A bucket keeps no record of when it
    /// refilled, so a settle down after it refilled past the reservation gives back units
    /// already refilled: at most the difference, once. Whether the TAT moved.
    fn settle(&self, tat: &mut u64, reservation: Reservation, actual: u64) -> bool {
        let interval = u128::from(self.interval);
        let before = *tat;
        let estimate = reservation.units();
        if estimate == 0 && actual == 0 {
            return false; // nothing reserved, nothing to charge
        }
        if actual >= estimate {
            let owed = u128::from(self.quota.limit()) + u128::from(self.quota.burst());
            let ceiling = u128::from(reservation.at().as_nanos()) + owed * interval;
            // An unreserved charge is an admission at its time: a bucket refilled before it
            // is full then.
            let from = match estimate {
                0 => before.max(reservation.at().as_nanos()),
                _ => before,
            };
            let later = u128::from(from) + u128::from(actual - estimate) * interval;
            let later = later.min(ceiling).max(u128::from(before));
            *tat = u64::try_from(later).unwrap_or(u64::MAX);
        } else {
            let earlier = u128::from(estimate - actual) * interval;
            let floor = u128::from(reservation.at().as_nanos()) + u128::from(actual) * interval;
            let moved = u128::from(before).saturating_sub(earlier).max(floor);
            // Never later than it was: a floor above the TAT is a reservation it never held.
            *tat = u64::try_from(moved).map_or(before, |moved| moved.min(before));
        }
        *tat != before
    }

    /// The TAT: the bucket is full again then.
    #[inline]
    fn idle_at(&self, tat: &u64) -> Option<Moment> {
        Some(Moment::from_nanos(*tat))
    }
}

impl OneWord for Gcra {
    #[inline]
    fn pack(&self, tat: &u64) -> u64 {
        *tat
    }

    #[inline]
    fn unpack(&self, word: u64) -> u64 {
        word
    }
}
