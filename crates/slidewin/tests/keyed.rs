//! `Keyed` under a flood of distinct keys: memory follows the live keys, the cap holds, and
//! a key being limited is never evicted. And with no key: a limiter holds no shard.

#![allow(
    clippy::cast_possible_truncation,
    reason = "counts and indices in tests are far below 2^32"
)]

use std::sync::Arc;
use std::time::Duration;

use slidewin::limit::{
    Algorithm, FixedWindow, Gcra, Kind, LimitError, MemoryBudget, Rule, RuleSet, SlidingCounter,
    SlidingLog,
};
use slidewin::{Keyed, Moment};
use slidewin_test_support::counting_alloc::{CountingAllocator, held_after};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const FLOOD: u64 = 1_000_000;

#[test]
fn a_million_keys_once_each_then_quiet_leaves_nothing_behind() {
    let (limiter, peak) = held_after(|| {
        let limiter = Keyed::<u64, _>::new(Gcra::new("10/s".parse().unwrap()).unwrap());
        for key in 0..FLOOD {
            // A million keys within one second: no sweep is due yet.
            let now = Moment::from_nanos(key * 1_000);
            assert!(limiter.check(&key, now, 1).unwrap().allowed());
        }
        limiter
    });
    assert_eq!(limiter.len(), FLOOD as usize);
    assert!(
        peak > 16 * FLOOD as isize,
        "{peak} bytes for a million keys"
    );

    // Quiet time, then ordinary traffic: each shard sweeps itself on first use.
    let later = Moment::from_secs(5);
    let ((), change) = held_after(|| {
        for key in FLOOD..FLOOD + 2_000 {
            limiter.check(&key, later, 1).unwrap();
        }
    });
    assert!(limiter.len() <= 2_000, "{} keys left", limiter.len());
    assert!(
        peak + change < 200_000,
        "{} bytes held after the sweep",
        peak + change
    );

    // And an explicit sweep empties it.
    limiter.sweep(Moment::from_secs(10));
    assert!(limiter.is_empty());
}

#[test]
fn with_a_cap_the_flood_stays_under_it_and_a_limited_key_stays_limited() {
    const CAP: usize = 10_000;
    let limiter = Keyed::<u64, _>::new(SlidingLog::new("3/minute".parse().unwrap()).unwrap())
        .with_max_keys(CAP)
        .unwrap();
    let start = Moment::from_secs(1);
    // The victim spends its quota before the flood.
    let victim = u64::MAX;
    for _ in 0..3 {
        assert!(limiter.check(&victim, start, 1).unwrap().allowed());
    }
    let mut refused = 0;
    let (_, bytes) = held_after(|| {
        for key in 0..FLOOD {
            let now = start + Duration::from_micros(key); // the whole flood inside one second
            match limiter.check(&key, now, 1) {
                Ok(decision) => assert!(decision.allowed()),
                Err(LimitError::KeysFull { cap }) => {
                    assert_eq!(cap, CAP);
                    refused += 1;
                }
                Err(other) => panic!("{other}"),
            }
            if key % 50_000 == 0 {
                assert!(limiter.len() <= CAP, "{} keys at {key}", limiter.len());
            }
        }
    });
    assert!(limiter.len() <= CAP);
    assert_eq!(
        refused,
        FLOOD as usize - (CAP - 1),
        "every key past the cap was refused"
    );
    assert!(bytes < (CAP * 128) as isize, "{bytes} bytes for {CAP} keys");
    // The victim was not evicted: it is still limited.
    assert!(
        !limiter
            .check(&victim, start + Duration::from_secs(2), 1)
            .unwrap()
            .allowed()
    );
    // A minute on, the flood's keys are idle: a new key is admitted, and the victim too.
    let later = start + Duration::from_secs(61);
    assert!(limiter.check(&(FLOOD + 1), later, 1).unwrap().allowed());
    assert!(limiter.check(&victim, later, 1).unwrap().allowed());
}

/// A keyed log at 1e9 per minute reached 3.9 GB after five checks of cost 1e8: a timestamp per
/// unit. Its memory now follows the admissions.
#[test]
fn a_keyed_log_holds_a_stamp_per_admission_not_per_unit() {
    let (limiter, empty) = held_after(|| {
        Keyed::<u64, _>::new(SlidingLog::new("1000000000/minute".parse().unwrap()).unwrap())
    });
    let admit = |i| {
        let decision = limiter
            .check(&7, Moment::from_secs(i), 100_000_000)
            .unwrap();
        assert!(decision.allowed());
    };
    // The first admission brings the key's shard and table (the limiter allocates them with
    // its first key); the four after it, only their stamps.
    let ((), first) = held_after(|| admit(0));
    let ((), bytes) = held_after(|| (1..5).for_each(admit));
    let remaining = limiter
        .peek(&7, Moment::from_secs(5), 0)
        .unwrap()
        .remaining();
    assert_eq!(remaining, 500_000_000);
    assert!(
        bytes < 512 && first < 2_048,
        "{bytes} bytes for four admissions, {first} for the first ({empty} for the empty \
         limiter)"
    );
}

