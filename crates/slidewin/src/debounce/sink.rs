//! What a [`Debounced`](crate::debounce::Debounced) state answers: [`Admit`] for a new call,
//! [`Edge`] for why a call ran, and the [`Sink`] that its runs of held calls go to.

use std::fmt;

use crate::Moment;

/// Why a call ran: what [`Debounced`](crate::debounce::Debounced) reports with each run.
///
/// ```
/// use slidewin::debounce::Edge;
/// assert_eq!(Edge::MaxWait.to_string(), "max_wait");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Edge {
    /// The call ran the moment it was made: its key was quiet and `leading` is set.
    Leading,
    /// The held call ran when its window closed (`trailing`).
    Trailing,
    /// The call ran the moment it was made because `max_wait` had passed since the last run
    /// (lodash's "invocations in a tight loop"; it happens whatever `leading` says).
    MaxWait,
    /// The held call ran early, on [`flush`](crate::debounce::Debounced::flush).
    Flush,
}

impl fmt::Display for Edge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Edge::Leading => "leading",
            Edge::Trailing => "trailing",
            Edge::MaxWait => "max_wait",
            Edge::Flush => "flush",
        })
    }
}

/// What to do with a new call ([`Debounced::call`](crate::debounce::Debounced::call)).
///
/// ```
/// use std::time::Duration;
/// use slidewin::Moment;
/// use slidewin::debounce::{Admit, Debounce, Debounced, Edge, ThrottleOptions};
///
/// let throttle = Debounce::new(ThrottleOptions::new(Duration::from_millis(100)))?;
/// let mut state = Debounced::<u32>::new();
/// let mut ignore = |_: Edge, _: Moment, _: u32| {};
/// assert_eq!(state.call(&throttle, Moment::ZERO, &mut ignore), Admit::Run(Edge::Leading));
/// assert_eq!(state.call(&throttle, Moment::ZERO, &mut ignore), Admit::Buffer);
/// # Ok::<(), slidewin::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Admit {
    /// Run the call now.
    Run(Edge),
    /// Hand the call to [`buffer`](crate::debounce::Debounced::buffer): it waits for the trailing
    /// edge.
    Buffer,
    /// Drop the call: it falls in a window and `trailing` is off, so it can never run.
    Refuse,
}

/// Where a [`Debounced`](crate::debounce::Debounced) reports what becomes of the call it holds.
/// Only [`run`](Sink::run) is required; a closure `FnMut(Edge, Moment, C)` is a sink that runs
/// calls and drops replaced ones.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::Moment;
/// use slidewin::debounce::{Admit, Debounce, DebounceOptions, Debounced, Edge, Sink};
///
/// #[derive(Default)]
/// struct Log(Vec<String>);
///
/// impl Sink<&'static str> for Log {
///     fn run(&mut self, edge: Edge, at: Moment, call: &'static str) {
///         self.0.push(format!("{call} ran at {at} ({edge})"));
///     }
///     fn replaced(&mut self, old: &'static str) {
///         self.0.push(format!("{old} replaced"));
///     }
/// }
///
/// let d = Debounce::new(DebounceOptions::new(Duration::from_millis(60)))?;
/// let mut state = Debounced::new();
/// let mut log = Log::default();
/// for (ms, call) in [(0, "a"), (10, "b")] {
///     if state.call(&d, Moment::from_millis(ms), &mut log) == Admit::Buffer {
///         state.buffer(call, &mut log);
///     }
/// }
/// state.settle(&d, Moment::from_millis(100), &mut log);
/// assert_eq!(log.0, ["a replaced", "b ran at 70ms (trailing)"]);
/// # Ok::<(), slidewin::ConfigError>(())
/// ```
pub trait Sink<C> {
    /// The held call runs: at the trailing edge (`at` is when its timer was due, at or before
    /// the time given to the operation that found it due) or on a flush (`at` is then).
    fn run(&mut self, edge: Edge, at: Moment, call: C);

    /// A call was held where none was.
    fn armed(&mut self) {}

    /// The held call `old` was replaced by a newer call, held or run: it will never run.
    fn replaced(&mut self, old: C) {
        drop(old);
    }
}

impl<C, F: FnMut(Edge, Moment, C)> Sink<C> for F {
    fn run(&mut self, edge: Edge, at: Moment, call: C) {
        self(edge, at, call);
    }
}
