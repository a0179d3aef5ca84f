//! `slidewin period START END [--tz ZONE] [--month-end clamp|strict] [--json] [--units N]`.

use std::io::{self, BufRead, BufWriter, Write};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use jiff::ZonedDateTime;
use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use slidewin::{MonthEnd, Period};

use crate::json;

/// Exit code for bad input: a value that does not parse, or a period that cannot be measured
/// (the same code clap uses for a bad command line).
const BAD_INPUT: u8 = 2;

// The doc comments are the --help text, read in a terminal, not rendered as Markdown.
#[allow(clippy::doc_markdown)]
#[derive(Debug, Args)]
pub(crate) struct PeriodArgs {
    /// The start: a date, a civil datetime or a zoned datetime; `-` reads `START END` pairs
    /// from stdin.
    start: String,
    /// The end, in the same forms; omitted with `-`.
    end: Option<String>,
    /// Time zone for civil datetimes (and to convert zoned ones into), e.g.
    /// America/New_York. Days are then this zone's calendar days.
    #[arg(long, value_name = "ZONE")]
    tz: Option<String>,
    /// How a day of month missing from the end's month counts: clamp (2024-02-29 to
    /// 2025-02-28 is 1 year) or strict (11 months 30 days, as jiff and Temporal).
    #[arg(long, value_enum, default_value_t = MonthEndArg::Clamp)]
    month_end: MonthEndArg,
    /// Print {"years":..,"months":..,"days":..,"hours":..,"minutes":..,"seconds":..,"nanoseconds":..}.
    #[arg(long)]
    json: bool,
    /// At most this many units in the text, largest first (e.g. 2: "26 years 5 months").
    #[arg(long, value_name = "N", default_value_t = 6)]
    units: usize,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum MonthEndArg {
    /// A month is whole when start + n months, clamped to the month's last day, is not after
    /// the end.
    Clamp,
    /// The day of month must be reached (Temporal's and jiff's rule).
    Strict,
}

impl From<MonthEndArg> for MonthEnd {
    fn from(arg: MonthEndArg) -> MonthEnd {
        match arg {
            MonthEndArg::Clamp => MonthEnd::Clamp,
            MonthEndArg::Strict => MonthEnd::Strict,
        }
    }
}

/// A value as written: the form decides what kind of period is measured.
enum Point {
    Date(Date),
    DateTime(DateTime),
    Zoned(ZonedDateTime),
}

fn parse_point(which: &str, text: &str) -> Result<Point, String> {
    let parsed = if text.contains('[') {
        text.parse().map(Point::Zoned)
    } else if text.contains(['T', 't', ' ']) {
        text.parse().map(Point::DateTime)
    } else {
        text.parse().map(Point::Date)
    };
    parsed.map_err(|e| format!("invalid {which} {text:?}: {e}"))
}

/// Everything a line needs besides its two values.
struct Settings {
    tz: Option<TimeZone>,
    month_end: MonthEnd,
    json: bool,
    units: usize,
}

impl Settings {
    /// One answer, or a message naming the bad value.
    fn answer(&self, start: &str, end: &str) -> Result<String, String> {
        let start = parse_point("START", start)?;
        let end = parse_point("END", end)?;
        let period = self.measure(start, end).map_err(|e| e.to_string())?;
        Ok(if self.json {
            json::period(&period)
        } else {
            period.humanize(self.units)
        })
    }

    /// Two dates give a date period; a datetime on either side makes both datetimes (a date
    /// is its midnight); a zoned value or `--tz` makes both zoned, in `--tz` if given, else in
    /// the zoned value's zone.
    fn measure(&self, start: Point, end: Point) -> Result<Period, Box<dyn std::error::Error>> {
        let m = self.month_end;
        let zone = self.tz.clone().or_else(|| match (&start, &end) {
            (Point::Zoned(z), _) | (_, Point::Zoned(z)) => Some(z.time_zone().clone()),
            _ => None,
        });
        match (start, end, zone) {
            (Point::Date(a), Point::Date(b), _) => Ok(Period::between_dates(a, b, m)?),
            (a, b, None) => Ok(Period::between_datetimes(civil(a), civil(b), m)?),
            (a, b, Some(tz)) => {
                let (a, b) = (self.zoned(a, &tz)?, self.zoned(b, &tz)?);
                Ok(Period::between_zoned(&a, &b, m)?)
            }
        }
    }

