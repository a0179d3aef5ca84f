//! A login throttle on an exact sliding window (the job of Perl's `LinkedList::Single`
//! sliding-window example): a user is refused after 3 failed
//! attempts in the last 10 seconds, and the program says when old attempts are forgotten.
//!
//! ```text
//! cargo run --release --example login_throttle
//! cargo run --release --example login_throttle -- --replay < crates/slidewin/examples/login_throttle/replay.txt
//! ```

mod throttle;

use std::io;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = throttle::run(
        &args,
        io::stdin().lock(),
        &mut io::stdout().lock(),
        &mut io::stderr().lock(),
    );
    ExitCode::from(code)
}
