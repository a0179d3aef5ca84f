//! `EventWindow` against a plain `Vec` reference over random sequences of records (in order,
//! late, equal times), expires (forward, backward, at the boundary), bursts and huge jumps:
//! the same contents, counts and handler calls after every step: `20-vs-array.t` of Perl's
//! `LinkedList::Single` sliding-window example, randomized.

use std::time::Duration;

use proptest::prelude::*;
use slidewin::{EventWindow, Moment};

/// The obviously-correct window: a `Vec` kept sorted by a stable sort after every push.
struct Reference {
    span: u64,
    max_len: Option<usize>,
    events: Vec<(Moment, u32)>,
}

impl Reference {
    fn record(&mut self, t: Moment, payload: u32) -> Option<(Moment, u32)> {
        self.events.push((t, payload));
        self.events.sort_by_key(|e| e.0); // stable: equal times keep arrival order
        match self.max_len {
            Some(max) if self.events.len() > max => Some(self.events.remove(0)),
            _ => None,
        }
    }

    fn inside(&self, t: Moment, now: Moment) -> bool {
        // (now - span, now], without going below zero.
        t <= now && u128::from(t.as_nanos()) + u128::from(self.span) > u128::from(now.as_nanos())
    }

    fn expire(&mut self, now: Moment) -> Vec<(Moment, u32)> {
        let (gone, kept) = self.events.drain(..).partition(|&(t, _)| {
            u128::from(t.as_nanos()) + u128::from(self.span) <= u128::from(now.as_nanos())
        });
        self.events = kept;
        gone
    }

    fn count_in(&self, now: Moment) -> usize {
        self.events
            .iter()
            .filter(|&&(t, _)| self.inside(t, now))
            .count()
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// Record at `base + offset`; offsets below earlier ones make late events.
    Record(u64),
    /// Expire at `base + offset`; may be before an earlier expire (time going back).
    Expire(u64),
    /// Count at `base + offset`.
    CountIn(u64),
    /// Move `base` forward.
    Advance(u64),
    /// Record `n` events at `base + offset`.
    Burst(u16, u64),
    /// Move `base` forward by about a million spans: the next expire empties the window.
    Jump,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..40u64).prop_map(Op::Record),
        4 => (0..60u64).prop_map(Op::Expire),
        2 => (0..60u64).prop_map(Op::CountIn),
        2 => (0..15u64).prop_map(Op::Advance),
        1 => (1..300u16, 0..40u64).prop_map(|(n, o)| Op::Burst(n, o)),
        1 => Just(Op::Jump),
    ]
}

fn check(window: &EventWindow<u32>, reference: &Reference) -> Result<(), TestCaseError> {
    let ours: Vec<(Moment, u32)> = window.iter().map(|(t, p)| (t, *p)).collect();
    prop_assert_eq!(&ours, &reference.events);
    prop_assert_eq!(window.len(), reference.events.len());
    prop_assert_eq!(
        window.oldest().map(|(t, p)| (t, *p)),
        reference.events.first().copied()
    );
    prop_assert_eq!(
        window.newest().map(|(t, p)| (t, *p)),
        reference.events.last().copied()
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn matches_a_sorted_vec(
        span in 1..25u64,
        max_len in proptest::option::of(1..60usize),
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        let span_duration = Duration::from_nanos(span);
        let mut window = match max_len {
            Some(max) => EventWindow::with_max_len(span_duration, max).unwrap(),
            None => EventWindow::new(span_duration).unwrap(),
        };
        let mut reference = Reference { span, max_len, events: Vec::new() };
        let mut base = 0u64;
        let mut next_payload = 0u32;
        let mut record = |window: &mut EventWindow<u32>, reference: &mut Reference, t: Moment| {
            let mut evicted = Vec::new();
            window.record_with(t, next_payload, |e| evicted.push(e));
            let expected = reference.record(t, next_payload);
            next_payload += 1;
            (evicted, expected.into_iter().collect::<Vec<_>>())
        };
        for op in ops {
            match op {
                Op::Record(offset) => {
                    let (ours, theirs) = record(&mut window, &mut reference, Moment::from_nanos(base + offset));
                    prop_assert_eq!(ours, theirs);
                }
                Op::Burst(n, offset) => {
                    for _ in 0..n {
                        let (ours, theirs) = record(&mut window, &mut reference, Moment::from_nanos(base + offset));
                        prop_assert_eq!(ours, theirs);
                    }
                }
                Op::Expire(offset) => {
                    let now = Moment::from_nanos(base + offset);
                    let mut handed = Vec::new();
                    let n = window.expire(now, |e| handed.push(e));
                    let expected = reference.expire(now);
                    prop_assert_eq!(n, expected.len());
                    prop_assert_eq!(handed, expected);
                    prop_assert!(window.capacity() <= 8.max(8 * window.len()));
                }
                Op::CountIn(offset) => {
                    let now = Moment::from_nanos(base + offset);
                    prop_assert_eq!(window.count_in(now), reference.count_in(now));
                }
                Op::Advance(d) => base += d,
                Op::Jump => base += 1_000_000 * span + 17,
            }
            check(&window, &reference)?;
        }
    }

    /// Near the end of the timeline and with the longest span nothing overflows.
    #[test]
    fn matches_at_the_ends_of_the_timeline(
        times in proptest::collection::vec(prop_oneof![0..50u64, (u64::MAX - 50)..=u64::MAX], 1..40),
        nows in proptest::collection::vec(prop_oneof![0..50u64, (u64::MAX - 50)..=u64::MAX], 1..10),
        long in any::<bool>(),
    ) {
        let span = if long { u64::MAX - 10 } else { 20 };
        let mut window = EventWindow::new(Duration::from_nanos(span)).unwrap();
        let mut reference = Reference { span, max_len: None, events: Vec::new() };
        for (i, t) in times.iter().enumerate() {
            let payload = u32::try_from(i).unwrap();
            window.record(Moment::from_nanos(*t), payload);
            reference.record(Moment::from_nanos(*t), payload);
        }
        for now in nows {
            let now = Moment::from_nanos(now);
            prop_assert_eq!(window.count_in(now), reference.count_in(now));
            let mut handed = Vec::new();
            window.expire(now, |e| handed.push(e));
            prop_assert_eq!(handed, reference.expire(now));
            check(&window, &reference)?;
        }
    }
}
