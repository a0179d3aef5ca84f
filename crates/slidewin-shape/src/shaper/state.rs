//! What a [`Shaper`](super::Shaper) keeps: a slot per key holding its `Debounced` state and
//! its buffered call, under one lock, and the effects of a key's reports (tasks fired, events,
//! calls cancelled), with what they drop left until the lock is released.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use slidewin::debounce::{Debounce, Debounced, Edge, Sink};
use slidewin::{Clock, Moment};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

use super::Shaper;
use super::timer::keep_clock;
use crate::clock::TokioClock;
use crate::event::Event;
use crate::runtime::{Runtime, Task};

pub(super) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A buffered call: its future, unpolled, and where to send its task if it runs.
pub(super) struct Call<T> {
    pub(super) future: BoxFuture<T>,
    pub(super) reply: oneshot::Sender<Task<T>>,
}

pub(super) struct Shared<K, T> {
    pub(super) runtime: Runtime,
    pub(super) debounce: Debounce,
    /// This shaper's timeline: from tokio's clock when it was made.
    pub(super) clock: TokioClock,
    /// Made with the `Debug` bound known, so that `Drop` can label keys too.
    pub(super) label_of: fn(&K) -> Arc<str>,
    pub(super) state: Mutex<State<K, T>>,
}

pub(super) struct State<K, T> {
    pub(super) slots: HashMap<K, Slot<T>>,
    pub(super) next_generation: u64,
}

pub(super) struct Slot<T> {
    pub(super) state: Debounced<Call<T>>,
    /// Tells this slot from a later one of the same key, for its clock task.
    pub(super) generation: u64,
    pub(super) label: Option<Arc<str>>,
    pub(super) clock: Option<AbortHandle>,
    /// When the clock task will next look at the state (zero until its first look).
    pub(super) wake_at: Moment,
}

/// Values dropped only after the lock is released: a user's future may do anything in its
/// `Drop`, even call this shaper again.
pub(super) struct Garbage<T> {
    pub(super) one: Option<Call<T>>,
    pub(super) more: Vec<Call<T>>,
}

impl<T> Garbage<T> {
    pub(super) fn new() -> Garbage<T> {
        Garbage {
            one: None,
            more: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, call: Call<T>) {
        match self.one.take() {
            None => self.one = Some(call),
            Some(first) => {
                self.more.push(first);
                self.more.push(call);
            }
        }
    }
}

/// The shaper's side of a key's reports, under the lock.
pub(super) struct Effects<'a, K, T> {
    pub(super) shared: &'a Shared<K, T>,
    pub(super) key: &'a K,
    pub(super) label: &'a mut Option<Arc<str>>,
    pub(super) garbage: &'a mut Garbage<T>,
}

impl<K, T> Effects<'_, K, T>
where
    T: Send + 'static,
{
    pub(super) fn label(&mut self) -> Arc<str> {
        let label_of = self.shared.label_of;
        let key = self.key;
        Arc::clone(self.label.get_or_insert_with(|| label_of(key)))
    }

    pub(super) fn emit(&mut self, event: impl FnOnce(Arc<str>) -> Event) {
        if self.shared.runtime.events().observed() {
            let key = self.label();
            self.shared.runtime.events().emit(|| event(key));
        }
    }

    /// Dispatches a chosen call to the runtime: `Fired`, then the task's own events.
    pub(super) fn fire<F>(&mut self, edge: Edge, future: F) -> Task<T>
    where
        F: Future<Output = T> + Send + 'static,
    {
        let id = self.shared.runtime.next_id();
        self.emit(|key| Event::Fired { key, edge, id });
        self.shared.runtime.spawn(id, future)
    }

    /// A buffered call that will never run.
    pub(super) fn cancelled(&mut self, call: Call<T>) {
        self.emit(|key| Event::Cancelled { key });
        self.garbage.push(call);
    }
}

