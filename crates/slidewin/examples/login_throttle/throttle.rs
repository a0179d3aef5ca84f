//! The login throttle behind `main.rs`, apart from the process so that a test can run it on a
//! replay and check every line it prints.

use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};
use std::time::Duration;

use slidewin::time::MonotonicClock;
use slidewin::{Clock, EventWindow, Moment};

/// The one user with a password; every other login fails.
const USER: &str = "alice";
const PASSWORD: &str = "letmein";

/// The longest line read: the rest of a longer one is skipped, not held, and the line is bad.
const MAX_LINE: usize = 4096;
/// The most of a bad value that an error message quotes.
const QUOTE_MAX: usize = 200;
/// Exit status when a line was bad (the slidewin CLI's, and clap's for a bad command line).
const BAD_INPUT: u8 = 2;

const USAGE: &str = "\
usage: login_throttle [--max-attempts N] [--window DURATION] [--replay]

Reads `USER PASSWORD` lines from standard input and refuses a user after N failed attempts
in the last DURATION. With --replay, reads `SECONDS USER PASSWORD` lines and takes the time
from them, so that the output is the same on every run: SECONDS is a decimal number of
seconds from 0 (12, 9.999; at most nine decimals) that never goes back.

A bad line is reported on standard error with its number, and skipped; the exit status is
then 2.

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
                            "--max-attempts takes a whole number from 1, got {}",
                            quote(&text)
                        ));
                    }
                };
            }
            "--window" => config.window = parse_window(&value()?)?,
            "--replay" => config.replay = true,
            "--help" | "-h" => return Ok(Flags::Help),
            other => return Err(format!("unknown flag {}", quote(other))),
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
    let window = parsed.map_err(|why| {
        format!(
            "--window takes a duration such as 10s, got {}: {why}",
            quote(text)
        )
    })?;
    // The window's own check, so the message is the library's.
    EventWindow::new(window).map_err(|e| format!("--window {}: {e}", quote(text)))
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
            if let Some(until) = self.refused_until(failures, now) {
                return writeln!(
                    out,
                    "{}  {user}: refused: {max} failed attempts in the last {window}; try again in {}",
                    stamp(now),
                    secs_of(until.saturating_duration_since(now))
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
        match self.refused_until(&self.failures[user], now) {
            Some(until) => writeln!(out, "; refused until {}", secs(until)),
            None => writeln!(out),
        }
    }

    /// When this user may try again, if refused now: when the oldest of the failures in the
    /// window leaves it. Refused attempts are not recorded, so a user never has more than
    /// `max_attempts` failures.
    fn refused_until(&self, failures: &EventWindow<()>, now: Moment) -> Option<Moment> {
        if failures.count_in(now) < self.max_attempts {
            return None;
        }
        let (oldest, ()) = failures.oldest()?;
        // Every time taken leaves a window's room before Moment::MAX (`on_the_timeline`).
        Some(oldest.checked_add(self.empty.span()).unwrap_or(Moment::MAX))
    }
}

/// Runs the throttle with these flags on these lines; returns the process's exit code: 0, 2 if
/// a flag or a line was bad, 1 if the input or output failed.
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
            return BAD_INPUT;
        }
    };
    match throttle(&config, input, out, err) {
        Ok(Lines::AllGood) => 0,
        Ok(Lines::SomeBad) => BAD_INPUT,
        // A reader that stops early (`| head`) is not our failure.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            1
        }
    }
}

/// Whether every line of the input was good.
enum Lines {
    AllGood,
    SomeBad,
}

/// The last replay time taken, to name it when a later line goes back.
struct Taken {
    line: usize,
    /// As typed, quoted (cut if long).
    quoted: String,
    at: Moment,
}

/// A good line's attempt.
struct Attempt<'a> {
    now: Moment,
    /// The time as typed, in replay.
    typed: Option<&'a str>,
    user: &'a str,
    password: &'a str,
}

