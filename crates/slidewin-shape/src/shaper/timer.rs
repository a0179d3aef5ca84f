//! A key's timer: a task per key with something due, which sleeps on tokio's clock until then,
//! settles the key's state, and frees the key once it is idle.

use std::hash::Hash;
use std::sync::{Arc, Weak};
use std::time::Duration;

use slidewin::Moment;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::state::{Shared, Slot};

pub(super) fn spawn_clock<K, T>(shared: &Arc<Shared<K, T>>, key: &K, generation: u64) -> AbortHandle
where
    K: Hash + Eq + Clone + Send + 'static,
    T: Send + 'static,
{
    shared
        .runtime
        .handle()
        .spawn(clock(Arc::downgrade(shared), key.clone(), generation))
        .abort_handle()
}

/// Makes sure the key's clock task looks at the state in time after an operation changed it.
/// A state's next wake-up only moves later (new timers are due `wait` after a call, later than
/// any timer already live), so this is a safeguard: if it ever moved earlier than the clock's
/// sleep, a new clock task takes over (the old one sees a newer generation and stops).
pub(super) fn keep_clock<K, T>(
    shared: &Arc<Shared<K, T>>,
    key: &K,
    slot: &mut Slot<T>,
    next_generation: &mut u64,
) where
    K: Hash + Eq + Clone + Send + 'static,
    T: Send + 'static,
{
    if slot.state.wake_at(&shared.debounce) >= slot.wake_at {
        return;
    }
    if let Some(clock) = slot.clock.take() {
        clock.abort();
    }
    slot.generation = *next_generation;
    *next_generation += 1;
    slot.clock = Some(spawn_clock(shared, key, slot.generation));
    slot.wake_at = Moment::ZERO;
}

/// A key's timer: sleeps until the state next has something to do, handles it, and ends when
/// the state is freed (or replaced, or the shaper dropped). It never sleeps past what is
/// due: the wake-up it computed only ever moves later (see `Debounced::wake_at`), and a call
/// that finds something overdue settles it itself.
pub(super) async fn clock<K, T>(shared: Weak<Shared<K, T>>, key: K, generation: u64)
where
    K: Hash + Eq,
    T: Send + 'static,
{
    loop {
        let Some(strong) = shared.upgrade() else {
            return;
        };
        let Some(wake) = strong.tick(&key, generation) else {
            return;
        };
        // Far past the end of tokio's timer (about two years), sleep in steps and look again.
        let step = Duration::from_secs(60 * 60 * 24 * 365);
        let at = strong
            .clock
            .instant(wake)
            .unwrap_or_else(|| Instant::now() + step);
        drop(strong);
        tokio::time::sleep_until(at).await;
    }
}
