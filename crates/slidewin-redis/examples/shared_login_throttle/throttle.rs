//! The shared login throttle behind `main.rs`, apart from the process so that a test can run
//! two of them against one Redis, and one through an outage.

// Each test uses a part.
#![allow(dead_code)]

use std::io::{self, Write};
use std::time::Duration;

use slidewin::Quota;
use slidewin::limit::{Kind, Rule};
use slidewin_redis::{FailurePolicy, RedisDecision, RedisLimiter, Rules};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The rule's name: a user's failures are counted under the Redis key
/// `{PREFIX:USER}:failed:stamps`.
const RULE: &str = "failed";

/// The one user with a password; every other login fails.
const USER: &str = "alice";
const PASSWORD: &str = "letmein";

/// The longest line read whole: a user and a password fit many times over. A longer line is
/// skipped without being kept.
pub(crate) const MAX_LINE: usize = 1024;

/// The most bytes of a bad value or line a message quotes.
const QUOTED: usize = 200;

const USAGE: &str = "\
usage: shared_login_throttle [--redis URL] [--max-attempts N] [--window DURATION] [--prefix P]
                             [--on-redis-down closed|open]

Reads `USER PASSWORD` lines and refuses a user after N failed attempts in the last DURATION,
counted in Redis: start two of these side by side and they share the counts.

  --redis URL              default $REDIS_URL, else redis://127.0.0.1:6379/
  --max-attempts N         failed attempts allowed in the window (default 3)
  --window DURATION        the window: 10s, 1m 30s, 500ms, or plain seconds (default 10s)
  --prefix P               the Redis key prefix (default login)
  --on-redis-down POLICY   what to answer while Redis is down (default closed):
                             closed  refuse every login until Redis is back. A throttle that
                                     switched itself off whenever Redis is unreachable would
                                     give anyone who can overload Redis unlimited guesses.
                             open    check passwords without counting the failures: logins go
                                     on, but guessing is not limited until Redis is back
  --help                   show this

While Redis is down, each answer comes at once (the limiter does not wait for Redis once it
knows it is down) and says it was decided without Redis; a line on standard error says when
that starts and when Redis is back.";

/// What the flags asked for.
pub(crate) struct Config {
    pub(crate) url: String,
    /// The one rule: at most N failed attempts in the window, counted exactly.
    pub(crate) rules: Rules,
    pub(crate) prefix: String,
    pub(crate) policy: FailurePolicy,
}

/// The quota of the failed attempts: N per the window.
pub(crate) fn quota(rules: &Rules) -> Quota {
    rules.rule_set().rules()[0].quota()
}

pub(crate) fn parse_flags(args: &[String]) -> Result<Option<Config>, String> {
    let mut url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let (mut max_attempts, mut window) = (3, (Duration::from_secs(10), "10s".to_string()));
    let (mut prefix, mut policy) = ("login".to_string(), FailurePolicy::Closed);
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
                .ok_or_else(|| format!("{} needs a value", quote(flag)))
        };
        match flag {
            "--redis" => url = value()?,
            "--max-attempts" => {
                let text = value()?;
                max_attempts = match text.parse::<u64>() {
                    Ok(n) if n > 0 => n,
                    _ => {
                        return Err(format!(
                            "--max-attempts takes a whole number from 1, got `{}`",
                            quote(&text)
                        ));
                    }
                }
            }
            "--window" => {
                let text = value()?;
                window = (parse_window(&text)?, text);
            }
            "--prefix" => prefix = value()?,
            "--on-redis-down" => {
                let text = value()?;
                policy = match text.as_str() {
                    "closed" => FailurePolicy::Closed,
                    "open" => FailurePolicy::Open,
                    _ => {
                        return Err(format!(
                            "--on-redis-down takes `closed` or `open`, got `{}`",
                            quote(&text)
                        ));
                    }
                };
            }
            "--help" | "-h" => return Ok(None),
            other => return Err(format!("unknown flag `{}`", quote(other))),
        }
    }
    // Built from the numbers, so that the window means what `login_throttle`'s does.
    let (window, text) = window;
    let quota = Quota::new(max_attempts, window)
        .map_err(|e| format!("--window `{}`: {e}", quote(&text)))?;
    // The exact sliding log; on Redis it takes limits up to 100,000, and spans of whole
    // microseconds. Checked once, here, for what Redis can represent.
    let rules = Rule::new(RULE, Kind::SlidingLog, quota)
        .and_then(Rules::try_from)
        .map_err(|e| {
            format!(
                "--max-attempts {max_attempts} --window `{}`: {e}",
                quote(&text)
            )
        })?;
    Ok(Some(Config {
        url,
        rules,
        prefix,
        policy,
    }))
}

/// `10s`, `1m 30s`, `500ms`, an ISO 8601 `PT10S` (all through jiff), or a plain number of
/// seconds: what `login_throttle --window` takes, with the same meaning.
pub(crate) fn parse_window(text: &str) -> Result<Duration, String> {
    let parsed = match text.parse::<f64>() {
        Ok(secs) => Duration::try_from_secs_f64(secs).map_err(|e| e.to_string()),
        Err(_) => text
            .parse::<jiff::SignedDuration>()
            .map_err(|e| e.to_string())
            .and_then(|d| Duration::try_from(d).map_err(|_| "it is negative".to_string())),
    };
    parsed.map_err(|why| {
        format!(
            "--window takes a duration such as 10s, got `{}`: {why}",
            quote(text)
        )
    })
}

