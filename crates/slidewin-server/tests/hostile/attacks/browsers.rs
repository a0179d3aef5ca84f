//! What any web page a developer visits could do through their browser (issue 29, findings 6
//! and 7), through the real ports: read the open admin surfaces by DNS rebinding (a request
//! for the attacker's host name), and spend a key's quota with a form or `text/plain` post to
//! `/json`, which a browser sends cross-site without asking first.

use super::*;

use slidewin_server::{AdminHost, AdminToken};

const TOKEN: &str = "browsers-admin-token-0123456789";

/// The name a rebinding page's requests carry.
const REBIND: &str = "rebind.attacker.example";

/// Every admin route, and a word its answer holds when it is served.
const ADMIN_ROUTES: &[(&str, &str)] = &[
    ("/", "<html"),
    ("/assets/dashboard.js", "EventSource"),
    ("/assets/dashboard.css", "font"),
    ("/api/config", "\"domains\""),
    ("/api/stats", "\"rules\""),
    ("/api/events", "data:"),
    ("/metrics", "slidewin_config_loads_total"),
];

/// A service with its admin surfaces on free ports: the admin token set or not, and the hosts
/// listed for its open admin routes.
async fn serve_admin(token: Option<&str>, hosts: &[&str]) -> Served {
    let hosts = hosts
        .iter()
        .map(|h| h.parse::<AdminHost>().expect("a host"));
    let (service, _, _) = service_of(Memory::new(), CONFIG, Bounds::default());
    let mut service = service.with_admin_hosts(hosts);
    if let Some(token) = token {
        service = service.with_admin_token(AdminToken::new(token).expect("a valid token"));
    }
    Served::start(service, &server::local()).await
}

