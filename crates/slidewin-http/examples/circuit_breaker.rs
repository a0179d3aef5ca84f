//! A flaky backend behind a `CircuitBreakerLayer`, simulated under tokio's paused clock, so it
//! runs in a moment and prints the same every time:
//!
//! ```text
//! cargo run -p slidewin-http --example circuit_breaker
//! ```
//!
//! A client calls every 100 ms for 30 s. The backend answers in 20 ms, except from 3 s to 14 s,
//! when it fails with a `503` after 50 ms. The breaker trips when half the calls of the last
//! 2 s have failed (10 at least), waits 4 s, then lets 3 probes through. Each transition is
//! printed with its time and the statistics that caused it, and each second of the client's
//! view (answered, failed, refused at once) after it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::{Request, StatusCode};
use slidewin::breaker::CircuitBreaker;
use slidewin_http::CircuitBreakerLayer;
use slidewin_shape::TokioClock;
use tokio::time::{Instant, MissedTickBehavior};
use tower::ServiceExt;

/// When the backend goes down and comes back, from the start.
const DOWN: Duration = Duration::from_secs(3);
const UP: Duration = Duration::from_secs(14);

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let breaker = CircuitBreaker::builder()
        .error_ratio(0.5)
        .min_calls(10)
        .window(Duration::from_secs(2), 4)
        .wait(Duration::from_secs(4))
        .probes(3);
    let layer = CircuitBreakerLayer::builder(breaker)
        .name("inventory")
        .clock(TokioClock::new())
        .on_transition(|transition| println!("  {transition}"))
        .build()?;
    let handle = layer.handle();
    let down = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&down);
    let app = Router::new()
        .route("/", get(move || backend(flag.load(Ordering::Relaxed))))
        .layer(layer);

    let start = Instant::now();
    let mut ticks = tokio::time::interval(Duration::from_millis(100));
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut second = [0_u32; 3]; // answered, failed, refused
    for tick in 1..=300 {
        ticks.tick().await;
        let elapsed = start.elapsed();
        down.store(DOWN <= elapsed && elapsed < UP, Ordering::Relaxed);
        let request = Request::get("/").body(Body::empty())?;
        let response = app.clone().oneshot(request).await?;
        let refused = response.headers().contains_key("retry-after");
        let kind = match response.status() {
            StatusCode::OK => 0,
            _ if refused => 2,
            _ => 1,
        };
        second[kind] += 1;
        if tick % 10 == 0 {
            let [ok, failed, refused] = second;
            let to = tick / 10;
            println!(
                "{:>2}-{to:<2} s: {ok:>2} answered, {failed:>2} failed, {refused:>2} refused at once; {}",
                to - 1,
                handle.state()
            );
            second = [0; 3];
        }
    }
    println!("{:?}", handle.snapshot());
    Ok(())
}

/// The backend: 20 ms and a `200` while up, 50 ms and a `503` while down.
async fn backend(down: bool) -> StatusCode {
    let (took, status) = if down {
        (50, StatusCode::SERVICE_UNAVAILABLE)
    } else {
        (20, StatusCode::OK)
    };
    tokio::time::sleep(Duration::from_millis(took)).await;
    status
}
