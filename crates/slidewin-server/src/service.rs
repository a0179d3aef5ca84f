//! The service: the engine behind Envoy's gRPC, the HTTP API and the dashboard, and the
//! reloads of its config.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use crate::access::{AdminHost, AdminHosts, AdminToken};
use crate::backend::ServiceBackend;
use crate::config::Unit;
use crate::config_read::{CONFIG_READ_TIMEOUT, Reader};
use crate::engine::{
    Code, DescriptorStatus, Engine, Entry, LimitOverride, RateLimitRequest, RateLimitResponse,
    RequestDescriptor, RequestError,
};
use crate::snapshot::feed::{Feed, stats_answer};
use crate::snapshot::{BackendStatus, ConfigStatus, LoadError, Snapshot, SnapshotSource};

/// The largest request body `POST /json` reads, and the largest gRPC message decoded.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// The engine, the files its config comes from, and how its loads went. Cloning shares it.
pub struct Service<B: ServiceBackend> {
    inner: Arc<ServiceInner<B>>,
    /// What the admin routes require; none: they are open to [`Service::admin_hosts`].
    admin_token: Option<AdminToken>,
    /// The hosts besides the loopback ones that the open admin routes answer.
    admin_hosts: AdminHosts,
}

impl<B: ServiceBackend> Clone for Service<B> {
    fn clone(&self) -> Service<B> {
        Service {
            inner: Arc::clone(&self.inner),
            admin_token: self.admin_token.clone(),
            admin_hosts: self.admin_hosts.clone(),
        }
    }
}

struct ServiceInner<B: ServiceBackend> {
    engine: Engine<B>,
    /// Reads the config's files or directories (none for the built-in example) off the
    /// workers.
    reader: Reader,
    loads: Mutex<Loads>,
    tally: tokio::sync::watch::Sender<LoadTally>,
    /// Set once the stop has begun: health fails and the dashboard's event streams end.
    draining: tokio::sync::watch::Sender<bool>,
}

/// How many loads took effect and failed: what [`Service::load_tally`] watches.
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

impl<B: ServiceBackend> Service<B> {
    /// A service of `engine`, whose config is reloaded from `paths` (none: never reloaded).
    #[must_use]
    pub fn new(engine: Engine<B>, paths: Vec<PathBuf>) -> Service<B> {
        let metrics = engine.metrics().clone();
        metrics.config_loaded(true);
        metrics.set_config_version(1);
        Service {
            inner: Arc::new(ServiceInner {
                engine,
                reader: Reader::new(paths, CONFIG_READ_TIMEOUT),
                loads: Mutex::new(Loads::default()),
                tally: tokio::sync::watch::Sender::new(LoadTally {
                    version: 1,
                    errors: 0,
                }),
                draining: tokio::sync::watch::Sender::new(false),
            }),
            admin_token: None,
            admin_hosts: AdminHosts::default(),
        }
    }

