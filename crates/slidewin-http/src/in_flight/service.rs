//! [`InFlight`], the service an [`InFlightLayer`] wraps around yours.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use slidewin::Clock;
use slidewin_store::Backend;
use tower::Service;

use super::body::{Held, InFlightBody};
use super::{InFlightLayer, Shared};
use crate::armed::{Plan, wrapping_service};
use crate::limit::Extracted;

wrapping_service!(
    /// The service [`InFlightLayer`] wraps around yours.
    InFlight,
    InFlightLayer
);

type Boxed<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B, C, ReqBody, ResBody> Service<Request<ReqBody>> for InFlight<S, B, C>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send,
    B: Backend + Send + Sync + 'static,
    B::Store: Send + Sync,
    C: Clock + Send + Sync + 'static,
    ReqBody: Send + 'static,
    ResBody: From<String> + Send + 'static,
{
    type Response = Response<InFlightBody<ResBody>>;
    type Error = S::Error;
    type Future = Boxed<Response<InFlightBody<ResBody>>, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The clone is not ready; the service that was polled ready serves this request.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let shared = Arc::clone(&self.shared);
        let (parts, body) = request.into_parts();
        let (limit, key, cost) = match shared.plan(&parts) {
            Plan::Pass => {
                let future = inner.call(Request::from_parts(parts, body));
                return Box::pin(async move { Ok(future.await?.map(InFlightBody::plain)) });
            }
            Plan::Refuse(response) => {
                let response = response.map(|text| InFlightBody::plain(ResBody::from(text)));
                return Box::pin(async move { Ok(response) });
            }
            Plan::Check { limit, key, cost } => (limit, key.into_owned(), cost),
        };
        Box::pin(async move {
            let store = &shared.limits[limit].store;
            let now = shared.clock.now();
            let answer = match shared.backend.check_at_once(store, key.key(), now, cost) {
                Some(answer) => answer,
                None => shared.backend.check(store, key.key(), now, cost).await,
            };
            let checked = match answer {
                Ok(checked) if checked.allowed() => checked,
                refused => {
                    let response = shared.refusal(limit, key.key(), &refused);
                    return Ok(response.map(|text| InFlightBody::plain(ResBody::from(text))));
                }
            };
            // Held from here: given back if the wrapped service fails, or if this future or
            // the response's body is dropped, or when the body ends.
            let mut response = {
                let held = hold(Arc::clone(&shared), limit, key.clone(), cost);
                let response = inner.call(Request::from_parts(parts, body)).await;
                response?.map(|body| InFlightBody::holding(body, held))
            };
            shared.admitted(limit, key.key(), &checked, &mut response);
            Ok(response)
        })
    }
}

/// `cost` units of `key` under limit `limit`, given back when dropped.
fn hold<B, C>(shared: Arc<Shared<B, C>>, limit: usize, key: Extracted<'static>, cost: u64) -> Held
where
    B: Backend + Send + Sync + 'static,
    B::Store: Send + Sync,
    C: Clock + Send + Sync + 'static,
{
    Held::new(Box::new(move || {
        Box::pin(async move {
            let store = &shared.limits[limit].store;
            let now = shared.clock.now();
            // A release that fails leaves the units to their lease: nothing to answer.
            let _ = shared.backend.release(store, key.key(), now, cost).await;
        })
    }))
}
