//! The live dashboard: `GET /`, its embedded assets, and `GET /api/events` (server-sent events).
//!
//! The page, its script, its stylesheet and the chart library (uPlot, vendored under
//! `assets/vendor/`) are compiled into the binary: the dashboard works with no network. The
//! page asks for everything by relative URL, so the router may be nested under a prefix.
//!
//! `GET /api/events` sends one [`Snapshot`](crate::Snapshot) as JSON at once, then one a
//! second. At most [`MAX_EVENT_STREAMS`] streams are open at once; the next request gets
//! `503 Service Unavailable` until one closes. The streams share one snapshot a second, built
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

use crate::SnapshotSource;
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
/// Merge it into the service's router, or nest it under a prefix ending in `/`.
pub fn dashboard_router(source: Arc<dyn SnapshotSource>, stop: watch::Receiver<bool>) -> Router {
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
mod tests {
    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicU64, Ordering};

    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    const UPLOT_VERSION: &str = uplot_version!();
    use crate::snapshot::feed::{TICK, stats_answer};
    use crate::{ConfigStatus, PerSecond, RuleStats, Snapshot, Totals};

    /// Counts its snapshots; each one's `now_ms` and passed count say which call it was.
    #[derive(Default)]
    struct Fake {
        calls: AtomicU64,
        /// The threads its snapshots were taken on.
        threads: std::sync::Mutex<Vec<std::thread::ThreadId>>,
        /// Its generation: a test's reload.
        generation: AtomicU64,
    }

    impl SnapshotSource for Fake {
        fn generation(&self) -> u64 {
            self.generation.load(Ordering::SeqCst)
        }

        fn snapshot(&self) -> Snapshot {
            let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            self.threads
                .lock()
                .expect("not poisoned")
                .push(std::thread::current().id());
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

    /// The dashboard on a fake source, with the feed `/api/stats` would share, and its stop.
    fn router_with_feed() -> (Router, Arc<Fake>, Arc<Feed>, watch::Sender<bool>) {
        let fake = Arc::new(Fake::default());
        let stop = watch::Sender::new(false);
        let feed = Feed::new(fake.clone(), stop.subscribe());
        let router = dashboard_on(Arc::clone(&feed), stop.subscribe());
        (router, fake, feed, stop)
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
        assert_eq!(start.elapsed(), TICK);
        let third = next_frame(&mut body).await;
        assert!(
            third.contains("\"last_minute\":{\"passed\":180,"),
            "{third}"
        );
        assert_eq!(start.elapsed(), 2 * TICK);
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

    /// Opens `n` event streams and reads the first event of each.
    async fn open_streams(router: &Router, n: usize) -> Vec<(Body, String)> {
        let mut streams = Vec::new();
        for _ in 0..n {
            let response = router
                .clone()
                .oneshot(get("/api/events"))
                .await
                .expect("infallible");
            assert_eq!(response.status(), StatusCode::OK);
            let mut body = response.into_body();
            let first = next_frame(&mut body).await;
            streams.push((body, first));
        }
        streams
    }

    /// Issue 29: 32 streams on 4,000 rules each built their own snapshot every second, on
    /// the workers that answer checks.
    #[tokio::test(start_paused = true)]
    async fn hostile_29_thirty_two_streams_share_one_build_a_tick_off_the_workers() {
        let (router, fake) = router();
        let start = tokio::time::Instant::now();
        let mut streams = open_streams(&router, MAX_EVENT_STREAMS).await;
        assert_eq!(fake.calls.load(Ordering::SeqCst), 1, "one build for all");
        assert!(streams.iter().all(|(_, first)| *first == streams[0].1));
        for tick in 1..=3u32 {
            let mut events = Vec::new();
            for (body, _) in &mut streams {
                events.push(next_frame(body).await);
            }
            assert_eq!(start.elapsed(), tick * TICK);
            assert_eq!(fake.calls.load(Ordering::SeqCst), u64::from(tick) + 1);
            assert!(events.iter().all(|event| *event == events[0]), "{events:?}");
            let now_ms = 1_700_000_000_000 + (u64::from(tick) + 1) * 1000;
            assert!(events[0].starts_with(&format!("data: {{\"now_ms\":{now_ms},")));
        }
        // This test's runtime has one thread, which answers every request: no build ran there.
        let worker = std::thread::current().id();
        let threads = fake.threads.lock().expect("not poisoned");
        assert_eq!(threads.len(), 4);
        assert!(threads.iter().all(|thread| *thread != worker));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_that_joins_mid_tick_gets_the_current_snapshot() {
        let (router, fake) = router();
        let mut first = open_streams(&router, 1).await.remove(0);
        tokio::time::advance(TICK * 7 / 10).await;
        let mut late = open_streams(&router, 1).await.remove(0);
        assert_eq!(late.1, first.1, "the snapshot of this tick, at once");
        assert_eq!(fake.calls.load(Ordering::SeqCst), 1);
        // Then both follow the same ticks.
        let (a, b) = (
            next_frame(&mut first.0).await,
            next_frame(&mut late.0).await,
        );
        assert_eq!(a, b);
        assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
    }

    async fn stats_body(feed: &Arc<Feed>) -> String {
        let response = stats_answer(Arc::clone(feed)).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(header(&response, header::CONTENT_TYPE), "application/json");
        String::from_utf8(body_bytes(response).await).expect("UTF-8")
    }

    #[tokio::test(start_paused = true)]
    async fn api_stats_reuses_the_snapshot_of_this_tick() {
        let (router, fake, feed, _stop) = router_with_feed();
        // Alone, a loop of requests builds one snapshot a tick.
        let first = stats_body(&feed).await;
        for _ in 0..100 {
            assert_eq!(stats_body(&feed).await, first);
        }
        assert_eq!(fake.calls.load(Ordering::SeqCst), 1);
        tokio::time::advance(TICK).await;
        let second = stats_body(&feed).await;
        assert_ne!(second, first, "older than a tick: a new one");
        assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
        // With a stream open, both read the same one: the stream's first event is it.
        let (_body, event) = open_streams(&router, 1).await.remove(0);
        assert_eq!(event, format!("data: {second}\n\n"));
        assert_eq!(stats_body(&feed).await, second);
        assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
    }

    /// A reload must show at once in `/api/stats`, and in a stream that opens then.
    #[tokio::test(start_paused = true)]
    async fn a_snapshot_of_an_older_generation_is_never_reused() {
        let (router, fake, feed, _stop) = router_with_feed();
        let first = stats_body(&feed).await;
        fake.generation.store(1, Ordering::SeqCst);
        let second = stats_body(&feed).await;
        assert_ne!(second, first, "a new snapshot within the tick");
        assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
        assert_eq!(stats_body(&feed).await, second, "then reused");
        fake.generation.store(2, Ordering::SeqCst);
        let (_body, event) = open_streams(&router, 1).await.remove(0);
        assert_eq!(fake.calls.load(Ordering::SeqCst), 3);
        assert_ne!(event, format!("data: {second}\n\n"));
    }

    #[tokio::test(start_paused = true)]
    async fn nobody_looking_means_no_builds() {
        let (router, fake, feed, _stop) = router_with_feed();
        tokio::time::sleep(10 * TICK).await;
        assert_eq!(
            fake.calls.load(Ordering::SeqCst),
            0,
            "no stream, no request"
        );
        let streams = open_streams(&router, 2).await;
        tokio::time::sleep(TICK * 5 / 2).await;
        drop(streams);
        let built = fake.calls.load(Ordering::SeqCst);
        assert_eq!(built, 3, "one at once, one a tick");
        tokio::time::sleep(10 * TICK).await;
        assert_eq!(fake.calls.load(Ordering::SeqCst), built, "the ticks ended");
        stats_body(&feed).await;
        tokio::time::sleep(10 * TICK).await;
        assert_eq!(fake.calls.load(Ordering::SeqCst), built + 1);
        // A stream opened again starts the ticks again.
        let mut again = open_streams(&router, 1).await.remove(0);
        next_frame(&mut again.0).await;
        assert_eq!(fake.calls.load(Ordering::SeqCst), built + 3);
    }
}
