//! `Keyed::carry_from` at its edges: nothing to carry, keys gone idle, many keys, limits of
//! `u64::MAX`, a clock gone back at the carry, and the key cap.

use super::*;

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
