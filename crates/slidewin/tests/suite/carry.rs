//! `Keyed::carry_from`: a quota changed by a reload keeps the keys' counts, and every answer
//! afterwards is against the new quota (limitador #522: a raised limit answered against the
//! stale one, then an integer underflow).

use std::time::Duration;

use slidewin::limit::{
    Algorithm, FixedWindow, Gcra, Kind, LimitError, Rule, RuleSet, SlidingCounter, SlidingLog,
};
use slidewin::{Decision, Keyed, Limiter, Moment, Quota};

fn secs(n: u64) -> Moment {
    Moment::from_secs(n)
}

fn ms(n: u64) -> Moment {
    Moment::from_millis(n)
}

fn quota(text: &str) -> Quota {
    text.parse().unwrap()
}

fn log(text: &str) -> SlidingLog {
    SlidingLog::new(quota(text)).unwrap()
}

fn counter(text: &str) -> SlidingCounter {
    SlidingCounter::new(quota(text)).unwrap()
}

fn fixed(text: &str) -> FixedWindow {
    FixedWindow::new(quota(text)).unwrap()
}

fn gcra(text: &str) -> Gcra {
    Gcra::new(quota(text)).unwrap()
}

fn rule(name: &str, kind: Kind, text: &str) -> Rule {
    Rule::new(name, kind, quota(text)).unwrap()
}

/// `old` checks `history` for key 0, is carried at `at` into a limiter of `new`, and both are
/// returned: the new one holding key 0, the old one empty.
fn carried<A: Algorithm>(old: A, new: A, history: &[(Moment, u64)], at: Moment) -> Keyed<u32, A> {
    let old = Keyed::<u32, A>::new(old);
    for &(t, cost) in history {
        old.check(&0, t, cost).unwrap();
    }
    let new = Keyed::new(new);
    assert_eq!(new.carry_from(&old, at), 1);
    assert!(old.is_empty());
    assert_eq!(new.len(), 1);
    new
}

/// What the carried key answers from `start`, a check per second, until it is denied.
fn admitted_from<A: Algorithm>(keyed: &Keyed<u32, A>, start: u64) -> Vec<Decision> {
    let mut answers = Vec::new();
    for s in start.. {
        let decision = *keyed.check(&0, secs(s), 1).unwrap().as_ref();
        answers.push(decision);
        if !decision.allowed() {
            return answers;
        }
    }
    unreachable!()
}

fn fields(d: &Decision) -> (bool, u64, u64) {
    (d.allowed(), d.limit(), d.remaining())
}

// --- limitador #522: a raised limit keeps the counts --------------------------------------------

/// Five of 5/minute used, then the limit raised to 8: three more, counted against 8, and the
/// five still count until they leave.
#[test]
fn raising_a_limit_keeps_counts_limitador_522_sliding_log() {
    let history: Vec<_> = (1..=5).map(|s| (secs(s), 1)).collect();
    let new = carried(log("5/minute"), log("8/minute"), &history, secs(6));
    let answers = admitted_from(&new, 6);
    let seen: Vec<_> = answers.iter().map(fields).collect();
    assert_eq!(
        seen,
        [(true, 8, 2), (true, 8, 1), (true, 8, 0), (false, 8, 0)]
    );
    // Denied at 9 s until the admission at 1 s leaves, at 61 s.
    assert_eq!(answers[3].retry_after(), Some(Duration::from_secs(52)));
    assert!(!new.check(&0, ms(60_999), 1).unwrap().allowed());
    assert!(new.check(&0, secs(61), 1).unwrap().allowed());
}

/// The same span: the counters are kept, and the new limiter answers as one of the new quota
/// fed the same history would.
#[test]
fn raising_a_limit_keeps_counts_limitador_522_sliding_counter() {
    let history = [(secs(10), 3), (secs(50), 3), (secs(70), 2)];
    let new = carried(
        counter("10/minute"),
        counter("20/minute"),
        &history,
        secs(75),
    );
    let mut fed = Limiter::new(counter("20/minute"));
    for &(t, cost) in &history {
        assert!(fed.check(t, cost).unwrap().allowed());
    }
    for s in [75, 90, 100, 119, 120, 150, 181] {
        for cost in [0, 1, 5, 20] {
            assert_eq!(
                new.peek(&0, secs(s), cost).unwrap(),
                fed.peek(secs(s), cost).unwrap(),
                "at {s} s, cost {cost}"
            );
        }
        assert_eq!(new.check(&0, secs(s), 4), fed.check(secs(s), 4));
    }
    let decision = new.check(&0, secs(200), 0).unwrap();
    assert_eq!(decision.limit(), 20);
}

