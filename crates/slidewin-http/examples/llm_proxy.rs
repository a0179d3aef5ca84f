//! An axum proxy in front of a language model's API, with a budget of tokens per API key: 2,000
//! a minute and 10,000 a day, exact. Each request reserves what it may use at most (its
//! `x-max-tokens`), and the proxy settles it at what the model reports it used, from the
//! `x-usage-total-tokens` header the proxy sets from the model's answer. Simulated on tokio's
//! paused clock, so it runs in a moment and prints the same every time:
//!
//! ```text
//! cargo run -p slidewin-http --example llm_proxy
//! ```
//!
//! It prints each call: k1's third request used 1,300 tokens where it had reserved 400, so the
//! minute's budget is 70 over; its next request waits until the first two leave the window
//! (at 65 s), and k2, another key, is untouched:
//!
//! ```text
//!   time  key  asks  used  answer  RateLimit
//!     0s  k1   800   350  200     "minute";r=1200;t=60
//!     5s  k1   800   420  200     "minute";r=850;t=60
//!    10s  k1   400  1300  200     "minute";r=830;t=60
//!    15s  k1   300     -  429 retry in 50s  "minute";r=0;t=50
//!    20s  k2   500   100  200     "minute";r=1500;t=60
//!    65s  k1   300   200  200     "minute";r=400;t=60
//!    66s  k1   500   300  200     "minute";r=0;t=60
//! ```
//!
//! The model is a handler here, called as a tower service; in production it is an HTTP
//! client's call to the model's API, and the rest is the same. A streaming answer, whose
//! usage comes in its last event, is settled by the handler instead: it finds a
//! `slidewin_http::Settlement` in its request's extensions.

use std::time::Duration;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::State;
use axum::routing::post;
use http::{HeaderName, Request, Response, StatusCode};
use serde_json::{Value, json};
use slidewin::limit::{Kind, Rule, RuleSet};
use slidewin_http::{Key, Limit, Memory, ReserveLayer, SettleFrom};
use slidewin_shape::TokioClock;
use tower::ServiceExt;

const USAGE: HeaderName = HeaderName::from_static("x-usage-total-tokens");

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tokens = RuleSet::new([
        Rule::new("minute", Kind::SlidingLog, "2000/minute".parse()?)?,
        Rule::new("day", Kind::SlidingLog, "10000/day".parse()?)?,
    ])?;
    let per_key = Limit::new(tokens)
        .key(Key::header(HeaderName::from_static("x-api-key")))
        // The estimate, from the head: what the client lets the model use at most.
        .cost_fn(|head| {
            let asked = head.headers.get("x-max-tokens");
            asked
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(1_000)
        });
    let layer = ReserveLayer::with_clock(
        Memory::new(),
        TokioClock::new(),
        [per_key],
        SettleFrom::header(USAGE),
    )?;
    let proxy = Router::new()
        .route("/v1/chat/completions", post(complete))
        .with_state(model())
        .layer(layer);

    println!("  time  key  asks  used  answer  RateLimit");
    // (seconds from the start, key, max_tokens, tokens the model will use)
    let calls = [
        (0, "k1", 800, 350),
        (5, "k1", 800, 420),
        // The model ran past the cap it was given: 1,300 against 400 reserved, 70 over the
        // minute's 2,000. The answer is sent; the debt holds k1 back until enough leaves.
        (10, "k1", 400, 1_300),
        (15, "k1", 300, 0),
        (20, "k2", 500, 100),
        (65, "k1", 300, 200),
        (66, "k1", 500, 300),
    ];
    let start = tokio::time::Instant::now();
    for (at, key, asks, uses) in calls {
        tokio::time::sleep_until(start + Duration::from_secs(at)).await;
        let request = Request::post("/v1/chat/completions")
            .header("x-api-key", key)
            .header("x-max-tokens", asks)
            .body(Body::from(json!({ "uses": uses }).to_string()))?;
        let response = proxy.clone().oneshot(request).await?;
        let field = |name: &str| {
            let value = response.headers().get(name).and_then(|v| v.to_str().ok());
            value.unwrap_or("-").to_owned()
        };
        let used = match response.status() {
            StatusCode::OK => uses.to_string(),
            _ => "-".to_owned(),
        };
        let mut answer = response.status().as_u16().to_string();
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            answer = format!("{answer} retry in {}s", field("retry-after"));
        }
        println!(
            "  {at:>3}s  {key}  {asks:>4}  {used:>4}  {answer:<6}  {}",
            field("ratelimit")
        );
    }
    Ok(())
}

/// The proxy's handler: the request goes to the model, and its answer comes back with the
/// tokens it used in `x-usage-total-tokens`, which the layer settles the reservation at.
async fn complete(State(model): State<Router>, request: Request<Body>) -> Response<Body> {
    let answer = match model.oneshot(request).await {
        Ok(answer) => answer,
        Err(never) => match never {},
    };
    let (mut head, body) = answer.into_parts();
    let Ok(bytes) = to_bytes(body, 1 << 20).await else {
        return Response::builder()
            .status(StatusCode::BAD_GATEWAY)
            .body(Body::empty())
            .unwrap_or_default();
    };
    let answer: Value = serde_json::from_slice(&bytes).unwrap_or_default();
    if let Some(used) = answer["usage"]["total_tokens"].as_u64() {
        head.headers.insert(USAGE, used.into());
    }
    Response::from_parts(head, Body::from(bytes))
}

/// The model's API, as an OpenAI-style answer with its usage: here it uses what the request
/// says it will, to show the settling.
fn model() -> Router {
    Router::new().route(
        "/v1/chat/completions",
        post(|body: String| async move {
            let asked: Value = serde_json::from_str(&body).unwrap_or_default();
            let used = asked["uses"].as_u64().unwrap_or(0);
            axum::Json(json!({
                "choices": [{ "message": { "role": "assistant", "content": "..." } }],
                "usage": { "total_tokens": used },
            }))
        }),
    )
}
