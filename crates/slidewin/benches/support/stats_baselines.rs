//! The in-repo baselines the statistics are measured against: `MutexMetrics`, the bucket ring
//! behind one `Mutex` (what `WindowMetrics` would be with a lock), and `NaiveStat`, a moving
//! statistic that stores every event (what `MovingStat` would be without buckets).

// Shared by several bench and test crates, each of which uses a part.
#![allow(dead_code, unreachable_pub)]

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use slidewin::Moment;
use slidewin::stats::MetricEvent;

/// A ring of buckets behind a mutex, with `WindowMetrics`'s rules for counts: aligned buckets,
/// the `buckets` buckets ending at `now`'s valid, late events counted in the newest.
pub struct MutexMetrics {
    bucket: u64,
    buckets: u64,
    start: u64,
    ring: Mutex<Ring>,
}

struct Ring {
    newest: u64,
    /// `(epoch, counts)` per slot.
    slots: Vec<(u64, [u64; 4])>,
}

impl MutexMetrics {
    pub fn new(span: Duration, buckets: u64, start: Moment) -> MutexMetrics {
        let bucket = u64::try_from(span.as_nanos()).unwrap() / buckets;
        MutexMetrics {
            bucket,
            buckets,
            start: start.as_nanos(),
            ring: Mutex::new(Ring {
                newest: start.as_nanos() / bucket,
                slots: vec![(0, [0; 4]); usize::try_from(buckets).unwrap()],
            }),
        }
    }

    fn index(&self, epoch: u64) -> usize {
        usize::try_from(epoch % self.buckets).unwrap()
    }

    pub fn add(&self, t: Moment, event: MetricEvent, n: u64) {
        let mut epoch = t.as_nanos() / self.bucket;
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        if epoch + self.buckets <= ring.newest {
            epoch = ring.newest;
        }
        ring.newest = ring.newest.max(epoch);
        let slot = &mut ring.slots[self.index(epoch)];
        if slot.0 != epoch {
            *slot = (epoch, [0; 4]);
        }
        slot.1[event as usize] += n;
    }

    /// `event`s per second over the valid buckets, divided by the time they cover.
    pub fn rate(&self, now: Moment, event: MetricEvent) -> f64 {
        let ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let top = (now.as_nanos() / self.bucket).max(ring.newest);
        let bottom = top.saturating_sub(self.buckets - 1);
        let sum: u64 = ring
            .slots
            .iter()
            .filter(|(epoch, _)| (bottom..=top).contains(epoch))
            .map(|(_, counts)| counts[event as usize])
            .sum();
        let from = (bottom * self.bucket).max(self.start);
        let covered = now.as_nanos().saturating_sub(from).max(self.bucket);
        sum as f64 * 1e9 / covered as f64
    }
}

/// Every event kept in a deque, expired from the front; `tally` scans what is left.
pub struct NaiveStat {
    span: u64,
    start: u64,
    events: VecDeque<(u64, f64)>,
}

/// What both statistics answer: sum, count, min, max and rate per second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figures {
    pub sum: f64,
    pub count: u64,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub rate: f64,
}

impl NaiveStat {
    pub fn new(span: Duration, start: Moment) -> NaiveStat {
        NaiveStat {
            span: u64::try_from(span.as_nanos()).unwrap(),
            start: start.as_nanos(),
            events: VecDeque::new(),
        }
    }

    pub fn add(&mut self, t: Moment, x: f64) {
        self.events.push_back((t.as_nanos(), x));
        self.expire(t.as_nanos());
    }

    fn expire(&mut self, now: u64) {
        if let Some(cutoff) = now.checked_sub(self.span) {
            while self.events.front().is_some_and(|&(t, _)| t <= cutoff) {
                self.events.pop_front();
            }
        }
    }

    pub fn tally(&mut self, now: Moment) -> Figures {
        self.expire(now.as_nanos());
        let mut figures = Figures {
            sum: 0.0,
            count: 0,
            min: None,
            max: None,
            rate: 0.0,
        };
        for &(_, x) in &self.events {
            figures.sum += x;
            figures.count += 1;
            figures.min = Some(figures.min.map_or(x, |m: f64| m.min(x)));
            figures.max = Some(figures.max.map_or(x, |m: f64| m.max(x)));
        }
        let from = now.as_nanos().saturating_sub(self.span).max(self.start);
        let covered = now.as_nanos().saturating_sub(from).max(1);
        figures.rate = figures.sum * 1e9 / covered as f64;
        figures
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }
}
