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

// --- edges --------------------------------------------------------------------------------------

#[test]
fn an_empty_limiter_carries_nothing() {
    let old = Keyed::<u32, _>::new(log("5/minute"));
    let new = Keyed::<u32, _>::new(log("8/minute"));
    assert_eq!(new.carry_from(&old, secs(1)), 0);
    assert!(new.is_empty() && old.is_empty());
}

#[test]
fn keys_idle_at_the_carry_are_not_carried() {
    let old = Keyed::<u32, _>::new(log("5/minute"));
    old.check(&1, secs(0), 1).unwrap();
    old.check(&2, secs(30), 1).unwrap();
    old.check(&3, secs(59), 0).unwrap(); // a question holds nothing
    let new = Keyed::<u32, _>::new(log("5/minute"));
    // At 60 s key 1's admission has left; key 2's has not.
    assert_eq!(new.carry_from(&old, secs(60)), 1);
    assert_eq!(new.len(), 1);
    assert!(old.is_empty());
    assert_eq!(new.peek(&2, secs(60), 0).unwrap().remaining(), 4);
    assert_eq!(new.peek(&1, secs(60), 0).unwrap().remaining(), 5);
    // Idle under the new quota counts, not under the old one: a longer span still holds key
    // 1's admission.
    let old = Keyed::<u32, _>::new(log("5/minute"));
    old.check(&1, secs(0), 1).unwrap();
    let new = Keyed::<u32, _>::new(log("5/2minutes"));
    assert_eq!(new.carry_from(&old, secs(60)), 1);
    assert_eq!(new.peek(&1, secs(60), 0).unwrap().remaining(), 4);
    // A bucket full again, a fixed window over, a counter whose counts weigh nothing.
    let old = Keyed::<u32, _>::new(gcra("10/s"));
    old.check(&1, secs(0), 10).unwrap();
    assert_eq!(Keyed::new(gcra("20/s")).carry_from(&old, secs(1)), 0);
    let old = Keyed::<u32, _>::new(fixed("10/s"));
    old.check(&1, ms(500), 10).unwrap();
    assert_eq!(Keyed::new(fixed("20/s")).carry_from(&old, secs(1)), 0);
    let old = Keyed::<u32, _>::new(counter("10/s"));
    old.check(&1, ms(500), 10).unwrap();
    assert_eq!(Keyed::new(counter("20/s")).carry_from(&old, ms(1_999)), 1);
    old.check(&1, ms(500), 10).unwrap();
    assert_eq!(Keyed::new(counter("20/s")).carry_from(&old, secs(2)), 0);
}

#[test]
fn many_keys_carry_each_their_own() {
    let old = Keyed::<String, _>::new(log("10/minute"));
    for key in 0..1_000u64 {
        let name = format!("client-{key}");
        old.check(&name, secs(1), key % 10 + 1).unwrap();
    }
    let new = Keyed::<String, _>::new(log("20/minute"));
    assert_eq!(new.carry_from(&old, secs(2)), 1_000);
    assert_eq!(new.len(), 1_000);
    for key in 0..1_000u64 {
        let name = format!("client-{key}");
        let left = new.peek(name.as_str(), secs(2), 0).unwrap().remaining();
        assert_eq!(left, 20 - (key % 10 + 1), "{name}");
    }
}

