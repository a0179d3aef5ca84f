//! [`Debounced`]: lodash's `debounce` state machine for one key, with time as a parameter.
//!
//! The fields and steps are lodash's (`lastCallTime`, `lastInvokeTime`, the timer, `lastArgs`;
//! `shouldInvoke`, `leadingEdge`, `remainingWait`, `timerExpired`, `trailingEdge`, the
//! `maxWait` path for calls in a tight loop), on a perfect event loop: a timer due at `t` is
//! handled at `t`, before a call made at `t`. Every operation first settles the timer steps
//! due by `now`, at the times they were due, so a late look changes nothing (lodash #6003).
//!
//! Lodash 4.17.21 has at most one timer live per debounced function, except after its `flush`,
//! which leaves the timer running (lodash PR #4656); here `flush` stops it, so one optional due
//! time is the whole timer.
//!
//! What a state answers ([`Admit`], [`Edge`]) and where its runs go ([`Sink`]) are in `sink`.

use crate::debounce::{Admit, Debounce, Edge, Sink};
use crate::{Clock, Moment};

/// Lodash's timer, and whether the state has seen a call at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Timer {
    /// No call since [`Debounced::new`] or [`Debounced::cancel`] (lodash's `lastCallTime` is
    /// `undefined`): the next call is a leading edge whatever the time.
    Fresh,
    /// No timer set.
    Unset,
    /// Lodash's `timerId`, due at this time.
    Due(Moment),
}

/// Lodash's `debounce` for one key, with time as a parameter: the call it holds, its times and
/// its timer. The rules (a [`Debounce`]) are passed to each operation, so that a keyed holder
/// stores one set of rules and a small state per key.
///
/// Drive it by hand: [`call`](Debounced::call) when a call comes, then run it, hold it
/// ([`buffer`](Debounced::buffer)) or drop it as [`Admit`] says; [`settle`](Debounced::settle)
/// when [`timer`](Debounced::timer) comes due, to run the held call at the trailing edge. A
/// call run later than it was made (trailing, or on [`flush`](Debounced::flush)) goes to the
/// [`Sink`], with the edge and the time it was due.
///
/// Timing is lodash 4.17.21's, exactly: a timer due at `t` is handled before a call made at
/// `t`, and every operation first settles what came due by its time, at the times it was due,
/// so it does not matter how late one looks. Two differences, where lodash is buggy: `flush`
/// stops the timer (lodash PR #4656, unreleased), and a call made after a long pause is a
/// leading edge even if no one looked in between (lodash #6003). The timeline never goes back:
/// a time earlier than the latest call or run counts as that one, as if no time had passed.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::Moment;
/// use slidewin::debounce::{Admit, Debounce, Debounced, Edge, ThrottleOptions};
///
/// // A scroll handler, at most once per 100 ms, and a frame every 30 ms.
/// let throttle = Debounce::new(ThrottleOptions::new(Duration::from_millis(100)))?;
/// let mut scroll = Debounced::new();
/// let mut ran = Vec::new();
/// for frame in 0..8u64 {
///     let now = Moment::from_millis(frame * 30);
///     let mut late = |_: Edge, at: Moment, frame: u64| ran.push((frame, at));
///     match scroll.call(&throttle, now, &mut late) {
///         Admit::Run(_) => ran.push((frame, now)),
///         Admit::Buffer => scroll.buffer(frame, &mut late),
///         Admit::Refuse => {}
///     }
/// }
/// // Frame 0 at once, frame 3 when the window closed, frame 7 as max_wait (= wait) had passed.
/// let ms = Moment::from_millis;
/// assert_eq!(ran, [(0, ms(0)), (3, ms(100)), (7, ms(210))]);
/// // The game loop sleeps until the timer, then settles: nothing more was held.
/// assert_eq!(scroll.timer(), Some(ms(310)));
/// scroll.settle(&throttle, ms(310), &mut |_, at, frame| ran.push((frame, at)));
/// assert_eq!(ran.len(), 3);
/// assert!(scroll.is_idle(&throttle, ms(310)));
/// # Ok::<(), slidewin::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Debounced<C> {
    last_call: Moment,
    last_invoke: Moment,
    timer: Timer,
    /// Lodash's `lastArgs`, as the call itself. Held only with a timer set.
    buffered: Option<C>,
}

