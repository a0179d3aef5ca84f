//! [`CircuitBreakerService`], the service a [`CircuitBreakerLayer`] wraps around yours, and its
//! [`BreakerFuture`], which reports the call's outcome, or hands its probe back when dropped.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use slidewin::breaker::Permit;
use slidewin::{Clock, Moment};
use tower::{Layer, Service};

use super::{CircuitBreakerLayer, Shared};
use crate::clock::TscClock;

impl<S, C> Layer<S> for CircuitBreakerLayer<C> {
    type Service = CircuitBreakerService<S, C>;

    fn layer(&self, inner: S) -> CircuitBreakerService<S, C> {
        CircuitBreakerService {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// The service [`CircuitBreakerLayer`] wraps around yours. It is ready when yours is; a
/// call the breaker refuses is answered without calling yours.
pub struct CircuitBreakerService<S, C = TscClock> {
    inner: S,
    shared: Arc<Shared<C>>,
}

impl<S: Clone, C> Clone for CircuitBreakerService<S, C> {
    fn clone(&self) -> Self {
        CircuitBreakerService {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: fmt::Debug, C> fmt::Debug for CircuitBreakerService<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakerService")
            .field("inner", &self.inner)
            .field("breaker", &self.shared.name)
            .finish_non_exhaustive()
    }
}

pin_project_lite::pin_project! {
    /// The future of a [`CircuitBreakerService`]'s response: the refusal, ready at once, or
    /// the wrapped service's own future, unboxed, whose outcome is reported to the breaker
    /// when it completes. Dropped before that, it hands a probe's permit back.
    pub struct BreakerFuture<F, C, T> {
        #[pin]
        state: State<F, C, T>,
    }
}

pin_project_lite::pin_project! {
    #[project = StateProj]
    enum State<F, C, T> {
        Refused { response: Option<Response<T>> },
        Called { #[pin] future: F, call: Call<C> },
    }
}

/// A call let through: its permit, held until its outcome is reported, and released if it
/// never is (the future dropped, or a panic in the wrapped service).
struct Call<C> {
    shared: Arc<Shared<C>>,
    permit: Option<Permit>,
    start: Moment,
}

impl<C: Clock> Call<C> {
    /// Reports the outcome: a failure, a success, or (`None`) nothing, the permit handed back.
    fn finish(&mut self, failed: Option<bool>) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        let shared = &self.shared;
        match failed {
            Some(failed) => {
                let now = shared.clock.now();
                let took = now.saturating_duration_since(self.start);
                if let Some(transition) = shared.breaker.on_result(now, took, failed) {
                    shared.report(&transition);
                }
            }
            None => shared.breaker.release(permit),
        }
    }
}

impl<C> Drop for Call<C> {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            // Not made to the end: a probe must not be lost (one for good when `probes(1)`).
            self.shared.breaker.release(permit);
        }
    }
}

impl<F, C, T, E> Future for BreakerFuture<F, C, T>
where
    F: Future<Output = Result<Response<T>, E>>,
    C: Clock,
{
    type Output = Result<Response<T>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Refused { response } => match response.take() {
                Some(response) => Poll::Ready(Ok(response)),
                None => panic!("a CircuitBreakerService response future polled after it completed"),
            },
            StateProj::Called { future, call } => match std::task::ready!(future.poll(cx)) {
                Ok(response) => {
                    let (response, failed) = call.shared.failures.failed(response);
                    call.finish(Some(failed));
                    Poll::Ready(Ok(response))
                }
                Err(err) => {
                    call.finish(call.shared.failures.count_inner_errors.then_some(true));
                    Poll::Ready(Err(err))
                }
            },
        }
    }
}

impl<F, C, T> fmt::Debug for BreakerFuture<F, C, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerFuture").finish_non_exhaustive()
    }
}

impl<S, C, ReqBody, ResBody> Service<Request<ReqBody>> for CircuitBreakerService<S, C>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    C: Clock,
    ResBody: From<String>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = BreakerFuture<S::Future, C, ResBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let shared = &self.shared;
        // One clock read: the breaker's time and the call's start.
        let now = shared.clock.now();
        let state = match shared.breaker.try_acquire(now) {
            Ok(permit) => {
                if let Some(transition) = permit.transition() {
                    shared.report(transition);
                }
                // The clone is not ready; the service that was polled ready serves the call.
                let clone = self.inner.clone();
                let mut inner = std::mem::replace(&mut self.inner, clone);
                // Armed first, so that a panic in `call` hands the permit back too.
                let call = Call {
                    shared: Arc::clone(shared),
                    permit: Some(permit),
                    start: now,
                };
                State::Called {
                    future: inner.call(request),
                    call,
                }
            }
            Err(rejected) => State::Refused {
                response: Some(shared.refuse(now, rejected).map(ResBody::from)),
            },
        };
        BreakerFuture { state }
    }
}
