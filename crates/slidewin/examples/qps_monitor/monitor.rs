//! The simulation behind the `qps_monitor` example (its test reads the same report).

use std::fmt::Write as _;
use std::time::Duration;

use slidewin::stats::MetricEvent;
use slidewin::{Moment, WindowMetrics};

/// One simulated request: arrives at `at`, is let through or blocked, and if let through
/// completes `rt` later, with or without an exception.
struct Request {
    at: u64,
    blocked: bool,
    rt: u64,
    exception: bool,
}

/// A small deterministic generator (`SplitMix64`), so that every run prints the same report.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Requests per second in second `s`: steady at 800, a burst to 2,000 in seconds 4 and 5.
fn rate_in(s: u64) -> u64 {
    if (4..6).contains(&s) { 2_000 } else { 800 }
}

fn traffic(seconds: u64) -> Vec<Request> {
    let mut rng = Rng(2026);
    let mut requests = Vec::new();
    for s in 0..seconds {
        let n = rate_in(s);
        for i in 0..n {
            // Spread evenly over the second, in microseconds.
            let at = s * 1_000_000 + i * 1_000_000 / n;
            // During the burst a limiter blocks what is over 1,500 per second.
            let blocked = n > 1_500 && i % 4 == 0;
            // Seconds 7 and 8: a failing dependency, slow and erroring.
            let failing = (7..9).contains(&s);
            let rt = if failing {
                150_000 + rng.below(150_000)
            } else {
                10_000 + rng.below(40_000)
            };
            let exception = rng.below(100) < if failing { 30 } else { 2 };
            requests.push(Request {
                at,
                blocked,
                rt,
                exception,
            });
        }
    }
    requests
}

/// Something happening at a time (µs): an arrival or a completion.
enum Happening {
    Arrival { blocked: bool },
    Completion { rt: u64, exception: bool },
}

/// The report: a line per second.
pub(crate) fn render() -> String {
    const SECONDS: u64 = 10;
    let interval = Duration::from_secs(1);
    let metrics = WindowMetrics::new(interval, 2, Moment::ZERO).expect("1 s in 2 buckets");
    let mut happenings: Vec<(u64, Happening)> = Vec::new();
    for r in traffic(SECONDS) {
        happenings.push((r.at, Happening::Arrival { blocked: r.blocked }));
        if !r.blocked {
            happenings.push((
                r.at + r.rt,
                Happening::Completion {
                    rt: r.rt,
                    exception: r.exception,
                },
            ));
        }
    }
    happenings.sort_by_key(|(t, _)| *t);
    let passes: Vec<u64> = happenings
        .iter()
        .filter(|(_, h)| matches!(h, Happening::Arrival { blocked: false }))
        .map(|(t, _)| *t)
        .collect();

    let mut out = String::new();
    let _ = writeln!(
        out,
        "  time  exact QPS  ours QPS  Sentinel's  |  avg RT  min RT  max RT  exceptions"
    );
    let mut next = happenings.iter().peekable();
    for s in 1..=SECONDS {
        let now_us = s * 1_000_000;
        while let Some((t, h)) = next.next_if(|(t, _)| *t <= now_us) {
            let t = Moment::from_nanos(t * 1_000);
            match *h {
                Happening::Arrival { blocked: false } => metrics.add(t, MetricEvent::Pass, 1),
                Happening::Arrival { blocked: true } => metrics.add(t, MetricEvent::Block, 1),
                Happening::Completion { rt, exception } => {
                    let outcome = if exception {
                        MetricEvent::Exception
                    } else {
                        MetricEvent::Success
                    };
                    metrics.add(t, outcome, 1);
                    metrics.add_rt(t, Duration::from_micros(rt));
                }
            }
        }
        let now = Moment::from_secs(s);
        let stats = metrics.stats(now);
        // The exact count of the last second, (now - 1 s, now].
        let exact = passes
            .iter()
            .filter(|&&t| t + 1_000_000 > now_us && t <= now_us)
            .count();
        #[allow(clippy::cast_precision_loss, reason = "a display")]
        let sentinel = stats.count(MetricEvent::Pass) as f64 / interval.as_secs_f64();
        let ms =
            |d: Option<Duration>| d.map_or("-".to_string(), |d| format!("{}ms", d.as_millis()));
        let _ = writeln!(
            out,
            "{:>5}s  {exact:>9}  {:>8.0}  {sentinel:>10.0}  |  {:>6}  {:>6}  {:>6}  {:>9.1}%",
            s,
            stats.rate(MetricEvent::Pass),
            ms(stats.avg_rt()),
            ms(stats.min_rt()),
            ms(stats.max_rt()),
            stats.exception_ratio().unwrap_or(0.0) * 100.0,
        );
    }
    let _ = writeln!(
        out,
        "\nRead on a second's boundary, the two valid buckets are [now - 500 ms, now) and the one\n\
         just begun: they cover 500 ms. Sentinel divides their sum by the whole second and reads\n\
         half; WindowMetrics divides by the 500 ms they cover."
    );
    out
}