    /// This service with its admin routes (the dashboard, `/api/*`, `/metrics`) requiring
    /// `token`; `POST /json`, `/healthz` and gRPC stay open. See [`AdminToken::protect`].
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use slidewin_server::{AdminToken, Bounds, Config, Engine, Metrics, Service};
    /// let config = Config::parse(slidewin_server::EXAMPLE_CONFIG, "example.yaml")?;
    /// let engine = Engine::new(slidewin_http::Memory::new(), config, Arc::new(slidewin::time::MonotonicClock), Bounds::default(), Metrics::new())?;
    /// let service = Service::new(engine, vec![]).with_admin_token(AdminToken::new("0123456789abcdef0123")?);
    /// let _router = service.router(true);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_admin_token(mut self, token: AdminToken) -> Service<B> {
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
    /// use slidewin_server::{AdminHost, Bounds, Config, Engine, Metrics, Service};
    /// let config = Config::parse(slidewin_server::EXAMPLE_CONFIG, "example.yaml")?;
    /// let engine = Engine::new(slidewin_http::Memory::new(), config, Arc::new(slidewin::time::MonotonicClock), Bounds::default(), Metrics::new())?;
    /// let host: AdminHost = "slidewin.internal".parse()?;
    /// let service = Service::new(engine, vec![]).with_admin_hosts([host]);
    /// assert_eq!(service.admin_hosts()[0].to_string(), "slidewin.internal");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_admin_hosts(mut self, hosts: impl IntoIterator<Item = AdminHost>) -> Service<B> {
        self.admin_hosts = AdminHosts::new(hosts);
        self
    }

    /// The hosts besides the loopback ones that the admin routes answer without a token
    /// ([`Service::with_admin_hosts`]).
    #[must_use]
    pub fn admin_hosts(&self) -> &[AdminHost] {
        self.admin_hosts.as_slice()
    }

    /// Marks the admin sign-in cookie `Secure`: the HTTP listener speaks TLS.
    pub(crate) fn over_tls(mut self) -> Service<B> {
        self.admin_token = self.admin_token.map(|t| t.with_secure_cookie(true));
        self
    }

    /// Begins the stop: from now on health answers 503 (`draining`) and the dashboard's
    /// event streams end. [`serve`](crate::serve) calls it when its shutdown future completes,
    /// before it stops accepting.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use slidewin_server::{Bounds, Config, Engine, Metrics, Service};
    /// let config = Config::parse(slidewin_server::EXAMPLE_CONFIG, "example.yaml")?;
    /// let engine = Engine::new(slidewin_http::Memory::new(), config, Arc::new(slidewin::time::MonotonicClock), Bounds::default(), Metrics::new())?;
    /// let service = Service::new(engine, vec![]);
    /// assert!(!service.is_draining());
    /// service.drain();
    /// assert!(service.is_draining());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn drain(&self) {
        self.inner.draining.send_replace(true);
    }

    /// Whether the stop has begun ([`Service::drain`]).
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
    /// [`CONFIG_READ_TIMEOUT`]: a read that takes longer is given up (a FIFO or a hung mount),
    /// and while it has not returned, a reload is refused by name. The config in force answers
    /// throughout.
    ///
    /// # Errors
    ///
    /// Why the files were not loaded; the config in force stays.
    pub async fn reload(&self) -> Result<u64, String> {
        if self.inner.reader.paths().is_empty() {
            return Err("the built-in config has no file to reload".to_owned());
        }
        let engine = self.inner.engine.clone();
        let loaded = self
            .inner
            .reader
            .load(move |config| engine.reload(config))
            .await;
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
                    message: why.clone(),
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
    /// use slidewin_server::{Bounds, Config, Engine, Metrics, Service};
    /// let config = Config::parse(slidewin_server::EXAMPLE_CONFIG, "example.yaml")?;
    /// let engine = Engine::new(slidewin_http::Memory::new(), config, Arc::new(slidewin::time::MonotonicClock), Bounds::default(), Metrics::new())?;
    /// let service = Service::new(engine, vec![]);
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

    /// The HTTP API: `POST /json`, `GET /healthz`, and unless `admin` is false, `GET
    /// /api/config`, `GET /api/stats`, `GET /metrics` and the dashboard, which require the
    /// admin token if the service has one ([`Service::with_admin_token`]), and otherwise
    /// answer only loopback hosts and [`Service::with_admin_hosts`]'s. `POST /json` takes
    /// `content-type: application/json` only (else `415`): no web page can send that without
    /// the browser asking first (a CORS preflight, which is not answered).
    pub fn router(&self, admin: bool) -> Router {
        let api = Router::new()
            .route("/json", post(json::<B>))
            .route("/healthz", get(health::<B>))
            .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
            .with_state(self.clone());
        if !admin {
            return api;
        }
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
            Some(token) => api.merge(token.protect(admin)),
            None => api.merge(self.admin_hosts.protect(admin)),
        }
    }
}

impl<B: ServiceBackend> SnapshotSource for Service<B> {
    fn snapshot(&self) -> Snapshot {
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
                kind: backend.kind().to_owned(),
                state: state.to_owned(),
                failure_policy: backend.failure_policy().map(str::to_owned),
                errors_total: engine.metrics().backend_errors(),
            },
            top_denied: engine.top_denied(),
            ..Snapshot::default()
        };
        snapshot.show(engine.busiest_rules(crate::snapshot::MAX_SHOWN_RULES));
        snapshot
    }

    /// Each load, taken or failed, adds one to the version or to the errors; the store's
    /// state is the low two bits.
    fn generation(&self) -> u64 {
        let loads = *self.inner.tally.borrow();
        let state = match self.inner.engine.backend().state() {
            "up" => 0,
            "probing" => 1,
            _ => 2,
        };
        loads.version.wrapping_add(loads.errors) << 2 | state
    }
}

