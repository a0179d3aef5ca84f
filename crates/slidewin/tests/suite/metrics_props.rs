//! `WindowMetrics` on one thread against a plain list of every event, over random sequences
//! of events, response times and reads, in order, late, far too late and after jumps:
//!
//! * the window's figures are exactly those of the events whose bucket is one of the
//!   `buckets` buckets ending at `now`'s (with the rule for late events below);
//! * so they are never above the exact window `(now - interval, now]`, and below it by at most
//!   the events of one bucket;
//! * the buckets, the current and the previous bucket are those the list says.
//!
//! Late events: on the ring's timeline (the newest bucket recorded), an event whose bucket is
//! out of the window counts in the newest bucket; a read before the newest bucket reads at its
//! last instant.

use std::time::Duration;

use proptest::prelude::*;
use slidewin::stats::{MetricEvent, MetricStats};
use slidewin::{Moment, WindowMetrics};

#[derive(Clone, Debug)]
enum Op {
    Add { back: u64, event: usize, n: u8 },
    AddRt { back: u64, rt: u16 },
    Read { ahead: u64, behind: u64 },
    Advance(u64),
}

fn op(bucket: u64, interval: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..=2 * bucket, 0..4_usize, 1..=u8::MAX)
            .prop_map(move |(back, event, n)| Op::Add { back: back.saturating_sub(bucket), event, n }),
        1 => (0..=3 * interval, 0..4_usize, 1..=u8::MAX).prop_map(|(back, event, n)| Op::Add { back, event, n }),
        3 => (0..=bucket, any::<u16>()).prop_map(|(back, rt)| Op::AddRt { back, rt }),
        3 => (0..=interval * 2, 0..=bucket * 2).prop_map(|(ahead, behind)| Op::Read { ahead, behind }),
        4 => (0..=bucket).prop_map(Op::Advance),
        1 => (0..=interval * 3).prop_map(Op::Advance),
        1 => Just(Op::Advance(1 << 40)),
    ]
}

fn case() -> impl Strategy<Value = (u64, u64, u64, Vec<Op>)> {
    (2_u64..=40, 1_u64..=6, 0_u64..500).prop_flat_map(|(bucket, samples, start)| {
        (
            Just(bucket),
            Just(samples),
            Just(start),
            prop::collection::vec(op(bucket, bucket * samples), 1..150),
        )
    })
}

/// Every event with the bucket (epoch) it counts in, and its time.
#[derive(Clone, Copy, Debug)]
struct Entry {
    epoch: u64,
    t: u64,
    /// An event index, or 4 for a response time.
    kind: usize,
    value: u64,
}

struct Reference {
    bucket: u64,
    samples: u64,
    slots: u64,
    newest: u64,
    entries: Vec<Entry>,
}

impl Reference {
    fn add(&mut self, t: u64, kind: usize, value: u64) {
        let mut epoch = t / self.bucket;
        if epoch + self.samples <= self.newest {
            epoch = self.newest;
        }
        self.newest = self.newest.max(epoch);
        self.entries.push(Entry {
            epoch,
            t,
            kind,
            value,
        });
    }

    fn read_at(&self, now: u64) -> (u64, u64) {
        let epoch = now / self.bucket;
        if epoch >= self.newest {
            (epoch, now)
        } else {
            (self.newest, self.newest * self.bucket + self.bucket - 1)
        }
    }

    fn in_epochs(&self, from: u64, to: u64) -> impl Iterator<Item = &Entry> {
        self.entries
            .iter()
            .filter(move |e| (from..=to).contains(&e.epoch))
    }

    /// Whether the ring still holds `epoch`: recorded in (or slot 0's first epoch), and no
    /// later epoch has taken its slot.
    fn holds(&self, epoch: u64) -> bool {
        let recorded = epoch == 0 || self.entries.iter().any(|e| e.epoch == epoch);
        let taken = self
            .entries
            .iter()
            .any(|e| e.epoch > epoch && e.epoch % self.slots == epoch % self.slots);
        recorded && !taken
    }
}

