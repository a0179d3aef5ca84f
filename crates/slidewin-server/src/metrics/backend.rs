//! The backend's series: its state, its errors, what it refused, and the memory it holds.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use slidewin_store::BackendState;

use super::Metrics;
use super::labels::StateLabels;

/// The series of [`Metrics`] this module keeps.
#[derive(Debug)]
pub(super) struct BackendSeries {
    backend_state: Family<StateLabels, Gauge>,
    backend_errors: Counter,
    key_cap_refusals: Counter,
    memory_refusals: Counter,
    denials_answered: Counter,
    memory_bytes: Gauge,
    memory_max_bytes: Gauge,
}

impl BackendSeries {
    /// Each registered in `registry`, at zero.
    pub(super) fn register(registry: &mut Registry) -> BackendSeries {
        let backend_state = Family::<StateLabels, Gauge>::default();
        registry.register(
            "backend_state",
            "1 for the backend's state: up, down (Redis circuit open) or probing (half-open)",
            backend_state.clone(),
        );
        let backend_errors = Counter::default();
        registry.register(
            "backend_errors",
            "Checks the backend failed (answered by the failure policy, or an error)",
            backend_errors.clone(),
        );
        let key_cap_refusals = Counter::default();
        registry.register(
            "key_cap_refusals",
            "New keys refused because a rule held its cap of keys",
            key_cap_refusals.clone(),
        );
        let memory_refusals = Counter::default();
        registry.register(
            "memory_refusals",
            "New keys, or admissions that would grow a sliding log, refused because the memory \
             backend's budget (--max-memory) was spent",
            memory_refusals.clone(),
        );
        let denials_answered = Counter::default();
        registry.register(
            "denied_cache_answers",
            "One-unit checks answered with a denial Redis gave that still held, without asking \
             Redis",
            denials_answered.clone(),
        );
        let memory_bytes = Gauge::default();
        registry.register(
            "memory_bytes",
            "Bytes the memory backend's keys hold, on its budget",
            memory_bytes.clone(),
        );
        let memory_max_bytes = Gauge::default();
        registry.register(
            "memory_max_bytes",
            "The memory backend's budget (--max-memory), in bytes",
            memory_max_bytes.clone(),
        );
        BackendSeries {
            backend_state,
            backend_errors,
            key_cap_refusals,
            memory_refusals,
            denials_answered,
            memory_bytes,
            memory_max_bytes,
        }
    }
}

impl Metrics {
    pub(crate) fn set_backend_state(&self, state: BackendState) {
        for known in [BackendState::Up, BackendState::Down, BackendState::Probing] {
            let value = i64::from(known == state);
            let known = known.as_str();
            self.inner
                .backend
                .backend_state
                .get_or_create(&StateLabels { state: known })
                .set(value);
        }
    }

    pub(crate) fn backend_error(&self) {
        self.inner.backend.backend_errors.inc();
    }

    pub(crate) fn backend_errors(&self) -> u64 {
        self.inner.backend.backend_errors.get()
    }

    pub(crate) fn key_cap_refusal(&self) {
        self.inner.backend.key_cap_refusals.inc();
    }

    pub(crate) fn memory_refusal(&self) {
        self.inner.backend.memory_refusals.inc();
    }

    /// The backend's count of checks answered from the denials it kept, as it stands now.
    pub(crate) fn set_denials_answered(&self, total: u64) {
        self.inner
            .backend
            .denials_answered
            .inner()
            .fetch_max(total, std::sync::atomic::Ordering::Relaxed);
    }

    /// The memory backend's budget: what its keys hold now, of `max` bytes.
    pub(crate) fn set_memory(&self, used: usize, max: usize) {
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.inner.backend.memory_bytes.set(gauge(used));
        self.inner.backend.memory_max_bytes.set(gauge(max));
    }
}
