//! The service: the engine behind Envoy's gRPC, the HTTP API and the dashboard, and the
//! reloads of its config.

pub(crate) mod grpc;
pub(crate) mod health;
mod json;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{DefaultBodyLimit, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::access::{AdminHost, AdminHosts, AdminToken};
use crate::config::Config;
use crate::config_read::Reader;
use crate::engine::Bounds;
use crate::engine::Engine;
use crate::error::Error;
use crate::snapshot::feed::{Feed, stats_answer};
use crate::snapshot::{BackendStatus, ConfigStatus, LoadError, Snapshot, SnapshotSource};
use slidewin_store::{Backend, BackendState};

/// The engine, the files its config comes from, and how its loads went. Cloning shares it.
pub struct Endpoints<B: Backend> {
    inner: Arc<ServiceInner<B>>,
    /// What the admin routes require; none: they are open to [`Endpoints::admin_hosts`].
    admin_token: Option<AdminToken>,
    /// The hosts besides the loopback ones that the open admin routes answer.
    admin_hosts: AdminHosts,
    /// Whether a degraded answer (the backend away, a failure policy answering) is healthy.
    ready_when_degraded: bool,
}

impl<B: Backend> Clone for Endpoints<B> {
    fn clone(&self) -> Endpoints<B> {
        Endpoints {
            inner: Arc::clone(&self.inner),
            admin_token: self.admin_token.clone(),
            admin_hosts: self.admin_hosts.clone(),
            ready_when_degraded: self.ready_when_degraded,
        }
    }
}

struct ServiceInner<B: Backend> {
    engine: Engine<B>,
    /// Reads the config's files or directories (none for the built-in example) off the
    /// workers.
    reader: Reader,
    loads: Mutex<Loads>,
    tally: tokio::sync::watch::Sender<LoadTally>,
    /// Set once the stop has begun: health fails and the dashboard's event streams end.
    draining: tokio::sync::watch::Sender<bool>,
}

/// How many loads took effect and failed: what [`Endpoints::load_tally`] watches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadTally {
    /// The version in force (1 for the first config).
    pub version: u64,
    /// Loads that failed, leaving the config in force.
    pub errors: u64,
}

#[derive(Default)]
struct Loads {
    last_error: Option<LoadError>,
    errors_total: u64,
}

