//! [`Bucket`]: lodash's debounce state machine for one key, with time as a parameter.
//!
//! The fields and steps are lodash's (`lastCallTime`, `lastInvokeTime`, the timer, `lastArgs`;
//! `shouldInvoke`, `leadingEdge`, `remainingWait`, `timerExpired`, `trailingEdge`, the
//! `maxWait` path for calls in a tight loop), on a perfect event loop: a timer due at `t` is
//! handled at `t`, before a call made at `t`. Every operation first [`settle`](Bucket::settle)s
//! the timer steps due by `now`, at the times they were due, so a late wake-up (a runtime that
//! was blocked) changes nothing (lodash #6003).
//!
//! The reference is lodash 4.17.21. There a key has at most one timer live, `timerId`: every
//! step that starts a timer either finds none set or clears the one set first (the tight-loop
//! path clears it since 4.17.12; older versions left it firing). The one exception is its
//! `flush`, which leaves the timer running with `timerId` unset (the fix, lodash PR #4656,
//! never shipped); here `flush` stops it, so the bucket keeps a single optional due time.

use slidewin::Moment;

use crate::event::Edge;

/// A shaper's timing, in nanoseconds. `wait > 0`, `max_wait >= wait`, and `leading || trailing`
/// (checked where the options are built).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timing {
    pub(crate) wait: u64,
    pub(crate) max_wait: Option<u64>,
    pub(crate) leading: bool,
    pub(crate) trailing: bool,
}

/// Where a bucket reports what becomes of buffered calls.
pub(crate) trait Sink<C> {
    /// The buffered call runs now, for the trailing edge or a flush.
    fn run(&mut self, edge: Edge, call: C);
    /// A call was buffered in an empty bucket.
    fn armed(&mut self);
    /// The buffered call `old` was replaced by a newer call (buffered or run).
    fn replaced(&mut self, old: C);
    /// The buffered call was cancelled.
    fn cancelled(&mut self, call: C);
}

/// What to do with a new call ([`Bucket::call`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Run it now.
    Run(Edge),
    /// Buffer it for the trailing edge ([`Bucket::buffer`]).
    Buffer,
    /// It can never run (inside a window with `trailing` off): answer `Cancelled` now.
    Refuse,
}

/// One key's state. It exists from a key's first call until the key is quiet
/// ([`is_quiet`](Bucket::is_quiet)); a missing bucket is a key in lodash's initial state.
#[derive(Debug)]
pub(crate) struct Bucket<C> {
    last_call: Moment,
    last_invoke: Moment,
    /// When lodash's `timerId` is due, if it is set: the key's only live timer.
    timer: Option<Moment>,
    /// Lodash's `lastArgs`, as the call itself. Only ever `Some` with `trailing` on, and then
    /// `timer` is set.
    buffered: Option<C>,
}

fn after(t: Moment, nanos: u64) -> Moment {
    Moment::from_nanos(t.as_nanos().saturating_add(nanos))
}

fn since(t: Moment, earlier: Moment) -> u64 {
    t.as_nanos().saturating_sub(earlier.as_nanos())
}

impl<C> Bucket<C> {
    /// A key's first call (or its first since it went quiet): lodash's leading edge.
    pub(crate) fn start(now: Moment, timing: &Timing) -> (Bucket<C>, Admit) {
        let mut bucket = Bucket {
            last_call: now,
            last_invoke: now,
            timer: None,
            buffered: None,
        };
        let admit = bucket.leading_edge(now, timing);
        (bucket, admit)
    }

