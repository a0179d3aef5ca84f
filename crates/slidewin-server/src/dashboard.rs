//! The live dashboard: `GET /`, its embedded assets, and `GET /api/events` (server-sent events).
//!
//! The page, its scripts, its stylesheet and the chart library (uPlot, vendored under
//! `assets/vendor/`) are compiled into the binary: the dashboard works with no network. The
//! page asks for everything by relative URL, so the router may be nested under a prefix.
//!
//! `GET /api/events` sends one [`Snapshot`](crate::Snapshot) as JSON at once, then one a
//! second. At most [`MAX_EVENT_STREAMS`] streams are open at once; the next request gets
//! `503 Endpoints Unavailable` until one closes. The streams share one snapshot a second, built
//! and serialised once ([`Feed`]).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::stream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

#[cfg(test)]
use crate::snapshot::SnapshotSource;
use crate::snapshot::feed::{Feed, Latest, Looking};

/// At most this many `GET /api/events` streams are open at once; the next request gets 503.
pub(crate) const MAX_EVENT_STREAMS: usize = 32;

/// A comment line this often when no event went out, so proxies keep the stream open.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(15);

/// What the browser may keep, for files whose URL names their version: a year, unchanged.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// What the browser may keep, for files that change with the binary: ask each time (the
/// `ETag` makes the answer a short `304`).
const REVALIDATE: &str = "no-cache";

/// The page: only its own scripts, styles and event stream; no frames, no forms.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// The version of the vendored uPlot (`assets/vendor/uplot-<version>/`); its assets' names carry
/// it, so a browser may keep them for good. `index.html` names them too.
macro_rules! uplot_version {
    () => {
        "1.6.32"
    };
}

/// The page.
const INDEX_HTML: &str = include_str!("../assets/index.html");

/// One embedded file.
struct Asset {
    /// Its name under `/assets/`.
    name: &'static str,
    /// Its bytes.
    body: &'static [u8],
    /// Its `content-type`.
    content_type: &'static str,
    /// Its `cache-control`.
    cache_control: &'static str,
}

/// Every file under `/assets/`: a name not in this table is a 404, so no path reaches the disk.
const ASSETS: &[Asset] = &[
    Asset {
        name: "dashboard.js",
        body: include_bytes!("../assets/dashboard.js"),
        content_type: "text/javascript; charset=utf-8",
        cache_control: REVALIDATE,
    },
    Asset {
        name: "charts.js",
        body: include_bytes!("../assets/charts.js"),
        content_type: "text/javascript; charset=utf-8",
        cache_control: REVALIDATE,
    },
    Asset {
        name: "dashboard.css",
        body: include_bytes!("../assets/dashboard.css"),
        content_type: "text/css; charset=utf-8",
        cache_control: REVALIDATE,
    },
    Asset {
        name: concat!("uplot-", uplot_version!(), ".min.js"),
        body: include_bytes!(concat!(
            "../assets/vendor/uplot-",
            uplot_version!(),
            "/uPlot.iife.min.js"
        )),
        content_type: "text/javascript; charset=utf-8",
        cache_control: IMMUTABLE,
    },
    Asset {
        name: concat!("uplot-", uplot_version!(), ".min.css"),
        body: include_bytes!(concat!(
            "../assets/vendor/uplot-",
            uplot_version!(),
            "/uPlot.min.css"
        )),
        content_type: "text/css; charset=utf-8",
        cache_control: IMMUTABLE,
    },
    Asset {
        name: concat!("uplot-", uplot_version!(), ".LICENSE.txt"),
        body: include_bytes!(concat!(
            "../assets/vendor/uplot-",
            uplot_version!(),
            "/LICENSE"
        )),
        content_type: "text/plain; charset=utf-8",
        cache_control: IMMUTABLE,
    },
];

/// What the handlers share.
struct Dashboard {
    /// The snapshots, one a tick while a stream is open, shared by every stream.
    feed: Arc<Feed>,
    /// One permit per open event stream.
    streams: Arc<Semaphore>,
    /// Turns `true` when the service stops: every event stream ends then.
    stop: watch::Receiver<bool>,
}

/// The dashboard's routes: `GET /` (the page), `GET /assets/{name}` (its embedded files) and
/// `GET /api/events` (a snapshot of `source` at once, then one a second, as server-sent
/// events; at most 32 streams at once, the next gets 503).
///
/// Its streams share one snapshot a second, built off the async workers, and only while a
/// stream is open: however many watch, `source` is asked once a second at most.
///
/// Every event stream ends, and a new one is refused (503), once `stop` is `true`: a stop
/// never waits for a dashboard left open.
///
/// The tests serve it over a fake source; the service builds its own with [`dashboard_on`],
/// on the feed `/api/stats` shares.
#[cfg(test)]
pub(crate) fn dashboard_router(
    source: Arc<dyn SnapshotSource>,
    stop: watch::Receiver<bool>,
) -> Router {
    dashboard_on(Feed::new(source, stop.clone()), stop)
}