/// An answer: its status, its head (lower-cased) and its body.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// `request_line` with `headers` (and `connection: close`) and `body`, written as is to a new
/// connection: the answer, read to its end, or (an event stream never ends) until its body
/// holds `enough`.
async fn send(
    http: SocketAddr,
    request_line: &str,
    headers: &[(&str, &str)],
    body: &str,
    enough: &str,
) -> Answer {
    let mut request = format!("{request_line}\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    ));
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(http).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let mut buffer = [0u8; 16 * 1024];
        loop {
            let n = stream.read(&mut buffer).await.unwrap_or(0);
            answer.extend_from_slice(&buffer[..n]);
            let text = String::from_utf8_lossy(&answer);
            let body = text.split_once("\r\n\r\n").map_or("", |(_, body)| body);
            if n == 0 || (!enough.is_empty() && body.contains(enough)) {
                return text.into_owned();
            }
        }
    };
    // A bound on a hang only: the answers come at once.
    let text = tokio::time::timeout(std::time::Duration::from_secs(20), exchange)
        .await
        .expect("an answer");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    Answer {
        status: head[9..12].parse().expect("a status"),
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

/// `GET path` for `host` (no Host header when `None`).
async fn get(http: SocketAddr, path: &str, host: Option<&str>, enough: &str) -> Answer {
    let headers: Vec<(&str, &str)> = host.map(|h| ("host", h)).into_iter().collect();
    send(http, &format!("GET {path} HTTP/1.1"), &headers, "", enough).await
}

/// A refusal for the host: 403, the host and both ways out named, nothing of the service.
fn assert_misdirected(what: &str, answer: &Answer, names: &str) {
    assert_eq!(answer.status, 403, "{what}: {}", answer.body);
    for word in [names, "--admin-host", "admin token", "loopback"] {
        assert!(
            answer.body.contains(word),
            "{what}: {word:?} not in {}",
            answer.body
        );
    }
    for (_, shows) in ADMIN_ROUTES {
        assert!(!answer.body.contains(shows), "{what} shows {shows:?}");
    }
    for secret in ["client", "gcra", "\"api\"", "rate_limit"] {
        assert!(!answer.body.contains(secret), "{what} shows {secret:?}");
    }
    assert!(!answer.head.contains("set-cookie"), "{what}");
}

#[tokio::test]
async fn a_rebinding_host_gets_no_admin_data_on_any_admin_route() {
    let served = serve_admin(None, &["dash.example"]).await;
    let with_port = format!("{REBIND}:{}", served.http.port());
    for (path, _) in ADMIN_ROUTES {
        for host in [REBIND, with_port.as_str(), "dash.example.attacker.example"] {
            let answer = get(served.http, path, Some(host), "").await;
            assert_misdirected(&format!("GET {path} for {host}"), &answer, host);
        }
        // The refusal tells the name to list, without the port.
        let answer = get(served.http, path, Some(&with_port), "").await;
        assert!(
            answer.body.contains(&format!("--admin-host {REBIND} ")),
            "{}",
            answer.body
        );
        // An absolute-form target is the request's host: its Host header does not count.
        let line = format!("GET http://{with_port}{path} HTTP/1.1");
        let loopback = served.http.to_string();
        let answer = send(served.http, &line, &[("host", &loopback)], "", "").await;
        assert_misdirected(&format!("GET {path} absolute-form"), &answer, REBIND);
    }
    // HEAD, and a host that is not even a name, the same.
    let answer = send(
        served.http,
        "HEAD /api/config HTTP/1.1",
        &[("host", REBIND)],
        "",
        "",
    )
    .await;
    assert_eq!(answer.status, 403);
    let answer = get(served.http, "/api/stats", Some("a b\\\"c"), "").await;
    assert_misdirected("a host that is no name", &answer, "a b\\\\\\\"c");
    served.stop().await;
}

#[tokio::test]
async fn loopback_hosts_and_listed_names_are_served() {
    let served = serve_admin(None, &["dash.example", "10.1.2.3"]).await;
    let port = served.http.port();
    let hosts = [
        format!("localhost:{port}"),
        "LocalHost".to_owned(),
        format!("127.0.0.1:{port}"),
        "127.8.9.10".to_owned(),
        format!("[::1]:{port}"),
        "x.localhost".to_owned(),
        format!("dash.example:{port}"),
        "Dash.Example.".to_owned(),
        "10.1.2.3".to_owned(),
    ];
    for (path, shows) in ADMIN_ROUTES {
        for host in &hosts {
            let answer = get(served.http, path, Some(host), shows).await;
            assert_eq!(answer.status, 200, "GET {path} for {host}: {}", answer.body);
            assert!(answer.body.contains(shows), "GET {path} for {host}");
        }
    }
    // An absolute-form target for a loopback host is served whatever its Host header says.
    let line = format!("GET http://127.0.0.1:{port}/api/config HTTP/1.1");
    let answer = send(served.http, &line, &[("host", REBIND)], "", "").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    served.stop().await;
}

#[tokio::test]
async fn a_request_without_one_host_is_refused() {
    let served = serve_admin(None, &[]).await;
    for line in ["GET /api/config HTTP/1.1", "GET /api/config HTTP/1.0"] {
        let answer = send(served.http, line, &[], "", "").await;
        assert_misdirected(line, &answer, "no Host header");
    }
    // Two, one of them loopback: which one a proxy on the way read is anyone's guess.
    let hosts = [("host", "127.0.0.1"), ("host", REBIND)];
    let answer = send(served.http, "GET /api/config HTTP/1.1", &hosts, "", "").await;
    assert_misdirected("two Host headers", &answer, "several Host headers");
    served.stop().await;
}

#[tokio::test]
async fn json_and_healthz_do_not_look_at_the_host() {
    let served = serve_admin(None, &[]).await;
    for host in [Some(REBIND), None] {
        let answer = get(served.http, "/healthz", host, "").await;
        assert_eq!((answer.status, answer.body.as_str()), (200, "OK\n"));
        let mut headers = vec![("content-type", "application/json")];
        headers.extend(host.map(|h| ("host", h)));
        let body = json_request("client", host.unwrap_or("no-host"));
        let answer = send(served.http, "POST /json HTTP/1.1", &headers, &body, "").await;
        assert_eq!(answer.status, 200, "{host:?}: {}", answer.body);
        assert!(answer.body.contains("\"overallCode\":\"OK\""));
    }
    served.stop().await;
}

#[tokio::test]
async fn with_a_token_any_host_with_the_token_gets_in() {
    let served = serve_admin(Some(TOKEN), &[]).await;
    let bearer = format!("Bearer {TOKEN}");
    for (path, shows) in ADMIN_ROUTES {
        let headers = [("host", REBIND), ("authorization", bearer.as_str())];
        let line = format!("GET {path} HTTP/1.1");
        let answer = send(served.http, &line, &headers, "", shows).await;
        assert_eq!(answer.status, 200, "GET {path}: {}", answer.body);
        assert!(answer.body.contains(shows), "GET {path}");
        // Without it, the token's refusal, not the host's.
        let answer = get(served.http, path, Some(REBIND), "").await;
        assert_eq!(answer.status, 401, "GET {path}: {}", answer.body);
    }
    served.stop().await;
}

#[tokio::test]
async fn the_sign_in_cookie_is_not_the_token_and_the_token_is_no_cookie() {
    let served = serve_admin(Some(TOKEN), &[]).await;
    let host = served.http.to_string();
    let answer = get(served.http, &format!("/?token={TOKEN}"), Some(&host), "").await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    let set_cookie = answer
        .head
        .lines()
        .find_map(|line| line.strip_prefix("set-cookie: "))
        .expect("a cookie");
    let cookie = set_cookie.split(';').next().unwrap().to_owned();
    let value = cookie.strip_prefix("slidewin_admin=").expect("the cookie");
    assert!(
        !set_cookie.contains(&TOKEN.to_ascii_lowercase()),
        "{set_cookie}"
    );
    assert_eq!(value.len(), 64, "an HMAC-SHA256 in hex: {value}");
    assert!(value.bytes().all(|b| b.is_ascii_hexdigit()), "{value}");

    let line = "GET /api/config HTTP/1.1";
    let answer = send(served.http, line, &[("cookie", &cookie)], "", "").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.body.contains("\"domains\""));

    let raw = format!("slidewin_admin={TOKEN}");
    let answer = send(served.http, line, &[("cookie", &raw)], "", "").await;
    assert_eq!(
        answer.status, 401,
        "the raw token as a cookie: {}",
        answer.body
    );
    served.stop().await;
}

#[tokio::test]
async fn json_without_a_json_content_type_is_415_and_counts_nothing() {
    let served = serve_admin(None, &[]).await;
    let body = json_request("client", "victim");
    for content_type in [
        Some("text/plain"),
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=----x"),
        Some("application/jsonp"),
        None,
    ] {
        let headers: Vec<(&str, &str)> = content_type
            .map(|t| ("content-type", t))
            .into_iter()
            .collect();
        let answer = send(served.http, "POST /json HTTP/1.1", &headers, &body, "").await;
        assert_eq!(answer.status, 415, "{content_type:?}: {}", answer.body);
        let error: serde_json::Value = serde_json::from_str(&answer.body).expect("JSON");
        let error = error["error"].as_str().expect("an error");
        let got = content_type.map_or("no content type".to_owned(), |t| format!("\"{t}\""));
        for word in [got.as_str(), "application/json"] {
            assert!(error.contains(word), "{word:?} not in {error}");
        }
    }
    // Nothing was counted: the key's whole quota (3) is left for its first JSON request.
    let json = [("content-type", "application/json")];
    let answer = send(served.http, "POST /json HTTP/1.1", &json, &body, "").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(
        answer.body.contains("\"limitRemaining\":2"),
        "{}",
        answer.body
    );
    served.stop().await;
}

#[tokio::test]
async fn json_content_type_with_parameters_or_in_capitals_is_served() {
    let served = serve_admin(None, &[]).await;
    let body = json_request("client", "either");
    for (content_type, remaining) in [
        ("application/json; charset=utf-8", 2),
        ("Application/JSON", 1),
    ] {
        let headers = [("content-type", content_type)];
        let answer = send(served.http, "POST /json HTTP/1.1", &headers, &body, "").await;
        assert_eq!(answer.status, 200, "{content_type}: {}", answer.body);
        let left = format!("\"limitRemaining\":{remaining}");
        assert!(answer.body.contains(&left), "{}", answer.body);
    }
    served.stop().await;
}
