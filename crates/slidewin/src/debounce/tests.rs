//! `Debounced` at its edges: a new state, one call, the window's boundary, huge jumps, time
//! going backwards, the end of the timeline, and the lodash regressions.

use std::time::Duration;

use super::*;
use crate::{ConfigError, Moment};

fn ms(n: u64) -> Moment {
    Moment::from_millis(n)
}

fn rules(wait: u64, max_wait: Option<u64>, leading: bool, trailing: bool) -> Debounce {
    let mut o = DebounceOptions::new(Duration::from_millis(wait))
        .leading(leading)
        .trailing(trailing);
    if let Some(m) = max_wait {
        o = o.max_wait(Duration::from_millis(m));
    }
    Debounce::new(o).unwrap()
}

/// Records what the state reports; calls are numbered.
#[derive(Default)]
struct Log(Vec<String>);

impl Sink<u32> for Log {
    fn run(&mut self, edge: Edge, at: Moment, call: u32) {
        self.0.push(format!("run {call} at {at} ({edge})"));
    }
    fn armed(&mut self) {
        self.0.push("armed".into());
    }
    fn replaced(&mut self, old: u32) {
        self.0.push(format!("replaced {old}"));
    }
}

/// Makes call `n` at `now`, holding it if told to; the admission.
fn call(s: &mut Debounced<u32>, d: &Debounce, now: Moment, n: u32, log: &mut Log) -> Admit {
    let admit = s.call(d, now, log);
    if admit == Admit::Buffer {
        s.buffer(n, log);
    }
    admit
}

// ---- options ----

#[test]
fn bad_options_are_refused_naming_the_value() {
    let o = |wait| DebounceOptions::new(Duration::from_millis(wait));
    assert_eq!(Debounce::new(o(0)), Err(ConfigError::ZeroWait));
    assert_eq!(
        Debounce::new(o(60).max_wait(Duration::from_millis(59))),
        Err(ConfigError::MaxWaitShorterThanWait {
            max_wait: Duration::from_millis(59),
            wait: Duration::from_millis(60),
        })
    );
    assert_eq!(
        Debounce::new(o(60).leading(false).trailing(false)),
        Err(ConfigError::NoEdge)
    );
    let long = Duration::from_secs(u64::MAX);
    assert_eq!(
        Debounce::new(DebounceOptions::new(long)),
        Err(ConfigError::WaitTooLong { wait: long })
    );
    assert_eq!(
        Debounce::new(o(1).max_wait(long)),
        Err(ConfigError::WaitTooLong { wait: long })
    );
    assert!(
        Debounce::new(DebounceOptions::new(long))
            .unwrap_err()
            .to_string()
            .contains("584 years")
    );
    let throttle = ThrottleOptions::new(Duration::from_millis(5))
        .leading(false)
        .trailing(false);
    assert_eq!(Debounce::new(throttle), Err(ConfigError::NoEdge));
}

#[test]
fn the_longest_wait_and_max_wait_equal_to_wait_are_accepted() {
    let max = Duration::from_nanos(u64::MAX);
    let d = Debounce::new(DebounceOptions::new(max).max_wait(max)).unwrap();
    assert_eq!((d.wait(), d.max_wait()), (max, Some(max)));
    let t = Debounce::new(ThrottleOptions::new(Duration::from_millis(40))).unwrap();
    assert_eq!(t, rules(40, Some(40), true, true));
    assert_eq!(
        format!("{t:?}"),
        "Debounce { wait: 40ms, max_wait: Some(40ms), leading: true, trailing: true }"
    );
}

// ---- a new state, one call ----

#[test]
fn a_new_state_is_idle_and_holds_nothing() {
    let d = rules(60, Some(100), false, true);
    let mut s = Debounced::<u32>::new();
    let mut log = Log::default();
    assert!(!s.pending());
    assert_eq!(s.timer(), None);
    assert_eq!(s.wake_at(&d), Moment::ZERO);
    assert!(s.is_idle(&d, Moment::ZERO));
    assert!(s.is_idle(&d, Moment::MAX));
    s.settle(&d, Moment::MAX, &mut log);
    assert!(!s.flush(&d, ms(5), &mut log));
    assert_eq!(s.cancel(), None);
    assert!(log.0.is_empty());
}