#[test]
fn u64_max_limits_carry_without_overflow() {
    let max = u64::MAX;
    let whole = Duration::from_nanos(u64::MAX);
    let huge = Quota::new(max, Duration::from_secs(1)).unwrap();
    let one = Quota::new(1, Duration::from_secs(1)).unwrap();
    let at = secs(10);

    // A log of u64::MAX units, cut to 1, then raised back.
    let history = [(at, max - 1), (at + Duration::from_nanos(1), 1)];
    let cut = carried(
        SlidingLog::new(huge).unwrap(),
        SlidingLog::new(one).unwrap(),
        &history,
        at,
    );
    assert_eq!(fields(&cut.check(&0, at, 1).unwrap()), (false, 1, 0));
    let back = Keyed::new(SlidingLog::new(huge).unwrap());
    assert_eq!(back.carry_from(&cut, at), 1);
    // Only the one unit kept counts.
    assert_eq!(back.peek(&0, at, 0).unwrap().remaining(), max - 1);

    // Counters of u64::MAX, lowered to 1 and raised back.
    let history = [(at, max)];
    let cut = carried(
        SlidingCounter::new(huge).unwrap(),
        SlidingCounter::new(one).unwrap(),
        &history,
        at,
    );
    for cost in [0, 1] {
        let denied = cut.peek(&0, at, cost).unwrap();
        assert_eq!(fields(&denied), (false, 1, 0));
        assert!(denied.retry_after().is_some());
    }
    let back = Keyed::new(SlidingCounter::new(huge).unwrap());
    assert_eq!(back.carry_from(&cut, at), 1);
    assert!(!back.check(&0, at, 1).unwrap().allowed());

    // The largest fixed window a word holds, over the longest span.
    let widest = Quota::new(u64::MAX / 2 - 1, whole).unwrap();
    let history = [(at, u64::MAX / 2 - 1)];
    let cut = carried(
        FixedWindow::new(widest).unwrap(),
        FixedWindow::new(Quota::new(1, whole).unwrap()).unwrap(),
        &history,
        at,
    );
    assert_eq!(fields(&cut.check(&0, at, 1).unwrap()), (false, 1, 0));

    // A bucket of u64::MAX units a nanosecond each, to one unit in 584 years, and back.
    let finest = Quota::new(max, whole).unwrap();
    let slowest = Quota::new(1, whole).unwrap();
    let history = [(at, 1_000)];
    let cut = carried(
        Gcra::new(finest).unwrap(),
        Gcra::new(slowest).unwrap(),
        &history,
        at,
    );
    let denied = cut.check(&0, at, 1).unwrap();
    assert_eq!(fields(&denied), (false, 1, 0));
    let back = Keyed::new(Gcra::new(finest).unwrap());
    assert_eq!(back.carry_from(&cut, at), 1);
    let answer = back.check(&0, at, 1).unwrap();
    assert!(
        !answer.allowed(),
        "a TAT at the end of the timeline admits nothing more"
    );
    // Nearly the whole bucket drained at once: a TAT near the end of the timeline.
    let old = Keyed::<u32, _>::new(Gcra::new(finest).unwrap());
    assert!(
        old.check(&0, Moment::from_nanos(1_000), max - 2_000)
            .unwrap()
            .allowed()
    );
    let new = Keyed::new(Gcra::new(slowest).unwrap());
    assert_eq!(new.carry_from(&old, Moment::ZERO), 1);
    assert!(!new.check(&0, Moment::ZERO, 1).unwrap().allowed());
}

/// A carry at a time before the states' own (a clock gone back) keeps them, and only denies
/// more.
#[test]
fn a_clock_gone_back_at_the_carry_only_denies_more() {
    // The log keeps its timeline: checks earlier than its newest stamp count at it.
    let history: Vec<_> = (11..=15).map(|s| (secs(s), 1)).collect();
    let new = carried(log("5/minute"), log("6/minute"), &history, secs(1));
    assert_eq!(fields(&new.check(&0, secs(2), 1).unwrap()), (true, 6, 0));
    let denied = new.check(&0, secs(3), 1).unwrap();
    assert!(!denied.allowed());
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(68))); // 11 s + 60 s, from 3 s

    // The fixed window counts in its own window.
    let new = carried(
        fixed("5/minute"),
        fixed("6/minute"),
        &[(secs(70), 5)],
        secs(10),
    );
    assert_eq!(fields(&new.check(&0, secs(10), 1).unwrap()), (true, 6, 0));
    assert!(!new.check(&0, secs(11), 1).unwrap().allowed());

    // The counter, in the window it is in.
    let new = carried(
        counter("5/minute"),
        counter("6/minute"),
        &[(secs(70), 5)],
        secs(10),
    );
    assert_eq!(fields(&new.check(&0, secs(10), 1).unwrap()), (true, 6, 0));

    // The bucket: its TAT (1.5 s) is more than a whole bucket (1 s) ahead of 0.2 s, so its
    // own time is somewhere in [0.5 s, 1.5 s): the rate rose, and the TAT is kept.
    let history = [(secs(1), 5)];
    let new = carried(gcra("10/s"), gcra("100/s"), &history, ms(200));
    assert_eq!(new.peek(&0, secs(1), 0).unwrap().remaining(), 50);
    assert_eq!(new.peek(&0, ms(200), 0).unwrap().remaining(), 0);
    // The rate fell: the most restrictive of the conversions over those times, at 1 s, where
    // the 500 ms owed are 5 units, a whole bucket of 5/s: nothing left at 1 s, and no more
    // than a carry at 1 s itself leaves.
    let new = carried(gcra("10/s"), gcra("5/s"), &history, ms(200));
    let same_time = carried(gcra("10/s"), gcra("5/s"), &history, secs(1));
    for t in [secs(1), ms(1_500), secs(2)] {
        assert_eq!(new.peek(&0, t, 0), same_time.peek(&0, t, 0), "at {t:?}");
    }
    assert_eq!(new.peek(&0, secs(1), 0).unwrap().remaining(), 0);
    assert_eq!(new.peek(&0, secs(2), 0).unwrap().remaining(), 5);
}

