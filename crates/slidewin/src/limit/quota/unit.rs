//! The units of a quota's span, and the words they are written as (`s`, `sec`, `second`,
//! `Minutes`, ...), with the calendar words a span refuses (`month`, `year`).

/// The units of a span, smallest first (their order is the order of their sizes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Unit {
    Nanosecond,
    Microsecond,
    Millisecond,
    Second,
    Minute,
    Hour,
    Day,
    Week,
}

impl Unit {
    pub(super) fn nanos(self) -> u64 {
        match self {
            Unit::Nanosecond => 1,
            Unit::Microsecond => 1_000,
            Unit::Millisecond => 1_000_000,
            Unit::Second => 1_000_000_000,
            Unit::Minute => 60_000_000_000,
            Unit::Hour => 3_600_000_000_000,
            Unit::Day => 86_400_000_000_000,
            Unit::Week => 604_800_000_000_000,
        }
    }

    pub(super) fn symbol(self) -> &'static str {
        match self {
            Unit::Nanosecond => "ns",
            Unit::Microsecond => "µs",
            Unit::Millisecond => "ms",
            Unit::Second => "s",
            Unit::Minute => "m",
            Unit::Hour => "h",
            Unit::Day => "d",
            Unit::Week => "w",
        }
    }

    /// The next larger unit, which a later part of a span must stay below.
    pub(super) fn larger(self) -> Option<Unit> {
        match self {
            Unit::Nanosecond => Some(Unit::Microsecond),
            Unit::Microsecond => Some(Unit::Millisecond),
            Unit::Millisecond => Some(Unit::Second),
            Unit::Second => Some(Unit::Minute),
            Unit::Minute => Some(Unit::Hour),
            Unit::Hour => Some(Unit::Day),
            Unit::Day => Some(Unit::Week),
            Unit::Week => None,
        }
    }
}

/// What a word of letters names: a unit, months or years (refused), or nothing.
pub(super) enum Named {
    Unit(Unit),
    Calendar(&'static str),
    Nothing,
}

/// The unit table of the [`Quota`] docs. Both micro signs are there: the micro sign U+00B5
/// (what jiff and `Duration`'s `Debug` print) and the Greek mu U+03BC (what keyboards type).
pub(super) fn named(word: &str) -> Named {
    const UNITS: &[(&str, Unit)] = &[
        ("ns", Unit::Nanosecond),
        ("nsec", Unit::Nanosecond),
        ("nsecs", Unit::Nanosecond),
        ("nanosecond", Unit::Nanosecond),
        ("nanoseconds", Unit::Nanosecond),
        ("us", Unit::Microsecond),
        ("usec", Unit::Microsecond),
        ("usecs", Unit::Microsecond),
        ("\u{b5}s", Unit::Microsecond),
        ("\u{b5}sec", Unit::Microsecond),
        ("\u{b5}secs", Unit::Microsecond),
        ("\u{3bc}s", Unit::Microsecond),
        ("\u{3bc}sec", Unit::Microsecond),
        ("\u{3bc}secs", Unit::Microsecond),
        ("microsecond", Unit::Microsecond),
        ("microseconds", Unit::Microsecond),
        ("ms", Unit::Millisecond),
        ("msec", Unit::Millisecond),
        ("msecs", Unit::Millisecond),
        ("millisecond", Unit::Millisecond),
        ("milliseconds", Unit::Millisecond),
        ("s", Unit::Second),
        ("sec", Unit::Second),
        ("secs", Unit::Second),
        ("second", Unit::Second),
        ("seconds", Unit::Second),
        ("m", Unit::Minute),
        ("min", Unit::Minute),
        ("mins", Unit::Minute),
        ("minute", Unit::Minute),
        ("minutes", Unit::Minute),
        ("h", Unit::Hour),
        ("hr", Unit::Hour),
        ("hrs", Unit::Hour),
        ("hour", Unit::Hour),
        ("hours", Unit::Hour),
        ("d", Unit::Day),
        ("day", Unit::Day),
        ("days", Unit::Day),
        ("w", Unit::Week),
        ("wk", Unit::Week),
        ("wks", Unit::Week),
        ("week", Unit::Week),
        ("weeks", Unit::Week),
    ];
    const CALENDAR: &[(&str, &str)] = &[
        ("mo", "months"),
        ("mos", "months"),
        ("month", "months"),
        ("months", "months"),
        ("y", "years"),
        ("yr", "years"),
        ("yrs", "years"),
        ("year", "years"),
        ("years", "years"),
    ];
    if let Some(&(_, unit)) = UNITS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(word))
    {
        Named::Unit(unit)
    } else if let Some(&(_, what)) = CALENDAR
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(word))
    {
        Named::Calendar(what)
    } else {
        Named::Nothing
    }
}
