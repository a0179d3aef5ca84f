//! [`ShedLayerBuilder`]: a layer's adaptive limit, what fails, and its hooks, built into a
//! layer by [`build`](ShedLayerBuilder::build).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::{Response, response};
use slidewin::shed::{AdaptiveLimitBuilder, Change, ShedConfigError};
use slidewin::{Clock, WindowMetrics};

use super::{ChangeFn, RefusalFn, Shared, ShedLayer};
use crate::clock::TscClock;
use crate::failures::Failures;
use crate::refusal::{Refusal, problem};

impl ShedLayer {
    /// A builder of a layer around the limit `limit` will build, on a [`TscClock`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::shed::AdaptiveLimit;
    /// use slidewin_http::ShedLayer;
    /// let layer = ShedLayer::builder(AdaptiveLimit::builder(Duration::from_millis(500))).build()?;
    /// # Ok::<(), slidewin::shed::ShedConfigError>(())
    /// ```
    pub fn builder(limit: AdaptiveLimitBuilder) -> ShedLayerBuilder {
        ShedLayerBuilder {
            limit,
            clock: TscClock::new(),
            name: "shed".into(),
            failures: Failures::default(),
            on_change: None,
            on_refusal: Arc::new(problem),
        }
    }
}

/// Builds a [`ShedLayer`].
///
/// ```
/// use std::time::Duration;
/// use slidewin::shed::AdaptiveLimit;
/// use slidewin::time::ManualClock;
/// use slidewin_http::ShedLayer;
///
/// let limit = AdaptiveLimit::builder(Duration::from_millis(300)).min(4).max(400).initial(40);
/// let layer = ShedLayer::builder(limit)
///     .name("checkout")
///     .clock(ManualClock::default())
///     .is_failure(|head| head.status.is_server_error() || head.status == 429)
///     .count_inner_errors(true)
///     .on_change(|change| eprintln!("checkout: {change}"))
///     .build()?;
/// # Ok::<(), slidewin::shed::ShedConfigError>(())
/// ```
#[must_use = "a builder does nothing until `build`"]
pub struct ShedLayerBuilder<C = TscClock> {
    limit: AdaptiveLimitBuilder,
    clock: C,
    name: Box<str>,
    failures: Failures,
    on_change: Option<Box<ChangeFn>>,
    on_refusal: Arc<RefusalFn>,
}

impl<C: fmt::Debug> fmt::Debug for ShedLayerBuilder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedLayerBuilder")
            .field("limit", &self.limit)
            .field("clock", &self.clock)
            .field("name", &self.name)
            .field("count_inner_errors", &self.failures.count_inner_errors)
            .finish_non_exhaustive()
    }
}