/// With caps of 100, 1,000 and 100,000 the first `KeysFull` came at 86, 620 and about 94,000
/// live keys: each shard held its share of the cap, and refused when its share was full
/// whatever the others held. The cap is one count across the shards.
#[test]
fn keyed_cap_is_exact_across_shards() {
    for cap in [1, 17, 100, 1_000, 100_000] {
        let limiter = Keyed::<u64, _>::new(Gcra::new("1/minute".parse().unwrap()).unwrap())
            .with_max_keys(cap)
            .unwrap();
        for key in 0..cap as u64 {
            assert!(
                limiter.check(&key, Moment::ZERO, 1).unwrap().allowed(),
                "key {key} of a cap of {cap}"
            );
        }
        assert_eq!(limiter.len(), cap);
        let err = limiter.check(&u64::MAX, Moment::ZERO, 1).unwrap_err();
        assert_eq!(err, LimitError::KeysFull { cap });
        let keys = if cap == 1 { "key" } else { "keys" };
        assert_eq!(
            err.to_string(),
            format!(
                "the limiter holds its cap of {cap} {keys} and none is idle; a new key must wait"
            )
        );
        // A key already held is checked as ever, and an idle one is never held.
        assert!(!limiter.check(&0, Moment::ZERO, 1).unwrap().allowed());
        assert!(limiter.check(&u64::MAX, Moment::ZERO, 0).unwrap().allowed());
        assert_eq!(limiter.len(), cap);
    }
}

/// At the cap, the one key gone idle gives way to a new key, in whichever shard it is: the
/// others, still limited, stay.
#[test]
fn at_the_cap_a_key_gone_idle_in_any_shard_gives_way() {
    const CAP: usize = 1_000;
    let limiter = Keyed::<u64, _>::new(SlidingLog::new("1/minute".parse().unwrap()).unwrap())
        .with_max_keys(CAP)
        .unwrap();
    // Key 0 at 0 s (idle from 60 s); the others at 30 s (idle from 90 s).
    assert!(limiter.check(&0, Moment::ZERO, 1).unwrap().allowed());
    for key in 1..CAP as u64 {
        assert!(
            limiter
                .check(&key, Moment::from_secs(30), 1)
                .unwrap()
                .allowed()
        );
    }
    let at = Moment::from_secs(60);
    // New keys, whose shards are most likely not key 0's: one of them takes its place.
    assert!(limiter.check(&5_000, at, 1).unwrap().allowed());
    assert_eq!(limiter.len(), CAP);
    for key in 5_001..5_100 {
        assert_eq!(
            limiter.check(&key, at, 1),
            Err(LimitError::KeysFull { cap: CAP })
        );
    }
    // Every key still limited is still there, and still limited.
    for key in 1..CAP as u64 {
        assert!(!limiter.check(&key, at, 1).unwrap().allowed(), "key {key}");
    }
    assert!(!limiter.check(&5_000, at, 1).unwrap().allowed());
}

/// `reset` and `reset_all` give their keys' places under the cap back.
#[test]
fn reset_keys_give_their_places_back() {
    let limiter = Keyed::<u64, _>::new(Gcra::new("1/minute".parse().unwrap()).unwrap())
        .with_max_keys(100)
        .unwrap();
    for round in 0..3u64 {
        for key in 0..100 {
            assert!(
                limiter
                    .check(&(round * 1_000 + key), Moment::ZERO, 1)
                    .unwrap()
                    .allowed()
            );
        }
        assert!(limiter.check(&u64::MAX, Moment::ZERO, 1).is_err());
        if round == 0 {
            for key in 0..100 {
                assert!(limiter.reset(&key));
            }
        } else {
            limiter.reset_all();
        }
        assert!(limiter.is_empty());
    }
}

