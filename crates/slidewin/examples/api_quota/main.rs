//! One bursty client against the four rate-limiting algorithms, side by side: the fixed
//! window's boundary burst, and the exact log's guarantee. Deterministic: the time comes from a
//! `ManualClock`.
//!
//! ```text
//! cargo run --example api_quota
//! ```

mod chart;

fn main() {
    print!("{}", chart::render());
}
