//! [`Shaper`]: keyed debounce and throttle with lodash's timing, one answer per call;
//! [`Debouncer`] and [`Throttler`] are its two kinds.
//!
//! The shaper's face is here; what it keeps per key is in `state`, and a key's timer task in
//! `timer`.

mod state;
mod timer;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use slidewin::Moment;
use slidewin::debounce::{Admit, Debounce, DebounceOptions, Debounced, ThrottleOptions};
use tokio::sync::oneshot;

use crate::clock::TokioClock;
use crate::error::ShapeConfigError;
use crate::event::Event;
use crate::pending::Pending;
use crate::runtime::Runtime;
use state::{Call, Effects, Garbage, Shared, Slot, State, shrink};
use timer::{keep_clock, spawn_clock};

/// Keyed debounce: for each key, the calls that come less than `wait` apart are merged and
/// only one of them runs, at the times lodash's `debounce` would run it. A [`Shaper`] made
/// from [`DebounceOptions`].
///
/// With the default options a call runs once `wait` has passed without another call on its
/// key; `leading` runs a call on a quiet key at once; `max_wait` forces a run when calls never
/// stop.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin_shape::{Cancelled, Debouncer, Runtime};
/// use tokio::time::{Instant, sleep};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = Runtime::new(4)?;
/// let search = Debouncer::new(&rt, Duration::from_millis(300))?;
/// let start = Instant::now();
/// let mut answers = Vec::new();
/// for text in ["r", "ru", "rus", "rust"] {
///     answers.push(search.call("box", async move { (text, start.elapsed()) }));
///     sleep(Duration::from_millis(100)).await;
/// }
/// let mut results = Vec::new();
/// for answer in answers {
///     results.push(answer.await);
/// }
/// // The last keystroke was at 300 ms; the search ran 300 ms later, once.
/// assert_eq!(results[..3], [Err(Cancelled); 3]);
/// assert_eq!(results[3], Ok(("rust", Duration::from_millis(600))));
/// assert_eq!(rt.inspect().registered, 1);
/// # Ok(()) }
/// ```
pub type Debouncer<K, T> = Shaper<K, T, DebounceOptions>;

/// Keyed throttle: for each key, at most one run per `wait` window that a call opened, at its
/// leading edge and (if another call came in it) at its trailing edge, at the times lodash's
/// `throttle` would run them. A [`Shaper`] made from [`ThrottleOptions`]: a debounce with
/// `max_wait = wait` and both edges on by default, as lodash defines it.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin_shape::{Runtime, Throttler};
/// use tokio::time::{Instant, sleep};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = Runtime::new(4)?;
/// let scroll = Throttler::new(&rt, Duration::from_millis(100))?;
/// let start = Instant::now();
/// let mut answers = Vec::new();
/// for _ in 0..25 {
///     // A frame every 10 ms for 250 ms.
///     answers.push(scroll.call("list", async move { start.elapsed().as_millis() }));
///     sleep(Duration::from_millis(10)).await;
/// }
/// sleep(Duration::from_millis(200)).await;
/// let mut ran = Vec::new();
/// for answer in answers {
///     ran.extend(answer.await);
/// }
/// assert_eq!(ran, [0, 100, 200, 300]); // leading at 0, then one per window
/// # Ok(()) }
/// ```
pub type Throttler<K, T> = Shaper<K, T, ThrottleOptions>;

/// A keyed call shaper with lodash's timing: a [`Debouncer`] (`O` is [`DebounceOptions`]) or a
/// [`Throttler`] (`O` is [`ThrottleOptions`]). Both kinds are this one type; `O` only chooses
/// the constructors' defaults.
///
/// Every call gets its own answer, a [`Pending`]: `Ok` with the output if its future was the
/// one run, `Cancelled` if it was replaced (or cancelled). Only the chosen call's future is
/// ever polled; the others are dropped unpolled.
///
/// Each key is a [`slidewin::debounce::Debounced`], lodash 4.17.21's `debounce` to the
/// nanosecond, on tokio's clock: a timer due at `t` is handled before a call made at `t`.
/// Where lodash is buggy we are not: [`flush`](Shaper::flush) leaves no timer behind (lodash
/// PR #4656), and a runtime that was blocked past a deadline cannot wedge a key (lodash
/// #6003): every operation first catches up on what was due.
///
/// Runs are dispatched to the [`Runtime`], so calls merged away never take a slot or appear in
/// it; the shaper reports [`Event::Armed`], [`Event::Replaced`], [`Event::Fired`] and
/// [`Event::Cancelled`] on the runtime's events. Keys are independent, and a key's state is
/// freed as soon as it goes quiet.
///
/// Dropping the last clone of a shaper cancels its buffered calls; call
/// [`flush_all`](Shaper::flush_all) first to run them instead.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin_shape::{DebounceOptions, Debouncer, Runtime, Shaper, Throttler};
///
/// /// Saves a draft through either kind of shaper.
/// fn save<O>(shaper: &Shaper<&'static str, u32, O>, draft: u32) {
///     drop(shaper.call("draft", async move { draft }));
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = Runtime::new(4)?;
/// let debouncer = Debouncer::new(&rt, Duration::from_millis(300))?;
/// let throttler = Throttler::new(&rt, Duration::from_millis(300))?;
/// save(&debouncer, 1);
/// save(&throttler, 1);
/// assert!(debouncer.pending(&"draft")); // waits for the trailing edge
/// assert!(!throttler.pending(&"draft")); // ran at the leading edge
/// # Ok(()) }
/// ```
pub struct Shaper<K, T, O> {
    shared: Arc<Shared<K, T>>,
    kind: PhantomData<fn() -> O>,
}

