//! `Keyed` under a flood of distinct keys: memory follows the live keys, the cap holds, and
//! a key being limited is never evicted.

#![allow(
    clippy::cast_possible_truncation,
    reason = "counts and indices in tests are far below 2^32"
)]

#[path = "../benches/support/counting_alloc.rs"]
mod counting_alloc;

use std::time::Duration;

use counting_alloc::{CountingAllocator, held_after};
use slidewin::{Gcra, Keyed, LimitError, Moment, SlidingLog};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const FLOOD: u64 = 1_000_000;

#[test]
fn a_million_keys_once_each_then_quiet_leaves_nothing_behind() {
    let (limiter, peak) = held_after(|| {
        let limiter = Keyed::<u64, Gcra>::new("10/s".parse().unwrap()).unwrap();
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
    let limiter = Keyed::<u64, SlidingLog>::new("3/minute".parse().unwrap())
        .unwrap()
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
