//! The simulation behind the `reconnect_backoff` example (its test reads the same report).

use std::fmt::Write as _;
use std::time::Duration;

use slidewin::{Moment, MovingStat};

/// Closes per second at or above which the client backs off (Facebook's
/// `MAX_CHANNEL_STATES_PER_SEC`).
pub(crate) const THRESHOLD: f64 = 1.0;
/// The window the closes are counted over, and how long a back-off lasts.
pub(crate) const WINDOW: Duration = Duration::from_secs(30);
/// How soon the client retries when not backing off.
pub(crate) const RETRY: Duration = Duration::from_millis(500);
/// The server drops every connection this long after it opens, between `FLAP_FROM` and
/// `FLAP_UNTIL`; outside, connections stay up.
pub(crate) const DROP_AFTER: Duration = Duration::from_millis(50);
pub(crate) const FLAP_FROM: Moment = Moment::from_secs(2);
pub(crate) const FLAP_UNTIL: Moment = Moment::from_secs(60);

/// What the simulation saw.
pub(crate) struct Run {
    pub(crate) report: String,
    /// Connection attempts, the first included.
    pub(crate) attempts: u32,
    /// The close after which the client first backed off (1-based), if it did.
    pub(crate) first_backoff: Option<u32>,
}

/// Runs the client until it holds a connection past the flapping.
pub(crate) fn run() -> Run {
    let mut closes = MovingStat::new(WINDOW, Duration::from_secs(1), Moment::ZERO)
        .expect("30 s in buckets of 1 s");
    let mut report = String::new();
    let mut attempts = 1;
    let mut first_backoff = None;
    let mut n = 0;
    // The first connection opens at 0 s and lasts until the flapping starts.
    let mut closed_at = FLAP_FROM;
    loop {
        n += 1;
        closes.add(closed_at, 1.0).expect("1.0 is a finite sample");
        let tally = closes.tally(closed_at);
        // Facebook's formula: the sum over the whole window, however little of it has passed.
        let facebook = tally.sum() / WINDOW.as_secs_f64();
        let back_off = tally.rate() >= THRESHOLD;
        let wait = if back_off { WINDOW } else { RETRY };
        if back_off && first_backoff.is_none() {
            first_backoff = Some(n);
        }
        let _ = writeln!(
            report,
            "{:>8.3}s  close #{n:<3} {:>5.2}/s over {:>6.3}s (Facebook's: {facebook:.2}/s)  {}",
            closed_at.as_secs_f64(),
            tally.rate(),
            tally.covered().as_secs_f64(),
            if back_off {
                "back off 30 s"
            } else {
                "retry in 500 ms"
            },
        );
        let opened_at = closed_at + wait;
        attempts += 1;
        if opened_at >= FLAP_UNTIL {
            let _ = writeln!(
                report,
                "{:>8.3}s  connected: the server is stable again",
                opened_at.as_secs_f64()
            );
            break;
        }
        closed_at = opened_at + DROP_AFTER;
    }
    let flapping = (FLAP_UNTIL - FLAP_FROM).as_secs_f64();
    let unthrottled = (flapping / (RETRY + DROP_AFTER).as_secs_f64()).ceil();
    let _ = writeln!(
        report,
        "\n{attempts} connection attempts in {:.0} s of flapping; {unthrottled:.0} without the throttle.",
        flapping
    );
    Run {
        report,
        attempts,
        first_backoff,
    }
}
