//! [`BreakerHandle`]: a layer's breaker seen from a dashboard, and moved by operators.

use std::fmt;
use std::sync::{Arc, PoisonError};

use slidewin::breaker::{CallStats, CircuitBreaker, State, Transition};
use slidewin::stats::MetricEvent;
use slidewin::{Clock, Moment};

use super::Shared;
use crate::clock::TscClock;

/// A handle on a [`CircuitBreakerLayer`](crate::CircuitBreakerLayer)'s breaker
/// ([`handle`](crate::CircuitBreakerLayer::handle)), read at the layer's clock: its state,
/// the calls in its window, the calls it refused over the last minute, its last transition;
/// and the operators' controls, whose transitions are logged and hooked as the requests' are.
/// Clones share the breaker.
///
/// ```
/// use std::time::Duration;
/// use axum::{Router, body::Body, http::StatusCode, routing::get};
/// use http::Request;
/// use slidewin::breaker::{CallStats, CircuitBreaker, State};
/// use slidewin_http::CircuitBreakerLayer;
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let layer = CircuitBreakerLayer::builder(CircuitBreaker::builder().error_count(5)).build()?;
/// let handle = layer.handle();
/// let app = Router::new().route("/", get(|| async { StatusCode::INTERNAL_SERVER_ERROR })).layer(layer);
/// app.clone().oneshot(Request::get("/").body(Body::empty())?).await?;
///
/// let snapshot = handle.snapshot();
/// assert_eq!(snapshot.state, State::Closed);
/// assert_eq!(snapshot.window, CallStats { calls: 1, errors: 1, slow: 0 });
/// handle.force_open();
/// let refused = app.oneshot(Request::get("/").body(Body::empty())?).await?;
/// assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
/// assert_eq!(handle.refused(), 1);
/// # Ok(()) }
/// ```
pub struct BreakerHandle<C = TscClock> {
    pub(super) shared: Arc<Shared<C>>,
}

