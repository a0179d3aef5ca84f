//! "Joined 3 years 2 months ago", the calendar period Facebook's `TimeInterval` is for, for a
//! few users who signed up in a few time zones. Each period is counted in the user's own zone
//! (their calendar days and months), with months clamped at the month's end, in at most two
//! units, in the user's language; Temporal's strict count is shown beside it.
//!
//! Deterministic: "now" is fixed.
//!
//! ```text
//! cargo run --example joined
//! ```

use jiff::{Timestamp, ZonedDateTime};
use slidewin::Period;
use slidewin::period::{Labels, MonthEnd};

const VIETNAMESE: Labels<'static> = Labels::new([
    ("năm", "năm"),
    ("tháng", "tháng"),
    ("ngày", "ngày"),
    ("giờ", "giờ"),
    ("phút", "phút"),
    ("giây", "giây"),
]);

/// Name, sign-up time in the user's zone, and whether they read Vietnamese.
const USERS: [(&str, &str, bool); 5] = [
    ("An", "2023-09-15T08:30[Asia/Ho_Chi_Minh]", true),
    ("Bob", "2024-02-29T23:30[America/New_York]", false),
    ("Chloé", "2026-10-31T10:00[Europe/Paris]", false),
    ("Kenji", "2021-01-31T09:00[Asia/Tokyo]", false),
    ("Lan", "2026-11-29T19:00[Asia/Ho_Chi_Minh]", true),
];

/// The report for the fixed "now": one line per user.
pub(crate) fn report() -> String {
    let now: Timestamp = "2026-11-30T12:00:00Z".parse().expect("a valid timestamp");
    let mut out = String::new();
    for (name, joined, vietnamese) in USERS {
        let joined: ZonedDateTime = joined.parse().expect("a valid zoned datetime");
        // "Now" on the user's own calendar, so their days and months are counted.
        let now_there = now.to_zoned_datetime(joined.time_zone().clone());
        let period = Period::between_zoned(&joined, &now_there, MonthEnd::Clamp)
            .expect("same zone, within jiff's range");
        // Temporal's rule for comparison: it differs when the sign-up day is past the 28th.
        let strict = Period::between_zoned(&joined, &now_there, MonthEnd::Strict)
            .expect("same zone, within jiff's range");
        let line = if vietnamese {
            format!("Đã tham gia {} trước", period.humanize_with(&VIETNAMESE, 2))
        } else {
            format!("Joined {} ago", period.humanize(2))
        };
        let joined = joined.to_string();
        let strict = strict.humanize(2);
        out.push_str(&format!(
            "{name:<6} {joined:<44} {line:<34} (strict: {strict})\n"
        ));
    }
    out
}

fn main() {
    print!("{}", report());
}
