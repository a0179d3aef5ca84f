//! The admin token through the real sockets: each admin route refuses a request without it
//! (401, and nothing of the service in the answer), takes it in `Authorization: Bearer` or in
//! the cookie a browser gets from `/?token=` once; the data plane (`POST /json`, `/healthz`,
//! gRPC) never asks for it; and with no token set, everything is open as before to a loopback
//! host (tests/hostile/attacks/browsers.rs has the other hosts).

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry as PbEntry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest as PbRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code as PbCode;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use slidewin::Moment;
use slidewin::time::ManualClock;
use slidewin_server::{AdminToken, Bounds, Config, Endpoints, Engine, Metrics};
use slidewin_store::Memory;
use support::browser;
use support::server::{self, Served};

/// Names that only the config knows: no refusal may show one.
const DOMAIN: &str = "hidden_domain_q7";
const KEY: &str = "hidden_key_q7";
const RULE: &str = "hidden_rule_q7";

const TOKEN: &str = "s3cret-admin-token-0123456789";
/// As long as [`TOKEN`], one byte off at the end.
const SAME_LENGTH: &str = "s3cret-admin-token-0123456788";
/// A prefix of [`TOKEN`].
const SHORTER: &str = "s3cret-admin-token";

/// Every admin route, and a word its answer holds when it is let through.
const ADMIN_ROUTES: &[(&str, &str)] = &[
    ("/", "<html"),
    ("/assets/dashboard.js", "EventSource"),
    ("/assets/dashboard.css", "{"),
    ("/api/config", DOMAIN),
    ("/api/stats", DOMAIN),
    ("/api/events", DOMAIN),
    ("/metrics", "slidewin_config_loads_total"),
];

fn config() -> Config {
    let yaml = format!(
        "domain: {DOMAIN}\ndescriptors:\n  - key: {KEY}\n    limits:\n      - {{name: {RULE}, quota: 5 per minute}}\n"
    );
    Config::parse(&yaml, "access.yaml").expect("the test's config is valid")
}

/// A service on free ports of 127.0.0.1, the admin token set or not.
async fn start(token: Option<&str>) -> Running {
    let engine = Engine::new(
        Memory::new(),
        config(),
        Arc::new(ManualClock::new(Moment::from_secs(1_000))),
        Bounds::default(),
        Metrics::new(),
    )
    .expect("the backend holds the rules");
    let mut service = Endpoints::new(engine, vec![]);
    if let Some(token) = token {
        service = service.with_admin_token(AdminToken::new(token).expect("a valid token"));
    }
    Running(Served::start(service, &server::local()).await)
}

struct Running(Served);

impl std::ops::Deref for Running {
    type Target = Served;

    fn deref(&self) -> &Served {
        &self.0
    }
}

impl Running {
    async fn stop(self) {
        self.0.stop().await;
    }

    /// `method path` with `headers`: the status, the headers, and the body (of an event
    /// stream, up to its first event).
    async fn call(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, http::HeaderMap, String) {
        let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
        let mut request = http::Request::builder()
            .method(method)
            .uri(format!("http://{}{path}", self.http));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(Full::new(Bytes::from(body.to_owned())))
            .unwrap();
        let response = tokio::time::timeout(Duration::from_secs(10), client.request(request))
            .await
            .expect("HTTP answers in time")
            .expect("HTTP answers");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let streaming = headers
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
        let mut body = response.into_body();
        let mut text = Vec::new();
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
                .await
                .expect("the body comes in time");
            match frame {
                None => break,
                Some(frame) => {
                    if let Ok(data) = frame.expect("the body reads").into_data() {
                        text.extend_from_slice(&data);
                    }
                }
            }
            // An event stream never ends: its first event is enough.
            if streaming && text.windows(2).any(|w| w == b"\n\n") {
                break;
            }
        }
        (status, headers, String::from_utf8_lossy(&text).into_owned())
    }

    async fn get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, http::HeaderMap, String) {
        self.call("GET", path, headers, "").await
    }
}

/// A refusal: 401, the challenge, no cookie, and a body that tells nothing of the service;
/// returns the body, which must be the same for every refusal.
fn assert_refused(what: &str, (status, headers, body): &(u16, http::HeaderMap, String)) -> String {
    assert_eq!(*status, 401, "{what}: {body}");
    assert_eq!(
        headers[http::header::WWW_AUTHENTICATE],
        "Bearer realm=\"slidewin\"",
        "{what}"
    );
    assert!(
        headers.get(http::header::SET_COOKIE).is_none(),
        "{what} set a cookie"
    );
    for secret in [
        DOMAIN,
        KEY,
        RULE,
        TOKEN,
        "rate_limit",
        "slidewin_",
        "total_hits",
        "<html",
    ] {
        assert!(
            !body.contains(secret),
            "{what}'s body shows {secret:?}: {body}"
        );
    }
    body.clone()
}

