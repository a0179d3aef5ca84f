//! Sliding time windows: count and measure what happened in the last N seconds, exactly.
//!
//! The core crate is pure and synchronous: no I/O, no threads, no async. Every structure takes
//! the time as a parameter at its lowest level, so tests and replays choose it, and a [`Clock`]
//! supplies it at the convenience level.
//!
//! # The window convention
//!
//! An event at `t` is inside the window of span `S` at time `now` when `now - S < t <= now`:
//! the half-open interval `(now - S, now]`. An event exactly `S` old has left. Every structure
//! of slidewin agrees, so the windows ending at `now - S` and at `now` never share an event.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use slidewin::{Clock, EventWindow, ManualClock, Moment};
//!
//! let clock = ManualClock::new(Moment::ZERO);
//! let mut logins = EventWindow::new(Duration::from_secs(10))?;
//! for user in ["ann", "bob", "ann"] {
//!     logins.record(clock.now(), user);
//!     clock.advance(Duration::from_secs(4));
//! }
//! // Now 12 s: the login at 0 s has left (0, 4 and 8 s were recorded).
//! let mut gone = Vec::new();
//! logins.expire(clock.now(), |(t, user)| gone.push(format!("{user} at {t}")));
//! assert_eq!(gone, ["ann at 0ns"]);
//! assert_eq!(logins.len(), 2);
//! # Ok::<(), slidewin::ConfigError>(())
//! ```

mod error;
mod event_window;
mod slide_vec;
mod time;

pub use error::{ConfigError, TimeRangeError};
pub use event_window::{EventWindow, Events};
pub use time::{Clock, ManualClock, Moment, MonotonicClock, SystemClock};

// The README's examples are tests too.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
