//! The shared login throttle behind `main.rs`, apart from the process so that a test can run
//! two of them against one Redis.

use std::io::Write;
use std::time::Duration;

use slidewin::Quota;
use slidewin_redis::{RedisLimiter, Rule};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The one user with a password; every other login fails.
const USER: &str = "alice";
const PASSWORD: &str = "letmein";

const USAGE: &str = "\
usage: shared_login_throttle [--redis URL] [--max-attempts N] [--window DURATION] [--prefix P]

Reads `USER PASSWORD` lines and refuses a user after N failed attempts in the last DURATION,
counted in Redis: start two of these side by side and they share the counts.

  --redis URL          default $REDIS_URL, else redis://127.0.0.1:6379/
  --max-attempts N     failed attempts allowed in the window (default 3)
  --window DURATION    the window, as a quota's span: 10s, 1m, 500ms (default 10s)
  --prefix P           the Redis key prefix (default login)
  --help               show this";

struct Config {
    url: String,
    rule: Rule,
    prefix: String,
}

fn parse_flags(args: &[String]) -> Result<Option<Config>, String> {
    let mut url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let (mut max_attempts, mut window, mut prefix) =
        ("3".to_string(), "10s".to_string(), "login".to_string());
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--redis" => url = value()?,
            "--max-attempts" => max_attempts = value()?,
            "--window" => window = value()?,
            "--prefix" => prefix = value()?,
            "--help" | "-h" => return Ok(None),
            other => return Err(format!("unknown flag `{other}`")),
        }
    }
    let quota: Quota = format!("{max_attempts} per {window}")
        .parse()
        .map_err(|e| format!("--max-attempts `{max_attempts}` / --window `{window}`: {e}"))?;
    let rule = Rule::sliding_log(quota).map_err(|e| e.to_string())?;
    Ok(Some(Config { url, rule, prefix }))
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
        Ok(redis) => redis.with_prefix(&config.prefix),
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return 1;
        }
    };
    match throttle(&redis, &config.rule, input, out, err).await {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            1
        }
    }
}

async fn throttle(
    redis: &RedisLimiter,
    rule: &Rule,
    input: impl AsyncBufRead + Unpin,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<(), Box<dyn std::error::Error>> {
    let (max, window) = (rule.quota().limit(), rule.quota().span());
    writeln!(
        out,
        "shared login throttle: a user is refused after {max} failed attempts in the last {window:?}, \
         counted in Redis; {USER}'s password is {PASSWORD}"
    )?;
    let mut lines = input.lines();
    while let Some(line) = lines.next_line().await? {
        let Some((user, password)) = line.trim().split_once(char::is_whitespace) else {
            if !line.trim().is_empty() {
                writeln!(err, "expected `USER PASSWORD`, got `{}`", line.trim())?;
            }
            continue;
        };
        let password = password.trim();
        // Ask first, without counting: a locked user is refused whatever the password.
        let locked = redis.peek(rule, user, 1).await?;
        if let Some(wait) = locked.retry_after() {
            writeln!(
                out,
                "{user}: refused: {max} failed attempts in the last {window:?}; try again in {}",
                seconds(wait)
            )?;
        } else if user == USER && password == PASSWORD {
            writeln!(out, "{user}: welcome")?;
        } else {
            // Count the failure. Another process may have filled the window meanwhile.
            let counted = redis.check(rule, user, 1).await?;
            match counted.retry_after() {
                None => writeln!(
                    out,
                    "{user}: wrong password ({} of {max} failed attempts in the last {window:?})",
                    max - counted.remaining()
                )?,
                Some(wait) => writeln!(out, "{user}: refused; try again in {}", seconds(wait))?,
            }
        }
        out.flush()?;
    }
    Ok(())
}

/// Seconds with up to three decimals: `7s`, `0.25s`.
fn seconds(d: Duration) -> String {
    let text = format!("{:.3}", d.as_secs_f64());
    format!("{}s", text.trim_end_matches('0').trim_end_matches('.'))
}