#[test]
fn one_call_trailing_runs_wait_after_it_and_the_state_goes_idle() {
    let d = rules(60, None, false, true);
    let mut s = Debounced::new();
    let mut log = Log::default();
    assert_eq!(call(&mut s, &d, ms(5), 1, &mut log), Admit::Buffer);
    assert!(s.pending());
    assert_eq!(s.timer(), Some(ms(65)));
    s.settle(&d, ms(64), &mut log);
    assert!(s.pending());
    s.settle(&d, ms(65), &mut log);
    assert_eq!(log.0, ["armed", "run 1 at 65ms (trailing)"]);
    assert!(s.is_idle(&d, ms(65)));
}

#[test]
fn one_call_leading_and_trailing_runs_once() {
    let d = rules(60, None, true, true);
    let mut s = Debounced::new();
    let mut log = Log::default();
    assert_eq!(
        call(&mut s, &d, ms(0), 1, &mut log),
        Admit::Run(Edge::Leading)
    );
    assert!(!s.pending());
    s.settle(&d, ms(1_000), &mut log);
    assert!(
        log.0.is_empty(),
        "nothing held, nothing runs at the trailing edge"
    );
    assert!(s.is_idle(&d, ms(1_000)));
}

#[test]
fn a_call_in_a_leading_only_window_is_refused() {
    let d = rules(60, None, true, false);
    let mut s = Debounced::<u32>::new();
    let mut log = Log::default();
    assert_eq!(
        call(&mut s, &d, ms(0), 1, &mut log),
        Admit::Run(Edge::Leading)
    );
    assert_eq!(call(&mut s, &d, ms(59), 2, &mut log), Admit::Refuse);
    // The refused call still moved the window: 60 after it, not after the first.
    assert_eq!(call(&mut s, &d, ms(60), 3, &mut log), Admit::Refuse);
    assert_eq!(
        call(&mut s, &d, ms(180), 4, &mut log),
        Admit::Run(Edge::Leading)
    );
    assert!(log.0.is_empty());
}

// ---- the window's boundary ----

#[test]
fn a_timer_due_at_t_is_handled_before_a_call_at_t() {
    let d = rules(60, None, false, true);
    let mut s = Debounced::new();
    let mut log = Log::default();
    assert_eq!(call(&mut s, &d, ms(0), 1, &mut log), Admit::Buffer);
    // At 60 the window of the call at 0 has closed: call 1 runs first, then call 2 opens a
    // new window.
    assert_eq!(call(&mut s, &d, ms(60), 2, &mut log), Admit::Buffer);
    assert_eq!(log.0, ["armed", "run 1 at 60ms (trailing)", "armed"]);
    assert_eq!(s.wake_at(&d), ms(120));
}

#[test]
fn one_nanosecond_before_the_boundary_the_call_joins_the_window() {
    let d = rules(60, None, false, true);
    let mut s = Debounced::new();
    let mut log = Log::default();
    call(&mut s, &d, ms(0), 1, &mut log);
    let just_before = Moment::from_nanos(ms(60).as_nanos() - 1);
    assert_eq!(call(&mut s, &d, just_before, 2, &mut log), Admit::Buffer);
    s.settle(&d, ms(60), &mut log);
    assert_eq!(log.0, ["armed", "replaced 1"]);
    assert_eq!(s.timer(), Some(just_before + Duration::from_millis(60)));
}

// ---- huge jumps and the end of the timeline ----

#[test]
fn a_jump_of_centuries_settles_in_one_step() {
    let d = rules(50, Some(80), false, true);
    let mut s = Debounced::new();
    let mut log = Log::default();
    call(&mut s, &d, ms(0), 1, &mut log);
    call(&mut s, &d, ms(40), 2, &mut log);
    let far = Moment::from_secs(500 * 365 * 86_400);
    assert_eq!(call(&mut s, &d, far, 3, &mut log), Admit::Buffer);
    assert_eq!(
        log.0,
        ["armed", "replaced 1", "run 2 at 80ms (trailing)", "armed"]
    );
    assert_eq!(s.timer(), Some(far + Duration::from_millis(50)));
}

