//! `slidewin replay`: a config run against recorded requests, on their own times, with no
//! clock and no network: what it would have admitted and denied, which keys it would have
//! denied most, and, against the config in force, which requests it would decide otherwise.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::pin::pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use clap::Args;
use serde_json::{Map, Value, json};
use slidewin::Moment;
use slidewin::time::ManualClock;
use slidewin_server::{
    Bounds, Code, Config, Engine, Metrics, RateLimitRequest, RateLimitResponse, RequestError,
};
use slidewin_store::Memory;

/// The longest line read: a request as `POST /json` bounds its body, and a time.
const MAX_LINE: usize = Bounds::MAX_BODY_BYTES;

// The doc comments are the --help text, read in a terminal, not rendered as Markdown.
#[allow(clippy::doc_markdown)]
#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// The config to try: files or directories (their .yaml and .yml files), as serve's.
    #[arg(long, required = true, value_delimiter = ',')]
    config: Vec<PathBuf>,
    /// The config in force, to compare with: the requests it decides otherwise are listed.
    #[arg(long, value_delimiter = ',')]
    against: Vec<PathBuf>,
    /// The report as one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// How many of the keys denied most, and of the requests decided otherwise, are listed.
    #[arg(long, default_value_t = 10)]
    top: usize,
}

/// One config's engine, on a clock of its own that each line sets.
struct Replayed {
    engine: Engine<Memory>,
    clock: Arc<ManualClock>,
    tally: Tally,
}

impl Replayed {
    fn new(paths: &[PathBuf]) -> Result<Replayed, String> {
        let config = Config::load(paths).map_err(|e| e.to_string())?;
        let clock = Arc::new(ManualClock::new(Moment::ZERO));
        let engine = Engine::new(
            Memory::new(),
            config,
            clock.clone(),
            Bounds::default(),
            Metrics::new(),
        )
        .map_err(|e| e.to_string())?;
        Ok(Replayed {
            engine,
            clock,
            tally: Tally::default(),
        })
    }

    /// Decides `request` at `at`, and counts what was decided.
    fn decide(&mut self, request: &RateLimitRequest, at: Moment) -> Decided {
        self.clock.set(at);
        let answer = ready(self.engine.should_rate_limit(request));
        self.tally.add(request, &answer);
        match answer {
            Ok(response) if response.overall_code == Code::Ok => Decided::Ok,
            Ok(_) => Decided::OverLimit,
            Err(_) => Decided::Refused,
        }
    }
}

/// A request's decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decided {
    Ok,
    OverLimit,
    /// Out of the request bounds, as the service refuses it.
    Refused,
}

impl Decided {
    fn name(self) -> &'static str {
        match self {
            Decided::Ok => "OK",
            Decided::OverLimit => "OVER_LIMIT",
            Decided::Refused => "REFUSED",
        }
    }
}

/// What one config decided over the requests.
#[derive(Default)]
struct Tally {
    requests: u64,
    over_limit: u64,
    refused: u64,
    /// Descriptors that matched no limit.
    unmatched: u64,
    /// Per domain and limit (its one name, as `current_limit` gives it: the limit that bound
    /// each descriptor, the one over it when denied, else the one with the least left):
    /// descriptors admitted and denied.
    limits: BTreeMap<(String, String), (u64, u64)>,
    /// Descriptors denied, per domain, limit and entries.
    denied: HashMap<(String, String, String), u64>,
}