fn throttle(
    config: &Config,
    mut input: impl BufRead,
    out: &mut impl Write,
    err: &mut impl Write,
) -> io::Result<Lines> {
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
    if !config.replay {
        writeln!(out, "type `USER PASSWORD` lines; end with Ctrl-D")?;
    }
    let mut taken: Option<Taken> = None;
    let mut lines = Lines::AllGood;
    // Bytes, one buffer reused: a line that is not UTF-8 is a bad line, not the end of the
    // input, and a line longer than MAX_LINE is not held whole.
    let mut bytes = Vec::new();
    let mut number = 0;
    while let Some(len) = read_line(&mut input, &mut bytes)? {
        number += 1;
        let line = match std::str::from_utf8(&bytes) {
            _ if len > MAX_LINE => Err(format!(
                "longer than {MAX_LINE} bytes: {}",
                quote_cut(&String::from_utf8_lossy(&bytes), len)
            )),
            Ok(line) => Ok(line.trim()),
            Err(_) => Err(format!(
                "not UTF-8: {}",
                quote(String::from_utf8_lossy(&bytes).trim())
            )),
        };
        let attempt = line.and_then(|line| {
            if line.is_empty() || line.starts_with('#') {
                return Ok(None);
            }
            if config.replay {
                parse_replay_line(line, taken.as_ref(), config.window.span()).map(Some)
            } else {
                // The monotonic clock counts from its first reading in the process, which is
                // here; it cannot reach the end of the timeline in 584 years, but is checked.
                let now = MonotonicClock.now();
                on_the_timeline(now, config.window.span())
                    .map_err(|why| format!("the clock reads {}: {why}", secs(now)))?;
                let (user, password) = user_password(line, "USER PASSWORD")?;
                Ok(Some(Attempt {
                    now,
                    typed: None,
                    user,
                    password,
                }))
            }
        });
        match attempt {
            Ok(None) => {}
            Ok(Some(attempt)) => {
                if let Some(typed) = attempt.typed {
                    taken = Some(Taken {
                        line: number,
                        quoted: quote(typed),
                        at: attempt.now,
                    });
                }
                throttle.attempt(attempt.now, attempt.user, attempt.password, out)?;
            }
            Err(message) => {
                lines = Lines::SomeBad;
                writeln!(err, "line {number}: {message}")?;
            }
        }
        out.flush()?;
    }
    Ok(lines)
}

/// `SECONDS USER PASSWORD`, its time checked against the end of the timeline and the last time
/// taken; an error naming what is wrong otherwise.
fn parse_replay_line<'a>(
    line: &'a str,
    taken: Option<&Taken>,
    window: Duration,
) -> Result<Attempt<'a>, String> {
    let expected = "SECONDS USER PASSWORD";
    let (seconds, rest) = line
        .split_once(char::is_whitespace)
        .ok_or_else(|| format!("expected `{expected}`, got {}", quote(line)))?;
    let now = parse_seconds(seconds, window)?;
    if let Some(taken) = taken.filter(|taken| now < taken.at) {
        return Err(format!(
            "the time {} is before line {}'s {}; replay times must not go back",
            quote(seconds),
            taken.line,
            taken.quoted
        ));
    }
    let (user, password) = user_password(rest.trim_start(), expected)
        .map_err(|_| format!("expected `{expected}`, got {}", quote(line)))?;
    Ok(Attempt {
        now,
        typed: Some(seconds),
        user,
        password,
    })
}

/// `USER PASSWORD`, or an error quoting the line.
fn user_password<'a>(line: &'a str, expected: &str) -> Result<(&'a str, &'a str), String> {
    line.split_once(char::is_whitespace)
        .map(|(user, password)| (user, password.trim()))
        .ok_or_else(|| format!("expected `{expected}`, got {}", quote(line)))
}

