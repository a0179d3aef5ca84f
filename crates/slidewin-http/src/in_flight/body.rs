//! [`InFlightBody`], a response body that holds its request's units until it ends or is
//! dropped, and the [`Held`] units themselves.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use http_body::{Body, Frame, SizeHint};

/// A release to make: the backend's, with its store, key, time and units bound.
pub(crate) type Release = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// Units held for a request in flight: released when dropped.
pub(crate) struct Held(Option<Release>);

impl Held {
    pub(crate) fn new(release: Release) -> Held {
        Held(Some(release))
    }
}

impl Drop for Held {
    /// Releases without waiting: a backend that answers at once (memory) is done here; one
    /// that waits (Redis) goes on in a task of the runtime, if there is one. Without a runtime
    /// the units come back when their lease ends, as those of a holder that died.
    fn drop(&mut self) {
        let Some(release) = self.0.take() else {
            return;
        };
        let mut future = release();
        let mut cx = Context::from_waker(Waker::noop());
        if future.as_mut().poll(&mut cx).is_ready() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            drop(runtime.spawn(future));
        }
    }
}

pin_project_lite::pin_project! {
    /// The body of a response an [`InFlightLayer`](crate::InFlightLayer) let through: the
    /// wrapped service's own, unchanged, which gives its request's units back at its end
    /// (or when dropped before it).
    pub struct InFlightBody<T> {
        #[pin]
        inner: T,
        held: Option<Held>,
    }
}

impl<T> InFlightBody<T> {
    /// A body that holds nothing (a request no limit selected, or a refusal).
    pub(crate) fn plain(inner: T) -> InFlightBody<T> {
        InFlightBody { inner, held: None }
    }

    pub(crate) fn holding(inner: T, held: Held) -> InFlightBody<T> {
        InFlightBody {
            inner,
            held: Some(held),
        }
    }
}

/// A refusal's text, holding nothing (the layer builds refusals as `String`s).
impl<T: From<String>> From<String> for InFlightBody<T> {
    fn from(text: String) -> InFlightBody<T> {
        InFlightBody::plain(T::from(text))
    }
}

impl<T: Body> Body for InFlightBody<T> {
    type Data = T::Data;
    type Error = T::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<T::Data>, T::Error>>> {
        let mut this = self.project();
        let frame = std::task::ready!(this.inner.as_mut().poll_frame(cx));
        if frame.is_none() || this.inner.is_end_stream() {
            // The end: the request is no longer in flight.
            *this.held = None;
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<T> fmt::Debug for InFlightBody<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InFlightBody")
            .field("holding", &self.held.is_some())
            .finish_non_exhaustive()
    }
}
