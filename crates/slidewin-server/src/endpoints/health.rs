//! Health that tells the truth, one answer on every surface: `GET /healthcheck` (envoy
//! ratelimit's path) and `GET /healthz` on the HTTP listener, and the standard
//! `grpc.health.v1.Health` (tonic-health's) on the gRPC listener.
//!
//! The service is healthy when it decides with its backend and is not stopping. A config is
//! always loaded: the service does not start without one, and a reload that fails keeps the
//! config in force. While the backend does not answer, the failure policy (if any) answers for
//! it: the service then says it is degraded, and healthy only if the operator chose so
//! ([`Endpoints::with_ready_when_degraded`]); otherwise a load balancer would send its checks
//! to a replica that cannot decide them exactly.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use slidewin_store::{Backend, BackendState};
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use super::Endpoints;

/// The names the gRPC health service answers for, each with the service's one health: the
/// server as a whole (`""`), Envoy's rate limit service, and envoy ratelimit's own name.
pub(crate) const HEALTH_SERVICES: [&str; 3] = [
    "",
    "envoy.service.ratelimit.v3.RateLimitService",
    "ratelimit",
];

/// What the service says of itself.
///
/// ```
/// use slidewin_server::Health;
/// assert!(Health::Serving.is_serving());
/// assert!(Health::Degraded { why: "the redis backend is down".into() }.is_serving());
/// assert!(!Health::NotServing { why: "draining".into() }.is_serving());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    /// It decides with its backend.
    Serving,
    /// Its backend does not answer, a failure policy answers for it, and the operator counts
    /// that as healthy.
    Degraded {
        /// Which backend, in what state, and the policy.
        why: String,
    },
    /// It should not be sent checks: it is stopping, or its backend does not answer.
    NotServing {
        /// Why.
        why: String,
    },
}

impl Health {
    /// Whether a load balancer should send it checks.
    #[must_use]
    pub fn is_serving(&self) -> bool {
        !matches!(self, Health::NotServing { .. })
    }
}

impl<B: Backend> Endpoints<B> {
    /// Its health now, as `/healthcheck`, `/healthz` and `grpc.health.v1.Health` give it.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use slidewin_server::{Bounds, Config, Endpoints, Engine, Health, Metrics};
    /// let config = Config::parse(Config::EXAMPLE, "example.yaml")?;
    /// let engine = Engine::new(slidewin_store::Memory::new(), config, Arc::new(slidewin::time::MonotonicClock), Bounds::default(), Metrics::new())?;
    /// let service = Endpoints::new(engine, vec![]);
    /// assert_eq!(service.health(), Health::Serving);
    /// service.drain();
    /// assert!(!service.health().is_serving());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn health(&self) -> Health {
        if self.is_draining() {
            return Health::NotServing {
                why: "draining (the service is stopping)".to_owned(),
            };
        }
        let backend = self.engine().backend();
        let (kind, state) = (backend.kind(), backend.state());
        if state == BackendState::Up {
            return Health::Serving;
        }
        match backend.failure_policy() {
            Some(policy) if self.ready_when_degraded => Health::Degraded {
                why: format!(
                    "the {kind} backend is {state}; answering by the failure policy ({policy})"
                ),
            },
            Some(policy) => Health::NotServing {
                why: format!(
                    "the {kind} backend is {state}; answering by the failure policy ({policy})"
                ),
            },
            None => Health::NotServing {
                why: format!("the {kind} backend is {state}, and no failure policy answers"),
            },
        }
    }
}

/// `GET /healthcheck` and `GET /healthz`: `200 OK` while healthy (`OK: degraded, …` when a
/// failure policy answers and that counts), `500` with the reason otherwise, as envoy
/// ratelimit answers; never cached.
pub(super) async fn http<B: Backend>(State(service): State<Endpoints<B>>) -> Response {
    let no_store = [(header::CACHE_CONTROL, "no-store")];
    match service.health() {
        Health::Serving => (no_store, "OK\n").into_response(),
        Health::Degraded { why } => (no_store, format!("OK: degraded, {why}\n")).into_response(),
        Health::NotServing { why } => (
            StatusCode::INTERNAL_SERVER_ERROR,
            no_store,
            format!("not ready: {why}\n"),
        )
            .into_response(),
    }
}

/// Sets `reporter` (the gRPC health service's statuses) to `service`'s health now.
pub(crate) async fn report_now<B: Backend>(service: &Endpoints<B>, reporter: &HealthReporter) {
    let status = if service.health().is_serving() {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    };
    for name in HEALTH_SERVICES {
        reporter.set_service_status(name, status).await;
    }
}

/// Keeps `reporter` at `service`'s health: now, and again each time the backend's state
/// changes or the stop begins. Runs until dropped.
pub(crate) async fn report<B: Backend>(service: Endpoints<B>, reporter: HealthReporter) {
    let mut draining = service.draining();
    loop {
        report_now(&service, &reporter).await;
        if service.is_draining() {
            // The stop is not undone: nothing changes the answer any more.
            return;
        }
        let state = service.engine().backend().state();
        tokio::select! {
            _ = draining.wait_for(|&draining| draining) => {}
            _ = service.engine().backend().state_changed(state) => {}
        }
    }
}