impl Tally {
    fn add(
        &mut self,
        request: &RateLimitRequest,
        answer: &Result<RateLimitResponse, RequestError>,
    ) {
        self.requests += 1;
        let Ok(response) = answer else {
            self.refused += 1;
            return;
        };
        if response.overall_code == Code::OverLimit {
            self.over_limit += 1;
        }
        for (descriptor, status) in request.descriptors.iter().zip(&response.statuses) {
            let Some(limit) = &status.current_limit else {
                self.unmatched += 1;
                continue;
            };
            let counts = self
                .limits
                .entry((request.domain.clone(), limit.name.clone()))
                .or_default();
            if status.code == Code::Ok {
                counts.0 += 1;
            } else {
                counts.1 += 1;
                let entries: Vec<String> = descriptor
                    .entries
                    .iter()
                    .map(|e| format!("{}={}", e.key, e.value))
                    .collect();
                let key = (
                    request.domain.clone(),
                    limit.name.clone(),
                    entries.join(","),
                );
                *self.denied.entry(key).or_default() += 1;
            }
        }
    }

    /// The `n` keys denied most: the most first, then in order of domain, limit and entries.
    fn most_denied(&self, n: usize) -> Vec<(&(String, String, String), u64)> {
        let mut all: Vec<_> = self
            .denied
            .iter()
            .map(|(key, &count)| (key, count))
            .collect();
        all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        all.truncate(n);
        all
    }
}

/// A request the two configs decide otherwise.
struct Changed {
    line: u64,
    at: Moment,
    before: Decided,
    after: Decided,
    request: String,
}

/// Runs `slidewin replay`: 0 when every line was read, 2 on a config or a line that is not one.
pub(crate) fn run(args: &ReplayArgs) -> ExitCode {
    match replay(args, std::io::stdin().lock()) {
        Ok(report) => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(report.as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("slidewin replay: {e}");
            ExitCode::from(2)
        }
    }
}

/// The report of `args`'s configs over the lines of `input`.
fn replay(args: &ReplayArgs, mut input: impl BufRead) -> Result<String, String> {
    let config =
        |paths: &[PathBuf]| Replayed::new(paths).map_err(|e| format!("{}: {e}", shown(paths)));
    let mut tried = config(&args.config)?;
    let mut against = if args.against.is_empty() {
        None
    } else {
        Some(config(&args.against)?)
    };
    let (mut first, mut last) = (None, None);
    let mut changed = Vec::new();
    let mut changed_count = 0_u64;
    let mut line = Vec::new();
    let mut number = 0_u64;
    while read_line(&mut input, &mut line).map_err(|e| format!("line {}: {e}", number + 1))? {
        number += 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let (at, request) = parse(&line).map_err(|e| format!("line {number}: {e}"))?;
        first.get_or_insert(at);
        last = Some(at);
        let after = tried.decide(&request, at);
        if let Some(before) = against.as_mut().map(|old| old.decide(&request, at))
            && before != after
        {
            changed_count += 1;
            if changed.len() < args.top {
                let entries = describe(&request);
                changed.push(Changed {
                    line: number,
                    at,
                    before,
                    after,
                    request: entries,
                });
            }
        }
    }
    let report = Report {
        args,
        span: first.zip(last),
        tried: &tried.tally,
        against: against.as_ref().map(|old| &old.tally),
        changed: (&changed, changed_count),
    };
    Ok(if args.json {
        report.json()
    } else {
        report.text()
    })
}

/// Reads a line into `line` (without its end), at most [`MAX_LINE`] bytes; false at the end.
fn read_line(input: &mut impl BufRead, line: &mut Vec<u8>) -> Result<bool, String> {
    line.clear();
    loop {
        let buffer = input.fill_buf().map_err(|e| e.to_string())?;
        if buffer.is_empty() {
            return Ok(!line.is_empty());
        }
        let (taken, ended) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buffer.len(), false),
        };
        line.extend_from_slice(&buffer[..taken - usize::from(ended)]);
        input.consume(taken);
        if line.len() > MAX_LINE {
            return Err(format!(
                "longer than {MAX_LINE} bytes, the most a line may hold"
            ));
        }
        if ended {
            return Ok(true);
        }
    }
}

