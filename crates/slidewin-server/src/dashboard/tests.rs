//! The dashboard's tests: its assets, caching, access and event streams.

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
