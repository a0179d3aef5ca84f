//! The circuit: while Redis is known to be down, checks answer at once instead of each waiting
//! for it (a second, or the timeout), and one probe at a time asks whether it is back.
//!
//! Each place (a single Redis's URL, or a cluster node's `host:port`) has a circuit of its own,
//! closed until a call there fails with an error that says Redis may be down (`Unavailable`,
//! `Timeout`, `Cluster`: [`RedisError::is_transient`]). The first such failure opens it: calls
//! there answer at once with an `Unavailable` error that says so (which a `FailurePolicy` turns
//! into its decision). A task of the circuit's own then probes the place (`EXISTS` on the key
//! that failed, routed as that key's checks are), first after the first wait and then after
//! twice the wait before, up to the longest; the probe that Redis answers closes the circuit.
//! A background task rather than a caller probes, so that no caller ever waits on a Redis known
//! to be down (a caller's probe would wait its timeout while Redis stays down), and so that a
//! circuit whose place no check names any more (a cluster's node replaced in a failover) still
//! closes once its key is served again.
//!
//! A closed circuit costs a check one relaxed atomic load: the count of open circuits.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::RedisError;

/// The first wait before a probe, by default.
pub(crate) const FIRST_WAIT: Duration = Duration::from_millis(50);

/// The longest wait between probes, by default: a Redis that comes back is used again within
/// about this long (and a probe's round trip).
pub(crate) const LONGEST_WAIT: Duration = Duration::from_secs(2);

/// The longest wait that may be set: longer would leave checks without Redis for more than an
/// hour after it is back.
pub(crate) const MOST_WAIT: Duration = Duration::from_secs(3600);

/// Where a [`RedisLimiter`](crate::RedisLimiter)'s checks stand with Redis, from
/// [`RedisLimiter::circuit_state`](crate::RedisLimiter::circuit_state).
///
/// On a cluster each node has a circuit of its own; the limiter's state is then `Closed` when
/// every node's is, `HalfOpen` when every open one has its probe on the way, and `Open`
/// otherwise.
///
/// ```
/// use slidewin_redis::CircuitState;
/// assert_ne!(CircuitState::Closed, CircuitState::Open);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CircuitState {
    /// Redis answers: checks go to it.
    Closed,
    /// Redis failed: checks answer at once without it until a probe finds it back.
    Open,
    /// As `Open`, with a probe on its way to Redis.
    HalfOpen,
}

/// A probe of a key's place: `Ok` when Redis answered.
pub(crate) type ProbeFn = dyn Fn(String, Duration) -> Pin<Box<dyn Future<Output = Result<(), RedisError>> + Send>>
    + Send
    + Sync;

/// The circuits of a limiter (one per place), shared by its clones.
pub(crate) struct Circuits {
    /// How many circuits are open: what a check reads, and all it reads while none is.
    open: AtomicUsize,
    places: Mutex<HashMap<Arc<str>, Open>>,
    first: Duration,
    longest: Duration,
    probe: Box<ProbeFn>,
    state: watch::Sender<CircuitState>,
}

/// An open circuit.
struct Open {
    /// The latest failure: the one that opened it, or the latest probe's.
    cause: RedisError,
    /// The Redis key the probe asks about.
    key: String,
    next_try: Instant,
    probing: bool,
}

impl Circuits {
    /// Circuits waiting `first` before the first probe, doubling to `longest`, probing with
    /// `probe`.
    pub(crate) fn new(first: Duration, longest: Duration, probe: Box<ProbeFn>) -> Arc<Circuits> {
        Arc::new(Circuits {
            open: AtomicUsize::new(0),
            places: Mutex::new(HashMap::new()),
            first,
            longest,
            probe,
            state: watch::Sender::new(CircuitState::Closed),
        })
    }

