//! The workloads of Perl's `LinkedList::Single` sliding-window example, and the two in-repo
//! baselines they are measured against: the example's array algorithm (a `Vec`, a scan from the front and a `drain`) and its list algorithm
//! (`std::collections::LinkedList`, cut where the first live event begins).

// Shared by several bench and test crates, each of which uses a part.
#![allow(dead_code, unreachable_pub)]

use std::collections::LinkedList;
use std::hint::black_box;
use std::time::Duration;

use slidewin::{EventWindow, Moment};

/// The span of the example's workloads: 1,000 time units (nanoseconds here).
pub const SPAN: u64 = 1_000;

/// What the workloads need of a window: time in whole units, a `u64` payload.
pub trait Window {
    fn with_span(span: u64) -> Self;
    fn record(&mut self, t: u64, payload: u64);
    fn expire(&mut self, now: u64, handler: &mut impl FnMut(u64, u64)) -> usize;
    fn len(&self) -> usize;
}

impl Window for EventWindow<u64> {
    fn with_span(span: u64) -> Self {
        EventWindow::new(Duration::from_nanos(span)).expect("a positive span")
    }

    fn record(&mut self, t: u64, payload: u64) {
        EventWindow::record(self, Moment::from_nanos(t), payload);
    }

    fn expire(&mut self, now: u64, handler: &mut impl FnMut(u64, u64)) -> usize {
        EventWindow::expire(self, Moment::from_nanos(now), |(t, p)| {
            handler(t.as_nanos(), p);
        })
    }

    fn len(&self) -> usize {
        EventWindow::len(self)
    }
}

/// The example's array version: push at the end; count the expired prefix from the front, take it
/// off with one `drain` (perl's `splice`), hand each to the handler.
pub struct VecWindow {
    span: u64,
    events: Vec<(u64, u64)>,
}

impl Window for VecWindow {
    fn with_span(span: u64) -> Self {
        VecWindow {
            span,
            events: Vec::new(),
        }
    }

    fn record(&mut self, t: u64, payload: u64) {
        self.events.push((t, payload));
    }

    fn expire(&mut self, now: u64, handler: &mut impl FnMut(u64, u64)) -> usize {
        let Some(cutoff) = now.checked_sub(self.span) else {
            return 0;
        };
        let mut count = 0;
        while count < self.events.len() && self.events[count].0 <= cutoff {
            count += 1;
        }
        for (t, p) in self.events.drain(..count) {
            handler(t, p);
        }
        count
    }

    fn len(&self) -> usize {
        self.events.len()
    }
}

/// The example's list version: return early when the first event is live; otherwise find the
/// first live node, cut the list there, keep the live part and consume the dead one.
pub struct ListWindow {
    span: u64,
    events: LinkedList<(u64, u64)>,
}

impl Window for ListWindow {
    fn with_span(span: u64) -> Self {
        ListWindow {
            span,
            events: LinkedList::new(),
        }
    }

    fn record(&mut self, t: u64, payload: u64) {
        self.events.push_back((t, payload));
    }

    fn expire(&mut self, now: u64, handler: &mut impl FnMut(u64, u64)) -> usize {
        let Some(cutoff) = now.checked_sub(self.span) else {
            return 0;
        };
        match self.events.front() {
            Some((t, _)) if *t <= cutoff => {}
            _ => return 0, // usually nothing has expired
        }
        let dead_len = self.events.iter().take_while(|(t, _)| *t <= cutoff).count();
        let live = self.events.split_off(dead_len);
        let dead = std::mem::replace(&mut self.events, live);
        let mut count = 0;
        for (t, p) in dead {
            handler(t, p);
            count += 1;
        }
        count
    }

    fn len(&self) -> usize {
        self.events.len()
    }
}

/// `events` events one time unit apart, expiring after every `every` events; returns the
/// number expired (so nothing is optimized away).
pub fn steady<W: Window>(events: u64, every: u64) -> usize {
    let mut window = W::with_span(SPAN);
    let mut expired = 0;
    let mut handler = |t: u64, p: u64| {
        black_box((t, p));
    };
    // Nested loops rather than `i % every`: a division per event would cost more than a record.
    for sweep in 0..events / every {
        let start = sweep * every;
        for i in start..start + every {
            window.record(i, i);
        }
        expired += window.expire(start + every - 1, &mut handler);
    }
    black_box(window.len());
    expired
}

/// A burst of `burst` events in `burst` time units, then `survivors` events much later, then one
/// expire that leaves only the survivors. Returns the window, so its memory can be measured.
pub fn burst<W: Window>(burst: u64, survivors: u64) -> W {
    let mut window = W::with_span(SPAN);
    for i in 0..burst {
        window.record(i, i);
    }
    let later = burst + 10 * SPAN;
    for i in 0..survivors {
        window.record(later + i, i);
    }
    let expired = window.expire(later + survivors, &mut |t, p| {
        black_box((t, p));
    });
    assert_eq!(expired as u64, burst);
    assert_eq!(window.len() as u64, survivors);
    window
}
