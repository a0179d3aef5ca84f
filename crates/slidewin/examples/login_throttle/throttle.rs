//! The login throttle behind `main.rs`, apart from the process so that a test can run it on a
//! replay and check every line it prints.

use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};
use std::time::Duration;

use slidewin::{Clock, EventWindow, ManualClock, Moment, MonotonicClock};

/// The one user with a password; every other login fails.
const USER: &str = "alice";
const PASSWORD: &str = "letmein";

const USAGE: &str = "\
usage: login_throttle [--max-attempts N] [--window DURATION] [--replay]

Reads `USER PASSWORD` lines from standard input and refuses a user after N failed attempts
in the last DURATION. With --replay, reads `SECONDS USER PASSWORD` lines and takes the time
from them, so that the output is the same on every run.

  --max-attempts N     failed attempts allowed in the window (default 3)
  --window DURATION    the window: 10s, 1m 30s, 500ms, or plain seconds (default 10s)
  --replay             take the time from the first field of each line
  --help               show this";

/// What the flags asked for.
struct Config {
    max_attempts: usize,
    /// An empty window of the chosen span: checked once, cloned for each user.
    window: EventWindow<()>,
    replay: bool,
}

enum Flags {
    Run(Config),
    Help,
}

fn parse_flags(args: &[String]) -> Result<Flags, String> {
    let mut config = Config {
        max_attempts: 3,
        window: EventWindow::new(Duration::from_secs(10)).map_err(|e| e.to_string())?,
        replay: false,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        // Both `--flag value` and `--flag=value`.
        let (flag, inline_value) = match arg.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_string())),
            None => (arg.as_str(), None),
        };
        let mut value = || {
            inline_value
                .clone()
                .or_else(|| args.next().cloned())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag {
            "--max-attempts" => {
                let text = value()?;
                config.max_attempts = match text.parse::<usize>() {
                    Ok(n) if n > 0 => n,
                    _ => {
                        return Err(format!(
                            "--max-attempts takes a whole number from 1, got `{text}`"
                        ));
                    }
                };
            }
            "--window" => config.window = parse_window(&value()?)?,
            "--replay" => config.replay = true,
            "--help" | "-h" => return Ok(Flags::Help),
            other => return Err(format!("unknown flag `{other}`")),
        }
    }
    Ok(Flags::Run(config))
}

/// `10s`, `1m 30s`, `500ms`, an ISO 8601 `PT10S` (all through jiff), or a plain number of seconds.
fn parse_window(text: &str) -> Result<EventWindow<()>, String> {
    let parsed = match text.parse::<f64>() {
        Ok(secs) => Duration::try_from_secs_f64(secs).map_err(|e| e.to_string()),
        Err(_) => text
            .parse::<jiff::SignedDuration>()
            .map_err(|e| e.to_string())
            .and_then(|d| Duration::try_from(d).map_err(|_| "it is negative".to_string())),
    };
    let window = parsed
        .map_err(|why| format!("--window takes a duration such as 10s, got `{text}`: {why}"))?;
    // The window's own check, so the message is the library's.
    EventWindow::new(window).map_err(|e| format!("--window `{text}`: {e}"))
}

/// Failed attempts per user, each user's in an exact window. A user whose failures have all
/// been forgotten is dropped, so memory follows the users with recent failures only.
struct Throttle {
    max_attempts: usize,
    /// An empty window, cloned for a user's first failure.
    empty: EventWindow<()>,
    /// Ordered, so that the "forgot" lines come out in the same order on every run.
    failures: BTreeMap<String, EventWindow<()>>,
}

impl Throttle {
    /// Expires every user's old failures, saying so for each one.
    fn forget(&mut self, now: Moment, out: &mut impl Write) -> io::Result<()> {
        let mut result = Ok(());
        self.failures.retain(|user, failures| {
            failures.expire(now, |(t, ())| {
                if result.is_ok() {
                    result = writeln!(
                        out,
                        "{}  {user}: forgot the failed attempt at {}",
                        stamp(now),
                        secs(t)
                    );
                }
            });
            !failures.is_empty()
        });
        result
    }