/// `check_equivalent` decides as `check` does, key by key, and keeps the same keys (made with
/// `K::from` when new).
#[test]
fn check_equivalent_decides_as_check_does() {
    let quota = "3/s".parse().unwrap();
    let by_check = Keyed::<String, _>::new(SlidingLog::new(quota).unwrap());
    let by_equivalent = Keyed::<String, _>::new(SlidingLog::new(quota).unwrap());
    for i in 0..3_000u64 {
        let key = format!("client-{}", i * 7 % 13);
        let now = Moment::from_millis(i * 31);
        let cost = i % 4;
        assert_eq!(
            by_check.check(key.as_str(), now, cost),
            by_equivalent.check_equivalent(key.as_str(), now, cost),
            "request {i}, {key} at {now:?} for {cost}"
        );
    }
    // Each map sweeps its shards on its own schedule (their seeds differ): swept at the same
    // time, they hold the same keys.
    let end = Moment::from_millis(3_000 * 31);
    by_check.sweep(end);
    by_equivalent.sweep(end);
    assert_eq!(by_check.len(), by_equivalent.len());
    // A cost of 0 on a new key is a question: nothing is kept. Both maps are swept at its time
    // first: its shard, due for its own sweep, would drop keys gone idle since `end` in one map
    // and not in the other, whose seed puts them in other shards.
    let later = Moment::from_secs(3_600);
    by_check.sweep(later);
    by_equivalent.sweep(later);
    assert!(
        by_equivalent
            .check_equivalent("new", later, 0)
            .unwrap()
            .allowed()
    );
    assert_eq!(by_equivalent.len(), by_check.len());
    assert_eq!(
        by_equivalent.check_equivalent("new", later, 4),
        Err(LimitError::CostTooHigh { cost: 4, max: 3 })
    );
}

/// What a keyed limiter holds on the heap, in bytes, boxed as a service keeps one per rule.
#[derive(Debug)]
struct Held {
    /// The rules alone.
    rules: isize,
    /// Built: its own size and its rules.
    built: isize,
    /// Added by checks that leave a new key idle, peeks, resets, sweeps, a carry from an empty
    /// limiter: none of them puts a key in.
    idle_calls: isize,
    /// Added by its first key.
    first_key: isize,
    /// Added by its first key, once that key has gone idle and been swept.
    after_sweep: isize,
}

/// The bytes a limiter of `make()`'s rules holds as it goes from built to one key to none.
fn held_through_first_key<A: Algorithm>(make: impl Fn() -> A, max_keys: Option<usize>) -> Held {
    let (rules, rules_bytes) = held_after(&make);
    drop(rules);
    let (limiter, built) = held_after(|| {
        let limiter = Keyed::<u64, _>::new(make());
        Box::new(match max_keys {
            Some(cap) => limiter.with_max_keys(cap).unwrap(),
            None => limiter,
        })
    });
    let start = Moment::from_secs(1);
    let ((), idle_calls) = held_after(|| {
        assert!(limiter.check(&1, start, 0).unwrap().as_ref().allowed());
        assert!(limiter.peek(&1, start, 1).unwrap().as_ref().allowed());
        assert!(!limiter.reset(&1));
        limiter.reset_all();
        assert_eq!(limiter.sweep(start), 0);
        assert_eq!(limiter.carry_from(&Keyed::new(make()), start), 0);
        assert!(limiter.is_empty());
    });
    let ((), first_key) = held_after(|| {
        assert!(limiter.check(&7, start, 1).unwrap().as_ref().allowed());
        assert_eq!(limiter.len(), 1);
    });
    // Two hours on, every rule below is back at its full quota.
    let ((), swept) = held_after(|| {
        assert_eq!(limiter.sweep(Moment::from_secs(7_200)), 1);
    });
    Held {
        rules: rules_bytes,
        built,
        idle_calls,
        first_key,
        after_sweep: first_key + swept,
    }
}

/// Each algorithm and a rule set of two, without a cap and with the service's, each with what
/// it holds (printed for BENCHMARKS.md: `cargo test -p slidewin --test keyed an_idle -- --nocapture`).
fn held_by_every_algorithm() -> Vec<(String, usize, Held)> {
    let quota = || "10/s".parse().unwrap();
    let mut rows = Vec::new();
    for cap in [None, Some(1_000_000)] {
        let capped = if cap.is_some() { ", capped" } else { "" };
        let mut row = |name: &str, size: usize, held: Held| {
            println!("{name}{capped}: {size} bytes inline, {held:?}");
            rows.push((format!("{name}{capped}"), size, held));
        };
        let gcra = || Gcra::new(quota()).unwrap();
        row(
            "Gcra",
            size_of::<Keyed<u64, Gcra>>(),
            held_through_first_key(gcra, cap),
        );
        let log = || SlidingLog::new(quota()).unwrap();
        let size = size_of::<Keyed<u64, SlidingLog>>();
        row("SlidingLog", size, held_through_first_key(log, cap));
        let counter = || SlidingCounter::new(quota()).unwrap();
        let size = size_of::<Keyed<u64, SlidingCounter>>();
        row("SlidingCounter", size, held_through_first_key(counter, cap));
        let fixed = || FixedWindow::new(quota()).unwrap();
        let size = size_of::<Keyed<u64, FixedWindow>>();
        row("FixedWindow", size, held_through_first_key(fixed, cap));
        let set = || {
            RuleSet::new([
                Rule::new("minute", Kind::SlidingLog, "5/minute".parse().unwrap()).unwrap(),
                Rule::new("hour", Kind::Gcra, "20/hour".parse().unwrap()).unwrap(),
            ])
            .unwrap()
        };
        let size = size_of::<Keyed<u64, RuleSet>>();
        row("RuleSet of two", size, held_through_first_key(set, cap));
    }
    rows
}

