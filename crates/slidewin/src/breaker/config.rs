//! [`CircuitBreakerBuilder`]: a breaker's rules, window and waits, checked before anything is
//! built ([`BreakerConfigError`] names the bound a value broke), and the rules' verdicts.

use std::fmt;
use std::time::Duration;

use super::CircuitBreaker;
use super::state::{MAX_PROBES, Probes};
use super::transition::{CallStats, Rule, ratio};
use crate::error::ConfigError;
use crate::time::{Moment, duration_nanos};

/// A breaker's settings, checked: see [`CircuitBreakerBuilder`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Config {
    pub(super) error_ratio: Option<f64>,
    pub(super) error_count: Option<u64>,
    /// The ratio, and the duration above which a call is slow.
    pub(super) slow: Option<(f64, Duration)>,
    pub(super) min_calls: u64,
    pub(super) wait: Duration,
    pub(super) probes: u32,
}

impl Config {
    /// Whether a call that took `duration` is slow: strictly longer than the threshold.
    pub(super) fn is_slow(&self, duration: Duration) -> bool {
        self.slow.is_some_and(|(_, threshold)| duration > threshold)
    }

    /// The first rule the window reaches, once it holds at least `min_calls` calls.
    pub(super) fn tripped(&self, stats: &CallStats) -> Option<Rule> {
        if stats.calls < self.min_calls {
            return None;
        }
        self.reached(stats, self.error_count)
    }

    /// The first rule the probes reach, once all of them completed. The error count applies
    /// to the probes capped at their number, so that it can be reached.
    pub(super) fn probes_failed(&self, probes: Probes) -> Option<Rule> {
        let stats = probes.stats();
        let count = self.error_count.map(|n| n.min(u64::from(self.probes)));
        self.reached(&stats, count)
    }

    fn reached(&self, stats: &CallStats, error_count: Option<u64>) -> Option<Rule> {
        let at_least =
            |part: u64, threshold: f64| ratio(part, stats.calls).is_some_and(|r| r >= threshold);
        if self.error_ratio.is_some_and(|r| at_least(stats.errors, r)) {
            Some(Rule::ErrorRatio)
        } else if error_count.is_some_and(|n| stats.errors >= n) {
            Some(Rule::ErrorCount)
        } else if self.slow.is_some_and(|(r, _)| at_least(stats.slow, r)) {
            Some(Rule::SlowCallRatio)
        } else {
            None
        }
    }
}

/// Builds a [`CircuitBreaker`]: at least one rule, and optionally the window, the minimum
/// number of calls, the wait and the probes. From [`CircuitBreaker::builder`].
///
/// | setting | default | bound |
/// |---|---|---|
/// | [`error_ratio`](Self::error_ratio) | off | in `(0, 1]` |
/// | [`error_count`](Self::error_count) | off | at least 1 |
/// | [`slow_call_ratio`](Self::slow_call_ratio) | off | in `(0, 1]` |
/// | [`window`](Self::window) | 10 s in 10 buckets | as [`WindowMetrics::new`](crate::WindowMetrics::new) |
/// | [`min_calls`](Self::min_calls) | 10 | at least 1 |
/// | [`wait`](Self::wait) | 60 s | longer than zero, at most 584 years |
/// | [`probes`](Self::probes) | 10 | 1 to 1,024 |
///
/// A rule is *reached* at its threshold (resilience4j's `>=`; Sentinel trips only above it).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::Moment;
/// use slidewin::breaker::{BreakerConfigError, CircuitBreaker, Rule};
///
/// let breaker = CircuitBreaker::builder()
///     .error_ratio(0.5)
///     .slow_call_ratio(0.8, Duration::from_millis(500))
///     .window(Duration::from_secs(30), 30)
///     .min_calls(20)
///     .wait(Duration::from_secs(10))
///     .probes(3)
///     .build(Moment::ZERO)?;
/// assert_eq!(breaker.wait(), Duration::from_secs(10));
///
/// let err = CircuitBreaker::builder().error_ratio(1.5).build(Moment::ZERO).unwrap_err();
/// assert_eq!(err, BreakerConfigError::RatioOutOfRange { rule: Rule::ErrorRatio, ratio: 1.5 });
/// assert_eq!(err.to_string(), "the error ratio must be in (0, 1], got 1.5");
/// # Ok::<(), BreakerConfigError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `build`"]
pub struct CircuitBreakerBuilder {
    config: Config,
    span: Duration,
    buckets: u32,
}

impl CircuitBreakerBuilder {
    pub(super) fn new() -> CircuitBreakerBuilder {
        CircuitBreakerBuilder {
            config: Config {
                error_ratio: None,
                error_count: None,
                slow: None,
                min_calls: 10,
                wait: Duration::from_secs(60),
                probes: 10,
            },
            span: Duration::from_secs(10),
            buckets: 10,
        }
    }

