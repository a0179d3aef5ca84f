//! The live dashboard: `GET /`, its embedded assets, and `GET /api/events` (server-sent events).
//!
//! The page, its script, its stylesheet and the chart library (uPlot, vendored under
//! `assets/vendor/`) are compiled into the binary: the dashboard works with no network. The
//! page asks for everything by relative URL, so the router may be nested under a prefix.
//!
//! `GET /api/events` sends one [`Snapshot`](crate::Snapshot) as JSON at once, then one a
//! second. At most [`MAX_EVENT_STREAMS`] streams are open at once; the next request gets
//! `503 Service Unavailable` until one closes.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::stream;
use tokio::sync::{Semaphore, watch};
use tokio::time::MissedTickBehavior;

use crate::SnapshotSource;

/// At most this many `GET /api/events` streams are open at once; the next request gets 503.
pub(crate) const MAX_EVENT_STREAMS: usize = 32;

/// How often `GET /api/events` sends a snapshot.
const EVENT_INTERVAL: Duration = Duration::from_secs(1);

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
    /// Where the snapshots come from.
    source: Arc<dyn SnapshotSource>,
    /// One permit per open event stream.
    streams: Arc<Semaphore>,
    /// Turns `true` when the service stops: every event stream ends then.
    stop: watch::Receiver<bool>,
}