#[tokio::test]
async fn each_admin_route_refuses_a_request_without_the_right_token() {
    let server = start(Some(TOKEN)).await;
    let mut bodies = Vec::new();
    for (path, _) in ADMIN_ROUTES {
        let same_length = format!("Bearer {SAME_LENGTH}");
        let shorter = format!("Bearer {SHORTER}");
        let longer = format!("Bearer {TOKEN}0");
        let wrong_cookie = format!("slidewin_admin={SAME_LENGTH}");
        let raw_cookie = format!("slidewin_admin={TOKEN}");
        let basic = format!("Basic {TOKEN}");
        let cases: [(&str, Vec<(&str, &str)>); 8] = [
            ("no token", vec![]),
            (
                "a wrong token of the same length",
                vec![("authorization", &same_length)],
            ),
            ("a shorter wrong token", vec![("authorization", &shorter)]),
            ("a longer wrong token", vec![("authorization", &longer)]),
            ("a wrong cookie", vec![("cookie", &wrong_cookie)]),
            (
                "the token itself as the cookie",
                vec![("cookie", &raw_cookie)],
            ),
            (
                "the token in another scheme",
                vec![("authorization", &basic)],
            ),
            ("an empty bearer", vec![("authorization", "Bearer ")]),
        ];
        for (what, headers) in cases {
            let answer = server.get(path, &headers).await;
            bodies.push(assert_refused(&format!("GET {path} with {what}"), &answer));
        }
        for query in [
            format!("token={SAME_LENGTH}"),
            format!("token={SHORTER}"),
            "token=".to_owned(),
        ] {
            let answer = server.get(&format!("{path}?{query}"), &[]).await;
            bodies.push(assert_refused(&format!("GET {path}?{query}"), &answer));
        }
    }
    // HEAD too: no headers that tell more.
    let answer = server.call("HEAD", "/api/stats", &[], "").await;
    assert_refused("HEAD /api/stats", &answer);
    bodies.dedup();
    assert_eq!(bodies.len(), 1, "the refusals differ: {bodies:?}");
    server.stop().await;
}

#[tokio::test]
async fn the_token_in_the_header_opens_each_admin_route() {
    let server = start(Some(TOKEN)).await;
    let bearer = format!("Bearer {TOKEN}");
    for (path, shows) in ADMIN_ROUTES {
        let (status, _, body) = server.get(path, &[("authorization", &bearer)]).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        assert!(
            body.contains(shows),
            "GET {path} does not show {shows:?}: {body}"
        );
    }
    // The scheme is case-insensitive, as RFC 9110 says.
    let lower = format!("bearer {TOKEN}");
    let (status, _, _) = server.get("/metrics", &[("authorization", &lower)]).await;
    assert_eq!(status, 200);
    server.stop().await;
}

