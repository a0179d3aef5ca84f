//! [`RateLimit`], the service a layer wraps around yours, and its [`ResponseFuture`].

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use slidewin::Clock;
use tower::{Layer, Service};

use super::decision::{After, AtOnce, Outcome, Plan, Verdict};
use super::{RateLimitLayer, Shared};
use crate::clock::TscClock;
use slidewin_store::Backend;

impl<S, B: Backend, C> Layer<S> for RateLimitLayer<B, C> {
    type Service = RateLimit<S, B, C>;

    fn layer(&self, inner: S) -> RateLimit<S, B, C> {
        RateLimit {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// The service [`RateLimitLayer`] wraps around yours.
pub struct RateLimit<S, B: Backend, C = TscClock> {
    inner: S,
    shared: Arc<Shared<B, C>>,
}

impl<S: Clone, B: Backend, C> Clone for RateLimit<S, B, C> {
    fn clone(&self) -> Self {
        RateLimit {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S: fmt::Debug, B: Backend, C> fmt::Debug for RateLimit<S, B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

type Boxed<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

pin_project_lite::pin_project! {
    /// The future of a [`RateLimit`] service's response. With a backend that answers at once
    /// (memory) it is the wrapped service's own future, unboxed; otherwise a boxed one that
    /// waits for the store first.
    pub struct ResponseFuture<F, B: Backend, C, T, E> {
        #[pin]
        state: State<F, B, C, T, E>,
    }
}

pin_project_lite::pin_project! {
    #[project = StateProj]
    enum State<F, B: Backend, C, T, E> {
        Ready { response: Option<Response<T>> },
        Inner { #[pin] future: F, after: Option<(Arc<Shared<B, C>>, After)> },
        Waiting { future: Boxed<Response<T>, E> },
    }
}

impl<F, B, C, T, E> Future for ResponseFuture<F, B, C, T, E>
where
    F: Future<Output = Result<Response<T>, E>>,
    B: Backend,
    C: Clock,
{
    type Output = Result<Response<T>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Ready { response } => match response.take() {
                Some(response) => Poll::Ready(Ok(response)),
                None => panic!("a RateLimit response future polled after it completed"),
            },
            StateProj::Inner { future, after } => {
                let mut response = std::task::ready!(future.poll(cx))?;
                if let Some((shared, after)) = after.take() {
                    shared.finish(&after, &mut response);
                }
                Poll::Ready(Ok(response))
            }
            StateProj::Waiting { future } => future.as_mut().poll(cx),
        }
    }
}

impl<F, B: Backend, C, T, E> fmt::Debug for ResponseFuture<F, B, C, T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<S, B, C, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, B, C>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send,
    B: Backend,
    C: Clock + Send + Sync + 'static,
    ReqBody: Send + 'static,
    ResBody: From<String> + Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, B, C, ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The clone is not ready; the service that was polled ready serves this request.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let (parts, body) = request.into_parts();
        let state = match self.shared.plan(&parts) {
            Plan::Pass => State::Inner {
                future: inner.call(Request::from_parts(parts, body)),
                after: None,
            },
            Plan::Refuse(response) => State::Ready {
                response: Some(response.map(ResBody::from)),
            },
            Plan::Check {
                limit,
                key,
                cost,
                now,
            } => {
                let armed = &self.shared.limits[limit];
                let mut outcome = Outcome::new();
                match self
                    .shared
                    .decide_at_once(armed, key.key(), now, cost, &mut outcome)
                {
                    AtOnce::Admitted(binding) => {
                        let pk = self.shared.partition(limit, key.key());
                        let after = self.shared.admitted(limit, now, binding, false, pk);
                        State::Inner {
                            future: inner.call(Request::from_parts(parts, body)),
                            after: Some((Arc::clone(&self.shared), after)),
                        }
                    }
                    AtOnce::Decided => match self.shared.conclude(
                        limit,
                        now,
                        &outcome,
                        self.shared.partition(limit, key.key()),
                    ) {
                        Verdict::Refused(response) => State::Ready {
                            response: Some(response.map(ResBody::from)),
                        },
                        Verdict::Admitted(after) => State::Inner {
                            future: inner.call(Request::from_parts(parts, body)),
                            after: Some((Arc::clone(&self.shared), after)),
                        },
                    },
                    AtOnce::Waits => {
                        let key = key.into_owned();
                        let shared = Arc::clone(&self.shared);
                        State::Waiting {
                            future: Box::pin(async move {
                                let armed = &shared.limits[limit];
                                let outcome = shared.decide(armed, key.key(), now, cost).await;
                                let pk = shared.partition(limit, key.key());
                                match shared.conclude(limit, now, &outcome, pk) {
                                    Verdict::Refused(response) => Ok(response.map(ResBody::from)),
                                    Verdict::Admitted(mut after) => {
                                        // The wrapped service's own time, not the store's.
                                        if shared.stats_on {
                                            after.start = shared.clock.now();
                                        }
                                        let request = Request::from_parts(parts, body);
                                        let mut response = inner.call(request).await?;
                                        shared.finish(&after, &mut response);
                                        Ok(response)
                                    }
                                }
                            }),
                        }
                    }
                }
            }
        };
        ResponseFuture { state }
    }
}