fn rfc3339(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

impl<B: Backend> Endpoints<B> {
    /// A service of `engine`, whose config is reloaded from `paths` (none: never reloaded).
    #[must_use]
    pub fn new(engine: Engine<B>, paths: Vec<PathBuf>) -> Endpoints<B> {
        let metrics = engine.metrics().clone();
        metrics.config_loaded(true);
        metrics.set_config_version(1);
        Endpoints {
            inner: Arc::new(ServiceInner {
                engine,
                reader: Reader::new(paths, Config::READ_TIMEOUT),
                loads: Mutex::new(Loads::default()),
                tally: tokio::sync::watch::Sender::new(LoadTally {
                    version: 1,
                    errors: 0,
                }),
                draining: tokio::sync::watch::Sender::new(false),
            }),
            admin_token: None,
            admin_hosts: AdminHosts::default(),
            ready_when_degraded: false,
        }
    }

    /// This service with its admin routes (the dashboard, `/api/*`, `/metrics`) requiring
    /// `token`; `POST /json`, the health routes and gRPC stay open. See [`AdminToken::protect`].
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use slidewin_server::{AdminToken, Bounds, Config, Engine, Metrics, Endpoints};
    /// let config = Config::parse(Config::EXAMPLE, "example.yaml")?;
    /// let engine = Engine::new(slidewin_store::Memory::new(), config, Arc::new(slidewin::time::MonotonicClock), Bounds::default(), Metrics::new())?;
    /// let service = Endpoints::new(engine, vec![]).with_admin_token(AdminToken::new("0123456789abcdef0123")?);
    /// let _router = service.router(true);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_admin_token(mut self, token: AdminToken) -> Endpoints<B> {
        self.admin_token = Some(token);
        self
    }

    /// This service's admin routes, while it has no admin token, answering requests for
    /// `hosts` as well as for the loopback ones (`localhost`, `*.localhost`, 127.0.0.0/8,
    /// `[::1]`); any other host gets `403`, against DNS rebinding. With a token, the token
    /// decides whatever the host: a rebinding page has neither the token nor the cookie.
    /// Replaces the hosts given before.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use slidewin_server::{AdminHost, Bounds, Config, Engine, Metrics, Endpoints};
    /// let config = Config::parse(Config::EXAMPLE, "example.yaml")?;
    /// let engine = Engine::new(slidewin_store::Memory::new(), config, Arc::new(slidewin::time::MonotonicClock), Bounds::default(), Metrics::new())?;
    /// let host: AdminHost = "slidewin.internal".parse()?;
    /// let service = Endpoints::new(engine, vec![]).with_admin_hosts([host]);
    /// assert_eq!(service.admin_hosts()[0].to_string(), "slidewin.internal");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_admin_hosts(mut self, hosts: impl IntoIterator<Item = AdminHost>) -> Endpoints<B> {
        self.admin_hosts = AdminHosts::new(hosts);
        self
    }

    /// This service healthy while its backend does not answer and a failure policy answers
    /// for it (`200 OK: degraded, …`, gRPC `SERVING`); by default it is not (`500`,
    /// `NOT_SERVING`), so that a load balancer prefers a replica that decides exactly. A
    /// backend that does not answer with no failure policy is never healthy.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use slidewin_server::{Bounds, Config, Endpoints, Engine, Metrics};
    /// let config = Config::parse(Config::EXAMPLE, "example.yaml")?;
    /// let engine = Engine::new(slidewin_store::Memory::new(), config, Arc::new(slidewin::time::MonotonicClock), Bounds::default(), Metrics::new())?;
    /// let service = Endpoints::new(engine, vec![]).with_ready_when_degraded(true);
    /// assert!(service.health().is_serving());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_ready_when_degraded(mut self, ready: bool) -> Endpoints<B> {
        self.ready_when_degraded = ready;
        self
    }

    /// This service's reloads letting a domain be spread over several files, as
    /// [`Config::load_merging_domains`] reads them (envoy ratelimit's `MERGE_DOMAIN_CONFIG`).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use slidewin_server::{Bounds, Config, Endpoints, Engine, Metrics};
    /// let config = Config::parse(Config::EXAMPLE, "example.yaml")?;
    /// let engine = Engine::new(slidewin_store::Memory::new(), config, Arc::new(slidewin::time::MonotonicClock), Bounds::default(), Metrics::new())?;
    /// let service = Endpoints::new(engine, vec![]).with_merging_domains(true);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_merging_domains(self, merge: bool) -> Endpoints<B> {
        self.inner.reader.set_merging_domains(merge);
        self
    }

    /// The hosts besides the loopback ones that the admin routes answer without a token
    /// ([`Endpoints::with_admin_hosts`]).
    #[must_use]
    pub fn admin_hosts(&self) -> &[AdminHost] {
        self.admin_hosts.as_slice()
    }

    /// Marks the admin sign-in cookie `Secure`: the HTTP listener speaks TLS.
    pub(crate) fn over_tls(mut self) -> Endpoints<B> {
        self.admin_token = self.admin_token.map(|t| t.with_secure_cookie(true));
        self
    }

    /// Begins the stop: from now on health fails (`500 not ready: draining`, gRPC
    /// `NOT_SERVING`) and the dashboard's event streams end. [`serve`](crate::serve) calls it
    /// when its shutdown future completes, [`ConnectionLimits::drain_delay`](crate::ConnectionLimits::drain_delay)
    /// before it stops accepting.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use slidewin_server::{Bounds, Config, Engine, Metrics, Endpoints};
    /// let config = Config::parse(Config::EXAMPLE, "example.yaml")?;
    /// let engine = Engine::new(slidewin_store::Memory::new(), config, Arc::new(slidewin::time::MonotonicClock), Bounds::default(), Metrics::new())?;
    /// let service = Endpoints::new(engine, vec![]);
    /// assert!(!service.is_draining());
    /// service.drain();
    /// assert!(service.is_draining());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn drain(&self) {
        self.inner.draining.send_replace(true);
    }

    /// Whether the stop has begun ([`Endpoints::drain`]).
    #[must_use]
    pub fn is_draining(&self) -> bool {
        *self.inner.draining.borrow()
    }

    /// Watches the stop: turns `true` when it begins.
    pub(crate) fn draining(&self) -> tokio::sync::watch::Receiver<bool> {
        self.inner.draining.subscribe()
    }

    /// The engine.
    #[must_use]
    pub fn engine(&self) -> &Engine<B> {
        &self.inner.engine
    }

    /// Reads the config's files again and puts them in force. An invalid config changes
    /// nothing: it is logged, counted, and shown on the dashboard. The files are read, and the
    /// config built, on a blocking thread, never on the workers that answer checks, and within
    /// [`Config::READ_TIMEOUT`]: a read that takes longer is given up (a FIFO or a hung mount),
    /// and while it has not returned, a reload is refused by name. The config in force answers
    /// throughout.
    ///
    /// # Errors
    ///
    /// Why the files were not loaded; the config in force stays.
    pub async fn reload(&self) -> Result<u64, Error> {
        if self.inner.reader.paths().is_empty() {
            return Err(Error::NoConfigFile);
        }
        let engine = self.inner.engine.clone();
        let loaded = self
            .inner
            .reader
            .load(move |config| engine.reload(config).map_err(|e| e.to_string()))
            .await
            .map_err(Error::Config);
        let metrics = self.inner.engine.metrics();
        match &loaded {
            Ok(version) => {
                metrics.config_loaded(true);
                metrics.set_config_version(*version);
                tracing::info!(version, "config reloaded");
                // The files are good again: the dashboard's error banner is about the files now.
                self.loads().last_error = None;
                self.inner.tally.send_modify(|t| t.version = *version);
            }
            Err(why) => {
                metrics.config_loaded(false);
                tracing::error!(error = %why, "config not reloaded; the config in force stays");
                let mut loads = self.loads();
                loads.errors_total += 1;
                loads.last_error = Some(LoadError {
                    at: rfc3339(jiff::Timestamp::now()),
                    message: why.to_string(),
                });
                drop(loads);
                self.inner.tally.send_modify(|t| t.errors += 1);
            }
        }
        loaded
    }

    fn loads(&self) -> std::sync::MutexGuard<'_, Loads> {
        self.inner
            .loads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Watches the loads: each reload that takes effect or fails changes it.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use slidewin_server::{Bounds, Config, Engine, Metrics, Endpoints};
    /// let config = Config::parse(Config::EXAMPLE, "example.yaml")?;
    /// let engine = Engine::new(slidewin_store::Memory::new(), config, Arc::new(slidewin::time::MonotonicClock), Bounds::default(), Metrics::new())?;
    /// let service = Endpoints::new(engine, vec![]);
    /// assert_eq!(service.load_tally().borrow().version, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn load_tally(&self) -> tokio::sync::watch::Receiver<LoadTally> {
        self.inner.tally.subscribe()
    }

    /// The paths the config is read from.
    #[must_use]
    pub fn paths(&self) -> &[PathBuf] {
        self.inner.reader.paths()
    }

    /// The HTTP API: `POST /json`, `GET /healthcheck` and `GET /healthz` (see
    /// [`Endpoints::health`]), and unless `admin` is false, `GET
    /// /api/config`, `GET /api/stats`, `GET /metrics` and the dashboard, which require the
    /// admin token if the service has one ([`Endpoints::with_admin_token`]), and otherwise
    /// answer only loopback hosts and [`Endpoints::with_admin_hosts`]'s. `POST /json` takes
    /// `content-type: application/json` only (else `415`): no web page can send that without
    /// the browser asking first (a CORS preflight, which is not answered).
    pub fn router(&self, admin: bool) -> Router {
        let api = self.api_router();
        if admin {
            api.merge(self.admin_router())
        } else {
            api
        }
    }

    /// `POST /json` and the health routes alone: what the HTTP listener serves when the admin
    /// surfaces listen on an address of their own.
    pub(crate) fn api_router(&self) -> Router {
        Router::new()
            .route("/json", post(json::json::<B>))
            .route("/healthcheck", get(health::http::<B>))
            .route("/healthz", get(health::http::<B>))
            .layer(DefaultBodyLimit::max(Bounds::MAX_BODY_BYTES))
            .with_state(self.clone())
    }

    /// The admin surfaces alone (`/api/*`, `/metrics`, the dashboard), behind the admin token
    /// or the host check.
    pub(crate) fn admin_router(&self) -> Router {
        // One feed of snapshots for the dashboard's event streams and `/api/stats` alike.
        let source: Arc<dyn SnapshotSource> = Arc::new(self.clone());
        let feed = Feed::new(source, self.draining());
        let stats = Arc::clone(&feed);
        let admin = Router::new()
            .route("/api/config", get(api_config::<B>))
            .route("/metrics", get(metrics::<B>))
            .with_state(self.clone())
            .route("/api/stats", get(move || stats_answer(Arc::clone(&stats))))
            .merge(crate::dashboard::dashboard_on(feed, self.draining()));
        match &self.admin_token {
            Some(token) => token.protect(admin),
            None => self.admin_hosts.protect(admin),
        }
    }

    /// The metrics alone, at `path`, with neither token nor host check: for a listener that
    /// only the scraper reaches ([`ServeOptions::metrics`](crate::ServeOptions::metrics)).
    pub(crate) fn metrics_router(&self, path: &str) -> Router {
        Router::new()
            .route(path, get(metrics::<B>))
            .with_state(self.clone())
    }
}

