//! [`CircuitBreakerLayerBuilder`]: a layer's breaker, what fails, and its hooks, built into a
//! layer by [`build`](CircuitBreakerLayerBuilder::build).

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Response, response};
use slidewin::breaker::{BreakerConfigError, CircuitBreakerBuilder, Transition};
use slidewin::{Clock, WindowMetrics};

use super::{CircuitBreakerLayer, RefusalFn, Shared, TransitionFn};
use crate::clock::TscClock;
use crate::failures::Failures;
use crate::refusal::{Refusal, problem};

impl CircuitBreakerLayer {
    /// A builder of a layer around the breaker `breaker` will build, on a [`TscClock`].
    ///
    /// ```
    /// use slidewin::breaker::CircuitBreaker;
    /// use slidewin_http::CircuitBreakerLayer;
    /// let layer = CircuitBreakerLayer::builder(CircuitBreaker::builder().error_count(5)).build()?;
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn builder(breaker: CircuitBreakerBuilder) -> CircuitBreakerLayerBuilder {
        CircuitBreakerLayerBuilder {
            breaker,
            clock: TscClock::new(),
            name: "breaker".into(),
            failures: Failures::default(),
            on_transition: None,
            on_refusal: Arc::new(problem),
        }
    }
}

/// Builds a [`CircuitBreakerLayer`].
///
/// ```
/// use std::time::Duration;
/// use slidewin::breaker::CircuitBreaker;
/// use slidewin::time::ManualClock;
/// use slidewin_http::CircuitBreakerLayer;
///
/// let breaker = CircuitBreaker::builder()
///     .error_ratio(0.5)
///     .slow_call_ratio(0.8, Duration::from_secs(2))
///     .min_calls(20)
///     .wait(Duration::from_secs(30))
///     .probes(3);
/// let layer = CircuitBreakerLayer::builder(breaker)
///     .name("search")
///     .clock(ManualClock::default())
///     .is_failure(|head| head.status.is_server_error() || head.status == 429)
///     .count_inner_errors(true)
///     .on_transition(|transition| eprintln!("search: {transition}"))
///     .build()?;
/// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
/// ```
#[must_use = "a builder does nothing until `build`"]
pub struct CircuitBreakerLayerBuilder<C = TscClock> {
    breaker: CircuitBreakerBuilder,
    clock: C,
    name: Box<str>,
    failures: Failures,
    on_transition: Option<Box<TransitionFn>>,
    on_refusal: Arc<RefusalFn>,
}

impl<C: fmt::Debug> fmt::Debug for CircuitBreakerLayerBuilder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakerLayerBuilder")
            .field("breaker", &self.breaker)
            .field("clock", &self.clock)
            .field("name", &self.name)
            .field("count_inner_errors", &self.failures.count_inner_errors)
            .finish_non_exhaustive()
    }
}