#[tokio::test]
async fn a_browser_signs_in_once_and_its_cookie_opens_the_page_and_the_events() {
    let server = start(Some(TOKEN)).await;

    // The token in the URL is answered by a redirect without it, setting the cookie.
    let (status, headers, _) = server.get(&format!("/?updates=3&token={TOKEN}"), &[]).await;
    assert_eq!(status, 303);
    assert_eq!(headers[http::header::LOCATION], "./?updates=3");
    assert_eq!(headers[http::header::CACHE_CONTROL], "no-store");
    assert_eq!(headers[http::header::REFERRER_POLICY], "no-referrer");
    let set_cookie = headers[http::header::SET_COOKIE].to_str().unwrap();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set_cookie.contains(attribute), "{set_cookie}");
    }
    let cookie = set_cookie.split(';').next().unwrap().to_owned();
    // Not the token: its HMAC under this process's key.
    assert!(cookie.starts_with("slidewin_admin="), "{cookie}");
    assert!(!cookie.contains(TOKEN), "{cookie}");

    // Percent-escapes in the token are decoded.
    let escaped = TOKEN.replace('-', "%2D");
    let (status, headers, _) = server
        .get(&format!("/api/stats?token={escaped}"), &[])
        .await;
    assert_eq!(status, 303);
    assert_eq!(headers[http::header::LOCATION], "./stats");

    // With the cookie (among others), the page, its assets and its event stream open.
    let cookies = format!("theme=dark; {cookie}");
    for (path, shows) in ADMIN_ROUTES {
        let (status, _, body) = server.get(path, &[("cookie", &cookies)]).await;
        assert_eq!(status, 200, "GET {path} with the cookie: {body}");
        assert!(body.contains(shows), "GET {path} does not show {shows:?}");
    }
    let (status, headers, body) = server.get("/api/events", &[("cookie", &cookie)]).await;
    assert_eq!(status, 200);
    assert!(
        headers[http::header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert!(body.starts_with("data:") && body.contains(KEY), "{body}");

    // A token in the URL is never let through as it is, even with the cookie.
    let (status, _, _) = server
        .get(
            &format!("/api/config?token={TOKEN}"),
            &[("cookie", &cookie)],
        )
        .await;
    assert_eq!(status, 303);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_works_in_a_real_browser_with_the_token_once() {
    let server = start(Some(TOKEN)).await;
    let http = server.http;

    // Without the token, the browser sees the refusal and nothing else.
    let refused = tokio::task::spawn_blocking(move || {
        browser::dump_dom(&format!("http://{http}/?updates=1"), 2000)
    })
    .await
    .unwrap();
    assert!(refused.contains("401 Unauthorized"), "{refused}");
    assert!(!refused.contains(DOMAIN) && !refused.contains("EventSource"));

    // With it once in the URL: redirect, cookie, page, scripts, event stream.
    let dom = tokio::task::spawn_blocking(move || {
        browser::dump_dom(&format!("http://{http}/?updates=2&token={TOKEN}"), 4000)
    })
    .await
    .unwrap();
    assert!(dom.contains("paused after 2 updates"), "{dom}");
    assert!(dom.contains(KEY), "the page shows no rule:\n{dom}");
    server.stop().await;
}

#[tokio::test]
async fn the_data_plane_needs_no_token() {
    let server = start(Some(TOKEN)).await;
    let (status, _, body) = server.get("/healthz", &[]).await;
    assert_eq!((status, body.as_str()), (200, "OK\n"));

    let request = format!(
        r#"{{"domain":"{DOMAIN}","descriptors":[{{"entries":[{{"key":"{KEY}","value":"ann"}}]}}]}}"#
    );
    let (status, _, body) = server
        .call(
            "POST",
            "/json",
            &[("content-type", "application/json")],
            &request,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"overallCode\":\"OK\""), "{body}");

    let mut client = RateLimitServiceClient::connect(format!("http://{}", server.grpc))
        .await
        .expect("gRPC connects");
    let answer = client
        .should_rate_limit(PbRequest {
            domain: DOMAIN.to_owned(),
            descriptors: vec![RateLimitDescriptor {
                entries: vec![PbEntry {
                    key: KEY.to_owned(),
                    value: "ann".to_owned(),
                }],
                ..Default::default()
            }],
            hits_addend: 0,
        })
        .await
        .expect("gRPC answers without a token")
        .into_inner();
    assert_eq!(answer.overall_code, PbCode::Ok as i32);
    server.stop().await;
}

#[tokio::test]
async fn without_a_token_everything_is_open_as_before() {
    let server = start(None).await;
    for (path, shows) in ADMIN_ROUTES {
        let (status, headers, body) = server.get(path, &[]).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        assert!(body.contains(shows), "GET {path} does not show {shows:?}");
        assert!(headers.get(http::header::WWW_AUTHENTICATE).is_none());
    }
    // A `token` parameter means nothing then: the page is served as it is.
    let (status, _, _) = server.get("/?token=anything", &[]).await;
    assert_eq!(status, 200);
    server.stop().await;
}

/// `GET path` at `addr` on a connection of its own, `headers` added: the status line's code.
async fn status_at(addr: std::net::SocketAddr, path: &str, headers: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head =
        format!("GET {path} HTTP/1.1\r\nhost: localhost\r\n{headers}connection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let code = answer[9..12].parse().unwrap();
    (code, answer)
}

/// Issue 31: the admin surfaces on a listener of their own (envoy ratelimit's debug port)
/// keep their token; the HTTP listener then serves none of them; and the metrics listener
/// (envoy ratelimit's `PROMETHEUS_ADDR`) serves the metrics alone, at its path, without one.
#[tokio::test]
async fn issue_31_admin_and_metrics_listen_apart_from_the_data_plane() {
    let engine = Engine::new(
        Memory::new(),
        config(),
        Arc::new(ManualClock::new(Moment::from_secs(1_000))),
        Bounds::default(),
        Metrics::new(),
    )
    .unwrap();
    let service = Endpoints::new(engine, vec![]).with_admin_token(AdminToken::new(TOKEN).unwrap());
    let local = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let options = slidewin_server::ServeOptions {
        admin_addr: Some(local),
        metrics: Some(slidewin_server::MetricsListener::new(local, "/stats/prometheus").unwrap()),
        ..server::local()
    };
    let served = Served::start(service, &options).await;
    let (admin, metrics) = (served.admin.unwrap(), served.metrics.unwrap());
    let bearer = format!("authorization: Bearer {TOKEN}\r\n");

    for (path, _) in ADMIN_ROUTES {
        assert_eq!(
            status_at(served.http, path, &bearer).await.0,
            404,
            "{path} on HTTP"
        );
        assert_eq!(
            status_at(admin, path, "").await.0,
            401,
            "{path} without the token"
        );
    }
    assert_eq!(status_at(admin, "/api/config", &bearer).await.0, 200);
    assert_eq!(status_at(served.http, "/healthcheck", "").await.0, 200);
    let (code, scraped) = status_at(metrics, "/stats/prometheus", "").await;
    assert_eq!(code, 200);
    assert!(scraped.contains("slidewin_config_loads_total"), "{scraped}");
    // The metrics listener serves nothing else.
    for path in ["/metrics", "/api/config", "/", "/json"] {
        assert_eq!(status_at(metrics, path, "").await.0, 404, "{path}");
    }
    served.stop().await;
}