impl<C> Clone for BreakerHandle<C> {
    fn clone(&self) -> Self {
        BreakerHandle {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C> BreakerHandle<C> {
    /// The breaker's name ([`name`](crate::CircuitBreakerLayerBuilder::name)).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The core's breaker, to read it at a time of your own. Moving it directly skips the
    /// layer's log and hook: prefer the handle's controls.
    ///
    /// ```
    /// use slidewin::Clock;
    /// use slidewin::breaker::{CircuitBreaker, State};
    /// use slidewin_http::CircuitBreakerLayer;
    /// let layer = CircuitBreakerLayer::builder(CircuitBreaker::builder().error_count(5)).build()?;
    /// let handle = layer.handle();
    /// assert_eq!(handle.breaker().state(handle.clock().now()), State::Closed);
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    #[must_use]
    pub fn breaker(&self) -> &CircuitBreaker {
        &self.shared.breaker
    }

    /// The clock the layer reads.
    #[must_use]
    pub fn clock(&self) -> &C {
        &self.shared.clock
    }

    /// The last transition, from a request or a control; `None` before the first.
    ///
    /// ```
    /// use slidewin::breaker::{CircuitBreaker, State};
    /// use slidewin_http::CircuitBreakerLayer;
    /// let handle = CircuitBreakerLayer::builder(CircuitBreaker::builder().error_count(5)).build()?.handle();
    /// assert!(handle.last_transition().is_none());
    /// handle.disable();
    /// assert_eq!(handle.last_transition().map(|t| t.to), Some(State::Disabled));
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    #[must_use]
    pub fn last_transition(&self) -> Option<Transition> {
        *self
            .shared
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl<C: Clock> BreakerHandle<C> {
    /// The state a call would find now ([`CircuitBreaker::state`]).
    #[must_use]
    pub fn state(&self) -> State {
        self.shared.breaker.state(self.shared.clock.now())
    }

    /// The calls in the breaker's closed window now ([`CircuitBreaker::window`]).
    #[must_use]
    pub fn stats(&self) -> CallStats {
        self.shared.breaker.window(self.shared.clock.now())
    }

    /// The calls refused over the last minute.
    #[must_use]
    pub fn refused(&self) -> u64 {
        self.refused_at(self.shared.clock.now())
    }

    fn refused_at(&self, now: Moment) -> u64 {
        self.shared.refused.sum(now, MetricEvent::Block)
    }

    /// All of it, read at one moment of the layer's clock.
    #[must_use]
    pub fn snapshot(&self) -> BreakerSnapshot {
        let now = self.shared.clock.now();
        BreakerSnapshot {
            name: self.name().to_string(),
            at: now,
            state: self.shared.breaker.state(now),
            window: self.shared.breaker.window(now),
            refused: self.refused_at(now),
            last_transition: self.last_transition(),
        }
    }

    /// Forces the breaker open until a [`reset`](BreakerHandle::reset): every call refused,
    /// without `Retry-After`. `None` if it was already.
    ///
    /// ```
    /// use slidewin::breaker::{CircuitBreaker, State};
    /// use slidewin_http::CircuitBreakerLayer;
    /// let handle = CircuitBreakerLayer::builder(CircuitBreaker::builder().error_count(5)).build()?.handle();
    /// assert!(handle.force_open().is_some());
    /// assert_eq!(handle.state(), State::ForcedOpen);
    /// assert!(handle.force_open().is_none());
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn force_open(&self) -> Option<Transition> {
        let transition = self.shared.breaker.force_open(self.shared.clock.now())?;
        self.shared.report(&transition);
        Some(transition)
    }

    /// Disables the breaker until a [`reset`](BreakerHandle::reset): every call passes,
    /// uncounted. `None` if it was already.
    ///
    /// ```
    /// use slidewin::breaker::{CircuitBreaker, State};
    /// use slidewin_http::CircuitBreakerLayer;
    /// let handle = CircuitBreakerLayer::builder(CircuitBreaker::builder().error_count(5)).build()?.handle();
    /// handle.disable();
    /// assert_eq!(handle.state(), State::Disabled);
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn disable(&self) -> Option<Transition> {
        let transition = self.shared.breaker.disable(self.shared.clock.now())?;
        self.shared.report(&transition);
        Some(transition)
    }

    /// Closes the breaker with an empty window, from any state.
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::breaker::{CircuitBreaker, State};
    /// use slidewin::time::ManualClock;
    /// use slidewin_http::CircuitBreakerLayer;
    /// let handle = CircuitBreakerLayer::builder(CircuitBreaker::builder().error_count(5))
    ///     .clock(ManualClock::new(Moment::from_secs(5)))
    ///     .build()?
    ///     .handle();
    /// handle.force_open();
    /// let reset = handle.reset();
    /// assert_eq!(reset.to_string(), "forced-open -> closed at 5s: reset (0 calls, 0 errors, 0 slow)");
    /// assert_eq!(handle.state(), State::Closed);
    /// # Ok::<(), slidewin::breaker::BreakerConfigError>(())
    /// ```
    pub fn reset(&self) -> Transition {
        let transition = self.shared.breaker.reset(self.shared.clock.now());
        self.shared.report(&transition);
        transition
    }
}

/// A breaker read at one moment: [`BreakerHandle::snapshot`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BreakerSnapshot {
    /// The breaker's name.
    pub name: String,
    /// When it was read, on the layer's clock.
    pub at: Moment,
    /// The state a call would find.
    pub state: State,
    /// The calls in its closed window.
    pub window: CallStats,
    /// The calls it refused over the last minute.
    pub refused: u64,
    /// Its last transition.
    pub last_transition: Option<Transition>,
}

/// Prints a [`snapshot`](BreakerHandle::snapshot): the state and counts now.
impl<C: Clock> fmt::Debug for BreakerHandle<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let snapshot = self.snapshot();
        f.debug_struct("BreakerHandle")
            .field("name", &snapshot.name)
            .field("state", &snapshot.state)
            .field("window", &snapshot.window)
            .field("refused", &snapshot.refused)
            .finish_non_exhaustive()
    }
}