    /// A call at `now`. On [`Admit::Buffer`] the caller hands the call to
    /// [`buffer`](Bucket::buffer) before anything else.
    pub(crate) fn call(&mut self, now: Moment, timing: &Timing, sink: &mut impl Sink<C>) -> Admit {
        self.settle(now, timing, sink);
        let invoking = self.should_invoke(now, timing);
        self.last_call = now;
        if invoking {
            if self.timer.is_none() {
                return self.leading_edge(now, timing);
            }
            if timing.max_wait.is_some() {
                // Lodash's "invocations in a tight loop": max_wait has passed while its timer
                // still waits; this call runs at once and the timer is replaced by one due
                // `wait` from now.
                self.timer = Some(after(now, timing.wait));
                if let Some(old) = self.buffered.take() {
                    sink.replaced(old);
                }
                self.last_invoke = now;
                return Admit::Run(Edge::MaxWait);
            }
        }
        if self.timer.is_none() {
            self.timer = Some(after(now, timing.wait));
        }
        if timing.trailing {
            Admit::Buffer
        } else {
            Admit::Refuse
        }
    }

    /// Buffers the call just admitted with [`Admit::Buffer`], replacing any buffered call.
    pub(crate) fn buffer(&mut self, call: C, sink: &mut impl Sink<C>) {
        match self.buffered.replace(call) {
            None => sink.armed(),
            Some(old) => sink.replaced(old),
        }
    }

    /// Handles the timer, as often as it comes due by `now`, at the times it was due (lodash's
    /// `timerExpired`, which ends in a trailing edge or restarts the timer).
    pub(crate) fn settle(&mut self, now: Moment, timing: &Timing, sink: &mut impl Sink<C>) {
        while let Some(due) = self.timer.filter(|&due| due <= now) {
            if self.should_invoke(due, timing) {
                self.timer = None;
                if let Some(call) = self.buffered.take() {
                    self.last_invoke = due;
                    sink.run(Edge::Trailing, call);
                }
            } else {
                // Strictly later than `due`: both terms are positive when `should_invoke` is
                // not, so the loop ends; at the end of the timeline, where `after` can go no
                // further, the timer stays due there.
                let next = after(due, self.remaining_wait(due, timing));
                self.timer = Some(next);
                if next == due {
                    break;
                }
            }
        }
    }

    /// Runs the buffered call now, if lodash's timer is set, and stops the timer: unlike
    /// lodash 4.17.21 (which ships without PR #4656), nothing is left to fire later. Whether a
    /// call ran.
    pub(crate) fn flush(&mut self, now: Moment, timing: &Timing, sink: &mut impl Sink<C>) -> bool {
        self.settle(now, timing, sink);
        if self.timer.take().is_none() {
            return false;
        }
        match self.buffered.take() {
            Some(call) => {
                self.last_invoke = now;
                sink.run(Edge::Flush, call);
                true
            }
            None => false,
        }
    }

    /// Cancels the buffered call, if any. The key then starts afresh (lodash's `cancel`, which
    /// clears its timer): the caller drops the bucket.
    pub(crate) fn cancel(self, sink: &mut impl Sink<C>) -> bool {
        match self.buffered {
            Some(call) => {
                sink.cancelled(call);
                true
            }
            None => false,
        }
    }

    /// Whether a call is buffered for the trailing edge.
    pub(crate) fn pending(&self) -> bool {
        self.buffered.is_some()
    }

    /// Whether the bucket is the same as no bucket from `now` on: no timer, and any call from
    /// now would be invoking (lodash's `shouldInvoke` holds for good once it holds with no
    /// timer, since neither time stamp moves without a call).
    pub(crate) fn is_quiet(&self, now: Moment, timing: &Timing) -> bool {
        self.timer.is_none() && self.should_invoke(now, timing)
    }

    /// When the bucket next has something to do: its timer, or else the moment it goes quiet.
    pub(crate) fn next_wake(&self, timing: &Timing) -> Moment {
        match self.timer {
            Some(due) => due,
            None => {
                let quiet = after(self.last_call, timing.wait);
                match timing.max_wait {
                    Some(max_wait) => quiet.min(after(self.last_invoke, max_wait)),
                    None => quiet,
                }
            }
        }
    }

