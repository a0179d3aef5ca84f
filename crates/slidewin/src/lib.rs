//! Sliding time windows: count and measure what happened in the last N seconds, exactly.
//!
//! The core crate is pure and synchronous: no I/O, no threads, no async. Every structure takes
//! the time as a parameter at its lowest level, so tests and replays choose it, and a [`Clock`]
//! supplies it at the convenience level.
//!
//! # The window convention
//!
//! An event at `t` is inside the window of span `S` at time `now` when `now - S < t <= now`:
//! the half-open interval `(now - S, now]`. An event exactly `S` old has left. Every structure
//! of slidewin agrees, so the windows ending at `now - S` and at `now` never share an event.
//!
//! # Rate limits
//!
//! A [`Quota`] (`"100/minute"`, `"10/s burst 20"`), one of four algorithms, and a holder for
//! its state: [`Limiter`] (one owner), [`SharedLimiter`] (threads; lock-free where the
//! algorithm allows) or [`Keyed`] (a limiter per key, bounded memory). Every one answers
//! `check(now, cost)` with a [`Decision`], and a denied request consumes nothing. Several named
//! rules checked together, all or nothing, are a [`RuleSet`](limit::RuleSet). See the
//! [`limit`] module for which to choose.
//!
//! ```
//! use slidewin::{Limiter, Moment};
//! use slidewin::limit::SlidingLog;
//!
//! let mut limiter = Limiter::new(SlidingLog::new("3 per 10 seconds".parse()?)?);
//! let now = Moment::from_secs(100);
//! let decisions: Vec<bool> = (0..4).map(|_| limiter.check(now, 1).unwrap().allowed()).collect();
//! assert_eq!(decisions, [true, true, true, false]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Statistics over a window
//!
//! Two bucketed structures answer "how much, how fast" without keeping every event: memory
//! follows the number of buckets, not of events, and figures are within one bucket of the
//! exact window.
//!
//! | structure | for | figures | threads |
//! |---|---|---|---|
//! | [`MovingStat`] | any number: bytes, latencies, reconnects | sum, count, rate, min, max, mean | one owner (`&mut`) |
//! | [`WindowMetrics`] | requests ([`MetricEvent`]s and response times) | counts and rates per event, RT avg/min/max, exception ratio, buckets | shared (`&self`), lock-free |
//!
//! ```
//! use std::time::Duration;
//! use slidewin::{MetricEvent, Moment, MovingStat, WindowMetrics};
//!
//! let mut reconnects = MovingStat::new(Duration::from_secs(30), Duration::from_secs(1), Moment::ZERO)?;
//! for i in 0..20 {
//!     reconnects.add(Moment::from_millis(i * 150), 1.0)?;
//! }
//! assert!(reconnects.tally(Moment::from_secs(3)).rate() >= 1.0); // a reconnect loop: back off
//!
//! let metrics = WindowMetrics::new(Duration::from_secs(1), 2, Moment::ZERO)?;
//! metrics.add(Moment::from_millis(10), MetricEvent::Pass, 1);
//! assert_eq!(metrics.stats(Moment::from_millis(20)).count(MetricEvent::Pass), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Intervals and calendar periods
//!
//! [`Interval`] is a half-open `[start, end)` over any ordered point (integers, [`Moment`],
//! [`jiff::Timestamp`]): touching intervals abut but do not overlap, and [`Relation`] names
//! one of Allen's 13 relations. [`IntervalSet`] merges intervals given in any order and
//! answers union, intersection, difference and complement in linear merges. [`Period`]
//! measures years, months, days (and time) between dates or datetimes on jiff's calendar,
//! with an explicit [`MonthEnd`] convention, and writes itself in words ([`Labels`]).
//!
//! ```
//! use jiff::civil::date;
//! use slidewin::{Interval, IntervalSet, MonthEnd, Period};
//!
//! let busy = IntervalSet::from_iter([Interval::new(9, 10)?, Interval::new(10, 11)?]);
//! assert_eq!(busy.as_slice(), [Interval::new(9, 11)?]);
//!
//! let p = Period::between_dates(date(2024, 2, 29), date(2025, 2, 28), MonthEnd::Clamp)?;
//! assert_eq!(p.to_string(), "1 year");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use slidewin::{Clock, EventWindow, ManualClock, Moment};
//!
//! let clock = ManualClock::new(Moment::ZERO);
//! let mut logins = EventWindow::new(Duration::from_secs(10))?;
//! for user in ["ann", "bob", "ann"] {
//!     logins.record(clock.now(), user);
//!     clock.advance(Duration::from_secs(4));
//! }
//! // Now 12 s: the login at 0 s has left (0, 4 and 8 s were recorded).
//! let mut gone = Vec::new();
//! logins.expire(clock.now(), |(t, user)| gone.push(format!("{user} at {t}")));
//! assert_eq!(gone, ["ann at 0ns"]);
//! assert_eq!(logins.len(), 2);
//! # Ok::<(), slidewin::ConfigError>(())
//! ```

pub mod debounce;
mod divisor;
mod error;
mod event_window;
mod interval;
pub mod limit;
mod metrics;
mod moving_stat;
mod slide_vec;
pub mod time;

pub use error::{ConfigError, TimeRangeError};
pub use event_window::{EventWindow, Events};
pub use interval::{
    Difference, Gaps, Interval, IntervalError, IntervalSet, Labels, MonthEnd, Period, PeriodError,
    Relation,
};
pub use limit::{Decision, Keyed, Limiter, Quota, SharedLimiter};
pub use metrics::{MAX_SAMPLE_COUNT, MetricEvent, MetricStats, WindowMetrics};
pub use moving_stat::{MovingStat, SampleError, Tally};
pub use time::{Clock, ManualClock, Moment, MonotonicClock, SystemClock};

// The README's examples are tests too.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
