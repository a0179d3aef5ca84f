//! `Keyed`'s unit tests: what only its internals can show (how often a state is looked at).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::*;
use crate::limit::algorithm::Locked;
use crate::limit::algorithm::sealed::Enforce;
use crate::limit::{LimitError, SlidingLog};

/// How often `Counting` looked at a state to tell whether it is idle.
static LOOKS: AtomicUsize = AtomicUsize::new(0);

/// An algorithm that counts how often its state is looked at to tell whether it is idle.
#[derive(Clone, Debug)]
struct Counting<A> {
    inner: A,
}

impl<A: Algorithm> Algorithm for Counting<A> {}

impl<A: Algorithm> Enforce for Counting<A> {
    type Output = A::Output;
    type State = A::State;
    type Cell = Locked<A::State>;
    fn sweep_every(&self) -> u64 {
        self.inner.sweep_every()
    }
    fn carry(&self, old: &Self, state: A::State, now: Moment) -> Option<A::State> {
        self.inner.carry(&old.inner, state, now)
    }
    fn fresh(&self) -> A::State {
        self.inner.fresh()
    }
    type Pending = A::Pending;
    fn prepare(
        &self,
        state: &A::State,
        now: Moment,
        cost: u64,
    ) -> Result<(A::Output, A::Pending), LimitError> {
        self.inner.prepare(state, now, cost)
    }
    fn commit(state: &mut A::State, pending: A::Pending, cost: u64) {
        A::commit(state, pending, cost);
    }
    fn idle_at(&self, state: &A::State) -> Option<Moment> {
        LOOKS.fetch_add(1, Ordering::Relaxed);
        self.inner.idle_at(state)
    }
    fn is_idle(&self, state: &A::State, now: Moment) -> bool {
        LOOKS.fetch_add(1, Ordering::Relaxed);
        self.inner.is_idle(state, now)
    }
}

/// With 5 million keys, a cap of 100,000 and `SlidingLog` at 100/minute, checks went from
/// 1.23 million a second below the cap to about 30,000 once full: every refused key swept
/// its whole shard. A refusal now looks at no key's state but its own.
#[test]
fn a_flood_at_the_cap_sweeps_nothing_per_refusal() {
    const CAP: usize = 10_000;
    let inner = SlidingLog::new("100/minute".parse().unwrap()).unwrap();
    let limiter = Keyed::<u64, _>::new(Counting { inner })
        .with_max_keys(CAP)
        .unwrap();
    let mut now = Moment::from_secs(1);
    for key in 0..CAP as u64 {
        assert!(limiter.check(&key, now, 1).unwrap().allowed());
    }
    let before = LOOKS.load(Ordering::Relaxed);
    const FLOOD: usize = 200_000;
    for key in 0..FLOOD as u64 {
        now += Duration::from_micros(100); // 20 s in all: no key goes idle
        let result = limiter.check(&(CAP as u64 + key), now, 1);
        assert_eq!(result, Err(LimitError::KeysFull { cap: CAP }));
    }
    let looks = LOOKS.load(Ordering::Relaxed) - before;
    // One look at the new key's own state; shards sweep themselves once per span (none
    // here).
    assert!(looks <= FLOOD, "{looks} looks for {FLOOD} refused keys");
    // A minute after the first keys, they are idle: the flood's next keys take their places.
    now = Moment::from_secs(61);
    for key in 0..CAP as u64 {
        assert!(limiter.check(&(1_000_000 + key), now, 1).unwrap().allowed());
    }
    assert_eq!(limiter.len(), CAP);
}