/// The dashboard's routes on `feed`, which `/api/stats` shares.
pub(crate) fn dashboard_on(feed: Arc<Feed>, stop: watch::Receiver<bool>) -> Router {
    let state = Arc::new(Dashboard {
        feed,
        streams: Arc::new(Semaphore::new(MAX_EVENT_STREAMS)),
        stop,
    });
    Router::new()
        .route("/", get(index))
        .route("/assets/{name}", get(asset))
        .route("/api/events", get(events))
        .with_state(state)
}

/// `GET /`: the page.
async fn index(request_headers: HeaderMap) -> Response {
    let mut response = cached(
        &request_headers,
        INDEX_HTML.as_bytes(),
        "text/html; charset=utf-8",
        REVALIDATE,
    );
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// `GET /assets/{name}`: an embedded file, or 404.
async fn asset(Path(name): Path<String>, request_headers: HeaderMap) -> Response {
    match ASSETS.iter().find(|asset| asset.name == name) {
        Some(asset) => cached(
            &request_headers,
            asset.body,
            asset.content_type,
            asset.cache_control,
        ),
        None => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "no such dashboard asset\n",
        )
            .into_response(),
    }
}

/// A static body with its type, caching and `ETag`; `304` when the browser has it already.
fn cached(
    request_headers: &HeaderMap,
    body: &'static [u8],
    content_type: &'static str,
    cache_control: &'static str,
) -> Response {
    let etag = format!("\"{:016x}\"", fnv1a(body));
    let fresh = request_headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|tag| tag.trim().trim_start_matches("W/"))
        .any(|tag| tag == etag || tag == "*");
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (
            header::CACHE_CONTROL,
            HeaderValue::from_static(cache_control),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::ETAG,
            HeaderValue::from_str(&etag).unwrap_or(HeaderValue::from_static("\"0\"")),
        ),
    ];
    if fresh {
        (StatusCode::NOT_MODIFIED, headers).into_response()
    } else {
        (headers, body).into_response()
    }
}

/// The 64-bit FNV-1a hash: the assets' `ETag`s (they change only with the binary).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `GET /api/events`: the snapshot of this tick at once, then each one built, while a permit
/// is free. Every stream sends the same bytes: the [`Feed`]'s.
async fn events(State(dashboard): State<Arc<Dashboard>>) -> Response {
    if *dashboard.stop.borrow() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "the service is stopping\n",
        )
            .into_response();
    }
    let Ok(permit) = Arc::clone(&dashboard.streams).try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [
                (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
                (header::RETRY_AFTER, "5"),
            ],
            format!(
                "too many dashboard event streams are open (at most {MAX_EVENT_STREAMS}); \
                 close a dashboard or try again later\n"
            ),
        )
            .into_response();
    };
    let reader = Reader {
        latest: dashboard.feed.subscribe(),
        // The stream counts as looking from now until its body is dropped (the client left),
        // and its permit goes back then.
        _looking: dashboard.feed.look(),
        _permit: permit,
        feed: Arc::clone(&dashboard.feed),
        first: true,
    };
    // The stream ends when the service stops, so the connection's graceful close can finish.
    let events = stream::unfold(
        (reader, dashboard.stop.clone()),
        |(mut reader, mut stop)| async move {
            let event = tokio::select! {
                biased;
                _ = stop.wait_for(|stop| *stop) => None,
                event = reader.next() => event,
            }?;
            Some((Ok::<_, Infallible>(event), (reader, stop)))
        },
    );
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
            // nginx would otherwise buffer the stream.
            (HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        Body::from_stream(events),
    )
        .into_response()
}

/// One event stream's place in the feed.
struct Reader {
    feed: Arc<Feed>,
    /// The frames published; marks those sent.
    latest: Latest,
    /// Whether nothing was sent yet.
    first: bool,
    _looking: Looking,
    _permit: OwnedSemaphorePermit,
}

impl Reader {
    /// The next event: the frame of this tick first, then each new one (a client that reads
    /// slowly gets the latest, never a backlog), or a comment line when none came for a
    /// while, so that proxies keep the stream open.
    async fn next(&mut self) -> Option<Bytes> {
        if std::mem::take(&mut self.first) {
            return Some(self.feed.current(&mut self.latest).await.event.clone());
        }
        match tokio::time::timeout(KEEP_ALIVE_INTERVAL, self.latest.changed()).await {
            Err(_) => Some(Bytes::from_static(b":\n\n")),
            // The sender is in the feed, which this reader holds: it never closes.
            Ok(Err(_)) => None,
            Ok(Ok(())) => Some(
                self.latest
                    .borrow_and_update()
                    .as_ref()
                    .map_or_else(|| Bytes::from_static(b":\n\n"), |frame| frame.event.clone()),
            ),
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod browser_tests;
