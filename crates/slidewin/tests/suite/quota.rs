//! Quota strings: one strict grammar (the EBNF in the `Quota` docs), and errors that quote the
//! text as typed and point at the byte refused. Each test pins a form that an older parser
//! (a split on `burst`, `/` and ` per `, then jiff's span parser) read as something else.

use std::time::Duration;

use slidewin::limit::{FixedWindow, Gcra, SlidingCounter, SlidingLog};
use slidewin::{ConfigError, Quota};

fn q(text: &str) -> Quota {
    text.parse().unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn quota(limit: u64, span: Duration) -> Quota {
    Quota::new(limit, span).unwrap()
}

/// The message for `text`, which must be refused.
fn refused(text: &str) -> String {
    match text.parse::<Quota>() {
        Ok(quota) => panic!("{text:?} was read as `{quota}`"),
        Err(err) => err.to_string(),
    }
}

#[test]
fn burst_glued_to_the_unit_is_refused() {
    // `10/sburst20` was read as 10 per second, burst 20; `1/sburst 2` as 1 per second, burst 2.
    assert_eq!(
        refused("10/sburst20"),
        "the quota `10/sburst20` is not valid at byte 4: expected a space before `burst`"
    );
    assert_eq!(
        refused("1/sburst 2"),
        "the quota `1/sburst 2` is not valid at byte 3: expected a space before `burst`"
    );
    assert_eq!(
        refused("1/s burst2"),
        "the quota `1/s burst2` is not valid at byte 9: expected a space after `burst`"
    );
    assert_eq!(
        q("1/s burst 2"),
        quota(1, Duration::from_secs(1)).with_burst(2).unwrap()
    );
}

#[test]
fn a_zero_count_of_months_or_years_is_refused() {
    // `1/0y 1s` and `1/0mo 1s` were read as one second: a zero count hid the calendar unit.
    assert_eq!(
        refused("1/0y 1s"),
        "the quota `1/0y 1s` is not valid at byte 2: `0y` is in years, and months and years \
         have no fixed length: write the span in days, as in `30d`"
    );
    assert_eq!(
        refused("1/0mo 1s"),
        "the quota `1/0mo 1s` is not valid at byte 2: `0mo` is in months, and months and years \
         have no fixed length: write the span in days, as in `30d`"
    );
}

#[test]
fn a_zero_part_of_a_span_is_refused() {
    assert_eq!(
        refused("1/1m 0s"),
        "the quota `1/1m 0s` is not valid at byte 5: the part `0s` is zero; leave it out"
    );
    assert_eq!(
        refused("1/0h 30m"),
        "the quota `1/0h 30m` is not valid at byte 2: the part `0h` is zero; leave it out"
    );
}

#[test]
fn a_fraction_with_a_comma_or_a_point_is_refused() {
    // `1/5,5s` was read as 5.5 seconds.
    assert_eq!(
        refused("1/5,5s"),
        "the quota `1/5,5s` is not valid at byte 3: `5,5` is not a whole number: write the \
         span in a smaller unit, as in `1500ms` for 1.5 seconds"
    );
    assert!(refused("1/1.5s").contains("at byte 3: `1.5` is not a whole number"));
    assert!(refused("1/PT1.5S").contains("at byte 5: `1.5` is not a whole number"));
    assert_eq!(q("1/5500ms"), quota(1, Duration::from_millis(5_500)));
}

#[test]
fn a_signed_span_is_refused() {
    // `1/+5s` was read as five seconds.
    assert_eq!(
        refused("1/+5s"),
        "the quota `1/+5s` is not valid at byte 2: expected the span (`minute`, `10 seconds` \
         or `PT90S`), found `+`"
    );
    assert!(
        refused("1/-5s").ends_with(
            "at byte 2: expected the span (`minute`, `10 seconds` or `PT90S`), found `-`"
        )
    );
    assert!(refused("1/P-5D").contains("at byte 3: expected a number or `T` after `P`, found `-`"));
}

#[test]
fn a_part_as_large_as_the_next_unit_is_refused() {
    // `1/1d 25h` was read as 49 hours.
    assert_eq!(
        refused("1/1d 25h"),
        "the quota `1/1d 25h` is not valid at byte 5: `25h` is not less than 1d: each part \
         after the first is less than one of the next larger unit, as in `1h 30m`"
    );
    assert!(refused("1/1m 90s").contains("at byte 5: `90s` is not less than 1m"));
    assert!(refused("1/P1DT24H").contains("at byte 6: `24H` is not less than 1d"));
    assert!(refused("1/1s 1m").contains("at byte 5: `1m` comes after `1s`"));
    assert!(refused("1/1s 1s").contains("at byte 5: `1s` comes after `1s`"));
    // The first part may be as large as needed, and the rest must each fit below.
    assert_eq!(q("1/49h"), quota(1, Duration::from_secs(49 * 3_600)));
    assert_eq!(q("1/1d 23h"), quota(1, Duration::from_secs(47 * 3_600)));
    assert_eq!(
        q("1/1h 59m 59s 999ms"),
        quota(1, Duration::from_millis(7_199_999))
    );
}

#[test]
fn micro_sign_greek_mu_and_us_are_the_same_unit() {
    // `1/us` was accepted but `1/µs` was not.
    let micro = quota(1, Duration::from_micros(1));
    for text in [
        "1/us",
        "1/\u{b5}s",  // the micro sign
        "1/\u{3bc}s", // the Greek small letter mu
        "1/usec",
        "1/\u{b5}secs",
        "1/\u{3bc}sec",
        "1/microsecond",
        "1/1 microseconds",
        "1/1\u{b5}s",
        "1/1 \u{3bc}s",
    ] {
        assert_eq!(q(text), micro, "{text}");
    }
    assert_eq!(micro.to_string(), "1 per 1\u{b5}s");
}

#[test]
fn tabs_work_around_per_as_around_the_slash() {
    let expected = quota(10, Duration::from_secs(60));
    for text in [
        "10\tper\tminute",
        "10 per\tminute",
        "10\t per \tminute",
        "10\t/\tminute",
        "\t10 per minute\t",
    ] {
        assert_eq!(q(text), expected, "{text:?}");
    }
    assert_eq!(
        q("1 / 5\tseconds burst\t3"),
        quota(1, Duration::from_secs(5)).with_burst(3).unwrap()
    );
    // Only spaces and tabs: a newline or a no-break space is refused, and shown escaped.
    assert_eq!(
        refused("10 per minute\n"),
        "the quota `10 per minute\\n` is not valid at byte 13: expected ` burst N` or the end \
         of the quota, found `\\n`"
    );
    assert!(
        refused("10\u{a0}per minute").contains("at byte 2: expected `/` or `per` after the limit")
    );
}

#[test]
fn per_and_burst_are_words_between_spaces() {
    assert!(refused("10per minute").contains("at byte 2: expected a space before `per`"));
    assert!(refused("10 perminute").contains("at byte 6: expected a space after `per`"));
    assert!(refused("10 per").contains("at byte 6: expected the span after `per`, found the end"));
    assert!(refused("10/PT1Sburst 2").contains("at byte 7: expected a space before `burst`"));
}

#[test]
fn errors_quote_the_text_as_typed() {
    // The message used to show the text lowercased: "the span `p1y`".
    assert_eq!(
        refused("1/P1Y"),
        "the quota `1/P1Y` is not valid at byte 3: `1Y` is in years, and months and years \
         have no fixed length: write the span in days, as in `30d`"
    );
    assert_eq!(
        refused("100/Fortnight"),
        "the quota `100/Fortnight` is not valid at byte 4: `Fortnight` is not a unit of time; \
         use ns, us (µs), ms, s, m, h, d or w, or a name such as `seconds`"
    );
    assert_eq!(
        refused("TEN Per Minute"),
        "the quota `TEN Per Minute` is not valid at byte 0: expected the limit, a whole \
         number, found `TEN`"
    );
    let err = "  10 PER Munite".parse::<Quota>().unwrap_err();
    assert_eq!(err.input(), "  10 PER Munite");
    assert_eq!(
        err.reason(),
        "`Munite` is not a unit of time; use ns, us (µs), ms, s, m, h, d or w, or a name such \
         as `seconds`"
    );
    assert!(err.to_string().contains("at byte 9: "), "{err}");
}

#[test]
fn zero_and_oversized_counts_in_the_text_quote_it() {
    // They were the bare `ZeroLimit`, `ZeroSpan` and `ZeroBurst`, which do not say which text.
    assert_eq!(
        refused("0/s"),
        "the quota `0/s` is not valid at byte 0: the limit `0` must be at least 1"
    );
    assert_eq!(
        refused("5 per 0s"),
        "the quota `5 per 0s` is not valid at byte 6: the span `0s` is zero; it must be at \
         least 1ns"
    );
    assert_eq!(
        refused("5/s burst 00"),
        "the quota `5/s burst 00` is not valid at byte 10: the burst `00` must be at least 1"
    );
    assert_eq!(
        refused("18446744073709551616/s"),
        "the quota `18446744073709551616/s` is not valid at byte 0: the limit \
         `18446744073709551616` does not fit in 64 bits (the most is 18446744073709551615)"
    );
    assert_eq!(
        refused("1/213504d 1s"),
        "the quota `1/213504d 1s` is not valid at byte 2: the span `213504d 1s` is longer than \
         the longest span, 18446744073709551615ns (about 584 years)"
    );
    assert_eq!(q("1/213503d").span(), Duration::from_secs(213_503 * 86_400));
    // Built in code, they keep their own variants.
    assert_eq!(
        Quota::new(0, Duration::from_secs(1)),
        Err(ConfigError::ZeroLimit)
    );
    assert_eq!(Quota::new(1, Duration::ZERO), Err(ConfigError::ZeroSpan));
}

#[test]
fn several_quotas_in_one_string_are_refused() {
    // Python limits' `parse_many` notation: we take one quota per string.
    for (text, at, separator) in [
        ("1/second; 10/minute", 8, ';'),
        ("1/second, 10/minute", 8, ','),
        ("1/second|10/minute", 8, '|'),
        ("1/s burst 2; 10/minute", 11, ';'),
    ] {
        assert_eq!(
            refused(text),
            format!(
                "the quota `{text}` is not valid at byte {at}: a quota string holds one quota; \
                 `{separator}` separates several in Python limits' notation: parse each on its own"
            )
        );
    }
}

#[test]
fn a_huge_text_is_quoted_cut_to_its_start() {
    let text = format!("10/s {}", "y".repeat(1 << 20));
    let message = refused(&text);
    assert!(message.len() < 400, "{} bytes", message.len());
    assert!(message.starts_with(&format!(
        "the quota `10/s {}…` is not valid at byte 5",
        "y".repeat(251)
    )));
}

#[test]
fn python_limits_notation_reads_as_it_does_there() {
    for (text, limit, secs) in [
        ("10/minute", 10, 60),
        ("10 per minute", 10, 60),
        ("10/5 seconds", 10, 5),
        ("10 per 5 seconds", 10, 5),
        ("1/SECOND", 1, 1),
        ("1 / Second", 1, 1),
        ("1 per hour", 1, 3_600),
        ("1000 per day", 1_000, 86_400),
        ("2/3 hours", 2, 3 * 3_600),
    ] {
        assert_eq!(q(text), quota(limit, Duration::from_secs(secs)), "{text}");
    }
    // Python limits takes months and years; their lengths vary, so they are refused here.
    assert!(refused("1/month").contains("months and years have no fixed length"));
    assert!(refused("1 per 2 years").contains("`2 years` is in years"));
}

#[test]
fn display_prints_the_grammar_and_reads_back() {
    for (text, shown) in [
        ("5/s", "5 per 1s"),
        ("100/minute", "100 per 1m"),
        ("3/PT90S", "3 per 1m 30s"),
        ("1000/day", "1000 per 24h"),
        ("1/1w", "1 per 168h"),
        ("1/1500us", "1 per 1ms 500\u{b5}s"),
        ("10/s burst 20", "10 per 1s burst 20"),
        ("18446744073709551615/ns", "18446744073709551615 per 1ns"),
        (
            "1/18446744073709551615ns",
            "1 per 5124095h 34m 33s 709ms 551\u{b5}s 615ns",
        ),
    ] {
        let quota = q(text);
        assert_eq!(quota.to_string(), shown, "{text}");
        assert_eq!(q(shown), quota, "{shown}");
    }
}

#[test]
fn a_rate_faster_than_a_nanosecond_is_refused_by_gcra_with_its_bound() {
    let fastest = q("18446744073709551615/ns");
    assert_eq!(
        Gcra::new(fastest).unwrap_err().to_string(),
        "Gcra cannot represent the quota `18446744073709551615 per 1ns`: more than one unit of \
         cost per nanosecond: its emission interval (span / limit) is at least 1ns, so the \
         limit can be at most the span in nanoseconds"
    );
    assert!(matches!(
        Gcra::new(q("1001/us")),
        Err(ConfigError::Unrepresentable {
            algorithm: "Gcra",
            ..
        })
    ));
    // The bound itself is taken: one unit per nanosecond.
    assert_eq!(
        Gcra::new(q("1000/us")).unwrap().emission_interval(),
        Duration::from_nanos(1)
    );
    // The sliding log and the sliding counter take the quota; the fixed window packs its
    // window and count into one word, and refuses it too.
    assert!(SlidingLog::new(fastest).is_ok());
    assert!(SlidingCounter::new(fastest).is_ok());
    assert!(matches!(
        FixedWindow::new(fastest),
        Err(ConfigError::Unrepresentable {
            algorithm: "FixedWindow",
            ..
        })
    ));
}

#[test]
fn a_word_with_a_micro_sign_where_per_goes_is_refused_without_a_panic() {
    // Found by the mutation property: a check of the word's first three bytes cut into `μ`.
    assert!(
        refused("10 Peμr minute")
            .contains("at byte 3: expected `/` or `per` after the limit, found `Peμr`")
    );
    assert!(refused("10 pμ s").contains("at byte 3: expected `/` or `per`"));
    assert!(refused("1/μburst").contains("at byte 2: `μburst` is not a unit of time"));
    assert!(refused("1/sμburst 2").contains("at byte 2: `sμburst` is not a unit of time"));
}
