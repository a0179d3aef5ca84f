//! The chart behind `main.rs`, apart from the process so that a test can check it.

use std::fmt::Write;
use std::time::Duration;

use slidewin::time::ManualClock;
use slidewin::{Algorithm, Clock, FixedWindow, Gcra, Limiter, Moment, SlidingCounter, SlidingLog};

/// The quota every algorithm enforces.
pub(crate) const QUOTA: &str = "5 per 10s";
/// How long the chart runs, in seconds.
const SECONDS: usize = 30;

/// The client: four requests a second from 7 s to 14 s, then one every three seconds.
fn requests() -> Vec<Moment> {
    let burst = (7_000..14_000).step_by(250).map(Moment::from_millis);
    let trickle = (15..SECONDS as u64).step_by(3).map(Moment::from_secs);
    burst.chain(trickle).collect()
}

/// Per second, how many of the requests the algorithm admits; and the most in any window.
fn admitted<A: Algorithm>(requests: &[Moment]) -> (Vec<u64>, u64) {
    let clock = ManualClock::default();
    let mut limiter =
        Limiter::<A>::new(QUOTA.parse().expect("a valid quota")).expect("a plain quota");
    let mut per_second = vec![0; SECONDS];
    let mut times = Vec::new();
    for &at in requests {
        clock.set(at);
        if limiter.check_now(&clock, 1).expect("a cost of 1").allowed() {
            per_second[second(at)] += 1;
            times.push(clock.now());
        }
    }
    let span = Duration::from_secs(10);
    let worst = times
        .iter()
        .enumerate()
        .map(|(i, &end)| (i + 1 - times.partition_point(|&t| t + span <= end)) as u64)
        .max()
        .unwrap_or(0);
    (per_second, worst)
}

/// The second of the chart `at` falls in.
fn second(at: Moment) -> usize {
    usize::try_from(at.since_origin().as_secs()).expect("the chart runs for seconds")
}

/// One row of digits, a digit per second ('.' for none).
fn row(label: &str, counts: &[u64]) -> String {
    let cells: String = counts
        .iter()
        .map(|&n| match n {
            0 => '.',
            n => char::from_digit(n.min(9) as u32, 10).unwrap_or('+'),
        })
        .collect();
    format!("{label:<16}{cells}")
}

/// The whole chart.
pub(crate) fn render() -> String {
    let requests = requests();
    let mut asked = vec![0; SECONDS];
    for at in &requests {
        asked[second(*at)] += 1;
    }
    let results = [
        ("SlidingLog", admitted::<SlidingLog>(&requests)),
        ("SlidingCounter", admitted::<SlidingCounter>(&requests)),
        ("FixedWindow", admitted::<FixedWindow>(&requests)),
        ("Gcra", admitted::<Gcra>(&requests)),
    ];
    let mut out = String::new();
    let _ = writeln!(
        out,
        "one bursty client against four algorithms, each with the quota `{QUOTA}`"
    );
    let _ = writeln!(out, "admitted per second (a digit a second, '.' for none):");
    let _ = writeln!(out);
    let _ = writeln!(out, "{:<16}0    5    10   15   20   25", "second");
    let _ = writeln!(out, "{}", row("asked", &asked));
    for (name, (per_second, _)) in &results {
        let _ = writeln!(out, "{}", row(name, per_second));
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "most admitted in any 10 s window (the quota says 5):");
    for (name, (_, worst)) in &results {
        let note = match *name {
            "SlidingLog" => "exact: never more than the quota",
            "SlidingCounter" => "an estimate: over after a burst at a window's end",
            "FixedWindow" => "twice the quota across the boundary at 10 s",
            _ => "a token bucket: its burst, then the refill",
        };
        let _ = writeln!(out, "  {name:<16}{worst:>2}   {note}");
    }
    out
}