/// With a cap, carrying stops at it: the count held and the deadlines stay right, so the keys
/// carried go idle and give way as any others.
#[test]
fn carrying_stops_at_the_key_cap() {
    let old = Keyed::<u32, _>::new(log("1/minute"));
    for key in 0..100 {
        old.check(&key, secs(70), 1).unwrap();
    }
    let new = Keyed::<u32, _>::new(log("2/minute"))
        .with_max_keys(16)
        .unwrap();
    new.sweep(secs(100)); // no sweep is due again before 160 s
    assert_eq!(new.carry_from(&old, secs(100)), 16);
    assert_eq!(new.len(), 16);
    assert!(old.is_empty(), "the rest is dropped with the old limiter");
    // Full of keys being limited: a new key waits.
    assert_eq!(
        new.check(&1_000, secs(100), 1),
        Err(LimitError::KeysFull { cap: 16 })
    );
    // The keys carried are counted: one of 2 used.
    let carried = (0..100)
        .filter(|key| new.peek(key, secs(100), 0).unwrap().remaining() == 1)
        .count();
    assert_eq!(carried, 16);
    // At 130 s every carried key is idle and gives way, found by its deadline (no sweep).
    for key in 1_000..1_016 {
        assert!(new.check(&key, secs(130), 1).unwrap().allowed());
    }
    assert_eq!(new.len(), 16);
    // A reset gives a place back.
    assert!(new.reset(&1_000));
    assert!(new.check(&2_000, secs(131), 1).unwrap().allowed());
    assert_eq!(
        new.check(&3_000, secs(131), 1),
        Err(LimitError::KeysFull { cap: 16 })
    );
}

/// A capped old limiter gives its places back as it is emptied.
#[test]
fn a_capped_old_limiter_is_emptied_and_reusable() {
    let old = Keyed::<u32, _>::new(gcra("1/s")).with_max_keys(4).unwrap();
    for key in 0..4 {
        old.check(&key, secs(1), 1).unwrap();
    }
    let new = Keyed::<u32, _>::new(gcra("2/s")).with_max_keys(8).unwrap();
    assert_eq!(new.carry_from(&old, secs(1)), 4);
    assert_eq!(old.len(), 0);
    for key in 10..14 {
        assert!(old.check(&key, secs(1), 1).unwrap().allowed());
    }
}

/// A key the new limiter already holds keeps its own state: it is the newer.
#[test]
fn a_key_already_held_keeps_its_own_state() {
    let old = Keyed::<u32, _>::new(log("5/minute"));
    old.check(&1, secs(1), 5).unwrap();
    old.check(&2, secs(1), 5).unwrap();
    let new = Keyed::<u32, _>::new(log("8/minute"));
    new.check(&1, secs(2), 1).unwrap();
    assert_eq!(new.carry_from(&old, secs(3)), 1);
    assert_eq!(new.peek(&1, secs(3), 0).unwrap().remaining(), 7);
    assert_eq!(new.peek(&2, secs(3), 0).unwrap().remaining(), 3);
}

