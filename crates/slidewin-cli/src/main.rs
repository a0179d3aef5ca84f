//! `slidewin`: the command line of the slidewin workspace.
//!
//! ```text
//! slidewin serve                                      # the rate-limit service, built-in example
//! slidewin serve --config ratelimit.yaml --redis redis://127.0.0.1:6379
//! slidewin period 2000-05-15 2026-10-28               # 26 years 5 months 13 days
//! slidewin period 2024-03-09T21:00 2024-03-10T21:00 --tz America/New_York --json
//! printf '2024-02-29 2025-02-28\n' | slidewin period - --month-end strict
//! ```
//!
//! Thin glue: parsing and printing here, the arithmetic in the `slidewin` crate.

mod envoy_env;
mod json;
mod period;
mod replay;
mod serve;
mod telemetry;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Sliding time windows: the rate-limit service, and calendar arithmetic.
#[derive(Debug, Parser)]
#[command(name = "slidewin", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// The doc comments are the --help text, read in a terminal, not rendered as Markdown.
#[allow(clippy::doc_markdown)]
#[derive(Debug, Subcommand)]
enum Command {
    /// The rate-limit service: Envoy's RLS v3 gRPC, envoy ratelimit's POST /json, a live
    /// dashboard, Prometheus /metrics; exact sliding windows, in memory or Redis.
    ///
    /// Listens on 127.0.0.1 unless told otherwise. SIGHUP reloads the config; SIGTERM stops
    /// accepting, lets the checks in flight finish, and exits 0. A flag given twice takes
    /// its last value.
    #[command(args_override_self = true)]
    Serve(Box<serve::ServeArgs>),
    /// The calendar period from START to END: years, months, days (and hours, minutes,
    /// seconds between datetimes).
    ///
    /// START and END are dates (2000-05-15), civil datetimes (2024-03-09T21:00), instants
    /// (2024-03-09T21:00-05:00, 2024-03-10T02:00Z) or zoned datetimes
    /// (2024-03-09T21:00[America/New_York]; an offset beside the zone must be the zone's).
    /// An offset or Z makes the value an instant: it is measured on the calendar of --tz, else
    /// of the other value's zone, else of UTC, and so is a civil value or date beside it.
    /// Fractions of a second count ("0.5 seconds"); a leap second (:60) is refused.
    ///
    /// With `-` for START, reads `START END` pairs from stdin, one pair a line (at most 4096
    /// bytes), and answers one line each. Exit code 2 when a value is bad; in stdin mode the
    /// other lines are still answered. Errors quote at most 200 bytes of a value.
    Period(period::PeriodArgs),
    /// A config tried on recorded requests, with no clock and no network: what it would
    /// have admitted and denied per limit (the one that bound each descriptor: over it, else
    /// with the least left), the keys it would have denied most, and, with --against, the
    /// requests it decides otherwise than the config in force.
    ///
    /// Reads one request a line from stdin: a POST /json body with its "time", an RFC 3339
    /// instant or Unix seconds, as
    /// {"time":"2026-12-06T10:00:00.25Z","domain":"edge","descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}.
    /// Each config runs on the memory backend at the lines' times, so the same input gives
    /// the same report, byte for byte. Exit code 2 on a config or a line that is not one,
    /// naming the line.
    Replay(replay::ReplayArgs),
}

fn main() -> ExitCode {
    let argv = as_invoked(std::env::args_os().collect());
    let cli = Cli::parse_from(&argv);
    match cli.command {
        Command::Serve(args) if args.envoy_env => with_envoy_env(argv),
        Command::Serve(args) => serve::run(*args, Vec::new()),
        Command::Period(args) => period::run(&args),
        Command::Replay(args) => replay::run(&args),
    }
}

/// The command line, as `slidewin serve --envoy-env` when the binary runs as `ratelimit`
/// (envoy ratelimit's, which manifests name as their command): the image is the only change.
fn as_invoked(mut argv: Vec<OsString>) -> Vec<OsString> {
    let name = argv
        .first()
        .and_then(|arg0| std::path::Path::new(arg0).file_name())
        .and_then(|name| name.to_str());
    if name == Some("ratelimit") {
        argv.splice(1..1, ["serve".into(), "--envoy-env".into()]);
    }
    argv
}

/// `serve --envoy-env`: envoy ratelimit's variables as flags before those of `argv`, which win.
fn with_envoy_env(argv: Vec<OsString>) -> ExitCode {
    let translated = match envoy_env::translate(&|name| std::env::var(name).ok()) {
        Ok(translated) => translated,
        Err(e) => {
            eprintln!("slidewin serve --envoy-env: {e}");
            return ExitCode::from(2);
        }
    };
    let mut again: Vec<OsString> = argv.iter().take(2).cloned().collect();
    again.extend(translated.flags.into_iter().map(OsString::from));
    again.extend(argv.into_iter().skip(2));
    match Cli::parse_from(again).command {
        Command::Serve(args) => serve::run(*args, translated.warnings),
        Command::Period(_) | Command::Replay(_) => unreachable!("the command was serve"),
    }
}
