//! Sliding time windows: count and measure what happened in the last N seconds, exactly.
//!
//! The core crate is pure and synchronous: no I/O, no threads, no async. The everyday types
//! are at the root; the rest live in a module named after what they are about:
//!
//! | module | what is in it | start with |
//! |---|---|---|
//! | [`time`] | the timeline and the clocks | [`Moment`], [`Clock`], [`ManualClock`](time::ManualClock) for tests |
//! | [`event_window`] | an exact log of the events in a window | [`EventWindow`] |
//! | [`limit`] | rate limits: quotas, four algorithms, rule sets, holders; concurrency limits ([`Leases`](limit::Leases)) | [`Limiter`], [`SharedLimiter`], [`Keyed`] |
//! | [`stats`] | bucketed statistics over a window | [`MovingStat`], [`WindowMetrics`] |
//! | [`interval`] | half-open intervals and sets of them | [`Interval`] |
//! | [`period`] | calendar periods between dates, on jiff | [`Period`] |
//! | [`debounce`] | lodash's `debounce` and `throttle` for one key, driven by hand | [`Debounced`](debounce::Debounced) |
//! | [`breaker`] | a circuit breaker on the window statistics | [`CircuitBreaker`] |
//! | [`shed`] | load shedding: a concurrency limit that adapts to latency (AIMD) | [`AdaptiveLimit`] |
//!
//! Bad configuration is a [`ConfigError`] that names the value, never a panic.
//!
//! # Time is a parameter
//!
//! A method whose name has no suffix takes the time as a parameter (`check(now, cost)`,
//! `record(t, payload)`, `stats(now)`), so tests and replays choose it. The same name ending in
//! `_now` reads it from a [`Clock`] instead (`check_now(&clock, cost)`); a structure with a
//! lock reads the clock while holding it. `slidewin-redis` says the same, with the Redis
//! server's clock for `_now` and the Unix timeline for an explicit time. See [`time`].
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
//! | [`WindowMetrics`] | requests ([`MetricEvent`](stats::MetricEvent)s and response times) | counts and rates per event, RT avg/min/max, exception ratio, buckets | shared (`&self`), lock-free |
//!
//! ```
//! use std::time::Duration;
//! use slidewin::stats::MetricEvent;
//! use slidewin::{Moment, MovingStat, WindowMetrics};
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
//! # Circuit breaking
//!
//! A [`CircuitBreaker`] counts the outcomes of calls to what is behind it in a
//! [`WindowMetrics`] window and stops calling it when too many fail or are slow: resilience4j's
//! states (closed, open for a wait, half-open with a few probe calls, and forced-open and
//! disabled for operators) and Sentinel's three rules (error ratio, error count, slow-call
//! ratio) with a minimum number of calls. Each change of state is a
//! [`Transition`](breaker::Transition) returned to the caller that made it, with its time and the
//! statistics behind it.
//!
//! ```
//! use std::time::Duration;
//! use slidewin::{CircuitBreaker, Moment};
//!
//! let breaker = CircuitBreaker::builder().error_ratio(0.5).min_calls(2).build(Moment::ZERO)?;
//! let now = Moment::from_secs(1);
//! assert!(breaker.on_success(now, Duration::from_millis(30)).is_none());
//! let opened = breaker.on_error(now, Duration::from_millis(30)).unwrap();
//! assert_eq!(opened.to_string(), "closed -> open at 1s: error ratio reached (2 calls, 1 errors, 0 slow)");
//! assert_eq!(breaker.try_acquire(now).unwrap_err().retry_after, Some(Duration::from_secs(60)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Intervals and calendar periods
//!
//! [`Interval`] is a half-open `[start, end)` over any ordered point (integers, [`Moment`],
//! [`jiff::Timestamp`]): touching intervals abut but do not overlap, and
//! [`Relation`](interval::Relation) names one of Allen's 13 relations.
//! [`IntervalSet`](interval::IntervalSet) merges intervals given in any order and answers
//! union, intersection, difference and complement in linear merges. [`Period`] measures years,
//! months, days (and time) between dates or datetimes on jiff's calendar, with an explicit
//! [`MonthEnd`](period::MonthEnd) convention, and writes itself in words
//! ([`Labels`](period::Labels)).
//!
//! ```
//! use jiff::civil::date;
//! use slidewin::interval::IntervalSet;
//! use slidewin::period::MonthEnd;
//! use slidewin::{Interval, Period};
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
//! use slidewin::time::ManualClock;
//! use slidewin::{EventWindow, Moment};
//!
//! let clock = ManualClock::new(Moment::ZERO);
//! let mut logins = EventWindow::new(Duration::from_secs(10))?;
//! for user in ["ann", "bob", "ann"] {
//!     logins.record_now(&clock, user);
//!     clock.advance(Duration::from_secs(4));
//! }
//! // Now 12 s: the login at 0 s has left (0, 4 and 8 s were recorded).
//! let mut gone = Vec::new();
//! logins.expire_now(&clock, |(t, user)| gone.push(format!("{user} at {t}")));
//! assert_eq!(gone, ["ann at 0ns"]);
//! assert_eq!(logins.len(), 2);
//! # Ok::<(), slidewin::ConfigError>(())
//! ```

pub mod breaker;
pub mod debounce;
mod divisor;
mod error;
pub mod event_window;
pub mod interval;
pub mod limit;
pub mod period;
pub mod shed;
mod slide_vec;
mod spin;
pub mod stats;
pub mod time;

pub use breaker::CircuitBreaker;
pub use error::ConfigError;
pub use event_window::EventWindow;
pub use interval::Interval;
pub use limit::{Decision, Keyed, Limiter, Quota, SharedLimiter};
pub use period::Period;
pub use shed::AdaptiveLimit;
pub use stats::{MovingStat, WindowMetrics};
pub use time::{Clock, Moment};

// The README's examples are tests too.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