// ---- HTTP ----

/// `POST /json`'s body: envoy's `RateLimitRequest` in protobuf's JSON mapping (either
/// spelling of a field, as protobuf's JSON parsers take).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRequest {
    domain: String,
    #[serde(default)]
    descriptors: Vec<JsonDescriptor>,
    #[serde(default, alias = "hitsAddend", deserialize_with = "json_u64")]
    hits_addend: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonDescriptor {
    #[serde(default)]
    entries: Vec<JsonEntry>,
    #[serde(default, alias = "hitsAddend", deserialize_with = "json_opt_u64")]
    hits_addend: Option<u64>,
    #[serde(default)]
    limit: Option<JsonLimitOverride>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonLimitOverride {
    #[serde(alias = "requestsPerUnit")]
    requests_per_unit: u32,
    unit: JsonUnit,
}

/// A unit as protobuf's JSON names it (`SECOND`), or as our config does (`second`).
struct JsonUnit(Unit);

impl<'de> Deserialize<'de> for JsonUnit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<JsonUnit, D::Error> {
        let text = String::deserialize(d)?;
        Unit::from_name(&text).map(JsonUnit).ok_or_else(|| {
            serde::de::Error::custom(format_args!(
                "unknown unit `{text}`: expected SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR"
            ))
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonEntry {
    key: String,
    #[serde(default)]
    value: String,
}

/// protobuf's JSON writes 64-bit integers as strings, and takes numbers too.
#[derive(Deserialize)]
#[serde(untagged)]
enum JsonInt {
    Number(u64),
    Text(String),
}

fn json_u64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match JsonInt::deserialize(d)? {
        JsonInt::Number(n) => Ok(n),
        JsonInt::Text(text) => text.parse().map_err(|_| {
            serde::de::Error::custom(format_args!("`{text}` is not an unsigned 64-bit integer"))
        }),
    }
}

fn json_opt_u64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    json_u64(d).map(Some)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonResponse {
    overall_code: &'static str,
    statuses: Vec<JsonStatus>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    response_headers_to_add: Vec<JsonHeader>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonStatus {
    code: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    current_limit: Option<JsonLimit>,
    #[serde(skip_serializing_if = "is_zero")]
    limit_remaining: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_until_reset: Option<String>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's signature
fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonLimit {
    name: String,
    requests_per_unit: u32,
    unit: &'static str,
}

#[derive(Serialize)]
struct JsonHeader {
    key: String,
    value: String,
}

/// An entry, from either interface's owned strings.
fn entry(key: String, value: String) -> Entry {
    Entry { key, value }
}

fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::OverLimit => "OVER_LIMIT",
    }
}

/// A duration as protobuf's JSON writes one: seconds, with up to nine decimals, and `s`.
fn json_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        let text = format!("{}.{:09}", d.as_secs(), d.subsec_nanos());
        format!("{}s", text.trim_end_matches('0'))
    }
}

fn json_status(status: &DescriptorStatus) -> JsonStatus {
    JsonStatus {
        code: code_name(status.code),
        current_limit: status.current_limit.as_ref().map(|limit| JsonLimit {
            name: limit.name.clone(),
            requests_per_unit: limit.requests_per_unit,
            unit: limit.unit.map_or("UNKNOWN", |u| unit_upper(u.name())),
        }),
        limit_remaining: status.limit_remaining,
        duration_until_reset: status.duration_until_reset.map(json_duration),
    }
}

fn unit_upper(name: &str) -> &'static str {
    match name {
        "second" => "SECOND",
        "minute" => "MINUTE",
        "hour" => "HOUR",
        "day" => "DAY",
        "week" => "WEEK",
        "month" => "MONTH",
        "year" => "YEAR",
        _ => "UNKNOWN",
    }
}

fn problem(status: StatusCode, detail: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::json!({ "error": detail }).to_string(),
    )
        .into_response()
}

/// A body over [`MAX_BODY_BYTES`]: 413, naming the bound.
fn too_large(declared: Option<u64>) -> Response {
    let what = declared.map_or_else(
        || "the request body is too large".to_owned(),
        |len| format!("the request body of {len} bytes is too large"),
    );
    problem(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("{what}: at most {MAX_BODY_BYTES} bytes"),
    )
}

