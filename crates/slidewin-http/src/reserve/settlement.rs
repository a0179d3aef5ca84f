//! [`Settlement`]: a request's reservation, which its handler (or the layer, from the
//! response) settles at the actual cost.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use slidewin::limit::Reservation;
use slidewin_store::BackendError;

type Settled = Pin<Box<dyn Future<Output = Result<bool, BackendError>> + Send>>;

/// The backend's settle, with its store and key bound.
pub(crate) type Settle = Box<dyn Fn(Reservation, u64) -> Settled + Send + Sync>;

/// The reservation a [`ReserveLayer`](crate::ReserveLayer) made for a request, in the
/// request's extensions, for a handler that learns the actual cost itself: at the end of a
/// stream whose last event says how many tokens it used, say. Clones share one reservation.
///
/// [`settle`](Settlement::settle) changes the reserved cost to the actual one; settle again
/// when the count grows, each time with the whole cost so far (a settle starts from the last
/// one). Never settled, the estimate stands.
///
/// # Example
///
/// ```
/// use axum::Extension;
/// use slidewin_http::Settlement;
///
/// // A handler that learns the tokens it used, and settles them.
/// async fn complete(Extension(settlement): Extension<Settlement>) -> String {
///     let used = 1_234; // what the model said it used
///     // The request stands at its estimate if the store cannot be reached now.
///     let _ = settlement.settle(used).await;
///     format!("used {used} tokens")
/// }
/// ```
#[derive(Clone)]
pub struct Settlement {
    inner: Arc<Inner>,
}

struct Inner {
    settle: Settle,
    /// The reservation as last settled.
    current: Mutex<Reservation>,
}

impl Settlement {
    pub(crate) fn new(reservation: Reservation, settle: Settle) -> Settlement {
        Settlement {
            inner: Arc::new(Inner {
                settle,
                current: Mutex::new(reservation),
            }),
        }
    }

    /// The reservation as it stands: when it was counted, and its units (the estimate, or
    /// the cost it was last settled at).
    #[must_use]
    pub fn reservation(&self) -> Reservation {
        *self.lock()
    }

    /// Changes the request's cost to `actual` units, in the windows it was admitted in: more
    /// than was reserved is debt that later requests wait out, less gives units back.
    /// Whether anything held the reservation still (`false` once its windows have passed).
    ///
    /// # Errors
    ///
    /// [`BackendError::Unavailable`] while the store cannot be reached: the cost stays what
    /// it was before this call.
    pub fn settle(&self, actual: u64) -> impl Future<Output = Result<bool, BackendError>> + Send {
        let from = {
            let mut current = self.lock();
            let from = *current;
            *current = from.settled(actual);
            from
        };
        let settled = (self.inner.settle)(from, actual);
        let inner = Arc::clone(&self.inner);
        async move {
            let answer = settled.await;
            if answer.is_err() {
                // Not settled: the next settle starts from what the store still holds,
                // unless another has settled since.
                let mut current = inner.current.lock().unwrap_or_else(PoisonError::into_inner);
                if *current == from.settled(actual) {
                    *current = from;
                }
            }
            answer
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Reservation> {
        self.inner
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for Settlement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settlement")
            .field("reservation", &self.reservation())
            .finish_non_exhaustive()
    }
}