/// A line: a `POST /json` body with its `time`, an RFC 3339 instant or Unix seconds.
fn parse(line: &[u8]) -> Result<(Moment, RateLimitRequest), String> {
    let mut object: Map<String, Value> =
        serde_json::from_slice(line).map_err(|e| format!("not a JSON object: {e}"))?;
    let time = object
        .remove("time")
        .ok_or("no `time`: give an RFC 3339 instant or Unix seconds")?;
    let at = moment(&time)?;
    let rest = serde_json::to_vec(&object).map_err(|e| e.to_string())?;
    let request = RateLimitRequest::from_json(&rest).map_err(|e| format!("the request: {e}"))?;
    Ok((at, request))
}

/// A line's `time` on the Unix timeline.
fn moment(time: &Value) -> Result<Moment, String> {
    let nanos = match time {
        Value::String(text) => text
            .parse::<jiff::Timestamp>()
            .map_err(|e| format!("`time` {text:?}: {e}"))?
            .as_nanosecond(),
        Value::Number(number) => {
            let secs = number.as_f64().unwrap_or(f64::NAN);
            if !(0.0..1.8e10).contains(&secs) {
                return Err(format!("`time` {number}: Unix seconds from 0 to 1.8e10"));
            }
            // The digits as written (a double's nearest would put 10:00:02.001 at
            // 10:00:02.000999936); an exponent, through the double.
            match decimal_nanos(&number.to_string()) {
                Some(nanos) => nanos,
                // Within the range just checked: far below i128's bounds.
                #[allow(clippy::cast_possible_truncation)]
                None => (secs * 1e9).round() as i128,
            }
        }
        other => {
            return Err(format!(
                "`time` {other}: an RFC 3339 instant or Unix seconds"
            ));
        }
    };
    u64::try_from(nanos)
        .map(Moment::from_nanos)
        .map_err(|_| format!("`time` {time}: before 1970 or after 2554"))
}

/// `secs.fraction` in nanoseconds, the fraction's digits past the ninth dropped; `None` for
/// any other form.
fn decimal_nanos(text: &str) -> Option<i128> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if !whole.bytes().all(|b| b.is_ascii_digit()) || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits: String = fraction
        .chars()
        .chain(std::iter::repeat('0'))
        .take(9)
        .collect();
    Some(whole.parse::<i128>().ok()? * 1_000_000_000 + digits.parse::<i128>().ok()?)
}

/// A moment as an RFC 3339 instant.
fn instant(at: Moment) -> String {
    jiff::Timestamp::from_nanosecond(i128::from(at.as_nanos()))
        .map_or_else(|_| format!("{}s", at.as_secs_f64()), |t| t.to_string())
}

/// A request as `domain key=value,key=value; ...`.
fn describe(request: &RateLimitRequest) -> String {
    let descriptors: Vec<String> = request
        .descriptors
        .iter()
        .map(|d| {
            let entries: Vec<String> = d
                .entries
                .iter()
                .map(|e| format!("{}={}", e.key, e.value))
                .collect();
            entries.join(",")
        })
        .collect();
    format!("{} {}", request.domain, descriptors.join("; "))
}

fn shown(paths: &[PathBuf]) -> String {
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    names.join(",")
}

/// Polls a check once: the memory backend never waits.
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => unreachable!("a check on the memory backend waited"),
    }
}

/// What the report is made of.
struct Report<'a> {
    args: &'a ReplayArgs,
    span: Option<(Moment, Moment)>,
    tried: &'a Tally,
    against: Option<&'a Tally>,
    changed: (&'a [Changed], u64),
}

