//! [`delay()`]: run a future after a while, unless a token is cancelled first.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::pending::Pending;
use crate::runtime::Runtime;

/// Runs `future` on `runtime` once `duration` has passed, unless `token` is cancelled first;
/// then the answer is [`Cancelled`](crate::Cancelled), the future is dropped unpolled, and the
/// runtime never sees a task.
///
/// The delay starts when `delay` is called (tokio's clock), not when the [`Pending`] is first
/// polled, and the run happens whether or not the `Pending` is awaited. A token cancelled
/// before the delay is due always wins; one cancelled at the very instant it is due may or may
/// not, depending on which of the two the runtime sees first. A zero `duration` runs at once.
/// Delays have no key, so they report no shaper events; a delay that runs shows as its task's
/// `TaskRegistered`.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin_shape::{Cancelled, Runtime, delay};
/// use tokio_util::sync::CancellationToken;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = Runtime::new(4)?;
/// // Show a loading skeleton only if the page takes longer than 800 ms.
/// let loaded = CancellationToken::new();
/// let skeleton = delay(&rt, Duration::from_millis(800), loaded.clone(), async { "skeleton" });
/// tokio::time::sleep(Duration::from_millis(300)).await;
/// loaded.cancel(); // the page came in 300 ms
/// assert_eq!(skeleton.await, Err(Cancelled));
/// assert_eq!(rt.inspect().registered, 0);
/// # Ok(()) }
/// ```
pub fn delay<F>(
    runtime: &Runtime,
    duration: Duration,
    token: CancellationToken,
    future: F,
) -> Pending<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    if token.is_cancelled() {
        return Pending::cancelled();
    }
    let due = {
        let _tokio = runtime.handle().enter();
        Instant::now().checked_add(duration)
    };
    let (reply, answer) = oneshot::channel();
    let rt = runtime.clone();
    runtime.handle().spawn(async move {
        let go = {
            let mut cancelled = pin!(token.cancelled());
            let mut due = pin!(async {
                match due {
                    Some(due) => tokio::time::sleep_until(due).await,
                    // Beyond tokio's clock: never due.
                    None => std::future::pending().await,
                }
            });
            // The token first: cancellation wins whenever it is seen before the run goes.
            std::future::poll_fn(|cx| {
                if cancelled.as_mut().poll(cx).is_ready() {
                    Poll::Ready(false)
                } else if due.as_mut().poll(cx).is_ready() {
                    Poll::Ready(true)
                } else {
                    Poll::Pending
                }
            })
            .await
        };
        if go {
            // If the caller dropped its `Pending`, the task runs detached.
            let _ = reply.send(rt.run(future));
        }
        // Otherwise `future` and `reply` drop here: unpolled, and the answer is `Cancelled`.
    });
    Pending::waiting(answer)
}
