//! `MovingStat` against the exact `EventWindow` over random sequences of samples (in order,
//! late, far too late), reads (at, before and after the latest sample) and jumps in time:
//!
//! * the figures are those of the samples from the start of the oldest bucket with an instant
//!   inside the window to `now` (exactly);
//! * so they are never below the exact window, and above it by at most the samples of one
//!   bucket: those in `(cutoff - bucket, cutoff]`;
//! * it never holds more than `window / bucket + 1` buckets.
//!
//! Both sides follow the same rule for time going backwards: a sample older than the window at
//! the latest time added counts at that time, and a read before it reads at it.

use std::time::Duration;

use proptest::prelude::*;
use slidewin::{EventWindow, Moment, MovingStat};

#[derive(Clone, Debug)]
enum Op {
    /// Add `x` at `base - back` (late when `back > 0`).
    Add { back: u64, x: u8 },
    /// Read at `base + ahead - behind`.
    Tally { ahead: u64, behind: u64 },
    /// Move `base` forward.
    Advance(u64),
}

fn op(bucket: u64, window: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..=2 * bucket, any::<u8>()).prop_map(move |(back, x)| Op::Add { back: back.saturating_sub(bucket), x }),
        1 => (0..=window * 2, any::<u8>()).prop_map(|(back, x)| Op::Add { back, x }),
        3 => (0..=window * 2, 0..=bucket).prop_map(|(ahead, behind)| Op::Tally { ahead, behind }),
        4 => (0..=bucket).prop_map(Op::Advance),
        1 => (0..=window * 3).prop_map(Op::Advance),
        1 => Just(Op::Advance(1 << 40)),
    ]
}

fn case() -> impl Strategy<Value = (u64, u64, u64, Vec<Op>)> {
    (1_u64..=50, 1_u64..=6, 0_u64..1_000).prop_flat_map(|(bucket, buckets, start)| {
        let window = bucket * buckets;
        (
            Just(bucket),
            Just(window),
            Just(start),
            prop::collection::vec(op(bucket, window), 1..120),
        )
    })
}

/// The exact window, and the rule for late samples.
struct Reference {
    window: u64,
    newest: u64,
    all: EventWindow<u8>,
}

impl Reference {
    fn add(&mut self, t: u64, x: u8) {
        let t = if t >= self.newest {
            self.newest = t;
            t
        } else if t + self.window > self.newest {
            t
        } else {
            self.newest
        };
        self.all.record(Moment::from_nanos(t), x);
    }

    /// Count and sum of the samples in `[from, to]`.
    fn between(&self, from: u64, to: u64) -> (u64, f64) {
        self.all
            .iter()
            .filter(|(t, _)| (from..=to).contains(&t.as_nanos()))
            .fold((0, 0.0), |(n, sum), (_, &x)| (n + 1, sum + f64::from(x)))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn within_one_bucket_of_the_exact_window((bucket, window, start, ops) in case()) {
        let mut stat = MovingStat::new(
            Duration::from_nanos(window),
            Duration::from_nanos(bucket),
            Moment::from_nanos(start),
        ).unwrap();
        let mut reference = Reference {
            window,
            newest: start,
            all: EventWindow::new(Duration::from_nanos(window)).unwrap(),
        };
        let mut base = start;
        for op in ops {
            match op {
                Op::Add { back, x } => {
                    let t = base.saturating_sub(back);
                    stat.add(Moment::from_nanos(t), f64::from(x)).unwrap();
                    reference.add(t, x);
                }
                Op::Advance(d) => base += d,
                Op::Tally { ahead, behind } => {
                    let now = (base + ahead).saturating_sub(behind);
                    let tally = stat.tally(Moment::from_nanos(now));
                    let now = now.max(reference.newest);
                    let cutoff = now.checked_sub(window);
                    // The exact window (now - window, now].
                    let exact = reference.between(cutoff.map_or(0, |c| c + 1), now);
                    // From the first bucket with an instant inside it.
                    let first = cutoff.map_or(0, |c| (c + 1) / bucket * bucket);
                    let bucketed = reference.between(first, now);
                    prop_assert_eq!((tally.count(), tally.sum()), bucketed);
                    prop_assert!(tally.count() >= exact.0);
                    let one_bucket = cutoff.map_or(0, |c| {
                        reference.between((c + 1).saturating_sub(bucket), c).0
                    });
                    prop_assert!(tally.count() <= exact.0 + one_bucket);
                    let from = first.max(start);
                    let covered = (now.saturating_sub(from)).max(bucket);
                    prop_assert_eq!(tally.covered(), Duration::from_nanos(covered));
                    let xs: Vec<u8> = reference
                        .all
                        .iter()
                        .filter(|(t, _)| (first..=now).contains(&t.as_nanos()))
                        .map(|(_, &x)| x)
                        .collect();
                    prop_assert_eq!(tally.min(), xs.iter().min().map(|&x| f64::from(x)));
                    prop_assert_eq!(tally.max(), xs.iter().max().map(|&x| f64::from(x)));
                }
            }
            prop_assert!(stat.len() as u64 <= window / bucket + 1);
        }
    }
}
