//! What the property tests of the limiters share: a decision's fields, and the exact sliding
//! window computed the obvious way.

#![allow(dead_code)] // each test binary uses part of it

use std::time::Duration;

use slidewin::Decision;

/// A decision's fields, to compare with what a reference computes.
pub(crate) type Fields = (bool, u64, u64, Duration, Option<Duration>);

pub(crate) fn fields(d: Decision) -> Fields {
    (
        d.allowed(),
        d.limit(),
        d.remaining(),
        d.reset_after(),
        d.retry_after(),
    )
}

/// The exact sliding window, the obvious way: every admitted unit's time, counted in the window
/// `(at - span, at]`, where `at` is the request's time or the newest admission's if later (the
/// limiter's time never goes back); waits are from the caller's `now`. A count above the limit
/// (a lower limit, after a carry) has nothing remaining.
pub(crate) struct ReferenceLog {
    pub(crate) limit: u64,
    pub(crate) span: u64,
    pub(crate) units: Vec<u64>,
}

impl ReferenceLog {
    pub(crate) fn check(&mut self, now: u64, cost: u64) -> Fields {
        let at = self.units.iter().copied().max().map_or(now, |t| t.max(now));
        let mut live: Vec<u64> = self
            .units
            .iter()
            .copied()
            .filter(|t| t + self.span > at)
            .collect();
        live.sort_unstable();
        let count = live.len() as u64;
        let leaves = |t: u64| Duration::from_nanos((t + self.span).saturating_sub(now));
        if count + cost <= self.limit {
            self.units.extend(std::iter::repeat_n(at, cost as usize));
            live.extend(std::iter::repeat_n(at, cost as usize));
            let reset = live.last().map_or(Duration::ZERO, |t| leaves(*t));
            (true, self.limit, self.limit - count - cost, reset, None)
        } else {
            let must_leave = live[(count + cost - self.limit - 1) as usize];
            let reset = live.last().map_or(Duration::ZERO, |t| leaves(*t));
            let remaining = self.limit.saturating_sub(count);
            (
                false,
                self.limit,
                remaining,
                reset,
                Some(leaves(must_leave)),
            )
        }
    }

    /// What a log of span `span` still holds: the units inside the window at the newest one.
    pub(crate) fn known(&self, span: u64) -> Vec<u64> {
        let newest = self.units.iter().copied().max().unwrap_or(0);
        self.units
            .iter()
            .copied()
            .filter(|t| t + span > newest)
            .collect()
    }
}