    /// The waits' settings, checked: the first longer than zero, the longest at least the
    /// first and at most an hour.
    pub(crate) fn check_waits(first: Duration, longest: Duration) -> Result<(), RedisError> {
        let wrong = |detail: String| Err(RedisError::Config { detail });
        if first.is_zero() {
            return wrong(format!(
                "the circuit's first wait must be longer than zero, got {first:?}"
            ));
        }
        if longest < first {
            return wrong(format!(
                "the circuit's longest wait must be at least its first ({first:?}), got {longest:?}"
            ));
        }
        if longest > MOST_WAIT {
            return wrong(format!(
                "the circuit's longest wait must be at most {MOST_WAIT:?}, got {longest:?}"
            ));
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, Open>> {
        // Nothing panics while holding the lock; a poisoned map is still a good map.
        self.places.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a call may go to `place`: an error at once, saying why not, while its circuit
    /// is open. `place` is looked up only while some circuit is open.
    #[inline]
    pub(crate) fn gate(&self, place: impl FnOnce() -> Arc<str>) -> Result<(), RedisError> {
        if self.open.load(Ordering::Relaxed) == 0 {
            return Ok(());
        }
        self.gate_slow(&place())
    }

    #[cold]
    fn gate_slow(&self, place: &str) -> Result<(), RedisError> {
        match self.lock().get(place) {
            None => Ok(()),
            Some(open) => Err(open.error(place, Instant::now())),
        }
    }

    /// Notes a call's failure: one that says Redis may be down opens the circuit of its place
    /// (the error's `at`), unless open already, and starts its probe, of `key` (its Redis key)
    /// with `timeout`. Without a runtime to probe from, the circuit stays closed.
    pub(crate) fn failed(
        self: &Arc<Self>,
        err: &RedisError,
        key: impl FnOnce() -> String,
        timeout: Duration,
    ) {
        let (RedisError::Unavailable { at, .. }
        | RedisError::Timeout { at, .. }
        | RedisError::Cluster { at, .. }) = err
        else {
            return;
        };
        self.open(at, err, key, timeout);
    }

    /// Opens the circuit of `place` because of `cause`, unless open already, and starts its
    /// probe of `key` with `timeout`; without a runtime to probe from, it stays closed.
    fn open(
        self: &Arc<Self>,
        place: &str,
        cause: &RedisError,
        key: impl FnOnce() -> String,
        timeout: Duration,
    ) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (place, key): (Arc<str>, String) = {
            let mut places = self.lock();
            if places.contains_key(place) {
                // The calls that were on their way when it opened: the next try stays.
                return;
            }
            let place = Arc::from(place);
            let key = key();
            places.insert(
                Arc::clone(&place),
                Open {
                    cause: cause.clone(),
                    key: key.clone(),
                    next_try: Instant::now() + self.first,
                    probing: false,
                },
            );
            self.published(&places);
            (place, key)
        };
        runtime.spawn(probing(Arc::downgrade(self), place, key, timeout));
    }

    /// Opens here every circuit open in `from`, with its cause and its probe's key: circuits
    /// made with other waits take over from `from` without closing what it knows is down.
    pub(crate) fn open_as(self: &Arc<Self>, from: &Circuits, timeout: Duration) {
        let open: Vec<(Arc<str>, RedisError, String)> = from
            .lock()
            .iter()
            .map(|(place, open)| (Arc::clone(place), open.cause.clone(), open.key.clone()))
            .collect();
        for (place, cause, key) in open {
            self.open(&place, &cause, || key, timeout);
        }
    }

    /// Tells the open count and the state to those who read them.
    fn published(&self, places: &HashMap<Arc<str>, Open>) {
        self.open.store(places.len(), Ordering::Relaxed);
        let state = if places.is_empty() {
            CircuitState::Closed
        } else if places.values().all(|open| open.probing) {
            CircuitState::HalfOpen
        } else {
            CircuitState::Open
        };
        self.state.send_if_modified(|now| {
            let changed = *now != state;
            *now = state;
            changed
        });
    }

    /// What an open circuit is open for: its latest failure (of the first place by name, when
    /// several are open); `None` while all are closed.
    pub(crate) fn cause(&self) -> Option<RedisError> {
        if self.open.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let places = self.lock();
        let first = places.iter().min_by(|a, b| a.0.cmp(b.0));
        first.map(|(_, open)| open.cause.clone())
    }

    /// The state now.
    pub(crate) fn state(&self) -> CircuitState {
        *self.state.borrow()
    }

    /// The state once it is other than `from` (at once if it is already).
    pub(crate) async fn changed(&self, from: CircuitState) -> CircuitState {
        let mut states = self.state.subscribe();
        // The sender lives as long as `self`: this never fails.
        let state = states.wait_for(|state| *state != from).await.map(|s| *s);
        state.unwrap_or_else(|_| self.state())
    }
}

impl Open {
    /// What a call to an open circuit's place answers.
    fn error(&self, place: &str, now: Instant) -> RedisError {
        let next = if self.probing {
            "a probe is on its way".to_string()
        } else {
            // In whole milliseconds, rounded up: never "in 0ms" before the time.
            let wait = self.next_try.saturating_duration_since(now);
            let millis = wait.as_nanos().div_ceil(1_000_000);
            let millis = u64::try_from(millis).unwrap_or(u64::MAX);
            format!("next try in {:?}", Duration::from_millis(millis))
        };
        RedisError::Unavailable {
            at: place.to_string(),
            detail: format!(
                "not asked: the circuit is open since {}; {next}",
                self.cause.reason()
            ),
        }
    }
}

/// The probe of `place`'s open circuit: waits, probes with `key`, and closes the circuit when
/// Redis answers, else waits twice as long (up to the longest wait) and probes again. Ends when
/// the circuit closes or the limiter is gone.
async fn probing(circuits: Weak<Circuits>, place: Arc<str>, key: String, timeout: Duration) {
    let Some(first) = circuits.upgrade().map(|c| c.first) else {
        return;
    };
    let mut wait = first;
    loop {
        let next_try = {
            let Some(circuits) = circuits.upgrade() else {
                return;
            };
            let places = circuits.lock();
            let Some(open) = places.get(&place) else {
                return;
            };
            open.next_try
        };
        tokio::time::sleep_until(next_try).await;
        let Some(circuits) = circuits.upgrade() else {
            return;
        };
        let probe = {
            let mut places = circuits.lock();
            let Some(open) = places.get_mut(&place) else {
                return;
            };
            open.probing = true;
            circuits.published(&places);
            (circuits.probe)(key.clone(), timeout)
        };
        let outcome = probe.await;
        let mut places = circuits.lock();
        match outcome {
            // Redis answered: an error of another kind is still an answer.
            Err(err) if err.is_transient() => {
                wait = (wait * 2).min(circuits.longest);
                if let Some(open) = places.get_mut(&place) {
                    open.cause = err;
                    open.next_try = Instant::now() + wait;
                    open.probing = false;
                }
                circuits.published(&places);
            }
            _ => {
                places.remove(&place);
                circuits.published(&places);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
