//! Seed 004's login throttle on Redis: the failed attempts are counted by an exact sliding log
//! in Redis (a rule named `failed`, checked at the Redis server's time; a user's count is the
//! key `{login:USER}:failed:stamps`), so every process that shares the Redis shares the
//! counts. Try two side by side:
//!
//! ```text
//! cargo run --example shared_login_throttle        # in one terminal
//! cargo run --example shared_login_throttle        # in another: same user, same counts
//! ```
//!
//! It needs a Redis (`--redis URL`, or `$REDIS_URL`, else `redis://127.0.0.1:6379/`) to start.
//! If Redis goes down while it runs, it goes on: `--on-redis-down closed` (the default)
//! refuses every login until Redis is back, `open` checks passwords without counting the
//! failures; either way it says so on standard error, and again when Redis is back.
//! `--window` reads as `login_throttle`'s does: `10` is ten seconds, as are `10s` and `PT10S`.

mod throttle;

use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let code = throttle::run(&args, stdin, &mut std::io::stdout(), &mut std::io::stderr()).await;
    ExitCode::from(code)
}
