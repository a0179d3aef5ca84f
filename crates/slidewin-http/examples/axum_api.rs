//! An axum API behind one [`RateLimitLayer`]: a search limited per client IP, uploads limited
//! per API key in kibibytes, a new route whose policy is tried in shadow mode, and what each
//! policy did over the last minute at `/stats`.
//!
//! ```sh
//! cargo run -p slidewin-http --example axum_api --features axum   # -- --port 8080, or PORT=8080
//!
//! curl -i http://127.0.0.1:3000/search        # 200, with RateLimit-Policy and RateLimit
//! sleep 1; for i in $(seq 10); do curl -s -o /dev/null http://127.0.0.1:3000/search; done
//! curl -i http://127.0.0.1:3000/search        # the 11th in a second: 429, problem+json
//! head -c 300000 /dev/zero | curl -i -H 'x-api-key: k-42' --data-binary @- http://127.0.0.1:3000/upload
//! curl -i http://127.0.0.1:3000/v2/search     # never denied; /stats counts what it would deny
//! curl http://127.0.0.1:3000/stats
//! ```

use std::net::{Ipv4Addr, SocketAddr};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::{get, post};
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, Method, Response, StatusCode};
use slidewin::Clock;
use slidewin::limit::{Kind, Rule, RuleSet};
use slidewin_http::{Key, Limit, Memory, RateLimitLayer, Refusal, problem};

type Limits = RateLimitLayer<Memory>;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port = port().unwrap_or_else(|err| {
        eprintln!("{err}");
        std::process::exit(2)
    });
    let limits = limits()?;
    let app = Router::new()
        .route("/search", get(search))
        .route("/v2/search", get(search))
        .route("/upload", post(upload))
        .layer(limits.clone())
        // Added after the layer, so outside it.
        .route("/stats", get(stats))
        .with_state(limits);

    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await?;
    println!("listening on http://{}", listener.local_addr()?);
    // The peer's address goes into each request, for `Key::peer_ip`.
    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service).await?;
    Ok(())
}

/// The limits, most specific first: the first that selects a request decides it.
fn limits() -> Result<Limits, Box<dyn std::error::Error>> {
    // Per client IP (a `Limit`'s default key), exact: 10 a second AND 1000 an hour.
    let search = Limit::new(RuleSet::new([
        Rule::new("burst", Kind::SlidingLog, "10/second".parse()?)?,
        Rule::new("hourly", Kind::SlidingLog, "1000/hour".parse()?)?,
    ])?)
    .route("/search");

    // Per API key, in KiB. In memory a sliding log keeps a stamp per upload, not per KiB, so
    // it stays exact and small. On Redis it keeps 7 bytes a unit (a limit of 100,000 at
    // most): there, or for quotas in the millions, a `SlidingCounter` keeps two numbers a key,
    // at the price of up to twice the quota in a window just after a burst.
    let upload = Limit::new(RuleSet::from(Rule::new(
        "upload-kib",
        Kind::SlidingLog,
        "1024/minute".parse()?,
    )?))
    .route("/upload")
    .method(Method::POST) // a GET gets axum's 405, not a key check
    .key(Key::header("x-api-key".parse()?))
    .cost_fn(|parts| {
        let bytes = parts
            .headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse().ok());
        bytes.unwrap_or(0_u64).div_ceil(1024).max(1) // no Content-Length: `upload` answers 411
    });

    // A new route's policy, tried before it is enforced: it decides and sends the fields, and
    // `/stats` counts what it would have denied, but it never denies.
    let v2 = Limit::new(RuleSet::from(Rule::new(
        "v2-search",
        Kind::SlidingLog,
        "5/second".parse()?,
    )?))
    .route("/v2/search")
    .shadow("v2-search")?;

    Ok(RateLimitLayer::builder(Memory::new())
        .limit(search)
        .limit(upload)
        .limit(v2)
        .on_refusal(|refusal: &Refusal<'_>| match refusal {
            // The upload's API key is missing: the client's mistake, not the `500` of the
            // default answer (which a missing peer address, a server's mistake, keeps).
            Refusal::MissingKey { policies, .. } if policies.contains(&"upload-kib") => {
                let mut response = Response::new("an upload needs an x-api-key header\n".into());
                *response.status_mut() = StatusCode::UNAUTHORIZED;
                let text = HeaderValue::from_static("text/plain; charset=utf-8");
                response.headers_mut().insert(CONTENT_TYPE, text);
                response
            }
            _ => problem(refusal),
        })
        .build()?)
}

async fn search() -> &'static str {
    "no results yet\n"
}

async fn upload(headers: HeaderMap, body: Bytes) -> Result<String, StatusCode> {
    if !headers.contains_key(CONTENT_LENGTH) {
        return Err(StatusCode::LENGTH_REQUIRED); // a chunked body was charged 1 KiB
    }
    Ok(format!("stored {} bytes\n", body.len()))
}

async fn stats(State(limits): State<Limits>) -> String {
    let now = limits.clock().now();
    let mut out = format!(
        "{:<12} {:>7} {:>7} {:>14}\n",
        "policy", "passed", "denied", "shadow-denied"
    );
    for policy in limits.stats() {
        out += &format!(
            "{:<12} {:>7} {:>7} {:>14}\n",
            policy.name(),
            policy.passed(now),
            policy.denied(now),
            policy.shadow_denied(now),
        );
    }
    out + "(the last minute)\n"
}

/// `--port N`, else `PORT`, else 3000.
fn port() -> Result<u16, String> {
    let mut args = std::env::args().skip(1);
    let port = match (args.next().as_deref(), args.next()) {
        (Some("--port"), Some(port)) => port,
        (None, _) => std::env::var("PORT").unwrap_or_else(|_| "3000".into()),
        _ => return Err("usage: axum_api [--port N]   (or PORT=N)".into()),
    };
    port.parse()
        .map_err(|_| format!("not a port number: {port:?}"))
}