impl<C: Clock + Send + Sync + 'static> ShedLayerBuilder<C> {
    /// Reads time from `clock`: the requests' times and the statistics (a `ManualClock`, or
    /// slidewin-shape's `TokioClock` under `tokio::time::pause()`, in tests).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::shed::AdaptiveLimit;
    /// use slidewin::time::ManualClock;
    /// use slidewin_http::ShedLayer;
    /// let layer = ShedLayer::builder(AdaptiveLimit::builder(Duration::from_secs(1)))
    ///     .clock(ManualClock::default())
    ///     .build()?;
    /// # Ok::<(), slidewin::shed::ShedConfigError>(())
    /// ```
    pub fn clock<C2: Clock + Send + Sync + 'static>(self, clock: C2) -> ShedLayerBuilder<C2> {
        ShedLayerBuilder {
            limit: self.limit,
            clock,
            name: self.name,
            failures: self.failures,
            on_change: self.on_change,
            on_refusal: self.on_refusal,
        }
    }

    /// Names the limit in its logs and its [`ShedHandle`](crate::ShedHandle) (`shed` by
    /// default).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::shed::AdaptiveLimit;
    /// use slidewin_http::ShedLayer;
    /// let layer = ShedLayer::builder(AdaptiveLimit::builder(Duration::from_secs(1)))
    ///     .name("search")
    ///     .build()?;
    /// assert_eq!(layer.handle().name(), "search");
    /// # Ok::<(), slidewin::shed::ShedConfigError>(())
    /// ```
    pub fn name(mut self, name: &str) -> Self {
        self.name = name.into();
        self
    }

    /// Counts a response as failed when `is_failure` says so of its head, instead of when it
    /// is a `5xx` (as [`CircuitBreakerLayerBuilder::is_failure`](crate::CircuitBreakerLayerBuilder::is_failure)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::shed::AdaptiveLimit;
    /// use slidewin_http::ShedLayer;
    /// let layer = ShedLayer::builder(AdaptiveLimit::builder(Duration::from_secs(1)))
    ///     .is_failure(|head| head.status == 503 || head.status == 504)
    ///     .build()?;
    /// # Ok::<(), slidewin::shed::ShedConfigError>(())
    /// ```
    pub fn is_failure(
        mut self,
        is_failure: impl Fn(&response::Parts) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.failures.is_failure = Some(Box::new(is_failure));
        self
    }

    /// Whether the wrapped service's error is a failure: `true` by default. With `false` the
    /// call counts by its time alone, fast or slow.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::shed::AdaptiveLimit;
    /// use slidewin_http::ShedLayer;
    /// let layer = ShedLayer::builder(AdaptiveLimit::builder(Duration::from_secs(1)))
    ///     .count_inner_errors(false)
    ///     .build()?;
    /// # Ok::<(), slidewin::shed::ShedConfigError>(())
    /// ```
    pub fn count_inner_errors(mut self, count: bool) -> Self {
        self.failures.count_inner_errors = count;
        self
    }

    /// Calls `hook` with each change of the whole limit, from the request that made it, after
    /// it is logged. It runs on the request's path: keep it short.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::shed::AdaptiveLimit;
    /// use slidewin_http::ShedLayer;
    /// let layer = ShedLayer::builder(AdaptiveLimit::builder(Duration::from_secs(1)))
    ///     .on_change(|change| println!("{change}"))
    ///     .build()?;
    /// # Ok::<(), slidewin::shed::ShedConfigError>(())
    /// ```
    pub fn on_change(mut self, hook: impl Fn(&Change) + Send + Sync + 'static) -> Self {
        self.on_change = Some(Box::new(hook));
        self
    }

    /// Answers shed requests with `handler` instead of [`problem`](crate::problem)'s
    /// `application/problem+json` (add a `Retry-After` here, if your clients need one).
    ///
    /// ```
    /// use std::time::Duration;
    /// use http::Response;
    /// use slidewin::shed::AdaptiveLimit;
    /// use slidewin_http::{Refusal, ShedLayer};
    /// let layer = ShedLayer::builder(AdaptiveLimit::builder(Duration::from_secs(1)))
    ///     .on_refusal(|refusal: &Refusal<'_>| {
    ///         let mut response = Response::new(format!("busy: {refusal}"));
    ///         *response.status_mut() = refusal.status();
    ///         response.headers_mut().insert("retry-after", "1".parse().unwrap());
    ///         response
    ///     })
    ///     .build()?;
    /// # Ok::<(), slidewin::shed::ShedConfigError>(())
    /// ```
    pub fn on_refusal(
        mut self,
        handler: impl Fn(&Refusal<'_>) -> Response<String> + Send + Sync + 'static,
    ) -> Self {
        self.on_refusal = Arc::new(handler);
        self
    }

    /// The layer.
    ///
    /// # Errors
    ///
    /// The [`ShedConfigError`] of the limit's settings.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::shed::{AdaptiveLimit, ShedConfigError};
    /// use slidewin_http::ShedLayer;
    /// let err = ShedLayer::builder(AdaptiveLimit::builder(Duration::ZERO)).build().unwrap_err();
    /// assert_eq!(err, ShedConfigError::ZeroThreshold);
    /// ```
    pub fn build(self) -> Result<ShedLayer<C>, ShedConfigError> {
        let limit = self.limit.build()?;
        // The last minute, in seconds, as the other layers' statistics.
        let shed = WindowMetrics::new(Duration::from_secs(60), 60, self.clock.now())
            .expect("a minute in 60 buckets is a valid window");
        Ok(ShedLayer {
            shared: Arc::new(Shared {
                name: self.name,
                limit,
                clock: self.clock,
                failures: self.failures,
                on_change: self.on_change,
                on_refusal: self.on_refusal,
                shed,
            }),
        })
    }
}