impl<C: Clock + Send + Sync + 'static> CircuitBreakerLayerBuilder<C> {
    /// Reads time from `clock`: the calls' times, the breaker's wait, the statistics (a
    /// `ManualClock`, or slidewin-shape's `TokioClock` under `tokio::time::pause()`, in tests).
    ///
    /// ```
    /// use slidewin::breaker::CircuitBreaker;
    /// use slidewin::time::ManualClock;
    /// use slidewin_http::CircuitBreakerLayer;
    /// let layer = CircuitBreakerLayer::builder(CircuitBreaker::builder().error_count(5))
    ///     .clock(ManualClock::default())
    ///     .build()?;
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn clock<C2: Clock + Send + Sync + 'static>(
        self,
        clock: C2,
    ) -> CircuitBreakerLayerBuilder<C2> {
        CircuitBreakerLayerBuilder {
            breaker: self.breaker,
            clock,
            name: self.name,
            failures: self.failures,
            on_transition: self.on_transition,
            on_refusal: self.on_refusal,
        }
    }

    /// Names the breaker in its logs and its [`BreakerHandle`](crate::BreakerHandle)
    /// (`breaker` by default).
    ///
    /// ```
    /// use slidewin::breaker::CircuitBreaker;
    /// use slidewin_http::CircuitBreakerLayer;
    /// let layer = CircuitBreakerLayer::builder(CircuitBreaker::builder().error_count(5))
    ///     .name("inventory")
    ///     .build()?;
    /// assert_eq!(layer.handle().name(), "inventory");
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn name(mut self, name: &str) -> Self {
        self.name = name.into();
        self
    }

    /// Counts a response as failed when `is_failure` says so of its head (status, headers,
    /// extensions), instead of when it is a `5xx`. For tonic, whose errors are `200`s: a
    /// `grpc-status` other than `0` in the headers (a trailers-only answer; a status sent in
    /// the trailers of a streamed body is not seen).
    ///
    /// ```
    /// use slidewin::breaker::CircuitBreaker;
    /// use slidewin_http::CircuitBreakerLayer;
    /// let layer = CircuitBreakerLayer::builder(CircuitBreaker::builder().error_ratio(0.5))
    ///     .is_failure(|head| {
    ///         head.headers.get("grpc-status").is_some_and(|status| status != "0")
    ///             || head.status.is_server_error()
    ///     })
    ///     .build()?;
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn is_failure(
        mut self,
        is_failure: impl Fn(&response::Parts) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.failures.is_failure = Some(Box::new(is_failure));
        self
    }

    /// Whether the wrapped service's error (a timeout of a `tower::timeout` layer inside this
    /// one, a client's connection error) is a failure: `true` by default. With `false` it is
    /// not counted at all, and a probe's permit is handed back, as resilience4j's
    /// `ignoreExceptions`. (axum's `Router` never fails: its errors are responses.)
    ///
    /// ```
    /// use slidewin::breaker::CircuitBreaker;
    /// use slidewin_http::CircuitBreakerLayer;
    /// let layer = CircuitBreakerLayer::builder(CircuitBreaker::builder().error_ratio(0.5))
    ///     .count_inner_errors(false)
    ///     .build()?;
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn count_inner_errors(mut self, count: bool) -> Self {
        self.failures.count_inner_errors = count;
        self
    }

    /// Calls `hook` with each transition of the breaker, from the request (or the handle's
    /// call) that made it, after it is logged. It runs on the request's path: keep it short.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use slidewin::breaker::CircuitBreaker;
    /// use slidewin_http::CircuitBreakerLayer;
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let into = Arc::clone(&log);
    /// let layer = CircuitBreakerLayer::builder(CircuitBreaker::builder().error_ratio(0.5))
    ///     .on_transition(move |t| into.lock().unwrap().push(t.to_string()))
    ///     .build()?;
    /// layer.handle().force_open();
    /// assert!(log.lock().unwrap()[0].starts_with("closed -> forced-open at "));
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn on_transition(mut self, hook: impl Fn(&Transition) + Send + Sync + 'static) -> Self {
        self.on_transition = Some(Box::new(hook));
        self
    }

    /// Answers refused calls with `handler` instead of [`problem`](crate::problem)'s
    /// `application/problem+json`. The layer adds `Retry-After`.
    ///
    /// ```
    /// use http::Response;
    /// use slidewin::breaker::CircuitBreaker;
    /// use slidewin_http::{CircuitBreakerLayer, Refusal};
    /// let layer = CircuitBreakerLayer::builder(CircuitBreaker::builder().error_ratio(0.5))
    ///     .on_refusal(|refusal: &Refusal<'_>| {
    ///         let mut response = Response::new(format!("later: {refusal}"));
    ///         *response.status_mut() = refusal.status();
    ///         response
    ///     })
    ///     .build()?;
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn on_refusal(
        mut self,
        handler: impl Fn(&Refusal<'_>) -> Response<String> + Send + Sync + 'static,
    ) -> Self {
        self.on_refusal = Arc::new(handler);
        self
    }

    /// The layer, its breaker built at the clock's time.
    ///
    /// # Errors
    ///
    /// The [`BreakerConfigError`] of the breaker's settings.
    ///
    /// ```
    /// use slidewin::breaker::{BreakerConfigError, CircuitBreaker};
    /// use slidewin_http::CircuitBreakerLayer;
    /// let err = CircuitBreakerLayer::builder(CircuitBreaker::builder()).build().unwrap_err();
    /// assert_eq!(err, BreakerConfigError::NoRule);
    /// ```
    pub fn build(self) -> Result<CircuitBreakerLayer<C>, BreakerConfigError> {
        let start = self.clock.now();
        let breaker = self.breaker.build(start)?;
        // The last minute, in seconds, as the rate-limit layer's statistics.
        let refused = WindowMetrics::new(Duration::from_secs(60), 60, start)
            .map_err(BreakerConfigError::Window)?;
        Ok(CircuitBreakerLayer {
            shared: Arc::new(Shared {
                name: self.name,
                breaker,
                clock: self.clock,
                failures: self.failures,
                on_transition: self.on_transition,
                on_refusal: self.on_refusal,
                refused,
                last: Mutex::new(None),
            }),
        })
    }
}