/// A replay time: a decimal number of seconds from 0, with at most nine decimals (to the
/// nanosecond), read exactly (no floating point), and leaving a window's room before
/// `Moment::MAX`, so that the time an attempt is forgotten is on the timeline too.
fn parse_seconds(text: &str, window: Duration) -> Result<Moment, String> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if text.starts_with(['-', '+']) {
        return Err(format!(
            "the time {} has a sign; replay times are seconds from 0, such as 12 or 9.999",
            quote(text)
        ));
    }
    if !digits(whole) || !digits(fraction) || whole.is_empty() && fraction.is_empty() {
        return Err(format!(
            "the time {} is not a number of seconds such as 12 or 9.999",
            quote(text)
        ));
    }
    if fraction.len() > 9 {
        return Err(format!(
            "the time {} has more than nine decimals (finer than a nanosecond)",
            quote(text)
        ));
    }
    let past_the_end = || {
        let last = Moment::MAX
            .checked_sub(window)
            .map_or_else(|| "0".to_string(), |t| exact_secs(t.since_origin()));
        format!(
            "the time {} is past the end of the timeline: with a window of {}, replay times go \
             up to {last}",
            quote(text),
            secs_of(window)
        )
    };
    // Only digits: the parse fails only past u64::MAX.
    let secs = if whole.is_empty() {
        0
    } else {
        whole.parse::<u64>().map_err(|_| past_the_end())?
    };
    // Nine digits at most, padded to nine: below 10^9, and never an error.
    let nanos = format!("{fraction:0<9}").parse::<u32>().unwrap_or(0);
    let at = Moment::try_from(Duration::new(secs, nanos)).map_err(|_| past_the_end())?;
    on_the_timeline(at, window).map_err(|_| past_the_end())
}

/// `t`, if a window's room is left after it before `Moment::MAX`.
fn on_the_timeline(t: Moment, window: Duration) -> Result<Moment, String> {
    match t.checked_add(window) {
        Some(_) => Ok(t),
        None => Err("past the end of the timeline".to_string()),
    }
}

/// Reads one line into `bytes`, without its newline, keeping at most `MAX_LINE + 1` bytes of
/// it (the rest is skipped); returns the line's whole length, or `None` at the end.
fn read_line(input: &mut impl BufRead, bytes: &mut Vec<u8>) -> io::Result<Option<usize>> {
    bytes.clear();
    let mut len = 0;
    let mut read_any = false;
    loop {
        let chunk = match input.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(read_any.then_some(len));
        }
        read_any = true;
        let (part, used, ends) = match chunk.iter().position(|&b| b == b'\n') {
            Some(at) => (&chunk[..at], at + 1, true),
            None => (chunk, chunk.len(), false),
        };
        let room = (MAX_LINE + 1).saturating_sub(bytes.len());
        bytes.extend_from_slice(&part[..part.len().min(room)]);
        len += part.len();
        input.consume(used);
        if ends {
            return Ok(Some(len));
        }
    }
}

/// `text` in backquotes for an error message, cut to `QUOTE_MAX` bytes if longer.
fn quote(text: &str) -> String {
    quote_cut(text, text.len())
}

/// `text` (the start of something `len` bytes long) in backquotes, cut to `QUOTE_MAX` bytes
/// at a character boundary, saying how long it was if cut.
fn quote_cut(text: &str, len: usize) -> String {
    if len <= QUOTE_MAX && text.len() == len {
        return format!("`{text}`");
    }
    let mut end = QUOTE_MAX.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("`{}…` ({len} bytes)", &text[..end])
}

/// A time on the throttle's clock, right-aligned for a column.
fn stamp(t: Moment) -> String {
    format!("{:>8}", secs(t))
}

fn secs(t: Moment) -> String {
    secs_of(t.since_origin())
}

/// Seconds with up to three decimals (rounded) and no trailing zeros: `0s`, `1.5s`, `10s`.
fn secs_of(d: Duration) -> String {
    let millis = (d.as_nanos() + 500_000) / 1_000_000;
    let text = format!("{}.{:03}", millis / 1_000, millis % 1_000);
    format!("{}s", text.trim_end_matches('0').trim_end_matches('.'))
}

/// Seconds to the nanosecond, no trailing zeros: `18446744063.709551615`.
fn exact_secs(d: Duration) -> String {
    let text = format!("{}.{:09}", d.as_secs(), d.subsec_nanos());
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}