/// The dashboard's routes: `GET /` (the page), `GET /assets/{name}` (its embedded files) and
/// `GET /api/events` (a snapshot of `source` at once, then one a second, as server-sent
/// events; at most 32 streams at once, the next gets 503).
///
/// Every event stream ends, and a new one is refused (503), once `stop` is `true`: a stop
/// never waits for a dashboard left open.
///
/// Merge it into the service's router, or nest it under a prefix ending in `/`.
pub fn dashboard_router(source: Arc<dyn SnapshotSource>, stop: watch::Receiver<bool>) -> Router {
    let state = Arc::new(Dashboard {
        source,
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

/// `GET /api/events`: a snapshot at once, then one a second, while a permit is free.
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
    let mut ticks = tokio::time::interval(EVENT_INTERVAL);
    // A client that reads slowly gets the latest snapshot, not a burst of stale ones.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let source = Arc::clone(&dashboard.source);
    // The permit lives in the stream: it goes back when the body is dropped (the client left).
    // The stream ends when the service stops, so the connection's graceful close can finish.
    let snapshots = stream::unfold(
        (ticks, source, permit, dashboard.stop.clone()),
        |(mut ticks, source, permit, mut stop)| async move {
            tokio::select! {
                biased;
                _ = stop.wait_for(|stop| *stop) => return None,
                _ = ticks.tick() => {}
            }
            let event = snapshot_event(source.as_ref());
            Some((
                Ok::<_, std::convert::Infallible>(event),
                (ticks, source, permit, stop),
            ))
        },
    );
    let mut response = Sse::new(snapshots)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE_INTERVAL))
        .into_response();
    // nginx would otherwise buffer the stream.
    response.headers_mut().insert(
        HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    response
}

/// One event: the snapshot as JSON, or (never expected) an `error` event saying why not.
fn snapshot_event(source: &dyn SnapshotSource) -> Event {
    let snapshot = source.snapshot();
    Event::default()
        .json_data(&snapshot)
        .unwrap_or_else(|error| {
            tracing::warn!(%error, "dashboard: a snapshot did not serialize");
            Event::default()
                .event("error")
                .data("the snapshot did not serialize")
        })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicU64, Ordering};

    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    const UPLOT_VERSION: &str = uplot_version!();
    use crate::{ConfigStatus, PerSecond, RuleStats, Snapshot, Totals};

    /// Counts its snapshots; each one's `now_ms` and passed count say which call it was.
    #[derive(Default)]
    struct Fake {
        calls: AtomicU64,
    }

    impl SnapshotSource for Fake {
        fn snapshot(&self) -> Snapshot {
            let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            Snapshot {
                now_ms: 1_700_000_000_000 + call * 1000,
                config: ConfigStatus {
                    version: 7,
                    loaded_at: "2025-01-01T00:00:00Z".into(),
                    ..ConfigStatus::default()
                },
                rules: vec![RuleStats {
                    domain: "edge".into(),
                    name: "per_ip".into(),
                    quota: "10 per 1s".into(),
                    algorithm: "sliding_log".into(),
                    per_second: PerSecond {
                        passed: vec![call; 60],
                        denied: vec![0; 60],
                        shadow_denied: vec![0; 60],
                    },
                    last_minute: Totals {
                        passed: call * 60,
                        denied: 0,
                        shadow_denied: 0,
                    },
                    ..RuleStats::default()
                }],
                ..Snapshot::default()
            }
        }
    }

    /// The dashboard on a fake source, and the stop it watches (kept open by the sender).
    fn router_with_stop() -> (Router, Arc<Fake>, watch::Sender<bool>) {
        let fake = Arc::new(Fake::default());
        let stop = watch::Sender::new(false);
        (dashboard_router(fake.clone(), stop.subscribe()), fake, stop)
    }

    fn router() -> (Router, Arc<Fake>) {
        let (router, fake, stop) = router_with_stop();
        // Never stopped: the sender lives as long as the test's runtime.
        std::mem::forget(stop);
        (router, fake)
    }

    fn get(uri: &str) -> Request<Body> {
        Request::get(uri).body(Body::empty()).expect("a request")
    }

    fn header(response: &Response, name: HeaderName) -> &str {
        response
            .headers()
            .get(&name)
            .unwrap_or_else(|| panic!("no {name} header"))
            .to_str()
            .expect("an ASCII header")
    }

    async fn body_bytes(response: Response) -> Vec<u8> {
        response
            .into_body()
            .collect()
            .await
            .expect("a body")
            .to_bytes()
            .to_vec()
    }

    /// The next data frame of an event stream, as text.
    async fn next_frame(body: &mut Body) -> String {
        loop {
            let frame = body
                .frame()
                .await
                .expect("the stream is still open")
                .expect("a frame, not an error");
            if let Ok(data) = frame.into_data() {
                return String::from_utf8(data.to_vec()).expect("UTF-8");
            }
        }
    }

    #[tokio::test]
    async fn the_page_is_html_and_names_only_embedded_assets() {
        let (router, _) = router();
        let response = router.oneshot(get("/")).await.expect("infallible");
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            header(&response, header::CONTENT_TYPE),
            "text/html; charset=utf-8"
        );
        assert!(header(&response, header::CONTENT_SECURITY_POLICY).contains("script-src 'self'"));
        let body = String::from_utf8(body_bytes(response).await).expect("UTF-8");
        assert!(body.starts_with("<!doctype html>"));
        // Every `assets/…` the page names is served, and every asset served is named: a
        // renamed file or a new uPlot cannot leave the page asking for a 404.
        let named: BTreeSet<&str> = body
            .split("\"assets/")
            .skip(1)
            .map(|rest| rest.split('"').next().expect("a closing quote"))
            .collect();
        let served: BTreeSet<&str> = ASSETS.iter().map(|asset| asset.name).collect();
        assert_eq!(named, served);
        // Nothing from the network: no absolute URL in a src or href.
        assert!(!body.contains("src=\"http") && !body.contains("href=\"http"));
    }

    #[tokio::test]
    async fn every_asset_is_served_with_its_type_and_caching() {
        let (router, _) = router();
        for asset in ASSETS {
            let uri = format!("/assets/{}", asset.name);
            let response = router.clone().oneshot(get(&uri)).await.expect("infallible");
            assert_eq!(response.status(), StatusCode::OK, "{uri}");
            assert_eq!(
                header(&response, header::CONTENT_TYPE),
                asset.content_type,
                "{uri}"
            );
            assert_eq!(
                header(&response, header::CACHE_CONTROL),
                asset.cache_control,
                "{uri}"
            );
            assert_eq!(header(&response, header::X_CONTENT_TYPE_OPTIONS), "nosniff");
            let body = body_bytes(response).await;
            assert!(!body.is_empty(), "{uri}");
            assert_eq!(body, asset.body, "{uri}");
        }
        let versioned: Vec<&str> = ASSETS
            .iter()
            .filter(|asset| asset.cache_control == IMMUTABLE)
            .map(|asset| asset.name)
            .collect();
        assert!(
            versioned.iter().all(|name| name.contains(UPLOT_VERSION)),
            "only versioned names may be cached for good: {versioned:?}"
        );
        let js = ASSETS
            .iter()
            .find(|asset| asset.name.ends_with(".min.js"))
            .expect("uPlot");
        assert!(js.body.starts_with(
            format!("/*! https://github.com/leeoniya/uPlot (v{UPLOT_VERSION})").as_bytes()
        ));
    }

    #[tokio::test]
    async fn an_unchanged_asset_is_a_304() {
        let (router, _) = router();
        let first = router
            .clone()
            .oneshot(get("/assets/dashboard.js"))
            .await
            .expect("infallible");
        let etag = header(&first, header::ETAG).to_string();
        let again = Request::get("/assets/dashboard.js")
            .header(header::IF_NONE_MATCH, format!("W/\"other\", {etag}"))
            .body(Body::empty())
            .expect("a request");
        let second = router.oneshot(again).await.expect("infallible");
        assert_eq!(second.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(header(&second, header::ETAG), etag);
        assert!(body_bytes(second).await.is_empty());
    }

    #[tokio::test]
    async fn unknown_assets_are_404_and_paths_reach_no_file() {
        let (router, _) = router();
        for uri in [
            "/assets/nope.js",
            "/assets/Dashboard.js",
            "/assets/..%2F..%2FCargo.toml",
            "/assets/..%2Fsrc%2Fdashboard.rs",
            "/assets/vendor/uplot-1.6.32/LICENSE",
            "/assets/",
        ] {
            let response = router.clone().oneshot(get(uri)).await.expect("infallible");
            assert_eq!(response.status(), StatusCode::NOT_FOUND, "{uri}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn events_send_a_snapshot_at_once_then_one_a_second() {
        let (router, fake) = router();
        let start = tokio::time::Instant::now();
        let response = router
            .oneshot(get("/api/events"))
            .await
            .expect("infallible");
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(header(&response, header::CONTENT_TYPE), "text/event-stream");
        let mut body = response.into_body();

        let first = next_frame(&mut body).await;
        let expected = serde_json::to_string(&Fake::default().snapshot()).expect("JSON");
        assert_eq!(first, format!("data: {expected}\n\n"));
        assert_eq!(
            tokio::time::Instant::now(),
            start,
            "the first comes at once"
        );

        // Paused time runs ahead to the next timer: the interval's, a second on.
        let second = next_frame(&mut body).await;
        assert!(
            second.starts_with("data: {\"now_ms\":1700000002000,"),
            "{second}"
        );
        assert_eq!(start.elapsed(), EVENT_INTERVAL);
        let third = next_frame(&mut body).await;
        assert!(
            third.contains("\"last_minute\":{\"passed\":180,"),
            "{third}"
        );
        assert_eq!(start.elapsed(), 2 * EVENT_INTERVAL);
        assert_eq!(fake.calls.load(Ordering::SeqCst), 3);
    }

    /// Issue 29: a dashboard tab left open kept `slidewin serve` running 70 s after SIGTERM.
    #[tokio::test(start_paused = true)]
    async fn hostile_29_event_streams_end_when_the_service_stops() {
        let (router, _, stop) = router_with_stop();
        let response = router
            .clone()
            .oneshot(get("/api/events"))
            .await
            .expect("infallible");
        let mut body = response.into_body();
        assert!(next_frame(&mut body).await.starts_with("data: "));
        let stopped_at = tokio::time::Instant::now();
        stop.send_replace(true);
        // The body ends, at once, with no further snapshot.
        let end = body.frame().await;
        assert!(end.is_none(), "the stream ends: {end:?}");
        assert_eq!(tokio::time::Instant::now(), stopped_at);
        let refused = router
            .oneshot(get("/api/events"))
            .await
            .expect("infallible");
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    }

    #[tokio::test]
    async fn the_33rd_stream_is_refused_until_one_closes() {
        let (router, _) = router();
        let mut open = Vec::new();
        for _ in 0..MAX_EVENT_STREAMS {
            let response = router
                .clone()
                .oneshot(get("/api/events"))
                .await
                .expect("infallible");
            assert_eq!(response.status(), StatusCode::OK);
            open.push(response);
        }
        let refused = router
            .clone()
            .oneshot(get("/api/events"))
            .await
            .expect("infallible");
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            header(&refused, header::CONTENT_TYPE),
            "text/plain; charset=utf-8"
        );
        let why = String::from_utf8(body_bytes(refused).await).expect("UTF-8");
        assert!(why.contains("too many dashboard event streams"), "{why}");
        assert!(why.contains("32"), "{why}");

        // A client leaves: its body is dropped, its permit comes back.
        drop(open.pop());
        let again = router
            .oneshot(get("/api/events"))
            .await
            .expect("infallible");
        assert_eq!(again.status(), StatusCode::OK);
    }
}