impl<K, T, O> Clone for Shaper<K, T, O> {
    fn clone(&self) -> Self {
        Shaper {
            shared: Arc::clone(&self.shared),
            kind: PhantomData,
        }
    }
}

impl<K, T> Shaper<K, T, DebounceOptions>
where
    K: Hash + Eq + Clone + fmt::Debug + Send + 'static,
    T: Send + 'static,
{
    /// A debouncer with lodash's defaults: trailing edge only, no max wait.
    ///
    /// # Errors
    ///
    /// The options' [`ShapeConfigError::Options`]: a zero wait, or one too long.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin_shape::{Debouncer, Runtime};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let d: Debouncer<u32, ()> = Debouncer::new(&rt, Duration::from_millis(300))?;
    /// assert!(d.is_empty());
    /// let err = Debouncer::<u32, ()>::new(&rt, Duration::ZERO).unwrap_err();
    /// assert_eq!(err.to_string(), "the wait must be longer than zero, got 0ns");
    /// # Ok(()) }
    /// ```
    pub fn new(runtime: &Runtime, wait: Duration) -> Result<Debouncer<K, T>, ShapeConfigError> {
        Shaper::build(runtime, DebounceOptions::new(wait))
    }

    /// A debouncer with the given options.
    ///
    /// # Errors
    ///
    /// The options' [`ShapeConfigError::Options`] ([`Debounce::new`] says which).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin_shape::{ShapeConfigError, DebounceOptions, Debouncer, Runtime};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let opts = DebounceOptions::new(Duration::from_millis(300)).leading(true).trailing(false);
    /// let d: Debouncer<u32, ()> = Debouncer::with_options(&rt, opts)?;
    /// let none = DebounceOptions::new(Duration::from_millis(300)).trailing(false);
    /// assert_eq!(
    ///     Debouncer::<u32, ()>::with_options(&rt, none).unwrap_err(),
    ///     ShapeConfigError::Options(slidewin::ConfigError::NoEdge)
    /// );
    /// # Ok(()) }
    /// ```
    pub fn with_options(
        runtime: &Runtime,
        options: DebounceOptions,
    ) -> Result<Debouncer<K, T>, ShapeConfigError> {
        Shaper::build(runtime, options)
    }
}

impl<K, T> Shaper<K, T, ThrottleOptions>
where
    K: Hash + Eq + Clone + fmt::Debug + Send + 'static,
    T: Send + 'static,
{
    /// A throttler with lodash's defaults: both edges.
    ///
    /// # Errors
    ///
    /// The options' [`ShapeConfigError::Options`]: a zero wait, or one too long.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin_shape::{ShapeConfigError, Runtime, Throttler};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let t: Throttler<&str, ()> = Throttler::new(&rt, Duration::from_millis(100))?;
    /// assert_eq!(
    ///     Throttler::<&str, ()>::new(&rt, Duration::ZERO).unwrap_err(),
    ///     ShapeConfigError::Options(slidewin::ConfigError::ZeroWait)
    /// );
    /// # Ok(()) }
    /// ```
    pub fn new(runtime: &Runtime, wait: Duration) -> Result<Throttler<K, T>, ShapeConfigError> {
        Shaper::build(runtime, ThrottleOptions::new(wait))
    }

    /// A throttler with the given options.
    ///
    /// # Errors
    ///
    /// The options' [`ShapeConfigError::Options`] ([`Debounce::new`] says which).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin_shape::{Runtime, ThrottleOptions, Throttler};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let opts = ThrottleOptions::new(Duration::from_millis(100)).trailing(false);
    /// let t: Throttler<&str, ()> = Throttler::with_options(&rt, opts)?;
    /// # Ok(()) }
    /// ```
    pub fn with_options(
        runtime: &Runtime,
        options: ThrottleOptions,
    ) -> Result<Throttler<K, T>, ShapeConfigError> {
        Shaper::build(runtime, options)
    }
}