async fn json<B: ServiceBackend>(
    State(service): State<Service<B>>,
    request: axum::extract::Request,
) -> Response {
    use axum::extract::FromRequest;
    // Before anything is read or counted: a web page's form or `text/plain` post counts nothing.
    if let Err(why) = crate::access::json_content_type(request.headers()) {
        return problem(StatusCode::UNSUPPORTED_MEDIA_TYPE, &why);
    }
    // A declared length over the bound is refused on the headers alone: reading the body
    // first (as the `Bytes` extractor does, up to the bound) would wait for a client that
    // may never send it, and read a megabyte to refuse it anyway.
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
        return too_large(declared);
    }
    // Chunked: read up to the bound (the router's `DefaultBodyLimit`), and no further.
    let body = match axum::body::Bytes::from_request(request, &()).await {
        Ok(body) => body,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return too_large(None);
        }
        Err(rejection) => {
            // Past the bound on the bytes of bodies in flight: the service is busy, not the
            // client wrong.
            if let Some(full) = crate::serve::bodies_full(&rejection) {
                return problem(StatusCode::SERVICE_UNAVAILABLE, &full.to_string());
            }
            return rejection.into_response();
        }
    };
    let request: JsonRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => return problem(StatusCode::BAD_REQUEST, &format!("invalid request: {e}")),
    };
    let request = RateLimitRequest {
        domain: request.domain,
        descriptors: request
            .descriptors
            .into_iter()
            .map(|d| RequestDescriptor {
                entries: d
                    .entries
                    .into_iter()
                    .map(|e| entry(e.key, e.value))
                    .collect(),
                hits_addend: d.hits_addend,
                limit: d.limit.map(|l| LimitOverride {
                    requests_per_unit: l.requests_per_unit,
                    unit: l.unit.0,
                }),
            })
            .collect(),
        hits_addend: request.hits_addend,
    };
    match service.engine().should_rate_limit(&request).await {
        Ok(response) => json_answer(&response),
        Err(e) if e.is_invalid_argument() => problem(StatusCode::BAD_REQUEST, &e.to_string()),
        Err(e) => problem(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}

fn json_answer(response: &RateLimitResponse) -> Response {
    let body = JsonResponse {
        overall_code: code_name(response.overall_code),
        statuses: response.statuses.iter().map(json_status).collect(),
        response_headers_to_add: response
            .headers
            .iter()
            .map(|(name, value)| JsonHeader {
                key: name.as_str().to_owned(),
                value: value.to_str().unwrap_or_default().to_owned(),
            })
            .collect(),
    };
    let status = match response.overall_code {
        Code::Ok => StatusCode::OK,
        Code::OverLimit => StatusCode::TOO_MANY_REQUESTS,
    };
    let mut answer = (status, Json(body)).into_response();
    for (name, value) in &response.headers {
        answer.headers_mut().append(name.clone(), value.clone());
    }
    answer
}

/// `GET /healthz`: 200 `OK` while the service decides with its store; 503 with the reason
/// while it is stopping or its store does not answer (a failure policy may still be answering
/// for it: the service is up, but not ready).
async fn health<B: ServiceBackend>(State(service): State<Service<B>>) -> Response {
    let unready = |why: String| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::CACHE_CONTROL, "no-store")],
            format!("not ready: {why}\n"),
        )
            .into_response()
    };
    if service.is_draining() {
        return unready("draining (the service is stopping)".to_owned());
    }
    let backend = service.engine().backend();
    match backend.state() {
        "up" => ([(header::CACHE_CONTROL, "no-store")], "OK\n").into_response(),
        state => unready(match backend.failure_policy() {
            Some(policy) => format!(
                "the {} backend is {state}; answering by the failure policy ({policy})",
                backend.kind()
            ),
            None => format!("the {} backend is {state}", backend.kind()),
        }),
    }
}