impl<C> Default for Debounced<C> {
    fn default() -> Debounced<C> {
        Debounced::new()
    }
}

fn after(t: Moment, nanos: u64) -> Moment {
    Moment::from_nanos(t.as_nanos().saturating_add(nanos))
}

fn since(t: Moment, earlier: Moment) -> u64 {
    t.as_nanos().saturating_sub(earlier.as_nanos())
}

impl<C> Debounced<C> {
    /// A state that has seen no call: its first call is a leading edge.
    ///
    /// ```
    /// use slidewin::debounce::Debounced;
    /// let state = Debounced::<()>::new();
    /// assert!(!state.pending());
    /// assert_eq!(state.timer(), None);
    /// ```
    #[must_use]
    pub const fn new() -> Debounced<C> {
        Debounced {
            last_call: Moment::ZERO,
            last_invoke: Moment::ZERO,
            timer: Timer::Fresh,
            buffered: None,
        }
    }

    /// A call at `now`: first settles what came due by `now` (a trailing run goes to `sink`),
    /// then says what to do with the call. On [`Admit::Buffer`], hand the call to
    /// [`buffer`](Debounced::buffer) before anything else; the call is passed only then, so
    /// that a call run at once never moves into the state.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::debounce::{Admit, Debounce, DebounceOptions, Debounced, Edge};
    ///
    /// let d = Debounce::new(DebounceOptions::new(Duration::from_millis(60)).leading(true))?;
    /// let mut state = Debounced::new();
    /// let mut ran = Vec::new();
    /// let mut sink = |_: Edge, _: Moment, call| ran.push(call);
    /// assert_eq!(state.call(&d, Moment::ZERO, &mut sink), Admit::Run(Edge::Leading));
    /// assert_eq!(state.call(&d, Moment::from_millis(10), &mut sink), Admit::Buffer);
    /// state.buffer("second", &mut sink);
    /// // The window closed at 70 ms, before this call: "second" ran then.
    /// assert_eq!(state.call(&d, Moment::from_millis(70), &mut sink), Admit::Run(Edge::Leading));
    /// assert_eq!(ran, ["second"]);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    pub fn call(&mut self, debounce: &Debounce, now: Moment, sink: &mut impl Sink<C>) -> Admit {
        self.settle(debounce, now, sink);
        let now = self.on_timeline(now);
        let invoking = self.should_invoke(now, debounce);
        self.last_call = now;
        if invoking {
            if !matches!(self.timer, Timer::Due(_)) {
                return self.leading_edge(now, debounce);
            }
            if debounce.max_wait.is_some() {
                // Lodash's "invocations in a tight loop": max_wait has passed while the timer
                // still waits; this call runs at once and the timer restarts from it.
                self.timer = Timer::Due(after(now, debounce.wait));
                if let Some(old) = self.buffered.take() {
                    sink.replaced(old);
                }
                self.last_invoke = now;
                return Admit::Run(Edge::MaxWait);
            }
        }
        if !matches!(self.timer, Timer::Due(_)) {
            self.timer = Timer::Due(after(now, debounce.wait));
        }
        if debounce.trailing {
            Admit::Buffer
        } else {
            Admit::Refuse
        }
    }

    /// [`call`](Debounced::call) at the time `clock` reads.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::time::ManualClock;
    /// use slidewin::debounce::{Admit, Debounce, DebounceOptions, Debounced};
    ///
    /// let d = Debounce::new(DebounceOptions::new(Duration::from_millis(60)))?;
    /// let clock = ManualClock::default();
    /// let mut state = Debounced::<()>::new();
    /// assert_eq!(state.call_now(&d, &clock, &mut |_, _, _| {}), Admit::Buffer);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    pub fn call_now(
        &mut self,
        debounce: &Debounce,
        clock: &impl Clock,
        sink: &mut impl Sink<C>,
    ) -> Admit {
        self.call(debounce, clock.now(), sink)
    }

    /// Holds `call` for the trailing edge, replacing the call held, if any (reported to
    /// `sink` as [`replaced`](Sink::replaced), else [`armed`](Sink::armed)). Hand it the call
    /// just answered [`Admit::Buffer`]; a call held otherwise runs at the next trailing edge
    /// or flush, whatever the options say, and never if no timer is set.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::debounce::{Admit, Debounce, DebounceOptions, Debounced};
    ///
    /// let d = Debounce::new(DebounceOptions::new(Duration::from_millis(60)))?;
    /// let mut state = Debounced::new();
    /// assert_eq!(state.call(&d, Moment::ZERO, &mut |_, _, _| {}), Admit::Buffer);
    /// state.buffer("draft", &mut |_, _, _| {});
    /// assert!(state.pending());
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    pub fn buffer(&mut self, call: C, sink: &mut impl Sink<C>) {
        match self.buffered.replace(call) {
            None => sink.armed(),
            Some(old) => sink.replaced(old),
        }
    }

    /// Handles the timer as often as it came due by `now`, at the times it was due (lodash's
    /// `timerExpired`): it ends in a trailing run, given to `sink`, or starts again.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::debounce::{Debounce, DebounceOptions, Debounced};
    ///
    /// let d = Debounce::new(DebounceOptions::new(Duration::from_millis(60)))?;
    /// let mut state = Debounced::new();
    /// let mut ran = Vec::new();
    /// state.call(&d, Moment::ZERO, &mut |_, _, _| {});
    /// state.buffer("save", &mut |_, _, _| {});
    /// state.settle(&d, Moment::from_millis(59), &mut |_, at, call| ran.push((call, at)));
    /// assert!(ran.is_empty());
    /// state.settle(&d, Moment::from_secs(5), &mut |_, at, call| ran.push((call, at)));
    /// assert_eq!(ran, [("save", Moment::from_millis(60))]); // when it was due
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    pub fn settle(&mut self, debounce: &Debounce, now: Moment, sink: &mut impl Sink<C>) {
        while let Timer::Due(due) = self.timer {
            if due > now {
                return;
            }
            if self.should_invoke(due, debounce) {
                self.timer = Timer::Unset;
                if let Some(call) = self.buffered.take() {
                    self.last_invoke = due;
                    sink.run(Edge::Trailing, due, call);
                }
                return;
            }
            // Strictly later than `due`: both terms are positive when `should_invoke` is not,
            // so the loop ends; at the end of the timeline, where `after` can go no further,
            // the timer stays due there.
            let next = after(due, self.remaining_wait(due, debounce));
            self.timer = Timer::Due(next);
            if next == due {
                return;
            }
        }
    }

    /// [`settle`](Debounced::settle) at the time `clock` reads.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Clock;
    /// use slidewin::time::ManualClock;
    /// use slidewin::debounce::{Debounce, DebounceOptions, Debounced};
    ///
    /// let d = Debounce::new(DebounceOptions::new(Duration::from_millis(60)))?;
    /// let clock = ManualClock::default();
    /// let mut state = Debounced::new();
    /// state.call_now(&d, &clock, &mut |_, _, _| {});
    /// state.buffer(1, &mut |_, _, _| {});
    /// clock.advance(Duration::from_millis(60));
    /// let mut ran = None;
    /// state.settle_now(&d, &clock, &mut |_, _, call| ran = Some(call));
    /// assert_eq!(ran, Some(1));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    pub fn settle_now(&mut self, debounce: &Debounce, clock: &impl Clock, sink: &mut impl Sink<C>) {
        self.settle(debounce, clock.now(), sink);
    }

    /// Runs the held call now (given to `sink` as [`Edge::Flush`]), if the timer is set, and
    /// stops the timer: lodash's `flush`, which is the trailing edge brought forward, without
    /// the timer lodash 4.17.21 leaves running. Whether a call ran.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::debounce::{Debounce, DebounceOptions, Debounced, Edge};
    ///
    /// let d = Debounce::new(DebounceOptions::new(Duration::from_secs(60)))?;
    /// let mut state = Debounced::new();
    /// state.call(&d, Moment::ZERO, &mut |_, _, _| {});
    /// state.buffer("draft", &mut |_, _, _| {});
    /// let mut ran = Vec::new();
    /// let mut sink = |edge, at, call| ran.push((edge, at, call));
    /// assert!(state.flush(&d, Moment::from_secs(1), &mut sink));
    /// assert!(!state.flush(&d, Moment::from_secs(2), &mut sink));
    /// assert_eq!(state.timer(), None);
    /// assert_eq!(ran, [(Edge::Flush, Moment::from_secs(1), "draft")]);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    pub fn flush(&mut self, debounce: &Debounce, now: Moment, sink: &mut impl Sink<C>) -> bool {
        self.settle(debounce, now, sink);
        if !matches!(self.timer, Timer::Due(_)) {
            return false;
        }
        self.timer = Timer::Unset;
        match self.buffered.take() {
            Some(call) => {
                let now = self.on_timeline(now);
                self.last_invoke = now;
                sink.run(Edge::Flush, now, call);
                true
            }
            None => false,
        }
    }

    /// [`flush`](Debounced::flush) at the time `clock` reads.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::time::ManualClock;
    /// use slidewin::debounce::{Debounce, DebounceOptions, Debounced};
    ///
    /// let d = Debounce::new(DebounceOptions::new(Duration::from_secs(60)))?;
    /// let clock = ManualClock::default();
    /// let mut state = Debounced::new();
    /// state.call_now(&d, &clock, &mut |_, _, _| {});
    /// state.buffer((), &mut |_, _, _| {});
    /// assert!(state.flush_now(&d, &clock, &mut |_, _, _| {}));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    pub fn flush_now(
        &mut self,
        debounce: &Debounce,
        clock: &impl Clock,
        sink: &mut impl Sink<C>,
    ) -> bool {
        self.flush(debounce, clock.now(), sink)
    }

    /// Forgets everything, as lodash's `cancel` does: the state is [`new`](Debounced::new)
    /// again, its next call a leading edge. Gives back the held call, if any; what came due
    /// before is not run (settle first for that).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::debounce::{Debounce, DebounceOptions, Debounced};
    ///
    /// let d = Debounce::new(DebounceOptions::new(Duration::from_millis(60)))?;
    /// let mut state = Debounced::new();
    /// state.call(&d, Moment::ZERO, &mut |_, _, _| {});
    /// state.buffer("search", &mut |_, _, _| {});
    /// assert_eq!(state.cancel(), Some("search"));
    /// assert_eq!(state.cancel(), None);
    /// assert_eq!(state.timer(), None);
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    pub fn cancel(&mut self) -> Option<C> {
        let call = self.buffered.take();
        *self = Debounced::new();
        call
    }

    /// Whether a call is held for the trailing edge. (Lodash's `pending()` says whether its
    /// timer is set, which it also is after a leading run with nothing held.)
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::debounce::{Debounce, Debounced, ThrottleOptions};
    ///
    /// let d = Debounce::new(ThrottleOptions::new(Duration::from_millis(60)))?;
    /// let mut state = Debounced::<()>::new();
    /// state.call(&d, Moment::ZERO, &mut |_, _, _| {}); // leading: ran
    /// assert!(!state.pending());
    /// assert!(state.timer().is_some());
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn pending(&self) -> bool {
        self.buffered.is_some()
    }

    /// When the timer is due, if it is set: [`settle`](Debounced::settle) then (or later) to
    /// run the trailing edge.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::debounce::{Debounce, DebounceOptions, Debounced};
    ///
    /// let d = Debounce::new(DebounceOptions::new(Duration::from_millis(60)))?;
    /// let mut state = Debounced::<()>::new();
    /// state.call(&d, Moment::from_millis(5), &mut |_, _, _| {});
    /// assert_eq!(state.timer(), Some(Moment::from_millis(65)));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn timer(&self) -> Option<Moment> {
        match self.timer {
            Timer::Due(due) => Some(due),
            Timer::Fresh | Timer::Unset => None,
        }
    }

    /// Whether the state is the same as a [`new`](Debounced::new) one from `now` on: no timer
    /// set, and a call from now would be a leading edge. A keyed holder can drop it then.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::debounce::{Debounce, Debounced, ThrottleOptions};
    ///
    /// let d = Debounce::new(ThrottleOptions::new(Duration::from_millis(60)))?;
    /// let mut state = Debounced::<()>::new();
    /// assert!(state.is_idle(&d, Moment::ZERO));
    /// state.call(&d, Moment::ZERO, &mut |_, _, _| {});
    /// state.settle(&d, Moment::from_millis(60), &mut |_, _, _| {});
    /// assert!(state.is_idle(&d, Moment::from_millis(60)));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn is_idle(&self, debounce: &Debounce, now: Moment) -> bool {
        match self.timer {
            Timer::Fresh => true,
            Timer::Unset => self.should_invoke(now, debounce),
            Timer::Due(_) => false,
        }
    }

    /// [`is_idle`](Debounced::is_idle) at the time `clock` reads.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::time::ManualClock;
    /// use slidewin::debounce::{Debounce, DebounceOptions, Debounced};
    ///
    /// let d = Debounce::new(DebounceOptions::new(Duration::from_millis(60)))?;
    /// assert!(Debounced::<()>::new().is_idle_now(&d, &ManualClock::default()));
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn is_idle_now(&self, debounce: &Debounce, clock: &impl Clock) -> bool {
        self.is_idle(debounce, clock.now())
    }

    /// When the state next changes by itself: its timer comes due, or else it goes idle
    /// ([`is_idle`](Debounced::is_idle)). A holder that settles each state then, and drops
    /// the idle ones, keeps none longer than needed. It only moves later as calls come.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Moment;
    /// use slidewin::debounce::{Debounce, DebounceOptions, Debounced};
    ///
    /// let d = Debounce::new(DebounceOptions::new(Duration::from_millis(60)).leading(true))?;
    /// let mut state = Debounced::<()>::new();
    /// state.call(&d, Moment::ZERO, &mut |_, _, _| {});
    /// assert_eq!(state.wake_at(&d), Moment::from_millis(60)); // the timer
    /// state.settle(&d, Moment::from_millis(60), &mut |_, _, _| {});
    /// assert_eq!(state.wake_at(&d), Moment::from_millis(60)); // idle from then on
    /// # Ok::<(), slidewin::ConfigError>(())
    /// ```
    #[must_use]
    pub fn wake_at(&self, debounce: &Debounce) -> Moment {
        match self.timer {
            Timer::Fresh => Moment::ZERO,
            Timer::Due(due) => due,
            Timer::Unset => {
                let quiet = after(self.last_call, debounce.wait);
                match debounce.max_wait {
                    Some(max_wait) => quiet.min(after(self.last_invoke, max_wait)),
                    None => quiet,
                }
            }
        }
    }

    /// `now`, or the latest time this state has acted at if that is later.
    fn on_timeline(&self, now: Moment) -> Moment {
        match self.timer {
            Timer::Fresh => now,
            Timer::Unset | Timer::Due(_) => now.max(self.last_call).max(self.last_invoke),
        }
    }

    fn leading_edge(&mut self, now: Moment, debounce: &Debounce) -> Admit {
        // Lodash starts the max_wait clock here even when the leading call does not run.
        self.last_invoke = now;
        self.timer = Timer::Due(after(now, debounce.wait));
        if debounce.leading {
            Admit::Run(Edge::Leading)
        } else {
            Admit::Buffer
        }
    }

    fn should_invoke(&self, t: Moment, debounce: &Debounce) -> bool {
        matches!(self.timer, Timer::Fresh)
            || since(t, self.last_call) >= debounce.wait
            || debounce
                .max_wait
                .is_some_and(|max_wait| since(t, self.last_invoke) >= max_wait)
    }

    /// Only where `should_invoke(t)` is false, so neither subtraction wraps.
    fn remaining_wait(&self, t: Moment, debounce: &Debounce) -> u64 {
        let waiting = debounce.wait - since(t, self.last_call);
        match debounce.max_wait {
            Some(max_wait) => waiting.min(max_wait - since(t, self.last_invoke)),
            None => waiting,
        }
    }
}