    /// Trip when the failed calls are at least `ratio` of the calls in the window (Sentinel's
    /// `ERROR_RATIO`, resilience4j's `failureRateThreshold` over 100).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::{CircuitBreaker, State};
    /// let breaker = CircuitBreaker::builder().error_ratio(0.25).min_calls(4).build(Moment::ZERO)?;
    /// for error in [false, false, false, true] {
    ///     let _ = breaker.on_result(Moment::ZERO, Duration::ZERO, error);
    /// }
    /// assert_eq!(breaker.state(Moment::ZERO), State::Open); // 1 of 4: exactly the threshold
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn error_ratio(mut self, ratio: f64) -> Self {
        self.config.error_ratio = Some(ratio);
        self
    }

    /// Trip when at least `count` calls in the window failed (Sentinel's `ERROR_COUNT`, which
    /// trips above its count: its `n` is `n + 1` here).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::{CircuitBreaker, State};
    /// let breaker = CircuitBreaker::builder().error_count(3).min_calls(1).build(Moment::ZERO)?;
    /// for _ in 0..3 {
    ///     let _ = breaker.on_error(Moment::ZERO, Duration::ZERO);
    /// }
    /// assert_eq!(breaker.state(Moment::ZERO), State::Open);
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn error_count(mut self, count: u64) -> Self {
        self.config.error_count = Some(count);
        self
    }

    /// Trip when the calls strictly slower than `slower_than` are at least `ratio` of the
    /// calls in the window (Sentinel's `SLOW_REQUEST_RATIO` with its `count` as the RT,
    /// resilience4j's `slowCallRateThreshold` and `slowCallDurationThreshold`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::{CircuitBreaker, State};
    /// let breaker = CircuitBreaker::builder()
    ///     .slow_call_ratio(0.5, Duration::from_millis(100))
    ///     .min_calls(2)
    ///     .build(Moment::ZERO)?;
    /// let _ = breaker.on_success(Moment::ZERO, Duration::from_millis(100)); // not slower: fast
    /// let _ = breaker.on_success(Moment::ZERO, Duration::from_millis(101));
    /// assert_eq!(breaker.state(Moment::ZERO), State::Open);
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn slow_call_ratio(mut self, ratio: f64, slower_than: Duration) -> Self {
        self.config.slow = Some((ratio, slower_than));
        self
    }

    /// The window the rules look at: `span` in `buckets` buckets (see
    /// [`WindowMetrics`](crate::WindowMetrics)); Sentinel's `statIntervalMs`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::CircuitBreaker;
    /// let breaker = CircuitBreaker::builder()
    ///     .error_count(5)
    ///     .window(Duration::from_secs(60), 12)
    ///     .build(Moment::ZERO)?;
    /// assert_eq!(breaker.span(), Duration::from_secs(60));
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn window(mut self, span: Duration, buckets: u32) -> Self {
        self.span = span;
        self.buckets = buckets;
        self
    }

    /// The fewest calls in the window before a rule may trip it (resilience4j's
    /// `minimumNumberOfCalls`, Sentinel's `minRequestAmount`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::{CircuitBreaker, State};
    /// let breaker = CircuitBreaker::builder().error_ratio(0.5).min_calls(3).build(Moment::ZERO)?;
    /// let _ = breaker.on_error(Moment::ZERO, Duration::ZERO);
    /// let _ = breaker.on_error(Moment::ZERO, Duration::ZERO);
    /// assert_eq!(breaker.state(Moment::ZERO), State::Closed); // 2 calls: too few to judge
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn min_calls(mut self, calls: u64) -> Self {
        self.config.min_calls = calls;
        self
    }

    /// How long the breaker stays open before the next call is a probe (resilience4j's
    /// `waitDurationInOpenState`, Sentinel's `timeWindow`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::breaker::CircuitBreaker;
    /// let breaker = CircuitBreaker::builder().error_count(1).wait(Duration::from_secs(5)).build(Moment::ZERO)?;
    /// assert_eq!(breaker.wait(), Duration::from_secs(5));
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn wait(mut self, wait: Duration) -> Self {
        self.config.wait = wait;
        self
    }

    /// How many probe calls a half-open breaker lets through (resilience4j's
    /// `permittedNumberOfCallsInHalfOpenState`; Sentinel's is 1).
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::breaker::CircuitBreaker;
    /// let breaker = CircuitBreaker::builder().error_count(1).probes(1).build(Moment::ZERO)?;
    /// assert_eq!(breaker.probes(), 1);
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn probes(mut self, probes: u32) -> Self {
        self.config.probes = probes;
        self
    }