    fn zoned(&self, point: Point, tz: &TimeZone) -> Result<ZonedDateTime, jiff::Error> {
        match point {
            Point::Date(d) => d.to_zoned_datetime(tz.clone()),
            Point::DateTime(dt) => dt.to_zoned_datetime(tz.clone()),
            // Converted only when --tz asks; otherwise two zones stay two zones, an error.
            Point::Zoned(z) if self.tz.is_some() => Ok(z.with_time_zone(tz.clone())),
            Point::Zoned(z) => Ok(z),
        }
    }
}

/// A civil value as a datetime: a date is its midnight (zoned values never reach here).
fn civil(point: Point) -> DateTime {
    match point {
        Point::Date(d) => d.to_datetime(jiff::civil::Time::midnight()),
        Point::DateTime(dt) => dt,
        Point::Zoned(z) => z.datetime(),
    }
}

pub(crate) fn run(args: &PeriodArgs) -> ExitCode {
    let tz = match args.tz.as_deref().map(TimeZone::get).transpose() {
        Ok(tz) => tz,
        Err(e) => {
            return fail(&format!(
                "invalid --tz {:?}: {e}",
                args.tz.as_deref().unwrap_or("")
            ));
        }
    };
    let settings = Settings {
        tz,
        month_end: args.month_end.into(),
        json: args.json,
        units: args.units,
    };
    match (args.start.as_str(), args.end.as_deref()) {
        ("-", None) => stdin_mode(&settings),
        ("-", Some(end)) => fail(&format!(
            "END {end:?} was given with `-` for START: with `-`, the pairs come from stdin"
        )),
        (_, None) => fail("END is missing: give START END, or `-` to read pairs from stdin"),
        (start, Some(end)) => match settings.answer(start, end) {
            Ok(line) => {
                println!("{line}");
                ExitCode::SUCCESS
            }
            Err(message) => fail(&message),
        },
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("slidewin period: {message}");
    ExitCode::from(BAD_INPUT)
}

/// One answer per input line, buffered both ways, so a million pairs is one process and a few
/// large writes. A bad line gets an empty line (or `{"error":...}` with `--json`) so answers
/// stay aligned with the input, a message on stderr naming the line and the value, and exit
/// code 2 at the end.
fn stdin_mode(settings: &Settings) -> ExitCode {
    let mut stdin = io::stdin().lock();
    let mut out = BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    let mut err = BufWriter::new(io::stderr().lock());
    let mut bad = false;
    let result = (|| -> io::Result<()> {
        // Lines as bytes, one buffer reused: a line that is not UTF-8 is a bad line, not the
        // end of the input.
        let mut bytes = Vec::new();
        let mut number = 0;
        loop {
            bytes.clear();
            if stdin.read_until(b'\n', &mut bytes)? == 0 {
                break;
            }
            number += 1;
            let answer = match std::str::from_utf8(&bytes) {
                Ok(line) => {
                    let mut words = line.split_whitespace();
                    match (words.next(), words.next(), words.next()) {
                        (Some(start), Some(end), None) => settings.answer(start, end),
                        _ => Err(format!("expected `START END`, got {:?}", line.trim_end())),
                    }
                }
                Err(_) => Err(format!(
                    "not UTF-8: {:?}",
                    String::from_utf8_lossy(&bytes).trim_end()
                )),
            };
            match answer {
                Ok(text) => writeln!(out, "{text}")?,
                Err(message) => {
                    bad = true;
                    writeln!(err, "slidewin period: line {number}: {message}")?;
                    if settings.json {
                        writeln!(out, "{}", json::error(&format!("line {number}: {message}")))?;
                    } else {
                        writeln!(out)?;
                    }
                }
            }
        }
        out.flush()?;
        err.flush()
    })();
    match result {
        // A reader that stops early (`| head`) is not our failure.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            drop(err);
            eprintln!("slidewin period: {e}");
            ExitCode::FAILURE
        }
        Ok(()) if bad => ExitCode::from(BAD_INPUT),
        Ok(()) => ExitCode::SUCCESS,
    }
}