/// Runs the throttle; returns the process's exit code.
pub(crate) async fn run(
    args: &[String],
    input: impl AsyncBufRead + Unpin,
    out: &mut impl Write,
    err: &mut impl Write,
) -> u8 {
    let config = match parse_flags(args) {
        Ok(Some(config)) => config,
        Ok(None) => {
            let _ = writeln!(out, "{USAGE}");
            return 0;
        }
        Err(message) => {
            let _ = writeln!(err, "error: {message}\n\n{USAGE}");
            return 2;
        }
    };
    let redis = match RedisLimiter::connect(&config.url).await {
        Ok(redis) => redis
            .with_prefix(&config.prefix)
            .with_failure_policy(config.policy),
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return 1;
        }
    };
    match serve(&redis, &config.rules, config.policy, input, out, err).await {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            1
        }
    }
}

/// Answers the logins of `input` with `redis` (which answers by `policy` while Redis is down),
/// counting the failures under `rules`. Every decision is made at the Redis server's time
/// (`peek_now`, `check_now`), so that processes whose clocks disagree still agree.
pub(crate) async fn serve(
    redis: &RedisLimiter,
    rules: &Rules,
    policy: FailurePolicy,
    mut input: impl AsyncBufRead + Unpin,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<(), Box<dyn std::error::Error>> {
    let (max, window) = (quota(rules).limit(), seconds(quota(rules).span()));
    writeln!(
        out,
        "shared login throttle: a user is refused after {max} failed attempts in the last {window}, \
         counted in Redis; {USER}'s password is {PASSWORD}"
    )?;
    let mut outage = Outage {
        policy,
        down: false,
    };
    let mut line = Vec::with_capacity(MAX_LINE);
    let mut number = 0;
    while let Some(length) = next_line(&mut input, &mut line).await? {
        number += 1;
        let text = String::from_utf8_lossy(&line);
        if length > MAX_LINE {
            writeln!(
                err,
                "line {number}: longer than {MAX_LINE} bytes ({length}), skipped: `{}`",
                quote(&text)
            )?;
            continue;
        }
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let Some((user, password)) = text.split_once(char::is_whitespace) else {
            writeln!(
                err,
                "line {number}: expected `USER PASSWORD`, got `{}`",
                quote(text)
            )?;
            continue;
        };
        let password = password.trim();
        // Ask first, without counting: a locked user is refused whatever the password.
        let locked = redis.peek_now(rules, user, 1).await?;
        if outage.note(&locked, err)? && !locked.allowed() {
            writeln!(
                out,
                "{user}: refused: Redis is down, and every login is refused until it is back \
                 (--on-redis-down closed)"
            )?;
        } else if let Some(wait) = locked.retry_after() {
            writeln!(
                out,
                "{user}: refused: {max} failed attempts in the last {window}; try again in {}",
                seconds(wait)
            )?;
        } else if user == USER && password == PASSWORD {
            writeln!(out, "{user}: welcome")?;
        } else {
            // Count the failure. Another process may have filled the window meanwhile.
            let counted = redis.check_now(rules, user, 1).await?;
            if outage.note(&counted, err)? {
                writeln!(out, "{user}: wrong password (not counted: Redis is down)")?;
            } else {
                match counted.retry_after() {
                    None => writeln!(
                        out,
                        "{user}: wrong password ({} of {max} failed attempts in the last {window})",
                        max - counted.remaining()
                    )?,
                    Some(wait) => {
                        writeln!(out, "{user}: refused; try again in {}", seconds(wait))?;
                    }
                }
            }
        }
        out.flush()?;
    }
    Ok(())
}

/// Whether the answers come from Redis, told on standard error when that changes.
struct Outage {
    policy: FailurePolicy,
    down: bool,
}

impl Outage {
    /// Notes where `decision` came from; true when it was made without Redis.
    fn note(&mut self, decision: &RedisDecision, err: &mut impl Write) -> io::Result<bool> {
        match (decision.degraded(), self.down) {
            (Some(why), false) => {
                self.down = true;
                let doing = match self.policy {
                    FailurePolicy::Closed => "every login is refused",
                    FailurePolicy::Open => "failed attempts are not counted",
                };
                writeln!(
                    err,
                    "warning: deciding without Redis until it is back ({why}): {doing} \
                     (--on-redis-down {})",
                    self.flag()
                )?;
            }
            (None, true) => {
                self.down = false;
                writeln!(err, "Redis is back: failed attempts are counted again")?;
            }
            _ => {}
        }
        Ok(self.down)
    }

    fn flag(&self) -> &'static str {
        match self.policy {
            FailurePolicy::Closed => "closed",
            FailurePolicy::Open => "open",
        }
    }
}

/// The next line of `input` into `line`, without its end: at most [`MAX_LINE`] bytes of it
/// kept, the rest read and dropped. Returns the line's whole length, or `None` at the end.
pub(crate) async fn next_line(
    input: &mut (impl AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
) -> io::Result<Option<usize>> {
    line.clear();
    let mut length = 0;
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            return Ok((length > 0).then_some(length));
        }
        let end = available.iter().position(|&b| b == b'\n');
        let part = &available[..end.unwrap_or(available.len())];
        let room = (MAX_LINE + 1).saturating_sub(line.len());
        line.extend_from_slice(&part[..part.len().min(room)]);
        length += part.len();
        let used = part.len() + usize::from(end.is_some());
        input.consume(used);
        if end.is_some() {
            return Ok(Some(length));
        }
    }
}

/// `text` as a message quotes it: whole when short, else its first [`QUOTED`] bytes (cut at a
/// character) and how long it was.
fn quote(text: &str) -> String {
    if text.len() <= QUOTED {
        return text.to_string();
    }
    let mut end = QUOTED;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &text[..end], text.len())
}

/// Seconds with up to three decimals and no trailing zeros: `7s`, `0.25s`, `1.5s`.
fn seconds(d: Duration) -> String {
    let text = format!("{:.3}", d.as_secs_f64());
    format!("{}s", text.trim_end_matches('0').trim_end_matches('.'))
}