impl<K, T, O> Shaper<K, T, O>
where
    K: Hash + Eq + Clone + fmt::Debug + Send + 'static,
    T: Send + 'static,
{
    fn build(
        runtime: &Runtime,
        options: impl Into<DebounceOptions>,
    ) -> Result<Shaper<K, T, O>, ShapeConfigError> {
        let debounce = Debounce::new(options)?;
        let clock = {
            let _tokio = runtime.handle().enter();
            TokioClock::new()
        };
        Ok(Shaper {
            shared: Arc::new(Shared {
                runtime: runtime.clone(),
                debounce,
                clock,
                label_of: |key| format!("{key:?}").into(),
                state: Mutex::new(State {
                    slots: HashMap::new(),
                    next_generation: 0,
                }),
            }),
            kind: PhantomData,
        })
    }

    /// The timing every key follows: the options, checked.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin_shape::{Runtime, Throttler};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(1)?;
    /// let t = Throttler::<u8, ()>::new(&rt, Duration::from_millis(100))?;
    /// assert_eq!(t.debounce().max_wait(), Some(Duration::from_millis(100)));
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn debounce(&self) -> Debounce {
        self.shared.debounce
    }

    /// Calls `future` on `key`: registered now, run (or not) when lodash's timing says, and
    /// answered by the returned [`Pending`].
    ///
    /// The future is polled only if this call is the one run, as a task of the runtime; if it
    /// is replaced or cancelled it is dropped unpolled and the `Pending` resolves to
    /// [`Cancelled`](crate::Cancelled).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin_shape::{DebounceOptions, Debouncer, Runtime};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let opts = DebounceOptions::new(Duration::from_millis(60)).leading(true);
    /// let d = Debouncer::with_options(&rt, opts)?;
    /// let first = d.call("k", async { 1 }); // quiet key: runs at once
    /// let second = d.call("k", async { 2 }); // buffered for the trailing edge
    /// assert_eq!((first.await, second.await), (Ok(1), Ok(2)));
    /// # Ok(()) }
    /// ```
    pub fn call<F>(&self, key: K, future: F) -> Pending<T>
    where
        F: Future<Output = T> + Send + 'static,
    {
        let shared = &*self.shared;
        let now = shared.now();
        let mut garbage = Garbage::new();
        let mut refused = None;
        let pending = {
            let mut state = shared.lock();
            let state = &mut *state;
            let slot = match state.slots.get_mut(&key) {
                Some(slot) => slot,
                None => {
                    let generation = state.next_generation;
                    state.next_generation += 1;
                    let clock = spawn_clock(&self.shared, &key, generation);
                    state.slots.entry(key.clone()).or_insert(Slot {
                        state: Debounced::new(),
                        generation,
                        label: None,
                        clock: Some(clock),
                        wake_at: Moment::ZERO,
                    })
                }
            };
            let mut fx = Effects {
                shared,
                key: &key,
                label: &mut slot.label,
                garbage: &mut garbage,
            };
            let admit = slot.state.call(&shared.debounce, now, &mut fx);
            let pending = match admit {
                Admit::Run(edge) => Pending::running(fx.fire(edge, future)),
                Admit::Buffer => {
                    let (reply, answer) = oneshot::channel();
                    let call = Call {
                        future: Box::pin(future),
                        reply,
                    };
                    slot.state.buffer(call, &mut fx);
                    Pending::waiting(answer)
                }
                Admit::Refuse => {
                    fx.emit(|key| Event::Cancelled { key });
                    refused = Some(future);
                    Pending::cancelled()
                }
            };
            keep_clock(&self.shared, &key, slot, &mut state.next_generation);
            pending
        };
        drop((garbage, refused));
        pending
    }

    /// Runs `key`'s buffered call now, if there is one, and stops its timer: the `Pending` of that
    /// call resolves with its output. Whether a call ran ([`Edge::Flush`](crate::Edge::Flush)).
    ///
    /// The key's window is not reopened: lodash's `flush` is its trailing edge, brought
    /// forward. Unlike lodash before PR #4656, no timer is left behind to fire later.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin_shape::{Debouncer, Runtime};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let d = Debouncer::new(&rt, Duration::from_secs(60))?;
    /// let draft = d.call("doc", async { "saved" });
    /// assert!(d.flush(&"doc"));
    /// assert!(!d.pending(&"doc"));
    /// assert_eq!(draft.await, Ok("saved")); // no minute of waiting
    /// # Ok(()) }
    /// ```
    pub fn flush(&self, key: &K) -> bool {
        let debounce = self.shared.debounce;
        self.with_slot(key, |slot, now, fx| slot.state.flush(&debounce, now, fx))
            .unwrap_or(false)
    }

    /// Cancels `key`'s buffered call, if any (its `Pending` resolves to
    /// [`Cancelled`](crate::Cancelled)), and forgets the key: its next call starts afresh, as
    /// after lodash's `cancel`. Whether a call was cancelled.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin_shape::{Cancelled, Debouncer, Runtime};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let d = Debouncer::new(&rt, Duration::from_millis(300))?;
    /// let call = d.call("k", async { 1 });
    /// assert!(d.cancel(&"k"));
    /// assert_eq!(call.await, Err(Cancelled));
    /// assert!(d.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn cancel(&self, key: &K) -> bool {
        let now = self.shared.now();
        let mut garbage = Garbage::new();
        let cancelled = {
            let mut state = self.shared.lock();
            // Settle first: a run that was due before now has happened.
            if let Some(slot) = state.slots.get_mut(key) {
                let mut fx = self.shared.effects(key, &mut slot.label, &mut garbage);
                slot.state.settle(&self.shared.debounce, now, &mut fx);
            }
            match state.slots.remove(key) {
                Some(mut slot) => {
                    if let Some(clock) = slot.clock.take() {
                        clock.abort();
                    }
                    let cancelled = slot.state.cancel();
                    shrink(&mut state.slots);
                    match cancelled {
                        Some(call) => {
                            let mut fx = self.shared.effects(key, &mut slot.label, &mut garbage);
                            fx.cancelled(call);
                            true
                        }
                        None => false,
                    }
                }
                None => false,
            }
        };
        drop(garbage);
        cancelled
    }

    /// Whether `key` has a call buffered for its trailing edge: one that will run when its
    /// window closes, or on [`flush`](Shaper::flush).
    ///
    /// (Lodash's `pending()` says whether its timer is armed, which it also is after a leading
    /// run with nothing buffered; this says whether a call is waiting.)
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin_shape::{Debouncer, Runtime};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let d = Debouncer::new(&rt, Duration::from_millis(300))?;
    /// let _ = d.call("k", async {});
    /// assert!(d.pending(&"k"));
    /// tokio::time::sleep(Duration::from_millis(300)).await;
    /// assert!(!d.pending(&"k"));
    /// # Ok(()) }
    /// ```
    pub fn pending(&self, key: &K) -> bool {
        let debounce = self.shared.debounce;
        self.with_slot(key, |slot, now, fx| {
            slot.state.settle(&debounce, now, fx);
            slot.state.pending()
        })
        .unwrap_or(false)
    }

    /// Runs every key's buffered call now (as [`flush`](Shaper::flush) on each key): how
    /// many ran.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin_shape::{Debouncer, Runtime};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let d = Debouncer::new(&rt, Duration::from_secs(5))?;
    /// let answers = [d.call(1, async { 'a' }), d.call(2, async { 'b' })];
    /// assert_eq!(d.flush_all(), 2);
    /// let [a, b] = answers;
    /// assert_eq!((a.await, b.await), (Ok('a'), Ok('b')));
    /// # Ok(()) }
    /// ```
    pub fn flush_all(&self) -> usize {
        let now = self.shared.now();
        let mut garbage = Garbage::new();
        let mut state = self.shared.lock();
        let state_ref = &mut *state;
        let mut ran = 0;
        for (key, slot) in &mut state_ref.slots {
            let mut fx = self.shared.effects(key, &mut slot.label, &mut garbage);
            ran += usize::from(slot.state.flush(&self.shared.debounce, now, &mut fx));
            keep_clock(&self.shared, key, slot, &mut state_ref.next_generation);
        }
        drop(state);
        drop(garbage);
        ran
    }

    /// How many keys hold state: a key is held from its first call until it goes quiet
    /// (`wait` after its last call, or `max_wait` after its last run, whichever comes first,
    /// with no timer armed), and then freed by its timer task.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin_shape::{Debouncer, Runtime};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = Runtime::new(4)?;
    /// let d = Debouncer::new(&rt, Duration::from_millis(10))?;
    /// for key in 0..100 {
    ///     let _ = d.call(key, async {});
    /// }
    /// assert_eq!(d.len(), 100);
    /// tokio::time::sleep(Duration::from_millis(11)).await; // their timers ran at 10 ms
    /// assert_eq!(d.len(), 0);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        self.shared.lock().slots.len()
    }

    /// Whether no key holds state ([`len`](Shaper::len) is 0).
    ///
    /// ```
    /// use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let rt = slidewin_shape::Runtime::new(1)?;
    /// let d = slidewin_shape::Debouncer::<u8, ()>::new(&rt, Duration::from_millis(1))?;
    /// assert!(d.is_empty());
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K, T, O> fmt::Debug for Shaper<K, T, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shaper")
            .field("debounce", &self.shared.debounce)
            .finish_non_exhaustive()
    }
}