#[test]
fn a_timer_at_the_end_of_the_timeline_settles_without_looping() {
    // The timer of a call just before `Moment::MAX` is due at `MAX` (saturated); a call there
    // finds it due and the wait not over, and cannot push it further.
    let d = rules(40, None, false, true);
    let mut s = Debounced::new();
    let mut log = Log::default();
    let end = Moment::MAX;
    call(
        &mut s,
        &d,
        Moment::from_nanos(end.as_nanos() - 5),
        1,
        &mut log,
    );
    assert_eq!(call(&mut s, &d, end, 2, &mut log), Admit::Buffer);
    s.settle(&d, end, &mut log);
    assert_eq!(s.wake_at(&d), end);
    assert!(s.flush(&d, end, &mut log));
    assert_eq!(
        log.0,
        [
            "armed",
            "replaced 1",
            "run 2 at 18446744073.709551615s (flush)"
        ]
    );
}

#[test]
fn waits_near_the_end_of_the_timeline_saturate_instead_of_wrapping() {
    let max = Duration::from_nanos(u64::MAX);
    let d = Debounce::new(DebounceOptions::new(max).max_wait(max).leading(true)).unwrap();
    let mut s = Debounced::new();
    let mut log = Log::default();
    assert_eq!(
        call(&mut s, &d, ms(5), 1, &mut log),
        Admit::Run(Edge::Leading)
    );
    assert_eq!(s.wake_at(&d), Moment::MAX);
    assert_eq!(call(&mut s, &d, ms(6), 2, &mut log), Admit::Buffer);
    assert!(!s.is_idle(&d, ms(1_000_000)));
    s.settle(&d, Moment::MAX, &mut log);
    assert_eq!(log.0, ["armed"], "the wait never ends on the timeline");
}

// ---- time going backwards ----

#[test]
fn an_earlier_call_counts_at_the_latest_time_seen() {
    // Calls at 100 and 130, then one "at 60": it counts at 130, so the window closes at 170,
    // not at 140 (where it would if the last call had been at 60).
    let d = rules(40, None, false, true);
    let mut s = Debounced::new();
    let mut log = Log::default();
    call(&mut s, &d, ms(100), 1, &mut log);
    call(&mut s, &d, ms(130), 2, &mut log);
    assert_eq!(call(&mut s, &d, ms(60), 3, &mut log), Admit::Buffer);
    s.settle(&d, ms(169), &mut log);
    assert!(s.pending());
    s.settle(&d, ms(170), &mut log);
    assert_eq!(log.0.last().unwrap(), "run 3 at 170ms (trailing)");
}

#[test]
fn an_earlier_flush_runs_at_the_latest_time_seen() {
    let d = rules(40, None, false, true);
    let mut s = Debounced::new();
    let mut log = Log::default();
    call(&mut s, &d, ms(100), 1, &mut log);
    assert!(s.flush(&d, ms(20), &mut log));
    assert_eq!(log.0, ["armed", "run 1 at 100ms (flush)"]);
    // The flush does not reopen the window: it still ends 40 after the call at 100.
    assert!(!s.is_idle(&d, ms(139)));
    assert!(s.is_idle(&d, ms(140)));
}

#[test]
fn a_settle_back_in_time_does_nothing() {
    let d = rules(40, None, false, true);
    let mut s = Debounced::new();
    let mut log = Log::default();
    call(&mut s, &d, ms(100), 1, &mut log);
    s.settle(&d, ms(0), &mut log);
    assert_eq!(s.timer(), Some(ms(140)));
    assert!(s.pending());
}

// ---- flush, cancel ----

#[test]
fn flush_stops_the_timer_and_the_state_goes_idle_on_schedule() {
    let d = rules(60, None, false, true);
    let mut s = Debounced::new();
    let mut log = Log::default();
    call(&mut s, &d, ms(0), 1, &mut log);
    assert!(s.flush(&d, ms(10), &mut log));
    assert!(!s.pending());
    assert!(!s.flush(&d, ms(11), &mut log));
    // No timer: the next wake is when the state goes idle, 60 after its last call.
    assert_eq!(s.timer(), None);
    assert_eq!(s.wake_at(&d), ms(60));
    assert!(!s.is_idle(&d, ms(59)));
    assert!(s.is_idle(&d, ms(60)));
    assert_eq!(log.0, ["armed", "run 1 at 10ms (flush)"]);
}

#[test]
fn cancel_gives_back_the_held_call_and_starts_afresh() {
    let d = rules(60, None, true, true);
    let mut s = Debounced::new();
    let mut log = Log::default();
    call(&mut s, &d, ms(0), 1, &mut log);
    call(&mut s, &d, ms(10), 2, &mut log);
    assert_eq!(s.cancel(), Some(2));
    assert!(s.is_idle(&d, ms(10)));
    // Inside the old window, yet a leading edge again.
    assert_eq!(
        call(&mut s, &d, ms(20), 3, &mut log),
        Admit::Run(Edge::Leading)
    );
}

