//! `slidewin period START END [--tz ZONE] [--month-end clamp|strict] [--json] [--units N]`.

use std::io::{self, BufRead, BufWriter, Write};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use jiff::civil::{Date, DateTime, Time};
use jiff::fmt::temporal::Pieces;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ZonedDateTime};
use slidewin::Period;
use slidewin::period::MonthEnd;

use crate::json;

/// Exit code for bad input: a value that does not parse, or a period that cannot be measured
/// (the same code clap uses for a bad command line).
const BAD_INPUT: u8 = 2;

/// The longest stdin line read, newline included. A pair of the longest values jiff reads
/// (six-digit years, nanoseconds, an offset, a zone name and annotations) is a few hundred
/// bytes; a longer line is refused unread, so one line never costs more than this. (--help,
/// in main.rs, gives the figure.)
const MAX_LINE: usize = 4096;

/// The most bytes of a value an error quotes; the rest is cut and its length given (--help
/// gives the figure too).
const QUOTE_MAX: usize = 200;

// The doc comments are the --help text, read in a terminal, not rendered as Markdown.
#[allow(clippy::doc_markdown)]
#[derive(Debug, Args)]
pub(crate) struct PeriodArgs {
    /// The start: a date, a civil datetime, an instant or a zoned datetime; `-` reads
    /// `START END` pairs from stdin.
    start: String,
    /// The end, in the same forms; omitted with `-`.
    end: Option<String>,
    /// Time zone for civil datetimes and dates, and to convert zoned datetimes and instants
    /// into, e.g. America/New_York. Days are then this zone's calendar days. Without it, a
    /// zoned value's zone counts, else UTC when a value is an instant.
    #[arg(long, value_name = "ZONE")]
    tz: Option<String>,
    /// How a day of month missing from the end's month counts: clamp (2024-02-29 to
    /// 2025-02-28 is 1 year) or strict (11 months 30 days, as jiff and Temporal).
    #[arg(long, value_enum, default_value_t = MonthEndArg::Clamp)]
    month_end: MonthEndArg,
    /// Print {"years":..,"months":..,"days":..,"hours":..,"minutes":..,"seconds":..,"nanoseconds":..}.
    #[arg(long)]
    json: bool,
    /// At most this many units in the text, largest first (e.g. 2: "26 years 5 months"); 1
    /// or more.
    #[arg(long, value_name = "N", default_value_t = 6,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
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
    /// An offset or `Z`, without a zone: a point on the timeline, not a calendar's.
    Instant(Timestamp),
    Zoned(ZonedDateTime),
}

/// jiff's Temporal (RFC 9557) parser decides the form: a `[zone]` annotation makes a zoned
/// datetime (jiff's rules: an offset beside it must be one the zone has then, or the value is
/// refused), an offset or `Z` alone an instant, a time a civil datetime, else a date.
fn parse_point(which: &str, text: &str) -> Result<Point, String> {
    let invalid = |reason: &dyn std::fmt::Display| {
        format!(
            "invalid {which} {}: {}",
            quote(text),
            cut(&reason.to_string())
        )
    };
    let pieces = Pieces::parse(text).map_err(|e| invalid(&e))?;
    let point = match (
        pieces.time(),
        pieces.offset(),
        pieces.time_zone_annotation(),
    ) {
        (Some(time), ..) if time.second() == 59 && is_leap_second(text) => {
            return Err(invalid(
                &"a leap second (:60) cannot be measured: jiff has no leap seconds and would \
                  read it as :59",
            ));
        }
        (_, _, Some(_)) => text.parse().map(Point::Zoned),
        (_, Some(_), None) => text.parse().map(Point::Instant),
        (Some(time), None, None) => Ok(Point::DateTime(pieces.date().to_datetime(time))),
        (None, None, None) => Ok(Point::Date(pieces.date())),
    };
    point.map_err(|e| invalid(&e))
}

/// Whether the seconds jiff read as 59 were written as 60: its parser takes a leap second
/// and clamps it to :59 without a trace. Only called on a value jiff has parsed, so the time
/// follows the first `T`, `t` or space (a date has none) and its seconds are its fifth and
/// sixth digits, with or without colons (`23:59:60`, `235960`).
fn is_leap_second(text: &str) -> bool {
    let Some(at) = text.find(['T', 't', ' ']) else {
        return false;
    };
    let mut digits = text[at + 1..]
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b':')
        .filter(u8::is_ascii_digit)
        .skip(4);
    (digits.next(), digits.next()) == (Some(b'6'), Some(b'0'))
}

/// `text` quoted as typed (Rust's escapes), cut to [`QUOTE_MAX`] bytes on a char boundary
/// with its length after a `…` when longer: an error never echoes a huge value whole.
fn quote(text: &str) -> String {
    match head(text, QUOTE_MAX) {
        None => format!("{text:?}"),
        Some(head) => format!("{head:?}… ({} bytes)", text.len()),
    }
}

