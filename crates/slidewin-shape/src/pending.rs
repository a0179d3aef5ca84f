//! [`Pending`]: the answer to one call of a shaper.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::sync::oneshot;

use crate::error::Cancelled;
use crate::runtime::Task;

/// The answer to one call of a shaper (a [`Debouncer`](crate::Debouncer) or
/// [`Throttler`](crate::Throttler)'s [`call`](crate::Shaper::call), [`delay`](crate::delay())):
/// resolves to `Ok(output)` if this call's future was the one run, or `Err(`[`Cancelled`]`)`
/// if it never will be.
///
/// The call is registered when it is made, not when the `Pending` is first polled, and it runs
/// whether or not the `Pending` is awaited: dropping it only discards the answer (use
/// [`cancel`](crate::Shaper::cancel) to withdraw a call). If the run panics, awaiting the
/// `Pending` resumes the panic.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin_shape::{Debouncer, Runtime};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = Runtime::new(1)?;
/// let save = Debouncer::new(&rt, Duration::from_millis(500))?;
/// let pending = save.call("draft-7", async { "saved" });
/// assert!(save.pending(&"draft-7"));
/// assert_eq!(pending.await, Ok("saved")); // after 500 ms of (paused) quiet
/// # Ok(()) }
/// ```
#[must_use = "the call is registered either way; the Pending only carries its answer"]
pub struct Pending<T> {
    state: State<T>,
}

enum State<T> {
    /// Buffered in a window (or a delay); the shaper sends the task if the call is run, and
    /// drops the sender if it never will be.
    Waiting(oneshot::Receiver<Task<T>>),
    Running(Task<T>),
    Cancelled,
}

impl<T> Pending<T> {
    pub(crate) fn waiting(receiver: oneshot::Receiver<Task<T>>) -> Pending<T> {
        Pending {
            state: State::Waiting(receiver),
        }
    }

    pub(crate) fn running(task: Task<T>) -> Pending<T> {
        Pending {
            state: State::Running(task),
        }
    }

    pub(crate) fn cancelled() -> Pending<T> {
        Pending {
            state: State::Cancelled,
        }
    }
}

impl<T> Future for Pending<T> {
    type Output = Result<T, Cancelled>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match &mut self.state {
                State::Waiting(receiver) => match ready!(Pin::new(receiver).poll(cx)) {
                    Ok(task) => self.state = State::Running(task),
                    Err(_) => self.state = State::Cancelled,
                },
                State::Running(task) => return Pin::new(task).poll(cx),
                State::Cancelled => return Poll::Ready(Err(Cancelled)),
            }
        }
    }
}

impl<T> fmt::Debug for Pending<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Waiting(_) => "waiting",
            State::Running(_) => "running",
            State::Cancelled => "cancelled",
        };
        f.debug_struct("Pending").field("state", &state).finish()
    }
}
