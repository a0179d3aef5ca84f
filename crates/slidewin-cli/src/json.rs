//! The two JSON shapes the command prints, written by hand (one object per line, no
//! dependency for so little).

use std::fmt::Write as _;

use slidewin::Period;

/// `{"years":26,"months":5,"days":13,"hours":0,"minutes":0,"seconds":0,"nanoseconds":0}`:
/// every field, always, so a consumer never has to guess a missing key.
pub(crate) fn period(p: &Period) -> String {
    format!(
        "{{\"years\":{},\"months\":{},\"days\":{},\"hours\":{},\"minutes\":{},\"seconds\":{},\"nanoseconds\":{}}}",
        p.years(),
        p.months(),
        p.days(),
        p.hours(),
        p.minutes(),
        p.seconds(),
        p.nanoseconds()
    )
}

/// `{"error":"..."}`, the message escaped as a JSON string.
pub(crate) fn error(message: &str) -> String {
    let mut out = String::from("{\"error\":\"");
    for c in message.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                // Writing to a String cannot fail.
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push_str("\"}");
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn errors_are_escaped() {
        assert_eq!(
            super::error("bad \"x\"\\\n\u{1}"),
            r#"{"error":"bad \"x\"\\\n\u0001"}"#
        );
    }
}
