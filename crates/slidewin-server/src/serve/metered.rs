//! The bytes of request bodies in flight, bounded across every call: a call's body may hold up
//! to a megabyte, and without this bound the cap on calls in flight times that megabyte (4 GiB)
//! would be what a client that trickles its bodies could make the service hold.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use hyper::body::{Body, Bytes, Frame, SizeHint};

/// The bytes that request bodies in flight hold, and their bound.
pub(crate) struct BodyBytes {
    max: usize,
    held: AtomicUsize,
}

impl BodyBytes {
    pub(crate) fn new(max: usize) -> BodyBytes {
        BodyBytes {
            max,
            held: AtomicUsize::new(0),
        }
    }

    fn take(&self, bytes: usize) -> bool {
        self.held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(bytes).filter(|&sum| sum <= self.max)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: usize) {
        self.held.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// The bytes held now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }
}

/// A request body past the bound on the bytes of bodies in flight: what the call fails with.
#[derive(Debug)]
pub(crate) struct BodiesFull {
    pub(crate) max: usize,
}

impl fmt::Display for BodiesFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "overloaded: the request bodies in flight hold {} bytes, the most they may \
             (max_body_bytes_in_flight); try again",
            self.max
        )
    }
}

impl std::error::Error for BodiesFull {}

/// Whether `error`, or an error it comes from, is a [`BodiesFull`].
pub(crate) fn bodies_full<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a BodiesFull> {
    let mut at = Some(error);
    while let Some(error) = at {
        if let Some(full) = error.downcast_ref::<BodiesFull>() {
            return Some(full);
        }
        at = error.source();
    }
    None
}

/// A request body whose data frames are counted against a [`BodyBytes`] as they come, and
/// given back when the body is dropped; a frame past the bound fails the body with
/// `refusal(BodiesFull)`.
pub(crate) struct Metered<B> {
    body: B,
    bytes: Arc<BodyBytes>,
    taken: usize,
    refusal: fn(BodiesFull) -> Box<dyn std::error::Error + Send + Sync>,
}

impl<B> Metered<B> {
    pub(crate) fn new(
        body: B,
        bytes: Arc<BodyBytes>,
        refusal: fn(BodiesFull) -> Box<dyn std::error::Error + Send + Sync>,
    ) -> Metered<B> {
        Metered {
            body,
            bytes,
            taken: 0,
            refusal,
        }
    }
}

impl<B> Body for Metered<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let len = frame.data_ref().map_or(0, Bytes::len);
                if len > 0 && !this.bytes.take(len) {
                    let full = BodiesFull {
                        max: this.bytes.max,
                    };
                    return Poll::Ready(Some(Err((this.refusal)(full))));
                }
                this.taken += len;
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl<B> Drop for Metered<B> {
    fn drop(&mut self) {
        self.bytes.give_back(self.taken);
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, Full};

    use super::*;

    fn plain(full: BodiesFull) -> Box<dyn std::error::Error + Send + Sync> {
        Box::new(full)
    }

    #[tokio::test]
    async fn bodies_share_the_bound_and_give_their_bytes_back_when_dropped() {
        let bytes = Arc::new(BodyBytes::new(10));
        let body = |n: usize| {
            Metered::new(
                Full::new(Bytes::from(vec![0; n])),
                Arc::clone(&bytes),
                plain,
            )
        };
        let mut first = body(6);
        assert!(first.frame().await.unwrap().is_ok());
        assert_eq!(bytes.held(), 6);
        // Past the bound: the body fails, naming it, and holds nothing.
        let err = body(5).collect().await.unwrap_err();
        let full = bodies_full(err.as_ref()).expect("a BodiesFull");
        assert_eq!(full.max, 10);
        assert!(
            err.to_string().contains("max_body_bytes_in_flight"),
            "{err}"
        );
        assert_eq!(bytes.held(), 6);
        assert_eq!(body(4).collect().await.unwrap().to_bytes().len(), 4);
        assert_eq!(bytes.held(), 6, "the body dropped gave its bytes back");
        drop(first);
        assert_eq!(bytes.held(), 0);
    }
}
