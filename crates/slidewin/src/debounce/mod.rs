//! Debounce and throttle with lodash's timing, as a pure state machine: you pass the time,
//! it says which call runs and when it next needs you.
//!
//! A search box fires a request per keystroke, a scroll handler runs every frame, an editor
//! saves a draft per key: only the last call, the first, or one per interval is wanted.
//! Lodash's `debounce` and `throttle` are the reference, to the nanosecond (4.17.21, with two
//! of its bugs fixed; see [`Debounced`]).
//!
//! | type | what it is |
//! |---|---|
//! | [`DebounceOptions`] | lodash's `debounce` options: `wait`, `leading`, `trailing`, `max_wait` |
//! | [`ThrottleOptions`] | lodash's `throttle` options: a debounce with `max_wait = wait` |
//! | [`Debounce`] | the options, checked: the rules, `Copy`, one for any number of keys |
//! | [`Debounced<C>`](Debounced) | one key's state: the call it holds, its times, its timer |
//! | [`Admit`], [`Edge`], [`Sink`] | what to do with a new call; why a call ran; where runs of held calls go |
//!
//! [`Debounced`] has no clock and no timer thread: call it with explicit [`Moment`]s from a
//! game loop, a simulation or a test, and sleep until its [`timer`](Debounced::timer). For
//! futures on tokio, keyed, with an answer per call, `slidewin-shape`'s `Debouncer` and
//! `Throttler` drive one `Debounced` per key.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use slidewin::Moment;
//! use slidewin::debounce::{Admit, Debounce, DebounceOptions, Debounced, Edge};
//!
//! // Save a draft 300 ms after the last keystroke.
//! let autosave = Debounce::new(DebounceOptions::new(Duration::from_millis(300)))?;
//! let mut draft = Debounced::new();
//! let mut saved = Vec::new();
//! for (ms, text) in [(0, "h"), (100, "he"), (250, "hel"), (1_000, "help")] {
//!     let now = Moment::from_millis(ms);
//!     let mut save = |_: Edge, at: Moment, text| saved.push(format!("{text} at {at}"));
//!     match draft.call(&autosave, now, &mut save) {
//!         Admit::Run(_) => save(Edge::Leading, now, text),
//!         Admit::Buffer => draft.buffer(text, &mut save),
//!         Admit::Refuse => {}
//!     }
//! }
//! assert_eq!(saved, ["hel at 550ms"]); // found due at the keystroke of 1 s
//! assert_eq!(draft.timer(), Some(Moment::from_millis(1_300)));
//! draft.settle(&autosave, Moment::from_secs(2), &mut |_, at, text| {
//!     saved.push(format!("{text} at {at}"))
//! });
//! assert_eq!(saved, ["hel at 550ms", "help at 1.3s"]);
//! # Ok::<(), slidewin::ConfigError>(())
//! ```
//!
//! [`Moment`]: crate::Moment

mod debounced;
mod options;
mod sink;

pub use debounced::Debounced;
pub use options::{Debounce, DebounceOptions, ThrottleOptions};
pub use sink::{Admit, Edge, Sink};

#[cfg(test)]
mod tests;