async fn api_config<B: ServiceBackend>(State(service): State<Service<B>>) -> Response {
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
async fn metrics<B: ServiceBackend>(State(service): State<Service<B>>) -> Response {
    let engine = service.engine();
    engine.metrics().set_backend_state(engine.backend().state());
    if let Some((used, max)) = engine.backend().memory() {
        engine.metrics().set_memory(used, max);
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        engine.metrics().encode(),
    )
        .into_response()
}

// ---- gRPC ----

pub(crate) mod grpc {
    use envoy_types::pb::envoy::config::core::v3::HeaderValue as PbHeader;
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
        Code as PbCode, DescriptorStatus as PbStatus, RateLimit as PbLimit,
        rate_limit::Unit as PbUnit,
    };
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
    use envoy_types::pb::envoy::service::ratelimit::v3::{
        RateLimitRequest as PbRequest, RateLimitResponse as PbResponse,
    };
    use envoy_types::pb::google::protobuf::Duration as PbDuration;

    use std::convert::Infallible;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context, Poll};

    use tonic::Status;
    use tonic::codec::{DecodeBuf, EncodeBuf};

    use super::{
        Code, LimitOverride, MAX_BODY_BYTES, RateLimitRequest, RequestDescriptor, RequestError,
        Service,
    };
    use crate::backend::ServiceBackend;
    use crate::config::Unit;
    use crate::serve::GrpcRequest;

    /// Envoy's `RateLimitService` on a [`Service`].
    struct Grpc<B: ServiceBackend> {
        service: Service<B>,
    }

    /// The one method's path.
    const SHOULD_RATE_LIMIT: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

    /// Envoy's RLS as a tower service of HTTP/2 requests: `ShouldRateLimit` through tonic's
    /// unary machinery with [`Codec`], any other path `UNIMPLEMENTED`. (The generated
    /// `RateLimitServiceServer` does the same with tonic-prost's codec, which answers a
    /// message that does not decode with `INTERNAL`.)
    pub(crate) struct Rls<B: ServiceBackend>(Arc<Grpc<B>>);

    impl<B: ServiceBackend> Rls<B> {
        pub(crate) fn new(service: Service<B>) -> Rls<B> {
            Rls(Arc::new(Grpc { service }))
        }
    }

    impl<B: ServiceBackend> Clone for Rls<B> {
        fn clone(&self) -> Rls<B> {
            Rls(Arc::clone(&self.0))
        }
    }

    type Answer = http::Response<tonic::body::Body>;
    type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

    impl<B: ServiceBackend> tower::Service<GrpcRequest> for Rls<B> {
        type Response = Answer;
        type Error = Infallible;
        type Future = Boxed<Result<Answer, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: GrpcRequest) -> Self::Future {
            if request.uri().path() != SHOULD_RATE_LIMIT {
                let status = Status::unimplemented(format!(
                    "{}: this service answers only {SHOULD_RATE_LIMIT}",
                    request.uri().path()
                ));
                return Box::pin(async move { Ok(status.into_http()) });
            }
            let method = Method(Arc::clone(&self.0));
            Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(Codec)
                    .apply_max_message_size_config(Some(MAX_BODY_BYTES), None);
                Ok(grpc.unary(method, request).await)
            })
        }
    }

    /// `ShouldRateLimit`, as tonic's unary machinery calls it.
    struct Method<B: ServiceBackend>(Arc<Grpc<B>>);

    impl<B: ServiceBackend> tonic::server::UnaryService<PbRequest> for Method<B> {
        type Response = PbResponse;
        type Future = Boxed<Result<tonic::Response<PbResponse>, Status>>;

        fn call(&mut self, request: tonic::Request<PbRequest>) -> Self::Future {
            let grpc = Arc::clone(&self.0);
            Box::pin(async move { grpc.should_rate_limit(request).await })
        }
    }

    /// Protobuf through prost, where a request that does not decode (a string that is not
    /// UTF-8, a truncated field) is the client's error, `INVALID_ARGUMENT`, with prost's
    /// reason naming the field.
    #[derive(Clone, Copy)]
    struct Codec;

    struct Encoder;

    struct Decoder;

    impl tonic::codec::Codec for Codec {
        type Encode = PbResponse;
        type Decode = PbRequest;
        type Encoder = Encoder;
        type Decoder = Decoder;

        fn encoder(&mut self) -> Encoder {
            Encoder
        }

        fn decoder(&mut self) -> Decoder {
            Decoder
        }
    }

    impl tonic::codec::Encoder for Encoder {
        type Item = PbResponse;
        type Error = Status;

        fn encode(&mut self, item: PbResponse, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
            // The buffer grows as it is written: prost fails only on a full one.
            prost::Message::encode(&item, dst)
                .map_err(|e| Status::internal(format!("cannot encode the answer: {e}")))
        }
    }

    impl tonic::codec::Decoder for Decoder {
        type Item = PbRequest;
        type Error = Status;

        fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<PbRequest>, Status> {
            prost::Message::decode(src)
                .map(Some)
                .map_err(|e| Status::invalid_argument(format!("not a valid RateLimitRequest: {e}")))
        }
    }

    fn pb_unit(unit: Option<Unit>) -> i32 {
        (match unit {
            None => PbUnit::Unknown,
            Some(Unit::Second) => PbUnit::Second,
            Some(Unit::Minute) => PbUnit::Minute,
            Some(Unit::Hour) => PbUnit::Hour,
            Some(Unit::Day) => PbUnit::Day,
            Some(Unit::Week) => PbUnit::Week,
            Some(Unit::Month) => PbUnit::Month,
            Some(Unit::Year) => PbUnit::Year,
        }) as i32
    }

    fn unit_of_pb(unit: i32) -> Option<Unit> {
        match PbUnit::try_from(unit).ok()? {
            PbUnit::Second => Some(Unit::Second),
            PbUnit::Minute => Some(Unit::Minute),
            PbUnit::Hour => Some(Unit::Hour),
            PbUnit::Day => Some(Unit::Day),
            PbUnit::Week => Some(Unit::Week),
            PbUnit::Month => Some(Unit::Month),
            PbUnit::Year => Some(Unit::Year),
            PbUnit::Unknown => None,
        }
    }

    fn pb_code(code: Code) -> i32 {
        (match code {
            Code::Ok => PbCode::Ok,
            Code::OverLimit => PbCode::OverLimit,
        }) as i32
    }

    #[tonic::async_trait]
    impl<B: ServiceBackend> RateLimitService for Grpc<B> {
        async fn should_rate_limit(
            &self,
            request: tonic::Request<PbRequest>,
        ) -> Result<tonic::Response<PbResponse>, Status> {
            let request = request.into_inner();
            if request.descriptors.iter().any(|d| d.is_negative_hits) {
                return Err(Status::invalid_argument(
                    "is_negative_hits is not supported: a sliding window gives nothing back",
                ));
            }
            let mut descriptors = Vec::with_capacity(request.descriptors.len());
            for (i, d) in request.descriptors.into_iter().enumerate() {
                let limit = match d.limit {
                    None => None,
                    Some(limit) => Some(LimitOverride {
                        requests_per_unit: limit.requests_per_unit,
                        unit: unit_of_pb(limit.unit).ok_or_else(|| {
                            Status::invalid_argument(format!(
                                "descriptor {i}'s limit has unit {}: it needs a known unit",
                                limit.unit
                            ))
                        })?,
                    }),
                };
                descriptors.push(RequestDescriptor {
                    entries: d
                        .entries
                        .into_iter()
                        .map(|e| super::entry(e.key, e.value))
                        .collect(),
                    hits_addend: d.hits_addend.map(|h| h.value),
                    limit,
                });
            }
            let ours = RateLimitRequest {
                domain: request.domain,
                hits_addend: u64::from(request.hits_addend),
                descriptors,
            };
            let response = self
                .service
                .engine()
                .should_rate_limit(&ours)
                .await
                .map_err(|e| match e {
                    RequestError::Unavailable { .. } => Status::unavailable(e.to_string()),
                    _ => Status::invalid_argument(e.to_string()),
                })?;
            Ok(tonic::Response::new(PbResponse {
                overall_code: pb_code(response.overall_code),
                statuses: response
                    .statuses
                    .iter()
                    .map(|s| PbStatus {
                        code: pb_code(s.code),
                        current_limit: s.current_limit.as_ref().map(|l| PbLimit {
                            name: l.name.clone(),
                            requests_per_unit: l.requests_per_unit,
                            unit: pb_unit(l.unit),
                        }),
                        limit_remaining: s.limit_remaining,
                        duration_until_reset: s.duration_until_reset.map(|d| PbDuration {
                            seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                            nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
                        }),
                        ..Default::default()
                    })
                    .collect(),
                response_headers_to_add: response
                    .headers
                    .iter()
                    .map(|(name, value)| PbHeader {
                        key: name.as_str().to_owned(),
                        value: value.to_str().unwrap_or_default().to_owned(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }))
        }
    }
}