/// An explanation from jiff, which may quote the value itself, cut like [`quote`] (the
/// limit doubled: the explanation's own words come first).
fn cut(reason: &str) -> String {
    match head(reason, 2 * QUOTE_MAX) {
        None => reason.to_owned(),
        Some(head) => format!("{head}… ({} bytes)", reason.len()),
    }
}

/// The first `max` bytes of `text`, back to a char boundary, if it is longer than that.
fn head(text: &str, max: usize) -> Option<&str> {
    if text.len() <= max {
        return None;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Some(&text[..end])
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

    /// Two dates give a date period. Otherwise the measurement runs on one zone's calendar:
    /// `--tz` if given, else the zone of a zoned value, else UTC when a value is an instant;
    /// every value is placed in that zone (a civil one read there, a date as its midnight,
    /// an instant or a zoned one converted). With none of those, both are civil datetimes.
    fn measure(&self, start: Point, end: Point) -> Result<Period, Box<dyn std::error::Error>> {
        let m = self.month_end;
        let zoned_zone = match (&start, &end) {
            (Point::Zoned(z), _) | (_, Point::Zoned(z)) => Some(z.time_zone().clone()),
            _ => None,
        };
        let instant = matches!(start, Point::Instant(_)) || matches!(end, Point::Instant(_));
        let zone = self
            .tz
            .clone()
            .or(zoned_zone)
            .or_else(|| instant.then_some(TimeZone::UTC));
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
            Point::Instant(t) => Ok(t.to_zoned_datetime(tz.clone())),
            // Converted only when --tz asks; otherwise two zones stay two zones, an error.
            Point::Zoned(z) if self.tz.is_some() => Ok(z.with_time_zone(tz.clone())),
            Point::Zoned(z) => Ok(z),
        }
    }
}

/// A civil value as a datetime: a date is its midnight (instants and zoned values never
/// reach here: they always bring a zone).
fn civil(point: Point) -> DateTime {
    match point {
        Point::Date(d) => d.to_datetime(Time::midnight()),
        Point::DateTime(dt) => dt,
        Point::Instant(t) => t.to_zoned_datetime(TimeZone::UTC).datetime(),
        Point::Zoned(z) => z.datetime(),
    }
}

pub(crate) fn run(args: &PeriodArgs) -> ExitCode {
    let tz = match args.tz.as_deref().map(TimeZone::get).transpose() {
        Ok(tz) => tz,
        Err(e) => {
            return fail(&format!(
                "invalid --tz {}: {}",
                quote(args.tz.as_deref().unwrap_or("")),
                cut(&e.to_string())
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
            "END {} was given with `-` for START: with `-`, the pairs come from stdin",
            quote(end)
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
/// code 2 at the end. A line longer than [`MAX_LINE`] is bad too: it is skipped, not kept.
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
            let length = read_line(&mut stdin, &mut bytes, MAX_LINE)?;
            if length == 0 {
                break;
            }
            number += 1;
            let answer = if length > MAX_LINE {
                Err(format!(
                    "longer than the {MAX_LINE} bytes a line may be: {}",
                    quote_start(&bytes, length)
                ))
            } else {
                match std::str::from_utf8(&bytes) {
                    Ok(line) => {
                        let mut words = line.split_whitespace();
                        match (words.next(), words.next(), words.next()) {
                            (Some(start), Some(end), None) => settings.answer(start, end),
                            _ => Err(format!(
                                "expected `START END`, got {}",
                                quote(line.trim_end())
                            )),
                        }
                    }
                    Err(_) => Err(format!(
                        "not UTF-8: {}",
                        quote(String::from_utf8_lossy(&bytes).trim_end())
                    )),
                }
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

/// Reads one line into `line`, keeping at most `max + 1` of its bytes (enough to tell that it
/// is too long) and skipping the rest, so memory stays bounded whatever the input. Returns the
/// line's full length with its newline, 0 at the end of the input.
fn read_line(input: &mut impl BufRead, line: &mut Vec<u8>, max: usize) -> io::Result<usize> {
    line.clear();
    let mut length = 0;
    loop {
        let buffer = match input.fill_buf() {
            Ok(buffer) => buffer,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buffer.is_empty() {
            return Ok(length);
        }
        let (taken, done) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buffer.len(), false),
        };
        let room = (max + 1).saturating_sub(line.len());
        line.extend_from_slice(&buffer[..taken.min(room)]);
        input.consume(taken);
        length += taken;
        if done {
            return Ok(length);
        }
    }
}

/// The start of a line that was too long to keep, quoted, with the line's full length.
fn quote_start(kept: &[u8], length: usize) -> String {
    let text = String::from_utf8_lossy(&kept[..kept.len().min(QUOTE_MAX)]);
    // Cut on a char boundary: the last char may be split and come out as U+FFFD; drop it.
    let text = text.strip_suffix('\u{fffd}').unwrap_or(&text);
    format!("{text:?}… ({length} bytes)")
}
