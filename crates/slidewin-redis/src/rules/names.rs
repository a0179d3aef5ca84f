//! How the script, the Redis keys and the errors name each algorithm.

use slidewin::limit::{Kind, Rule};

/// The algorithm's number in the script.
pub(super) fn number(kind: Kind) -> u64 {
    match kind {
        Kind::SlidingLog => 1,
        Kind::SlidingCounter => 2,
        Kind::FixedWindow => 3,
        Kind::Gcra => 4,
        Kind::Leases => 5,
        Kind::Calendar => 6,
    }
}

/// `:name:kind`: what follows the hash tag in each Redis key of `rule`.
pub(crate) fn suffix(rule: &Rule) -> String {
    format!(":{}:{}", rule.name(), short(rule.kind()))
}

/// The algorithm in a key: short, as every key carries it.
fn short(kind: Kind) -> &'static str {
    match kind {
        // Its admissions packed in a string (the sorted sets of 0.1 were `log`).
        Kind::SlidingLog => "stamps",
        Kind::SlidingCounter => "counter",
        Kind::FixedWindow => "fixed",
        Kind::Gcra => "gcra",
        Kind::Leases => "leases",
        Kind::Calendar => "calendar",
    }
}

/// How the error names an algorithm on Redis.
pub(super) fn on_redis(kind: Kind) -> &'static str {
    match kind {
        Kind::SlidingLog => "SlidingLog on Redis",
        Kind::SlidingCounter => "SlidingCounter on Redis",
        Kind::FixedWindow => "FixedWindow on Redis",
        Kind::Gcra => "Gcra on Redis",
        Kind::Leases => "Leases on Redis",
        Kind::Calendar => "Calendar on Redis",
    }
}