/// Issue 29, finding 8: a limiter allocated its 64 shards when it was built, 8 KB before any
/// key (with the service's other per-rule costs, 28 KB a rule: 2 GiB for a 4 MiB config). A
/// limiter that has held no key now holds only itself (256 bytes: the cap's count on a cache
/// line of its own, the hasher, an empty slot for its shards) and its rules: under 512 bytes
/// with a rule set of two.
#[test]
fn an_idle_keyed_limiter_holds_no_shards() {
    for (name, size, held) in held_by_every_algorithm() {
        assert_eq!(
            held.built,
            (size as isize) + held.rules,
            "{name}: built, nothing but itself and its rules: {held:?}"
        );
        assert!(held.built < 512, "{name}: {held:?}");
        assert_eq!(
            held.idle_calls, 0,
            "{name}: calls that put no key in: {held:?}"
        );
    }
}

/// A key brings the shards' slots (16 bytes a shard, 1 KB for 64) and its own shard (128
/// bytes), no other shard; once it is swept, its table goes too, and only the slots and the
/// shard stay: a rule that sees a few keys holds a few shards, not all 64.
#[test]
fn a_first_key_brings_one_shard_and_its_sweep_leaves_only_that_shard() {
    for (name, _, held) in held_by_every_algorithm() {
        assert!(held.first_key < 1_024 + 512, "{name}: {held:?}");
        assert!(held.after_sweep <= 1_024 + 128, "{name}: {held:?}");
    }
}

// ---- A memory budget (issue 29: memory bounded in bytes, not only in keys) ----

/// A budget of `bytes` for `limiter`, its keys holding no heap of their own.
fn on_budget<A: Algorithm>(
    limiter: Keyed<u64, A>,
    bytes: usize,
) -> (Keyed<u64, A>, Arc<MemoryBudget>) {
    let budget = Arc::new(MemoryBudget::new(bytes));
    (
        limiter.with_memory_budget(Arc::clone(&budget), |_| 0),
        budget,
    )
}

/// Issue 29: `--max-keys` counted keys, not bytes, so one rule of exact logs could hold
/// gigabytes. On a budget, a flood of keys, each admitted as often as its log allows, holds no
/// more than the budget (counted by the allocator: what the keys hold beyond the limiter's own
/// slots and shards), and is refused past it with `MemoryFull`.
#[test]
fn hostile_29_a_flood_of_keys_and_stamps_holds_no_more_than_the_budget() {
    const BUDGET: usize = 256 * 1024;
    let make = || {
        Keyed::<u64, _>::new(SlidingLog::new("1000/minute".parse().unwrap()).unwrap())
            .with_max_keys(1_000_000)
            .unwrap()
    };
    let (limiter, budget) = on_budget(make(), BUDGET);
    // The limiter's own slots and shards are its, not its keys': allocated first.
    for key in 0..10_000 {
        let _ = limiter.check(&key, Moment::ZERO, 0);
    }
    let (refused, held) = held_after(|| {
        let mut refused = 0;
        for round in 0..64u64 {
            for key in 0..400 {
                match limiter.check(&key, Moment::from_millis(round), 1) {
                    Ok(_) => {}
                    Err(LimitError::MemoryFull { max_bytes }) => {
                        assert_eq!(max_bytes, BUDGET);
                        refused += 1;
                    }
                    Err(other) => panic!("{other}"),
                }
            }
        }
        refused
    });
    assert!(refused > 0, "the budget was reached");
    assert!(budget.used_bytes() <= BUDGET, "{budget:?}");
    assert!(
        held <= budget.used_bytes() as isize,
        "the allocator's {held} bytes within the {} counted",
        budget.used_bytes()
    );
    // A minute on, every key is idle: swept, it all comes back, and keys are taken again.
    let later = Moment::from_secs(61);
    assert!(limiter.sweep(later) > 200);
    assert!(limiter.is_empty());
    assert_eq!(budget.used_bytes(), 0);
    assert!(limiter.check(&1, later, 1).unwrap().allowed());
    drop(limiter);
    assert_eq!(
        budget.used_bytes(),
        0,
        "a limiter dropped gives back all it held"
    );
}

