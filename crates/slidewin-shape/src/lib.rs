//! Call shapers on tokio: keyed [`Debouncer`] and [`Throttler`] with lodash's timing to the
//! millisecond (tokio's timers'), [`delay()`] with a `CancellationToken`, a small task
//! [`Runtime`] that counts its tasks and reports [`Event`]s, and restart coordination
//! ([`Latest`], [`SequenceGuard`]).
//!
//! A search box fires a request per keystroke, a scroll handler runs every frame, an editor
//! saves a draft per key: only the last, the first, or one per interval is wanted. The
//! shapers sit in front of the runtime and decide which calls may enter it: a call merged
//! away never takes a slot and never appears in [`Runtime::inspect`].
//!
//! `Debouncer` and `Throttler` are one type, [`Shaper`], made from [`DebounceOptions`] or
//! [`ThrottleOptions`]. Each key is a [`slidewin::debounce::Debounced`], the pure state
//! machine, driven by tokio's clock; use that directly to debounce by hand, without tokio.
//!
//! Every call gets its own answer, a [`Pending`]: `Ok(output)` if its future was the one run,
//! `Err(`[`Cancelled`]`)` if it was superseded. Only the chosen call's future is ever polled.
//! Time is tokio's, so tests run under `tokio::time::pause()` and are exact to the millisecond.
//!
//! For slidewin's rate limiters, [`UntilReady::until_ready`] (on a
//! [`SharedLimiter`](slidewin::SharedLimiter)) and [`UntilKeyReady::until_key_ready`] (on a
//! [`Keyed`](slidewin::Keyed) limiter) wait on tokio's clock until a cost is admitted, reading
//! the time from a [`TokioClock`].
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use slidewin_shape::{Cancelled, DebounceOptions, Debouncer, Event, Runtime};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let rt = Runtime::new(4)?;
//! let mut events = rt.subscribe();
//! let d = Debouncer::with_options(&rt, DebounceOptions::new(Duration::from_millis(60)))?;
//!
//! // Five calls on one key, 10 ms apart: one task, the last call's.
//! let mut answers = Vec::new();
//! for i in 0..5 {
//!     answers.push(d.call("key", async move { i }));
//!     tokio::time::sleep(Duration::from_millis(10)).await;
//! }
//! let mut results = Vec::new();
//! for answer in answers {
//!     results.push(answer.await);
//! }
//! assert_eq!(results, [Err(Cancelled), Err(Cancelled), Err(Cancelled), Err(Cancelled), Ok(4)]);
//! assert_eq!(rt.inspect().registered, 1);
//!
//! let mut armed_replaced = (0, 0);
//! while let Some(event) = events.try_recv() {
//!     match event {
//!         Event::Armed { .. } => armed_replaced.0 += 1,
//!         Event::Replaced { .. } => armed_replaced.1 += 1,
//!         _ => {}
//!     }
//! }
//! assert_eq!(armed_replaced, (1, 4)); // merged calls leave only these traces
//! # Ok(()) }
//! ```
//!
//! # Design
//!
//! See `ARCHITECTURE.md` in the repository for the state machine, the choices made where
//! lodash is silent or buggy, and how keys are freed.

mod clock;
mod delay;
mod error;
mod event;
mod latest;
mod pending;
mod runtime;
mod sequence_guard;
mod shaper;
mod until_ready;

pub use clock::TokioClock;
pub use delay::delay;
pub use error::{Cancelled, ShapeConfigError};
pub use event::{Event, Outcome, Subscription, TaskId};
pub use latest::Latest;
pub use pending::Pending;
pub use runtime::{DEFAULT_EVENT_CAPACITY, Runtime, Stats, Task};
pub use sequence_guard::{SequenceGuard, Ticket};
pub use shaper::{Debouncer, Shaper, Throttler};
pub use slidewin::debounce::{DebounceOptions, Edge, ThrottleOptions};
pub use until_ready::{UntilKeyReady, UntilReady};

// The README's example is a test too.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