    fn leading_edge(&mut self, now: Moment, timing: &Timing) -> Admit {
        // Lodash resets the max_wait clock here even when the leading call does not run.
        self.last_invoke = now;
        self.timer = Some(after(now, timing.wait));
        if timing.leading {
            Admit::Run(Edge::Leading)
        } else {
            Admit::Buffer
        }
    }

    fn should_invoke(&self, t: Moment, timing: &Timing) -> bool {
        since(t, self.last_call) >= timing.wait
            || timing
                .max_wait
                .is_some_and(|max_wait| since(t, self.last_invoke) >= max_wait)
    }

    fn remaining_wait(&self, t: Moment, timing: &Timing) -> u64 {
        let waiting = timing.wait - since(t, self.last_call);
        match timing.max_wait {
            Some(max_wait) => waiting.min(max_wait - since(t, self.last_invoke)),
            None => waiting,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn ms(n: u64) -> Moment {
        Moment::from_millis(n)
    }

    fn timing(wait: u64, max_wait: Option<u64>, leading: bool, trailing: bool) -> Timing {
        Timing {
            wait: wait * MS,
            max_wait: max_wait.map(|m| m * MS),
            leading,
            trailing,
        }
    }

    /// Records what the bucket reports; calls are numbered.
    #[derive(Default)]
    struct Log(Vec<String>);

    impl Sink<u32> for Log {
        fn run(&mut self, edge: Edge, call: u32) {
            self.0.push(format!("run {call} ({edge})"));
        }
        fn armed(&mut self) {
            self.0.push("armed".into());
        }
        fn replaced(&mut self, old: u32) {
            self.0.push(format!("replaced {old}"));
        }
        fn cancelled(&mut self, call: u32) {
            self.0.push(format!("cancelled {call}"));
        }
    }

    /// Makes call `n` at `now`, buffering it if told to; returns the admission.
    fn call(b: &mut Bucket<u32>, now: u64, t: &Timing, n: u32, log: &mut Log) -> Admit {
        let admit = b.call(ms(now), t, log);
        if admit == Admit::Buffer {
            b.buffer(n, log);
        }
        admit
    }

    #[test]
    fn a_timer_at_the_end_of_the_timeline_settles_without_looping() {
        // The timer of a call just before `Moment::MAX` is due at `MAX` (saturated); a call
        // there finds it due and the wait not over, and cannot push it further.
        let t = timing(40, None, false, true);
        let end = Moment::MAX;
        let (mut b, _) = Bucket::<u32>::start(Moment::from_nanos(end.as_nanos() - 5), &t);
        let mut log = Log::default();
        b.buffer(1, &mut log);
        assert_eq!(b.call(end, &t, &mut log), Admit::Buffer);
        b.settle(end, &t, &mut log);
        assert_eq!(b.next_wake(&t), end);
    }

    #[test]
    fn a_timer_due_at_t_is_handled_before_a_call_at_t() {
        let t = timing(60, None, false, true);
        let (mut b, admit) = Bucket::start(ms(0), &t);
        assert_eq!(admit, Admit::Buffer);
        let mut log = Log::default();
        b.buffer(1, &mut log);
        // At 60 the window of the call at 0 has closed: call 1 runs first, then call 2 opens
        // a new window.
        assert_eq!(call(&mut b, 60, &t, 2, &mut log), Admit::Buffer);
        assert_eq!(log.0, ["armed", "run 1 (trailing)", "armed"]);
        assert_eq!(b.next_wake(&t), ms(120));
    }

    #[test]
    fn lodash_6003_late_timer_cannot_delay_the_leading_edge() {
        // Leading only, wait 50. The timer due at 50 is not handled (the runtime was blocked)
        // when the next call comes at 100. Lodash sees its stale timer and neither runs nor
        // re-arms the call; here the timer is settled first and the call runs.
        let t = timing(50, None, true, false);
        let (mut b, admit) = Bucket::<u32>::start(ms(0), &t);
        assert_eq!(admit, Admit::Run(Edge::Leading));
        let mut log = Log::default();
        assert_eq!(
            call(&mut b, 100, &t, 2, &mut log),
            Admit::Run(Edge::Leading)
        );
        assert_eq!(call(&mut b, 120, &t, 3, &mut log), Admit::Refuse);
        assert!(log.0.is_empty());
    }

    #[test]
    fn lodash_4_17_21_max_wait_replaces_the_pending_timer() {
        // Throttle shape: wait = max_wait = 40. After the trailing run at 40 (call at 30), a
        // call at 50 arms a timer for 90; the call at 80 is 40 after the last run, so it runs
        // at once and replaces call 70, and the timer due at 90 is replaced by one due at 120.
        let t = timing(40, Some(40), true, true);
        let mut log = Log::default();
        let (mut b, admit) = Bucket::<u32>::start(ms(0), &t);
        assert_eq!(admit, Admit::Run(Edge::Leading));
        for (at, n) in [(10, 1), (30, 3), (50, 5), (70, 7)] {
            assert_eq!(call(&mut b, at, &t, n, &mut log), Admit::Buffer);
        }
        assert_eq!(call(&mut b, 80, &t, 8, &mut log), Admit::Run(Edge::MaxWait));
        assert_eq!(
            log.0,
            [
                "armed",
                "replaced 1",
                "run 3 (trailing)",
                "armed",
                "replaced 5",
                "replaced 7"
            ]
        );
        assert_eq!(b.next_wake(&t), ms(120));
        b.settle(ms(119), &t, &mut log);
        assert!(!b.is_quiet(ms(119), &t));
        // At 120 the timer ends with nothing buffered.
        b.settle(ms(120), &t, &mut log);
        assert!(b.is_quiet(ms(120), &t));
        assert_eq!(log.0.len(), 6);
    }

    #[test]
    fn flush_stops_the_timer_and_the_bucket_goes_quiet_on_schedule() {
        let t = timing(60, None, false, true);
        let mut log = Log::default();
        let (mut b, _) = Bucket::start(ms(0), &t);
        b.buffer(1, &mut log);
        assert!(b.pending());
        assert!(b.flush(ms(10), &t, &mut log));
        assert!(!b.pending());
        assert!(!b.flush(ms(11), &t, &mut log));
        // No timer: the next wake is when the key goes quiet, 60 after its last call.
        assert_eq!(b.next_wake(&t), ms(60));
        assert!(!b.is_quiet(ms(59), &t));
        assert!(b.is_quiet(ms(60), &t));
        assert_eq!(log.0, ["armed", "run 1 (flush)"]);
    }

    #[test]
    fn cancel_reports_the_buffered_call() {
        let t = timing(60, None, false, true);
        let mut log = Log::default();
        let (mut b, _) = Bucket::start(ms(0), &t);
        b.buffer(1, &mut log);
        assert!(b.cancel(&mut log));
        let (b, _) = Bucket::<u32>::start(ms(0), &timing(60, None, true, true));
        assert!(!b.cancel(&mut log));
        assert_eq!(log.0, ["armed", "cancelled 1"]);
    }

    #[test]
    fn waits_near_the_end_of_the_timeline_saturate_instead_of_wrapping() {
        let t = Timing {
            wait: u64::MAX,
            max_wait: Some(u64::MAX),
            leading: true,
            trailing: true,
        };
        let (mut b, admit) = Bucket::<u32>::start(ms(5), &t);
        assert_eq!(admit, Admit::Run(Edge::Leading));
        assert_eq!(b.next_wake(&t), Moment::MAX);
        let mut log = Log::default();
        assert_eq!(call(&mut b, 6, &t, 2, &mut log), Admit::Buffer);
        assert!(!b.is_quiet(ms(1_000_000), &t));
    }
}