    /// The breaker, closed with an empty window, whose window counts time from `start`.
    ///
    /// # Errors
    ///
    /// A [`BreakerConfigError`] naming the first setting out of its bound (see the table
    /// above), or [`BreakerConfigError::NoRule`] if no rule was set.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{ConfigError, Moment};
    /// use slidewin::breaker::{BreakerConfigError, CircuitBreaker};
    /// let err = CircuitBreaker::builder().build(Moment::ZERO).unwrap_err();
    /// assert_eq!(err, BreakerConfigError::NoRule);
    /// let err = CircuitBreaker::builder().error_count(1).window(Duration::ZERO, 1).build(Moment::ZERO);
    /// assert_eq!(err.unwrap_err(), BreakerConfigError::Window(ConfigError::ZeroSpan));
    /// ```
    pub fn build(self, start: Moment) -> Result<CircuitBreaker, BreakerConfigError> {
        self.check()?;
        let ring = crate::WindowMetrics::new(self.span, self.buckets, start)
            .map_err(BreakerConfigError::Window)?;
        Ok(CircuitBreaker::from_parts(self.config, ring, start))
    }

    fn check(&self) -> Result<(), BreakerConfigError> {
        let c = &self.config;
        if c.error_ratio.is_none() && c.error_count.is_none() && c.slow.is_none() {
            return Err(BreakerConfigError::NoRule);
        }
        check_ratio(Rule::ErrorRatio, c.error_ratio)?;
        check_ratio(Rule::SlowCallRatio, c.slow.map(|(r, _)| r))?;
        if c.error_count == Some(0) {
            return Err(BreakerConfigError::ZeroErrorCount);
        }
        if c.min_calls == 0 {
            return Err(BreakerConfigError::ZeroMinCalls);
        }
        match duration_nanos(c.wait) {
            Some(0) => return Err(BreakerConfigError::ZeroWait),
            None => return Err(BreakerConfigError::WaitTooLong { wait: c.wait }),
            Some(_) => {}
        }
        if c.probes == 0 || c.probes > MAX_PROBES {
            return Err(BreakerConfigError::ProbesOutOfRange { probes: c.probes });
        }
        Ok(())
    }
}

fn check_ratio(rule: Rule, ratio: Option<f64>) -> Result<(), BreakerConfigError> {
    match ratio {
        Some(r) if !(r > 0.0 && r <= 1.0) => {
            Err(BreakerConfigError::RatioOutOfRange { rule, ratio: r })
        }
        _ => Ok(()),
    }
}

/// A circuit breaker's setting out of its bound, found by
/// [`CircuitBreakerBuilder::build`] before anything is built. The message names the setting,
/// the bound and the value.
///
/// ```
/// use slidewin::Moment;
/// use slidewin::breaker::CircuitBreaker;
/// let err = CircuitBreaker::builder().error_count(2).probes(0).build(Moment::ZERO).unwrap_err();
/// assert_eq!(err.to_string(), "probes must be from 1 to 1024, got 0");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum BreakerConfigError {
    /// No rule was set, so the breaker could never trip.
    NoRule,
    /// A ratio outside `(0, 1]` (or NaN).
    RatioOutOfRange {
        /// The rule the ratio was for.
        rule: Rule,
        /// The ratio that was given.
        ratio: f64,
    },
    /// An error count of zero: the breaker would trip with no error.
    ZeroErrorCount,
    /// A minimum number of calls of zero.
    ZeroMinCalls,
    /// A wait of zero.
    ZeroWait,
    /// A wait longer than the timeline (584 years).
    WaitTooLong {
        /// The wait that was given.
        wait: Duration,
    },
    /// A number of half-open probes of zero or above 1,024.
    ProbesOutOfRange {
        /// The number that was given.
        probes: u32,
    },
    /// The window's span and buckets, refused as [`WindowMetrics::new`](crate::WindowMetrics::new)
    /// refuses them.
    Window(ConfigError),
}

impl fmt::Display for BreakerConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BreakerConfigError::NoRule => f.write_str(
                "a circuit breaker needs a rule: error_ratio, error_count or slow_call_ratio",
            ),
            BreakerConfigError::RatioOutOfRange { rule, ratio } => {
                write!(f, "the {rule} must be in (0, 1], got {ratio}")
            }
            BreakerConfigError::ZeroErrorCount => {
                f.write_str("the error count must be at least 1, got 0")
            }
            BreakerConfigError::ZeroMinCalls => f.write_str("min_calls must be at least 1, got 0"),
            BreakerConfigError::ZeroWait => {
                f.write_str("the wait must be longer than zero, got 0ns")
            }
            BreakerConfigError::WaitTooLong { wait } => write!(
                f,
                "the wait {wait:?} is longer than the longest supported wait \
                 (u64::MAX nanoseconds, about 584 years)"
            ),
            BreakerConfigError::ProbesOutOfRange { probes } => {
                write!(f, "probes must be from 1 to {MAX_PROBES}, got {probes}")
            }
            BreakerConfigError::Window(err) => write!(f, "the breaker's window: {err}"),
        }
    }
}

impl std::error::Error for BreakerConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BreakerConfigError::Window(err) => Some(err),
            _ => None,
        }
    }
}
