//! The notations a quota is read from, its display, and the errors for texts that are not
//! quotas.

use super::parse::cut;
use super::*;

fn q(text: &str) -> Quota {
    text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn quota(limit: u64, secs: u64) -> Quota {
    Quota::new(limit, Duration::from_secs(secs)).unwrap()
}

#[test]
fn the_notations_people_write() {
    for (text, expected) in [
        ("100/minute", quota(100, 60)),
        ("100 / minute", quota(100, 60)),
        ("100 per minute", quota(100, 60)),
        ("100/min", quota(100, 60)),
        ("100/m", quota(100, 60)),
        ("100/Minutes", quota(100, 60)),
        ("10/s", quota(10, 1)),
        ("10/sec", quota(10, 1)),
        ("10/second", quota(10, 1)),
        ("10 Per Second", quota(10, 1)),
        ("1/SECOND", quota(1, 1)),
        ("5 per 10 seconds", quota(5, 10)),
        ("5/10s", quota(5, 10)),
        ("5/10 s", quota(5, 10)),
        ("1000/day", quota(1000, 86_400)),
        ("1000/d", quota(1000, 86_400)),
        ("7/week", quota(7, 7 * 86_400)),
        ("60/hour", quota(60, 3_600)),
        ("60/h", quota(60, 3_600)),
        ("3 per 1m 30s", quota(3, 90)),
        ("3/1m30s", quota(3, 90)),
        ("3/PT90S", quota(3, 90)),
        ("3/pt1m30s", quota(3, 90)),
        ("3/P1D", quota(3, 86_400)),
        ("3/P1W1DT1H", quota(3, 8 * 86_400 + 3_600)),
        ("10/s burst 20", quota(10, 1).with_burst(20).unwrap()),
        ("10/s BURST 1", quota(10, 1).with_burst(1).unwrap()),
        ("  10/s burst 1\t", quota(10, 1).with_burst(1).unwrap()),
    ] {
        assert_eq!(q(text), expected, "{text}");
    }
    assert_eq!(
        q("4/250ms"),
        Quota::new(4, Duration::from_millis(250)).unwrap()
    );
    assert_eq!(q("1/ns").span_nanos(), 1);
    assert_eq!(q("1/18446744073709551615ns").span_nanos(), u64::MAX);
}

#[test]
fn display_reads_back() {
    for text in [
        "100/minute",
        "5 per 10 seconds",
        "10/s burst 20",
        "3/PT90S",
        "4/250ms",
        "1/1d",
        "1/1s 500ms 3us 2ns",
        "1/18446744073709551615ns",
    ] {
        let quota = q(text);
        assert_eq!(q(&quota.to_string()), quota, "{text} -> {quota}");
    }
    assert_eq!(q("5 per 10 seconds").to_string(), "5 per 10s");
    assert_eq!(q("1000/day").to_string(), "1000 per 24h");
    assert_eq!(q("3/PT90S").to_string(), "3 per 1m 30s");
    assert_eq!(q("1/1500us").to_string(), "1 per 1ms 500µs");
    assert_eq!(q("10/s burst 2").to_string(), "10 per 1s burst 2");
}

#[test]
fn bad_quotas_are_errors_quoting_the_text_at_the_byte_refused() {
    for (text, at, needle) in [
        ("", 0, "the quota is empty"),
        (
            "100",
            3,
            "expected `/` or `per` after the limit, found the end",
        ),
        (
            "ten/minute",
            0,
            "expected the limit, a whole number, found `ten`",
        ),
        (
            "-5/minute",
            0,
            "expected the limit, a whole number, found `-`",
        ),
        (
            "/minute",
            0,
            "expected the limit, a whole number, found `/`",
        ),
        (
            "100/",
            4,
            "expected the span (`minute`, `10 seconds` or `PT90S`), found the end",
        ),
        ("0/s", 0, "the limit `0` must be at least 1"),
        ("5 per 0s", 6, "the span `0s` is zero"),
        ("5/s burst 0", 10, "the burst `0` must be at least 1"),
        ("99999999999999999999/s", 0, "does not fit in 64 bits"),
        (
            "1/18446744073709551616ns",
            2,
            "is longer than the longest span",
        ),
        ("100/month", 4, "months and years have no fixed length"),
        ("100/2 years", 4, "`2 years` is in years"),
        ("100/fortnight", 4, "`fortnight` is not a unit of time"),
        ("100/-5s", 4, "found `-`"),
        (
            "10/s burst",
            10,
            "expected the burst, a whole number, found the end",
        ),
        (
            "10/s burst many",
            11,
            "expected the burst, a whole number, found `many`",
        ),
        (
            "10/s bursts 2",
            5,
            "expected ` burst N` or the end of the quota, found `bursts`",
        ),
        (
            "10/s burst 2 x",
            13,
            "expected the end of the quota, found `x`",
        ),
        (
            "10/s; 5/m",
            4,
            "a quota string holds one quota; `;` separates several",
        ),
        ("10 per", 6, "expected the span after `per`, found the end"),
        ("10per s", 2, "expected a space before `per`"),
        ("10 pers", 6, "expected a space after `per`"),
        (
            "1/P",
            3,
            "expected a number or `T` after `P`, found the end",
        ),
        ("1/Pizza", 2, "`Pizza` is not a unit of time"),
        ("1/PT", 4, "expected a number after `T`, found the end"),
        ("1/P5", 4, "expected W or D after `5`, found the end"),
        ("1/PT5X", 5, "expected H, M or S after `5`, found `X`"),
        ("1/1h 1h", 5, "`1h` comes after `1h`"),
        ("1/1m 90s", 5, "`90s` is not less than 1m"),
        ("1/1m 0s", 5, "the part `0s` is zero"),
        ("1/1.5s", 3, "`1.5` is not a whole number"),
        ("1/5", 3, "expected a unit after `5`, found the end"),
        (
            "1/s\n",
            3,
            "expected ` burst N` or the end of the quota, found `\\n`",
        ),
    ] {
        let err = text.parse::<Quota>().unwrap_err();
        let got = err.at();
        let message = err.to_string();
        assert_eq!(got, at, "{text:?}: {message}");
        assert!(message.contains(needle), "{text:?}: {message}");
        let quoted = format!("the quota `{}` is not valid at byte {at}: ", shown(text));
        assert!(message.starts_with(&quoted), "{text:?}: {message}");
    }
    assert_eq!(
        Quota::new(1, Duration::MAX),
        Err(ConfigError::SpanTooLong {
            span: Duration::MAX
        })
    );
}

#[test]
fn a_long_text_is_quoted_cut() {
    let text = format!("1/s burst 2 {}", "x".repeat(10_000));
    let message = text.parse::<Quota>().unwrap_err().to_string();
    assert!(message.len() < 500, "{}", message.len());
    assert!(
        message.contains(&format!("`1/s burst 2 {}…`", "x".repeat(244))),
        "{message}"
    );
    assert!(
        message.ends_with(&format!("found `{}…`", "x".repeat(32))),
        "{message}"
    );
    assert_eq!(cut("aµb", 2), "a…"); // never inside a character
}