/// Fixed windows and counters are aligned to their span: another span starts fresh.
#[test]
fn another_span_starts_fixed_windows_and_counters_fresh() {
    let new = Keyed::<u32, _>::new(fixed("10/2minutes"));
    let old = Keyed::<u32, _>::new(fixed("10/minute"));
    old.check(&0, secs(61), 10).unwrap();
    assert_eq!(new.carry_from(&old, secs(62)), 0);
    assert!(old.is_empty() && new.is_empty());
    let new = Keyed::<u32, _>::new(counter("10/30s"));
    let old = Keyed::<u32, _>::new(counter("10/minute"));
    old.check(&0, secs(61), 10).unwrap();
    assert_eq!(new.carry_from(&old, secs(62)), 0);
    assert_eq!(new.peek(&0, secs(62), 0).unwrap().remaining(), 10);
}

#[test]
fn a_renamed_rule_starts_fresh_and_the_others_carry() {
    let old = RuleSet::new([
        rule("minute", Kind::SlidingLog, "5/minute"),
        rule("hour", Kind::SlidingLog, "20/hour"),
    ])
    .unwrap();
    let renamed = RuleSet::new([
        rule("per-minute", Kind::SlidingLog, "5/minute"),
        rule("hour", Kind::SlidingLog, "20/hour"),
    ])
    .unwrap();
    let history = [(secs(1), 4)];
    let new = carried(old.clone(), renamed, &history, secs(2));
    let each = new.peek(&0, secs(2), 0).unwrap();
    let left: Vec<_> = each.as_slice().iter().map(Decision::remaining).collect();
    assert_eq!(left, [5, 16]);

    // Every rule renamed: nothing carries, and the key is not held.
    let other = RuleSet::new([rule("a", Kind::SlidingLog, "5/minute")]).unwrap();
    let old_keyed = Keyed::<u32, _>::new(old);
    old_keyed.check(&0, secs(1), 4).unwrap();
    let new = Keyed::new(other);
    assert_eq!(new.carry_from(&old_keyed, secs(2)), 0);
    assert!(new.is_empty());
}

#[test]
fn a_rule_that_changes_kind_starts_fresh() {
    let old = RuleSet::new([
        rule("minute", Kind::SlidingLog, "5/minute"),
        rule("hour", Kind::FixedWindow, "20/hour"),
    ])
    .unwrap();
    let new = RuleSet::new([
        rule("minute", Kind::SlidingCounter, "5/minute"),
        rule("hour", Kind::FixedWindow, "20/hour"),
    ])
    .unwrap();
    let history = [(secs(1), 4)];
    let new = carried(old, new, &history, secs(2));
    let each = new.peek(&0, secs(2), 0).unwrap();
    let left: Vec<_> = each.as_slice().iter().map(Decision::remaining).collect();
    assert_eq!(left, [5, 16]);
}

/// Rules carry by name, wherever they are in the set; a rule new to the set starts fresh, and a
/// rule gone is dropped.
#[test]
fn rules_carry_by_name_whatever_their_order() {
    let old = RuleSet::new([
        rule("minute", Kind::SlidingLog, "5/minute"),
        rule("hour", Kind::Gcra, "20/hour"),
        rule("gone", Kind::FixedWindow, "1/minute"),
    ])
    .unwrap();
    let new = RuleSet::new([
        rule("day", Kind::FixedWindow, "100/day"),
        rule("hour", Kind::Gcra, "20/hour"),
        rule("minute", Kind::SlidingLog, "6/minute"),
    ])
    .unwrap();
    let history = [(secs(1), 1)];
    let new = carried(old, new, &history, secs(2));
    let each = new.peek(&0, secs(2), 0).unwrap();
    let left: Vec<_> = each.as_slice().iter().map(Decision::remaining).collect();
    assert_eq!(left, [100, 19, 5]);
}

/// Carrying a limiter into itself keeps every key as it is.
#[test]
fn a_limiter_carried_into_itself_keeps_its_keys() {
    let keyed = Keyed::<u32, _>::new(log("5/minute"))
        .with_max_keys(64)
        .unwrap();
    for key in 0..50 {
        keyed.check(&key, secs(1), 2).unwrap();
    }
    assert_eq!(keyed.carry_from(&keyed, secs(2)), 50);
    assert_eq!(keyed.len(), 50);
    assert_eq!(keyed.peek(&7, secs(2), 0).unwrap().remaining(), 3);
}