impl<B: Backend> Endpoints<B> {
    /// What the service is doing now: what `GET /api/stats` answers and the dashboard shows
    /// (its config, its backend, its busiest rules and the keys denied most).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use slidewin_server::{Bounds, Config, Endpoints, Engine, Metrics};
    ///
    /// let config = Config::parse(Config::EXAMPLE, "example.yaml")?;
    /// let engine = Engine::new(slidewin_store::Memory::new(), config, Arc::new(slidewin::time::MonotonicClock), Bounds::default(), Metrics::new())?;
    /// let snapshot = Endpoints::new(engine, vec![]).snapshot();
    /// assert_eq!((snapshot.backend.kind.as_str(), snapshot.backend.state.as_str()), ("memory", "up"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn snapshot(&self) -> Snapshot {
        let engine = &self.inner.engine;
        let (config, version, loaded_at) = engine.config();
        let (last_error, errors_total) = {
            let loads = self.loads();
            (loads.last_error.clone(), loads.errors_total)
        };
        let backend = engine.backend();
        let state = backend.state();
        engine.metrics().set_backend_state(state);
        let mut snapshot = Snapshot {
            now_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            config: ConfigStatus {
                version,
                loaded_at: rfc3339(loaded_at),
                files: config.files().to_vec(),
                last_error,
                errors_total,
            },
            backend: BackendStatus {
                kind: backend.kind().to_string(),
                state: state.to_string(),
                failure_policy: backend.failure_policy().map(|p| p.to_string()),
                errors_total: engine.metrics().backend_errors(),
                denied_cache_answers_total: backend.denials_answered(),
            },
            top_denied: engine.top_denied(),
            ..Snapshot::default()
        };
        snapshot.show(engine.busiest_rules(crate::snapshot::MAX_SHOWN_RULES));
        snapshot
    }
}