#[test]
fn raising_a_limit_keeps_counts_limitador_522_fixed_window() {
    let history = [(secs(60), 4), (secs(70), 6)];
    let new = carried(fixed("10/minute"), fixed("25/minute"), &history, secs(71));
    let answer = new.check(&0, secs(80), 1).unwrap();
    assert_eq!(fields(&answer), (true, 25, 14));
    assert!(new.check(&0, secs(81), 14).unwrap().allowed());
    let denied = new.check(&0, secs(82), 1).unwrap();
    assert_eq!(fields(&denied), (false, 25, 0));
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(38))); // the window ends at 120 s
    assert_eq!(new.check(&0, secs(120), 25).unwrap().remaining(), 0);
}

/// A token bucket keeps its TAT when the rate rises: it owes the same time, refilled at the new
/// rate, as Redis (which keeps the TAT under the rule's name) answers.
#[test]
fn raising_a_limit_keeps_counts_limitador_522_gcra() {
    let history = [(secs(1), 5)]; // 5 of 10/s: the TAT is 500 ms ahead
    let new = carried(gcra("10/s"), gcra("100/s"), &history, secs(1));
    let now = new.peek(&0, secs(1), 0).unwrap();
    // 500 ms owed at 10 ms a unit: 50 of the new 100, where a fresh bucket would have all 100.
    assert_eq!(fields(&now), (true, 100, 50));
    assert!(new.check(&0, secs(1), 50).unwrap().allowed());
    let denied = new.check(&0, secs(1), 1).unwrap();
    assert_eq!(fields(&denied), (false, 100, 0));
    assert_eq!(denied.retry_after(), Some(Duration::from_millis(10)));
    // It refills at the new rate: 100 more a second later.
    assert_eq!(new.peek(&0, secs(2), 0).unwrap().remaining(), 100);
}

#[test]
fn raising_a_limit_keeps_counts_limitador_522_rule_set() {
    let old = RuleSet::new([
        rule("minute", Kind::SlidingLog, "5/minute"),
        rule("hour", Kind::FixedWindow, "20/hour"),
        rule("burst", Kind::Gcra, "10/s"),
        rule("smooth", Kind::SlidingCounter, "30/hour"),
    ])
    .unwrap();
    let new = RuleSet::new([
        rule("minute", Kind::SlidingLog, "8/minute"),
        rule("hour", Kind::FixedWindow, "40/hour"),
        rule("burst", Kind::Gcra, "10/s"),
        rule("smooth", Kind::SlidingCounter, "60/hour"),
    ])
    .unwrap();
    let history: Vec<_> = (1..=5).map(|s| (secs(s), 1)).collect();
    let new = carried(old, new, &history, secs(6));
    let each = new.check(&0, secs(6), 1).unwrap();
    let seen: Vec<_> = each.as_slice().iter().map(fields).collect();
    assert_eq!(
        seen,
        [(true, 8, 2), (true, 40, 34), (true, 10, 9), (true, 60, 54)]
    );
    assert!(new.check(&0, secs(7), 2).unwrap().allowed());
    let denied = new.check(&0, secs(8), 1).unwrap();
    assert!(!denied.allowed());
    assert_eq!(denied.binding(), 0); // the minute, full at 8
}

// --- a lowered limit: denied, nothing remaining, no underflow -----------------------------------

/// Eight in the log, the limit lowered to 3: every cost is denied until six of the eight have
/// left (then two remain, and one more fits), as a log of the new quota fed the same eight
/// would answer; a cost of 0 is told there is nothing left.
#[test]
fn lowering_a_limit_below_the_count_denies_sliding_log() {
    let history: Vec<_> = (1..=8).map(|s| (secs(s), 1)).collect();
    let new = carried(log("10/minute"), log("3/minute"), &history, secs(9));
    let denied = new.check(&0, secs(10), 1).unwrap();
    assert_eq!(fields(&denied), (false, 3, 0));
    // The sixth oldest (at 6 s) leaves at 66 s.
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(56)));
    assert_eq!(denied.reset_after(), Duration::from_secs(58)); // the newest, at 8 s, leaves at 68 s
    let three = new.peek(&0, secs(10), 3).unwrap();
    assert_eq!(three.retry_after(), Some(Duration::from_secs(58))); // all eight gone
    let question = new.check(&0, secs(10), 0).unwrap();
    assert_eq!(question.remaining(), 0);
    assert!(!new.check(&0, ms(65_999), 1).unwrap().allowed());
    let admitted = new.check(&0, secs(66), 1).unwrap();
    assert_eq!(fields(&admitted), (true, 3, 0));
    assert!(!new.check(&0, secs(66), 1).unwrap().allowed());
    // At 67 s the admission at 7 s leaves: room for one.
    assert_eq!(fields(&new.check(&0, secs(67), 1).unwrap()), (true, 3, 0));
}

