//! The reconnect self-throttle of Facebook's chat client (its `ChannelManager`): a client
//! counts its connection's closes in a `MovingStat` of 30 s, and when they come at 1 per second
//! or more it stops retrying for 30 s.
//! Driven by a simulated server that drops every connection between 2 s and 60 s.
//! Deterministic: the time is simulated.
//!
//! ```text
//! cargo run --example reconnect_backoff
//! ```

mod simulation;

fn main() {
    let run = simulation::run();
    print!("{}", run.report);
    if let Some(close) = run.first_backoff {
        println!(
            "First back-off after close #{close}; {} attempts in all.",
            run.attempts
        );
    }
}
