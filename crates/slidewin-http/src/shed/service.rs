//! [`ShedService`], the service a [`ShedLayer`] wraps around yours, and its [`ShedFuture`],
//! which reports the call's time and outcome to the limit, or a failure when dropped.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use slidewin::Clock;
use slidewin::shed::{AdaptiveLimit, Token};
use tower::{Layer, Service};

use super::{Holder, Shared, ShedLayer};
use crate::clock::TscClock;

impl<S, C> Layer<S> for ShedLayer<C> {
    type Service = ShedService<S, C>;

    fn layer(&self, inner: S) -> ShedService<S, C> {
        ShedService {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// The service [`ShedLayer`] wraps around yours. It is ready when yours is; a request over
/// the limit is answered without calling yours.
pub struct ShedService<S, C = TscClock> {
    inner: S,
    shared: Arc<Shared<C>>,
}

impl<S: Clone, C> Clone for ShedService<S, C> {
    fn clone(&self) -> Self {
        ShedService {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: fmt::Debug, C> fmt::Debug for ShedService<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedService")
            .field("inner", &self.inner)
            .field("shed", &self.shared.name)
            .finish_non_exhaustive()
    }
}

pin_project_lite::pin_project! {
    /// The future of a [`ShedService`]'s response: the refusal, ready at once, or the wrapped
    /// service's own future, unboxed, whose time and outcome are reported to the limit when
    /// it completes. Dropped before that, it reports a failure and frees its place.
    pub struct ShedFuture<F, C, T> {
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

/// A request let through: its place under the limit, held until its outcome is reported, and
/// reported as a failure if it never is (the future dropped, or a panic in the wrapped
/// service).
struct Call<C> {
    token: Option<Token<Holder<C>>>,
    /// `finish(false)`, made where `C: Clock` is known: `Drop` cannot ask for it, as the
    /// future's state (and so this struct) has no such bound.
    on_drop: fn(&mut Call<C>),
}

impl<C: Clock> Call<C> {
    fn new(token: Token<Holder<C>>) -> Call<C> {
        Call {
            token: Some(token),
            on_drop: |call| call.finish(false),
        }
    }

    fn shared(&self) -> Option<&Shared<C>> {
        self.token.as_ref().map(|t| &*t.holder().0)
    }

    /// Reports the outcome at the clock's time, the latency from the token's start.
    fn finish(&mut self, ok: bool) {
        let Some(token) = self.token.take() else {
            return;
        };
        // The token gives its share back as it reports: a change is then logged on this one.
        let shared = Arc::clone(&token.holder().0);
        if let Some(change) = token.done_now(&shared.clock, ok) {
            shared.report(&change);
        }
    }
}

impl<C> Drop for Call<C> {
    fn drop(&mut self) {
        // A request given up: a failure, dated now rather than at its start, and logged.
        (self.on_drop)(self);
    }
}

impl<F, C, T, E> Future for ShedFuture<F, C, T>
where
    F: Future<Output = Result<Response<T>, E>>,
    C: Clock,
{
    type Output = Result<Response<T>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Refused { response } => match response.take() {
                Some(response) => Poll::Ready(Ok(response)),
                None => panic!("a ShedService response future polled after it completed"),
            },
            StateProj::Called { future, call } => match std::task::ready!(future.poll(cx)) {
                Ok(response) => {
                    let failed = call.shared().map(|shared| shared.failures.failed(response));
                    let Some((response, failed)) = failed else {
                        panic!("a ShedService response future polled after it completed")
                    };
                    call.finish(!failed);
                    Poll::Ready(Ok(response))
                }
                Err(err) => {
                    let counts = call.shared().is_some_and(|s| s.failures.count_inner_errors);
                    call.finish(!counts);
                    Poll::Ready(Err(err))
                }
            },
        }
    }
}

impl<F, C, T> fmt::Debug for ShedFuture<F, C, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedFuture").finish_non_exhaustive()
    }
}

impl<S, C, ReqBody, ResBody> Service<Request<ReqBody>> for ShedService<S, C>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    C: Clock,
    ResBody: From<String>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ShedFuture<S::Future, C, ResBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // One clock read: the admission's time and the call's start.
        let now = self.shared.clock.now();
        let holder = Holder(Arc::clone(&self.shared));
        let state = match AdaptiveLimit::try_acquire_owned(holder, now) {
            Ok(token) => {
                // Armed first, so that a panic in `call` frees the place too.
                let call = Call::new(token);
                // The clone is not ready; the service that was polled ready serves the call.
                let clone = self.inner.clone();
                let mut inner = std::mem::replace(&mut self.inner, clone);
                State::Called {
                    future: inner.call(request),
                    call,
                }
            }
            Err(shed) => State::Refused {
                response: Some(self.shared.refuse(now, shed).map(ResBody::from)),
            },
        };
        ShedFuture { state }
    }
}