    fn attempt(
        &mut self,
        now: Moment,
        user: &str,
        password: &str,
        out: &mut impl Write,
    ) -> io::Result<()> {
        self.forget(now, out)?;
        let (max, window) = (self.max_attempts, secs_of(self.empty.span()));
        if let Some(failures) = self.failures.get(user) {
            if let Some(retry) = self.retry_after(failures, now) {
                return writeln!(
                    out,
                    "{}  {user}: refused: {max} failed attempts in the last {window}; try again in {}",
                    stamp(now),
                    secs_of(retry)
                );
            }
        }
        if user == USER && password == PASSWORD {
            return writeln!(out, "{}  {user}: welcome", stamp(now));
        }
        let failures = self
            .failures
            .entry(user.to_string())
            .or_insert_with(|| self.empty.clone());
        failures.record(now, ());
        let count = failures.len();
        write!(
            out,
            "{}  {user}: wrong password ({count} of {max} failed attempts in the last {window})",
            stamp(now)
        )?;
        match self.retry_after(&self.failures[user], now) {
            Some(retry) => writeln!(out, "; refused until {}", secs(now + retry)),
            None => writeln!(out),
        }
    }

    /// How long until this user may try again, if refused now: until the oldest of the
    /// failures in the window leaves it. Refused attempts are not recorded, so a user never has
    /// more than `max_attempts` failures.
    fn retry_after(&self, failures: &EventWindow<()>, now: Moment) -> Option<Duration> {
        if failures.count_in(now) < self.max_attempts {
            return None;
        }
        let (oldest, ()) = failures.oldest()?;
        Some((oldest + self.empty.span()).saturating_duration_since(now))
    }
}

/// Runs the throttle with these flags on these lines; returns the process's exit code.
pub(crate) fn run(
    args: &[String],
    input: impl BufRead,
    out: &mut impl Write,
    err: &mut impl Write,
) -> u8 {
    let config = match parse_flags(args) {
        Ok(Flags::Run(config)) => config,
        Ok(Flags::Help) => {
            let _ = writeln!(out, "{USAGE}");
            return 0;
        }
        Err(message) => {
            let _ = writeln!(err, "error: {message}\n\n{USAGE}");
            return 2;
        }
    };
    match throttle(&config, input, out, err) {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            1
        }
    }
}

fn throttle(
    config: &Config,
    input: impl BufRead,
    out: &mut impl Write,
    err: &mut impl Write,
) -> io::Result<()> {
    let mut throttle = Throttle {
        max_attempts: config.max_attempts,
        empty: config.window.clone(),
        failures: BTreeMap::new(),
    };
    writeln!(
        out,
        "login throttle: a user is refused after {} failed attempts in the last {}; \
         {USER}'s password is {PASSWORD}",
        config.max_attempts,
        secs_of(config.window.span())
    )?;
    let replay_clock = ManualClock::default();
    if !config.replay {
        writeln!(out, "type `USER PASSWORD` lines; end with Ctrl-D")?;
    }
    for (number, line) in input.lines().enumerate() {
        let line = line?;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parsed = if config.replay {
            parse_replay_line(line).map(|(at, rest)| {
                replay_clock.set(at);
                (replay_clock.now(), rest)
            })
        } else {
            // The monotonic clock counts from its first reading in the process, which is here.
            Some((MonotonicClock.now(), line))
        };
        let attempt = parsed.and_then(|(now, rest)| {
            let (user, password) = rest.split_once(char::is_whitespace)?;
            Some((now, user, password.trim()))
        });
        match attempt {
            Some((now, user, password)) => throttle.attempt(now, user, password, out)?,
            None => {
                let expected = if config.replay {
                    "SECONDS USER PASSWORD"
                } else {
                    "USER PASSWORD"
                };
                writeln!(
                    err,
                    "line {}: expected `{expected}`, got `{line}`",
                    number + 1
                )?;
            }
        }
        out.flush()?;
    }
    Ok(())
}

/// `SECONDS REST`, with SECONDS a non-negative decimal.
fn parse_replay_line(line: &str) -> Option<(Moment, &str)> {
    let (seconds, rest) = line.split_once(char::is_whitespace)?;
    let at = Duration::try_from_secs_f64(seconds.parse().ok()?).ok()?;
    Some((Moment::try_from(at).ok()?, rest.trim_start()))
}

/// A time on the throttle's clock, right-aligned for a column.
fn stamp(t: Moment) -> String {
    format!("{:>8}", secs(t))
}

fn secs(t: Moment) -> String {
    secs_of(t.since_origin())
}

/// Seconds with up to three decimals and no trailing zeros: `0s`, `1.5s`, `10s`.
fn secs_of(d: Duration) -> String {
    let text = format!("{:.3}", d.as_secs_f64());
    format!("{}s", text.trim_end_matches('0').trim_end_matches('.'))
}
