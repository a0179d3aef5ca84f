//! A calendar quota's fields in the YAML: `zone` (an IANA name, looked up in jiff's tz
//! database), `anchor` (a date, or a date and time) and `month_end` (`clamp` or `strict`),
//! each checked as it is read.

use std::fmt;

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use serde::Deserialize;
use serde::de::{self, Deserializer};
use slidewin::limit::{CalendarQuota, CalendarUnit};
use slidewin::period::MonthEnd;

use super::Unit;
use super::error::shown;

/// The longest zone name read: IANA's longest is 32 bytes (`America/Argentina/ComodRivadavia`).
const MAX_ZONE_LEN: usize = 64;

/// `zone`: a time zone by its IANA name (`Europe/Paris`), from the system's tz database, or
/// the copy built into the binary where the system has none (a container from scratch).
#[derive(Clone)]
pub(super) struct ZoneYaml(TimeZone);

impl<'de> Deserialize<'de> for ZoneYaml {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ZoneYaml, D::Error> {
        let name = String::deserialize(deserializer)?;
        if name.len() > MAX_ZONE_LEN {
            return Err(de::Error::custom(format_args!(
                "the zone `{}` is longer than {MAX_ZONE_LEN} bytes; a zone is an IANA name \
                 such as `Europe/Paris`",
                shown(&name)
            )));
        }
        TimeZone::get(&name).map(ZoneYaml).map_err(|_| {
            de::Error::custom(format_args!(
                "unknown time zone `{}`: expected an IANA name such as `Europe/Paris` or `UTC`",
                shown(&name)
            ))
        })
    }
}

/// `anchor`: a date (`2026-01-15`, its windows start at midnight) or a date and time
/// (`2026-01-15T06:00`), civil, in the limit's zone.
#[derive(Clone, Copy)]
pub(super) struct AnchorYaml {
    at: DateTime,
    /// Whether a time of day was written.
    timed: bool,
}

impl<'de> Deserialize<'de> for AnchorYaml {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<AnchorYaml, D::Error> {
        let text = String::deserialize(deserializer)?;
        // A date alone (`2026-01-15`) has no time-of-day separator: jiff reads it as midnight.
        let timed = text.trim().contains(['T', 't', ' ']);
        text.parse::<DateTime>()
            .map(|at| AnchorYaml { at, timed })
            .map_err(|_| {
                de::Error::custom(format_args!(
                    "invalid anchor `{}`: expected a date (`2026-01-15`) or a date and time \
                     (`2026-01-15T06:00`), in the limit's zone",
                    shown(&text)
                ))
            })
    }
}

/// `month_end`: where a monthly or yearly window starts in a month without its anchor's day
/// (a cycle from the 31st in April): `clamp` (the default) on the month's last day, `strict`
/// on the day after it.
#[derive(Clone, Copy)]
pub(super) struct MonthEndYaml(MonthEnd);

impl<'de> Deserialize<'de> for MonthEndYaml {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<MonthEndYaml, D::Error> {
        let text = String::deserialize(deserializer)?;
        match text.to_ascii_lowercase().as_str() {
            "clamp" => Ok(MonthEndYaml(MonthEnd::Clamp)),
            "strict" => Ok(MonthEndYaml(MonthEnd::Strict)),
            _ => Err(de::Error::custom(format_args!(
                "invalid month_end `{}`: expected `clamp` (a cycle from the 31st starts on a \
                 shorter month's last day) or `strict` (on the day after it)",
                shown(&text)
            ))),
        }
    }
}

impl fmt::Debug for AnchorYaml {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.at)
    }
}

/// `quota` in `zone`, from `anchor` (by `month_end`), and the envoy unit it reports.
pub(super) fn placed(
    quota: CalendarQuota,
    zone: Option<ZoneYaml>,
    anchor: Option<AnchorYaml>,
    month_end: Option<MonthEndYaml>,
) -> Result<(CalendarQuota, Unit), String> {
    let unit = quota.unit();
    let mut quota = match zone {
        Some(ZoneYaml(zone)) => quota.in_zone(zone),
        None => quota,
    };
    if let Some(anchor) = anchor {
        if unit == CalendarUnit::Day && !anchor.timed {
            return Err(
                "a calendar day starts at midnight: an `anchor` for days moves the \
                        time of day, so it needs one (`2026-01-01T06:00`)"
                    .to_owned(),
            );
        }
        let monday = CalendarQuota::new(1, unit).map_err(|e| e.to_string())?;
        if unit == CalendarUnit::Week && quota.anchor() != monday.anchor() {
            return Err(
                "give the week's first day in the quota (`from sunday`) or in \
                        `anchor`, not both"
                    .to_owned(),
            );
        }
        quota = quota.anchored(anchor.at);
    }
    if let Some(MonthEndYaml(month_end)) = month_end {
        if !matches!(unit, CalendarUnit::Month | CalendarUnit::Year) {
            return Err(
                "`month_end` goes with a calendar month or year, whose anchor's day some \
                 months lack"
                    .to_owned(),
            );
        }
        quota = quota.with_month_end(month_end);
    }
    let envoy = match unit {
        CalendarUnit::Day => Unit::Day,
        CalendarUnit::Week => Unit::Week,
        CalendarUnit::Month => Unit::Month,
        CalendarUnit::Year => Unit::Year,
    };
    Ok((quota, envoy))
}
