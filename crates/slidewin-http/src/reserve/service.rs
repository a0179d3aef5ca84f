//! [`Reserve`], the service a [`ReserveLayer`] wraps around yours.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use slidewin::Clock;
use slidewin::limit::Reservation;
use slidewin_store::Backend;
use tower::Service;

use super::settlement::Settlement;
use super::{ReserveLayer, Shared};
use crate::armed::{Plan, wrapping_service};
use crate::limit::Extracted;

wrapping_service!(
    /// The service [`ReserveLayer`] wraps around yours.
    Reserve,
    ReserveLayer
);

type Boxed<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B, C, ReqBody, ResBody> Service<Request<ReqBody>> for Reserve<S, B, C>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send,
    B: Backend + Send + Sync + 'static,
    B::Store: Send + Sync,
    C: Clock + Send + Sync + 'static,
    ReqBody: Send + 'static,
    ResBody: From<String> + Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = Boxed<Response<ResBody>, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The clone is not ready; the service that was polled ready serves this request.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let shared = Arc::clone(&self.shared);
        let (mut parts, body) = request.into_parts();
        let (limit, key, estimate) = match shared.limits.plan(&parts) {
            Plan::Pass => {
                let future = inner.call(Request::from_parts(parts, body));
                return Box::pin(future);
            }
            Plan::Refuse(response) => {
                let response = response.map(ResBody::from);
                return Box::pin(async move { Ok(response) });
            }
            Plan::Check { limit, key, cost } => (limit, key.into_owned(), cost),
        };
        Box::pin(async move {
            let limits = &shared.limits;
            let store = &limits.limits[limit].store;
            let now = limits.clock.now();
            let (answer, reservation) = match limits
                .backend
                .reserve(store, key.key(), now, estimate)
                .await
            {
                Ok((checked, reservation)) => (Ok(checked), reservation),
                Err(err) => (Err(err), None),
            };
            let checked = match answer {
                Ok(checked) if checked.allowed() => checked,
                refused => {
                    let response = limits.refusal(limit, key.key(), &refused);
                    return Ok(response.map(ResBody::from));
                }
            };
            // None: nothing was recorded (an estimate of 0, an answer of a failure policy).
            let settlement = reservation.map(|r| settlement(&shared, limit, key.clone(), r));
            if let Some(settlement) = &settlement {
                parts.extensions.insert(settlement.clone());
            }
            let response = inner.call(Request::from_parts(parts, body)).await?;
            let (head, body) = response.into_parts();
            let actual = shared.settle_from.actual(&head);
            if let (Some(settlement), Some(actual)) = (&settlement, actual) {
                // A settle that fails leaves the estimate: the response is sent all the same.
                if let Err(err) = settlement.settle(actual).await {
                    tracing::debug!(%err, "a reservation could not be settled; its estimate stands");
                }
            }
            let mut response = Response::from_parts(head, body);
            limits.admitted(limit, key.key(), &checked, &mut response);
            Ok(response)
        })
    }
}

/// The settlement of `reservation`, made for `key` under limit `limit`.
fn settlement<B, C>(
    shared: &Arc<Shared<B, C>>,
    limit: usize,
    key: Extracted<'static>,
    reservation: Reservation,
) -> Settlement
where
    B: Backend + Send + Sync + 'static,
    B::Store: Send + Sync,
    C: Send + Sync + 'static,
{
    let shared = Arc::clone(shared);
    let key = Arc::new(key);
    Settlement::new(
        reservation,
        Box::new(move |from, actual| {
            let (shared, key) = (Arc::clone(&shared), Arc::clone(&key));
            Box::pin(async move {
                let limits = &shared.limits;
                let store = &limits.limits[limit].store;
                limits.backend.settle(store, key.key(), from, actual).await
            })
        }),
    )
}