/// A key whose log cannot grow for want of budget is still answered a denial when it is over
/// its limit, and refused only the admission that would have grown it; a new key is refused.
#[test]
fn on_a_spent_budget_denials_are_still_denials_and_new_keys_wait() {
    let log = || Keyed::<u64, _>::new(SlidingLog::new("3/minute".parse().unwrap()).unwrap());
    let (limiter, budget) = on_budget(log(), 0);
    assert_eq!(
        limiter.check(&1, Moment::ZERO, 1),
        Err(LimitError::MemoryFull { max_bytes: 0 })
    );
    // A cost of 0 leaves a key idle: answered, and nothing held.
    assert!(limiter.check(&1, Moment::ZERO, 0).unwrap().allowed());
    assert_eq!((limiter.len(), budget.used_bytes()), (0, 0));

    // Room for one key of one stamp: its second stamp cannot grow the log.
    let (limiter, budget) = on_budget(log(), 0);
    drop(budget);
    let one = {
        let (probe, probe_budget) = on_budget(log(), usize::MAX);
        probe.check(&1, Moment::ZERO, 1).unwrap();
        probe_budget.used_bytes()
    };
    let (limiter, budget) = {
        drop(limiter);
        on_budget(log(), one)
    };
    assert!(limiter.check(&1, Moment::ZERO, 1).unwrap().allowed());
    assert_eq!(budget.used_bytes(), one);
    assert_eq!(
        limiter.check(&1, Moment::from_secs(1), 1),
        Err(LimitError::MemoryFull { max_bytes: one })
    );
    // The same instant merges into its stamp: no growth, admitted.
    assert!(limiter.check(&1, Moment::ZERO, 1).unwrap().allowed());
    assert!(limiter.check(&1, Moment::ZERO, 1).unwrap().allowed());
    // Over its limit: a denial, with its wait, not a refusal.
    let denied = limiter.check(&1, Moment::from_secs(2), 1).unwrap();
    assert!(!denied.allowed());
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(58)));
    assert_eq!(
        limiter.check(&2, Moment::ZERO, 1),
        Err(LimitError::MemoryFull { max_bytes: one })
    );
    assert_eq!(budget.used_bytes(), one);
}

/// Several limiters on one budget: what each holds is counted, given back by resets, sweeps,
/// carries and drops, and the count is exact at every step (checked against a recount).
#[test]
fn limiters_sharing_a_budget_give_back_exactly_what_they_took() {
    let budget = Arc::new(MemoryBudget::new(usize::MAX));
    let quota = |q: &str| q.parse().unwrap();
    let logs = Keyed::<String, _>::new(SlidingLog::new(quota("50/s")).unwrap())
        .with_max_keys(1_000)
        .unwrap()
        .with_memory_budget(Arc::clone(&budget), |k: &String| k.capacity());
    let set = || {
        RuleSet::new([
            Rule::new("s", Kind::SlidingLog, quota("20/s")).unwrap(),
            Rule::new("m", Kind::Gcra, quota("600/minute")).unwrap(),
        ])
        .unwrap()
    };
    let sets = Keyed::<String, _>::new(set())
        .with_memory_budget(Arc::clone(&budget), |k: &String| k.capacity());
    for i in 0..300u64 {
        let key = format!("client-{}", i % 37);
        let now = Moment::from_millis(i * 7);
        let _ = logs.check(key.as_str(), now, 1 + i % 3);
        let _ = sets.check(key.as_str(), now, 1);
    }
    assert!(budget.used_bytes() > 0);
    assert!(logs.reset("client-3"));
    logs.reset_all();
    let newer = Keyed::<String, _>::new(set())
        .with_memory_budget(Arc::clone(&budget), |k: &String| k.capacity());
    let carried = newer.carry_from(&sets, Moment::from_millis(2_100));
    assert!(carried > 0);
    drop(sets);
    assert!(newer.sweep(Moment::from_secs(120)) > 0 || newer.is_empty());
    assert!(newer.is_empty());
    assert_eq!(budget.used_bytes(), 0, "{budget:?}");
    drop((logs, newer));
    assert_eq!(budget.used_bytes(), 0);
}
