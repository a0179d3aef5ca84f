//! [`TscClock`]: the layer's default clock, on the CPU's time-stamp counter.

use std::fmt;

use slidewin::{Clock, Moment};

/// A monotonic clock on the CPU's time-stamp counter, read through the `quanta` crate (which
/// falls back to the operating system's monotonic clock where the counter cannot be trusted):
/// the [`RateLimitLayer`](crate::RateLimitLayer)'s default, since it reads the time twice a
/// request (the decision's, and the end of the wrapped service's answer, for its latency).
///
/// A read costs about 13 ns on the machine of BENCHMARKS.md, against 33 ns for `Instant::now`
/// (a `clock_gettime` through the vDSO). Its moments are Unix time: the system clock's when it
/// was made, plus the counter's time since, so a calendar quota's windows
/// ([`Calendar`](slidewin::limit::Calendar)) fall on the calendar's dates, and a system clock
/// stepped back later moves nothing. Two clocks made apart may differ by the system clock's
/// steps between them: compare a clock's moments with its own or its clones', and read the
/// layer's statistics at [`layer.clock().now()`](crate::RateLimitLayer::clock).
///
/// ```
/// use slidewin::Clock;
/// use slidewin_http::TscClock;
///
/// let clock = TscClock::new();
/// let (a, b) = (clock.now(), clock.clone().now());
/// assert!(b >= a);
/// assert!(a > slidewin::Moment::from_secs(1_600_000_000)); // Unix time: after September 2020
/// ```
#[derive(Clone)]
pub struct TscClock {
    clock: quanta::Clock,
    origin: quanta::Instant,
    /// The Unix time at `origin`.
    unix: Moment,
}

impl TscClock {
    /// A clock that reads the system's Unix time now, and moves by the counter from then on.
    /// The first one made in a process calibrates the counter against the operating system's
    /// clock (a few milliseconds).
    #[must_use]
    pub fn new() -> TscClock {
        let clock = quanta::Clock::new();
        let origin = clock.now();
        let unix = slidewin::time::SystemClock.now();
        TscClock {
            clock,
            origin,
            unix,
        }
    }
}

impl Default for TscClock {
    fn default() -> TscClock {
        TscClock::new()
    }
}

impl Clock for TscClock {
    #[inline]
    fn now(&self) -> Moment {
        let since = self.clock.now().saturating_duration_since(self.origin);
        // 584 years of nanoseconds fit in a u64; past them, the end of the timeline.
        let since = u64::try_from(since.as_nanos()).unwrap_or(u64::MAX);
        Moment::from_nanos(self.unix.as_nanos().saturating_add(since))
    }
}

impl fmt::Debug for TscClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TscClock").finish_non_exhaustive()
    }
}