impl Report<'_> {
    fn text(&self) -> String {
        let mut out = String::new();
        let span = self.span.map_or_else(
            || "no requests".to_owned(),
            |(from, to)| format!("from {} to {}", instant(from), instant(to)),
        );
        out.push_str(&format!(
            "slidewin replay of {}: {span}\n",
            shown(&self.args.config)
        ));
        let tally = self.tried;
        out.push_str(&format!(
            "  {} requests: {} over the limit, {} refused; {} descriptors matched no limit\n",
            tally.requests, tally.over_limit, tally.refused, tally.unmatched
        ));
        out.push_str(&format!(
            "\n  {:<20} {:<24} {:>10} {:>10}\n",
            "domain", "bound by limit", "admitted", "denied"
        ));
        for ((domain, limit), (admitted, denied)) in &tally.limits {
            out.push_str(&format!(
                "  {domain:<20} {limit:<24} {admitted:>10} {denied:>10}\n"
            ));
        }
        let most = tally.most_denied(self.args.top);
        if !most.is_empty() {
            out.push_str(&format!(
                "\n  denied most\n  {:>10} {:<20} {:<24} entries\n",
                "denied", "domain", "limit"
            ));
        }
        for ((domain, limit, entries), count) in most {
            out.push_str(&format!(
                "  {count:>10} {domain:<20} {limit:<24} {entries}\n"
            ));
        }
        if let Some(old) = self.against {
            let (listed, count) = self.changed;
            out.push_str(&format!(
                "\nagainst {}: {count} of {} requests decided otherwise ({} over the limit there)\n",
                shown(&self.args.against),
                tally.requests,
                old.over_limit,
            ));
            for change in listed {
                out.push_str(&format!(
                    "  line {}  {}  {} -> {}  {}\n",
                    change.line,
                    instant(change.at),
                    change.before.name(),
                    change.after.name(),
                    change.request
                ));
            }
        }
        out
    }

    fn json(&self) -> String {
        let tally = |t: &Tally| {
            let limits: Vec<Value> = t
                .limits
                .iter()
                .map(|((domain, limit), (admitted, denied))| {
                    json!({"domain": domain, "limit": limit, "admitted": admitted, "denied": denied})
                })
                .collect();
            let denied: Vec<Value> = t
                .most_denied(self.args.top)
                .into_iter()
                .map(|((domain, limit, entries), count)| {
                    json!({"domain": domain, "limit": limit, "entries": entries, "denied": count})
                })
                .collect();
            json!({
                "requests": t.requests,
                "over_limit": t.over_limit,
                "refused": t.refused,
                "unmatched_descriptors": t.unmatched,
                "limits": limits,
                "denied_most": denied,
            })
        };
        let mut report = json!({
            "config": shown(&self.args.config),
            "from": self.span.map(|(from, _)| instant(from)),
            "to": self.span.map(|(_, to)| instant(to)),
            "decided": tally(self.tried),
        });
        if let Some(old) = self.against {
            let (listed, count) = self.changed;
            let listed: Vec<Value> = listed
                .iter()
                .map(|c| {
                    json!({
                        "line": c.line,
                        "time": instant(c.at),
                        "before": c.before.name(),
                        "after": c.after.name(),
                        "request": c.request,
                    })
                })
                .collect();
            report["against"] = json!({
                "config": shown(&self.args.against),
                "decided": tally(old),
                "changed": count,
                "changed_first": listed,
            });
        }
        format!("{report}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::{decimal_nanos, moment};
    use serde_json::json;
    use slidewin::Moment;

    #[test]
    fn unix_seconds_are_read_as_written() {
        assert_eq!(
            decimal_nanos("1796551202.001"),
            Some(1_796_551_202_001_000_000)
        );
        assert_eq!(decimal_nanos("5"), Some(5_000_000_000));
        assert_eq!(decimal_nanos("0.1234567891"), Some(123_456_789));
        assert_eq!(decimal_nanos("1e9"), None);
        let at = moment(&json!(1_796_551_202.001)).unwrap();
        assert_eq!(at, Moment::from_nanos(1_796_551_202_001_000_000));
        assert_eq!(
            moment(&json!(1e9)).unwrap(),
            Moment::from_secs(1_000_000_000)
        );
        let rfc = moment(&json!("2026-12-06T10:00:02.001Z")).unwrap();
        assert_eq!(rfc, at);
        assert!(moment(&json!("1969-12-31T23:59:59Z")).is_err());
        assert!(moment(&json!(true)).is_err());
    }
}