/// A lower limit with a shorter span: both cuts (the span's and the limit's) at once.
#[test]
fn a_sliding_log_carried_to_a_shorter_span_counts_what_the_new_window_holds() {
    let history: Vec<_> = (1..=6).map(|s| (secs(s * 10), 1)).collect(); // 10 s .. 60 s
    let new = carried(log("10/minute"), log("4/30s"), &history, secs(60));
    // (30 s, 60 s] holds 40, 50 and 60: one more fits.
    assert_eq!(fields(&new.check(&0, secs(60), 1).unwrap()), (true, 4, 0));
    // A longer span counts what the log still holds: 10 .. 60 s, all six, above a limit of 5.
    let history: Vec<_> = (1..=6).map(|s| (secs(s * 10), 1)).collect();
    let new = carried(log("10/minute"), log("5/2minutes"), &history, secs(60));
    let denied = new.check(&0, secs(61), 1).unwrap();
    assert_eq!(fields(&denied), (false, 5, 0));
    // Two must leave: the one at 20 s does at 140 s.
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(79)));
}

#[test]
fn lowering_a_limit_below_the_count_denies_sliding_counter() {
    let history = [(secs(10), 8)];
    let new = carried(
        counter("10/minute"),
        counter("3/minute"),
        &history,
        secs(20),
    );
    for cost in [0, 1, 3] {
        let denied = new.peek(&0, secs(20), cost).unwrap();
        assert_eq!(fields(&denied), (false, 3, 0), "cost {cost}");
        // The retry time is exact: admitted then, and not a nanosecond before.
        let at = secs(20) + denied.retry_after().unwrap();
        assert!(new.peek(&0, at, cost).unwrap().allowed(), "cost {cost}");
        let before = at - Duration::from_nanos(1);
        assert!(
            !new.peek(&0, before, cost).unwrap().allowed(),
            "cost {cost}"
        );
    }
    // In the next window the 8 weigh in as the counter fed them would have them: 8 × 45/60 = 6
    // at 75 s, still above 3.
    assert!(!new.check(&0, secs(75), 1).unwrap().allowed());
    // 8 × (60 - 53)/60 < 1 at 113 s: two fit.
    assert!(new.check(&0, secs(113), 2).unwrap().allowed());
}

#[test]
fn lowering_a_limit_below_the_count_denies_fixed_window() {
    let history = [(secs(60), 8)];
    let new = carried(fixed("10/minute"), fixed("3/minute"), &history, secs(61));
    let denied = new.check(&0, secs(62), 1).unwrap();
    assert_eq!(fields(&denied), (false, 3, 0));
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(58)));
    assert_eq!(new.peek(&0, secs(62), 0).unwrap().remaining(), 0);
    assert_eq!(fields(&new.check(&0, secs(120), 1).unwrap()), (true, 3, 2));
}

/// A rate lowered: the units owed are converted (at most an empty bucket), where keeping the
/// TAT would let through units the client already used.
#[test]
fn lowering_a_limit_below_the_count_denies_gcra() {
    let history = [(secs(1), 50)]; // 50 of 100/s: the TAT is 500 ms ahead
    let new = carried(gcra("100/s"), gcra("10/s"), &history, secs(1));
    let denied = new.check(&0, secs(1), 1).unwrap();
    assert_eq!(fields(&denied), (false, 10, 0));
    // 50 units owed, cut to an empty bucket of 10: one unit refills in 100 ms.
    assert_eq!(denied.retry_after(), Some(Duration::from_millis(100)));
    assert_eq!(denied.reset_after(), Duration::from_secs(1));
    // A few units owed convert without the cut: 5 of 100/s are 50 ms, 500 ms at 10/s.
    let new = carried(gcra("100/s"), gcra("10/s"), &[(secs(1), 5)], secs(1));
    assert_eq!(fields(&new.peek(&0, secs(1), 0).unwrap()), (true, 10, 5));
}

#[test]
fn lowering_a_limit_below_the_count_denies_rule_set() {
    let old = RuleSet::new([
        rule("minute", Kind::SlidingLog, "10/minute"),
        rule("hour", Kind::FixedWindow, "100/hour"),
    ])
    .unwrap();
    let new = RuleSet::new([
        rule("minute", Kind::SlidingLog, "3/minute"),
        rule("hour", Kind::FixedWindow, "4/hour"),
    ])
    .unwrap();
    let history: Vec<_> = (1..=6).map(|s| (secs(s), 1)).collect();
    let new = carried(old, new, &history, secs(7));
    let denied = new.check(&0, secs(8), 1).unwrap();
    let seen: Vec<_> = denied.as_slice().iter().map(fields).collect();
    assert_eq!(seen, [(false, 3, 0), (false, 4, 0)]);
    assert_eq!(denied.binding(), 1); // the hour waits longest
}

/// The edges: empty, idle, many keys, `u64::MAX`, a clock gone back, the key cap.
mod edges;