// ---- lodash regressions ----

#[test]
fn lodash_6003_late_timer_cannot_delay_the_leading_edge() {
    // Leading only, wait 50. The timer due at 50 is not handled (the runtime was blocked)
    // when the next call comes at 100. Lodash sees its stale timer and neither runs nor
    // re-arms the call; here the timer is settled first and the call runs.
    let d = rules(50, None, true, false);
    let mut s = Debounced::new();
    let mut log = Log::default();
    assert_eq!(
        call(&mut s, &d, ms(0), 1, &mut log),
        Admit::Run(Edge::Leading)
    );
    assert_eq!(
        call(&mut s, &d, ms(100), 2, &mut log),
        Admit::Run(Edge::Leading)
    );
    assert_eq!(call(&mut s, &d, ms(120), 3, &mut log), Admit::Refuse);
    assert!(log.0.is_empty());
}

#[test]
fn lodash_4_17_21_max_wait_replaces_the_pending_timer() {
    // Throttle: wait = max_wait = 40. After the trailing run at 40 (call at 30), a call at 50
    // starts a timer for 90; the call at 80 is 40 after the last run, so it runs at once and
    // replaces call 70, and the timer due at 90 is replaced by one due at 120.
    let d = Debounce::new(ThrottleOptions::new(Duration::from_millis(40))).unwrap();
    let mut s = Debounced::new();
    let mut log = Log::default();
    assert_eq!(
        call(&mut s, &d, ms(0), 0, &mut log),
        Admit::Run(Edge::Leading)
    );
    for (at, n) in [(10, 1), (30, 3), (50, 5), (70, 7)] {
        assert_eq!(call(&mut s, &d, ms(at), n, &mut log), Admit::Buffer);
    }
    assert_eq!(
        call(&mut s, &d, ms(80), 8, &mut log),
        Admit::Run(Edge::MaxWait)
    );
    assert_eq!(
        log.0,
        [
            "armed",
            "replaced 1",
            "run 3 at 40ms (trailing)",
            "armed",
            "replaced 5",
            "replaced 7"
        ]
    );
    assert_eq!(s.timer(), Some(ms(120)));
    s.settle(&d, ms(119), &mut log);
    assert!(!s.is_idle(&d, ms(119)));
    // At 120 the timer ends with nothing held.
    s.settle(&d, ms(120), &mut log);
    assert!(s.is_idle(&d, ms(120)));
    assert_eq!(log.0.len(), 6);
}

#[test]
fn lodash_pr4656_flush_leaves_no_timer() {
    // Throttle, trailing only, 100 ms. Call at 0, flush at 0 (it runs), call at 50. Lodash's
    // flush leaves the timer of the first window running: due at 100, it sees 100 ms since the
    // last run and runs the call of 50 at 100. Here flush stops it: the call at 50 opens a
    // window of its own and runs at 150.
    let d = Debounce::new(ThrottleOptions::new(Duration::from_millis(100)).leading(false)).unwrap();
    let mut s = Debounced::new();
    let mut log = Log::default();
    call(&mut s, &d, ms(0), 0, &mut log);
    assert!(s.flush(&d, ms(0), &mut log));
    call(&mut s, &d, ms(50), 1, &mut log);
    s.settle(&d, ms(100), &mut log);
    assert!(s.pending(), "nothing ran at 100");
    s.settle(&d, ms(150), &mut log);
    assert_eq!(
        log.0,
        [
            "armed",
            "run 0 at 0ns (flush)",
            "armed",
            "run 1 at 150ms (trailing)"
        ]
    );
}

#[test]
fn a_closure_is_a_sink() {
    let d = rules(10, None, false, true);
    let mut s = Debounced::new();
    let mut ran = Vec::new();
    let mut sink = |edge: Edge, at: Moment, call: char| ran.push((edge, at, call));
    s.call(&d, ms(0), &mut sink);
    s.buffer('a', &mut sink);
    s.call(&d, ms(1), &mut sink);
    s.buffer('b', &mut sink); // 'a' is dropped
    s.settle(&d, ms(11), &mut sink);
    assert_eq!(ran, [(Edge::Trailing, ms(11), 'b')]);
}