fn check(stats: &MetricStats, entries: &[&Entry]) -> Result<(), TestCaseError> {
    for (k, event) in MetricEvent::ALL.into_iter().enumerate() {
        let want: u64 = entries
            .iter()
            .filter(|e| e.kind == k)
            .map(|e| e.value)
            .sum();
        prop_assert_eq!(stats.count(event), want, "{}", event);
    }
    let rts: Vec<u64> = entries
        .iter()
        .filter(|e| e.kind == 4)
        .map(|e| e.value)
        .collect();
    prop_assert_eq!(stats.rt_count(), rts.len() as u64);
    prop_assert_eq!(stats.rt_sum(), Duration::from_nanos(rts.iter().sum()));
    prop_assert_eq!(
        stats.min_rt(),
        rts.iter().min().map(|&n| Duration::from_nanos(n))
    );
    prop_assert_eq!(
        stats.max_rt(),
        rts.iter().max().map(|&n| Duration::from_nanos(n))
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn matches_the_list_of_events((bucket, samples, start, ops) in case()) {
        let metrics = WindowMetrics::new(
            Duration::from_nanos(bucket * samples),
            u32::try_from(samples).unwrap(),
            Moment::from_nanos(start),
        ).unwrap();
        let mut reference = Reference {
            bucket,
            samples,
            slots: samples.next_power_of_two(),
            newest: start / bucket,
            entries: Vec::new(),
        };
        let mut base = start;
        for op in ops {
            match op {
                Op::Add { back, event, n } => {
                    let t = base.saturating_sub(back);
                    metrics.add(Moment::from_nanos(t), MetricEvent::ALL[event], u64::from(n));
                    reference.add(t, event, u64::from(n));
                }
                Op::AddRt { back, rt } => {
                    let t = base.saturating_sub(back);
                    metrics.add_rt(Moment::from_nanos(t), Duration::from_nanos(u64::from(rt)));
                    reference.add(t, 4, u64::from(rt));
                }
                Op::Advance(d) => base += d,
                Op::Read { ahead, behind } => {
                    let asked = (base + ahead).saturating_sub(behind);
                    let stats = metrics.stats(Moment::from_nanos(asked));
                    let (top, now) = reference.read_at(asked);
                    let bottom = top.saturating_sub(samples - 1);
                    let window: Vec<&Entry> = reference.in_epochs(bottom, top).collect();
                    check(&stats, &window)?;
                    for event in MetricEvent::ALL {
                        let at = Moment::from_nanos(asked);
                        prop_assert_eq!(metrics.sum(at, event), stats.count(event));
                        prop_assert_eq!(metrics.rate(at, event), stats.rate(event));
                    }
                    let from = (bottom * bucket).max(start);
                    prop_assert_eq!(stats.start(), Moment::from_nanos(from));
                    prop_assert_eq!(
                        stats.covered(),
                        Duration::from_nanos(now.saturating_sub(from).max(bucket))
                    );

                    // Against the exact window, for events counted at their own time (an event
                    // later than `now` in the current bucket, recorded before the clock went
                    // back, counts on both sides).
                    let own_time = |e: &&Entry| e.t / bucket == e.epoch;
                    let exact = reference
                        .entries
                        .iter()
                        .filter(own_time)
                        .filter(|e| e.t + bucket * samples > now)
                        .count();
                    let ours = window.iter().copied().filter(own_time).count();
                    let one_bucket = reference
                        .entries
                        .iter()
                        .filter(own_time)
                        .filter(|e| e.epoch + samples == top)
                        .count();
                    prop_assert!(ours <= exact && exact <= ours + one_bucket);

                    // The buckets one by one.
                    let held: Vec<u64> = (bottom..=top).filter(|&e| reference.holds(e)).collect();
                    let buckets = metrics.buckets(Moment::from_nanos(asked));
                    let starts: Vec<u64> = buckets.iter().map(|b| b.start().as_nanos()).collect();
                    prop_assert_eq!(starts, held.iter().map(|e| e * bucket).collect::<Vec<_>>());
                    for (b, &epoch) in buckets.iter().zip(&held) {
                        check(b, &reference.in_epochs(epoch, epoch).collect::<Vec<_>>())?;
                    }
                    let previous = metrics.previous_bucket(Moment::from_nanos(asked));
                    let want = top.checked_sub(1).filter(|&e| reference.holds(e));
                    prop_assert_eq!(previous.map(|b| b.start().as_nanos()), want.map(|e| e * bucket));
                    let current = metrics.current_bucket(Moment::from_nanos(asked));
                    prop_assert_eq!(current.is_some(), reference.holds(top));
                }
            }
        }
    }
}