impl<K, T> Sink<Call<T>> for Effects<'_, K, T>
where
    T: Send + 'static,
{
    fn run(&mut self, edge: Edge, _at: Moment, call: Call<T>) {
        let task = self.fire(edge, call.future);
        // If the caller dropped its `Pending`, the task runs detached.
        let _ = call.reply.send(task);
    }

    fn armed(&mut self) {
        self.emit(|key| Event::Armed { key });
    }

    fn replaced(&mut self, old: Call<T>) {
        self.emit(|key| Event::Replaced { key });
        self.garbage.push(old);
    }
}

impl<K, T> Shared<K, T>
where
    K: Hash + Eq,
    T: Send + 'static,
{
    pub(super) fn lock(&self) -> MutexGuard<'_, State<K, T>> {
        // The state is consistent between statements that can panic; keep going after one.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Now, on this shaper's timeline: one read of tokio's clock (the runtime's, so that a
    /// paused clock is seen from any thread).
    pub(super) fn now(&self) -> Moment {
        let _tokio = self.runtime.handle().enter();
        self.clock.now()
    }

    pub(super) fn effects<'a>(
        &'a self,
        key: &'a K,
        label: &'a mut Option<Arc<str>>,
        garbage: &'a mut Garbage<T>,
    ) -> Effects<'a, K, T> {
        Effects {
            shared: self,
            key,
            label,
            garbage,
        }
    }

    /// The clock task's turn: handles what is due for the state of `key` of this
    /// `generation`, and frees it if it went idle. When to come back, or `None` to stop.
    pub(super) fn tick(&self, key: &K, generation: u64) -> Option<Moment> {
        let now = self.now();
        let mut garbage = Garbage::new();
        let next = {
            let mut state = self.lock();
            let slot = state.slots.get_mut(key)?;
            if slot.generation != generation {
                return None;
            }
            let mut fx = self.effects(key, &mut slot.label, &mut garbage);
            slot.state.settle(&self.debounce, now, &mut fx);
            if slot.state.is_idle(&self.debounce, now) {
                state.slots.remove(key);
                shrink(&mut state.slots);
                None
            } else {
                slot.wake_at = slot.state.wake_at(&self.debounce);
                Some(slot.wake_at)
            }
        };
        drop(garbage);
        next
    }
}

/// Gives memory back as keys go quiet, so that a flood of keys leaves nothing behind. Halving
/// only when three quarters are empty keeps the rehashing amortized O(1) per removal.
pub(super) fn shrink<K: Hash + Eq, V>(slots: &mut HashMap<K, V>) {
    if slots.is_empty() {
        *slots = HashMap::new();
    } else if slots.len() * 4 < slots.capacity() {
        slots.shrink_to(slots.len() * 2);
    }
}

impl<K, T> Drop for Shared<K, T> {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        for (key, mut slot) in state.slots.drain() {
            if let Some(clock) = slot.clock.take() {
                clock.abort();
            }
            if slot.state.pending() {
                let events = self.runtime.events();
                let label_of = self.label_of;
                events.emit(|| Event::Cancelled {
                    key: slot.label.take().unwrap_or_else(|| label_of(&key)),
                });
            }
            // Dropping the call drops its reply, which answers its `Pending` with `Cancelled`.
        }
    }
}

impl<K, T, O> Shaper<K, T, O>
where
    K: Hash + Eq + Clone + fmt::Debug + Send + 'static,
    T: Send + 'static,
{
    /// Runs `f` on `key`'s slot, if it has one, under the lock; drops garbage after.
    pub(super) fn with_slot<R>(
        &self,
        key: &K,
        f: impl FnOnce(&mut Slot<T>, Moment, &mut Effects<'_, K, T>) -> R,
    ) -> Option<R> {
        let now = self.shared.now();
        let mut garbage = Garbage::new();
        let result = {
            let mut state = self.shared.lock();
            let state = &mut *state;
            let slot = state.slots.get_mut(key)?;
            let mut label = slot.label.take();
            let mut fx = self.shared.effects(key, &mut label, &mut garbage);
            let result = f(slot, now, &mut fx);
            slot.label = label;
            keep_clock(&self.shared, key, slot, &mut state.next_generation);
            result
        };
        drop(garbage);
        Some(result)
    }
}