impl<B: Backend> SnapshotSource for Endpoints<B> {
    fn snapshot(&self) -> Snapshot {
        Endpoints::snapshot(self)
    }

    /// Each load, taken or failed, adds one to the version or to the errors; the store's
    /// state is the low two bits.
    fn generation(&self) -> u64 {
        let loads = *self.inner.tally.borrow();
        let state = match self.inner.engine.backend().state() {
            BackendState::Up => 0,
            BackendState::Probing => 1,
            _ => 2,
        };
        loads.version.wrapping_add(loads.errors) << 2 | state
    }
}

async fn api_config<B: Backend>(State(service): State<Endpoints<B>>) -> Response {
    let (config, version, loaded_at) = service.engine().config();
    Json(serde_json::json!({
        "version": version,
        "loaded_at": rfc3339(loaded_at),
        "files": config.files(),
        "domains": crate::config_view::domains(&config),
    }))
    .into_response()
}

/// `GET /api/stats`: the snapshot the dashboard's event streams share, or one younger than a
/// tick: a loop of requests builds one a tick at most, off the async workers.
async fn metrics<B: Backend>(State(service): State<Endpoints<B>>) -> Response {
    let engine = service.engine();
    engine.metrics().set_backend_state(engine.backend().state());
    if let Some((used, max)) = engine.backend().memory() {
        engine.metrics().set_memory(used, max);
    }
    engine
        .metrics()
        .set_denials_answered(engine.backend().denials_answered());
    engine.metrics().set_top_denied(&engine.top_denied());
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        engine.metrics().encode(),
    )
        .into_response()
}
