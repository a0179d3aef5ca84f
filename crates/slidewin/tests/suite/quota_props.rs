//! The quota parser against the grammar in the `Quota` docs, on random texts: valid quotas
//! drawn from the grammar, the same mutated, and short strings from an alphabet near it.
//!
//! The reference is the EBNF written as a list-of-successes recognizer: every rule returns
//! every way it can match a prefix, with no lookahead and no greediness, so it is the grammar
//! read literally. The parser must accept exactly the texts the reference derives (and then
//! read the same quota), and every quota it reads must print back to a text that reads the
//! same.

use std::time::Duration;

use proptest::prelude::*;
use slidewin::Quota;

/// The unit table of the `Quota` docs: names and sizes in nanoseconds, smallest unit first.
const UNITS: [(&[&str], u64); 8] = [
    (&["ns", "nsec", "nsecs", "nanosecond", "nanoseconds"], 1),
    (
        &[
            "us",
            "usec",
            "usecs",
            "\u{b5}s",
            "\u{b5}sec",
            "\u{b5}secs",
            "\u{3bc}s",
            "\u{3bc}sec",
            "\u{3bc}secs",
            "microsecond",
            "microseconds",
        ],
        1_000,
    ),
    (
        &["ms", "msec", "msecs", "millisecond", "milliseconds"],
        1_000_000,
    ),
    (&["s", "sec", "secs", "second", "seconds"], 1_000_000_000),
    (&["m", "min", "mins", "minute", "minutes"], 60_000_000_000),
    (&["h", "hr", "hrs", "hour", "hours"], 3_600_000_000_000),
    (&["d", "day", "days"], 86_400_000_000_000),
    (&["w", "wk", "wks", "week", "weeks"], 604_800_000_000_000),
];

/// A unit, as its index in [`UNITS`].
type Unit = usize;

/// A part of a span: its count's digits and its unit.
type Part = (String, Unit);

// ---- the reference: the EBNF, rule by rule -------------------------------------------------

/// `ws = { " " | "\t" }`: every prefix of blanks.
fn ws(s: &str) -> Vec<&str> {
    let mut out = vec![s];
    let mut rest = s;
    while let Some(r) = rest.strip_prefix([' ', '\t']) {
        out.push(r);
        rest = r;
    }
    out
}

/// `ws1 = ( " " | "\t" ), ws`.
fn ws1(s: &str) -> Vec<&str> {
    s.strip_prefix([' ', '\t']).map(ws).unwrap_or_default()
}

/// A terminal, letters in any case.
fn lit<'a>(s: &'a str, terminal: &str) -> Option<&'a str> {
    let mut rest = s.chars();
    for want in terminal.chars() {
        if !rest.next()?.eq_ignore_ascii_case(&want) {
            return None;
        }
    }
    Some(rest.as_str())
}

/// `count = digit, { digit }`: every nonempty prefix of digits.
fn count(s: &str) -> Vec<(String, &str)> {
    let n = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    (1..=n).map(|i| (s[..i].to_string(), &s[i..])).collect()
}

/// `unit`: every name of the table that starts `s`.
fn unit(s: &str) -> Vec<(Unit, &str)> {
    let mut out = Vec::new();
    for (i, (names, _)) in UNITS.iter().enumerate() {
        for name in *names {
            if let Some(rest) = lit(s, name) {
                out.push((i, rest));
            }
        }
    }
    out
}

/// `part = count, ws, unit`.
fn part(s: &str) -> Vec<(Part, &str)> {
    let mut out = Vec::new();
    for (digits, r) in count(s) {
        for r in ws(r) {
            for (u, r) in unit(r) {
                out.push(((digits.clone(), u), r));
            }
        }
    }
    out
}

/// `part, { ws, part }`.
fn parts(s: &str) -> Vec<(Vec<Part>, &str)> {
    let mut out = Vec::new();
    for (first, r) in part(s) {
        out.push((vec![first.clone()], r));
        for r in ws(r) {
            for (more, r) in parts(r) {
                let mut all = vec![first.clone()];
                all.extend(more);
                out.push((all, r));
            }
        }
    }
    out
}

/// `[ count, designator ]`, as its two ways.
fn optional_iso_part<'a>(s: &'a str, designator: &str, u: Unit) -> Vec<(Option<Part>, &'a str)> {
    let mut out = vec![(None, s)];
    for (digits, r) in count(s) {
        if let Some(r) = lit(r, designator) {
            out.push((Some((digits, u)), r));
        }
    }
    out
}

/// `iso = "P", [ count, "W" ], [ count, "D" ], [ "T", [ count, "H" ], [ count, "M" ],
/// [ count, "S" ] ]`, with at least one part, and one after a `T`.
fn iso(s: &str) -> Vec<(Vec<Part>, &str)> {
    let Some(s) = lit(s, "P") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (w, r) in optional_iso_part(s, "W", 7) {
        for (d, r) in optional_iso_part(r, "D", 6) {
            let date: Vec<Part> = w.iter().chain(&d).cloned().collect();
            out.push((date.clone(), r));
            let Some(r) = lit(r, "T") else { continue };
            for (h, r) in optional_iso_part(r, "H", 5) {
                for (m, r) in optional_iso_part(r, "M", 4) {
                    for (sec, r) in optional_iso_part(r, "S", 3) {
                        let time: Vec<Part> = h.iter().chain(&m).chain(&sec).cloned().collect();
                        if !time.is_empty() {
                            out.push((date.iter().chain(&time).cloned().collect(), r));
                        }
                    }
                }
            }
        }
    }
    out.retain(|(parts, _)| !parts.is_empty());
    out
}

/// `span = unit | part, { ws, part } | iso`: a bare unit is one of it.
fn span(s: &str) -> Vec<(Vec<Part>, &str)> {
    let mut out: Vec<(Vec<Part>, &str)> = unit(s)
        .into_iter()
        .map(|(u, r)| (vec![("1".to_string(), u)], r))
        .collect();
    out.extend(parts(s));
    out.extend(iso(s));
    out
}

/// A count of the text, under the rule "at least 1 and at most `u64::MAX`".
fn value(digits: &str) -> Option<u64> {
    digits.parse().ok().filter(|&n| n >= 1)
}

/// The span's rules: units from the largest down, each once; each part after the first less
/// than one of the next larger unit; at most `u64::MAX` nanoseconds.
fn nanos(parts: &[Part]) -> Option<u64> {
    let mut total: u64 = 0;
    for (i, (digits, u)) in parts.iter().enumerate() {
        let n = u128::from(value(digits)?) * u128::from(UNITS[*u].1);
        if i > 0 {
            if *u >= parts[i - 1].1 {
                return None;
            }
            if n >= u128::from(UNITS[*u + 1].1) {
                return None;
            }
        }
        total = total.checked_add(u64::try_from(n).ok()?)?;
    }
    Some(total)
}

/// `quota = ws, count, ( ws, "/", ws | ws1, "per", ws1 ), span,
/// [ ws1, "burst", ws1, count ], ws`, and the whole text; every quota it derives.
fn reference(text: &str) -> Vec<Quota> {
    let mut out = Vec::new();
    for r in ws(text) {
        for (limit, r) in count(r) {
            let mut after_per = Vec::new();
            for r in ws(r) {
                if let Some(r) = lit(r, "/") {
                    after_per.extend(ws(r));
                }
            }
            for r in ws1(r) {
                if let Some(r) = lit(r, "per") {
                    after_per.extend(ws1(r));
                }
            }
            for r in after_per {
                for (parts, r) in span(r) {
                    let mut ends = vec![(None, r)];
                    for r in ws1(r) {
                        if let Some(r) = lit(r, "burst") {
                            for r in ws1(r) {
                                ends.extend(count(r).into_iter().map(|(b, r)| (Some(b), r)));
                            }
                        }
                    }
                    for (burst, r) in ends {
                        if !ws(r).contains(&"") {
                            continue;
                        }
                        let quota = (|| {
                            let limit = value(&limit)?;
                            let span = nanos(&parts)?;
                            let burst = burst.as_deref().map_or(Some(limit), value)?;
                            Quota::new(limit, Duration::from_nanos(span))
                                .ok()?
                                .with_burst(burst)
                                .ok()
                        })();
                        out.extend(quota);
                    }
                }
            }
        }
    }
    out
}

/// The parser and the reference agree on `text`; the parser's quota prints back.
fn agree(text: &str) -> Result<(), TestCaseError> {
    let derived = reference(text);
    // The grammar is unambiguous: every derivation reads the same quota.
    prop_assert!(
        derived.windows(2).all(|w| w[0] == w[1]),
        "{text:?}: {derived:?}"
    );
    let parsed = text.parse::<Quota>();
    prop_assert_eq!(
        parsed.as_ref().ok(),
        derived.first(),
        "{:?}: {:?}",
        text,
        parsed
    );
    if let Ok(quota) = parsed {
        let shown = quota.to_string();
        prop_assert_eq!(
            shown.parse::<Quota>(),
            Ok(quota),
            "{:?} -> {:?}",
            text,
            shown
        );
    }
    Ok(())
}

// ---- valid quotas drawn from the grammar ---------------------------------------------------

/// A text in the grammar and the quota it means.
#[derive(Clone, Debug)]
struct Valid {
    text: String,
    quota: Quota,
}

fn blank() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["", "", " ", "\t", "  ", " \t "]).prop_map(String::from)
}

fn blank1() -> impl Strategy<Value = String> {
    prop::sample::select(vec![" ", " ", "\t", "  ", "\t "]).prop_map(String::from)
}

/// Letters in a random case: one bit per character.
fn recased(word: &str, cases: u64) -> String {
    word.chars()
        .enumerate()
        .map(|(i, c)| {
            if cases >> (i % 64) & 1 == 1 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
}

/// A count and its digits, sometimes with leading zeros.
fn a_count() -> impl Strategy<Value = (u64, String)> {
    let n = prop_oneof![
        4 => 1u64..=1_000,
        1 => 1u64..=u64::MAX,
        1 => Just(u64::MAX),
    ];
    (n, 0usize..3).prop_map(|(n, zeros)| (n, format!("{}{n}", "0".repeat(zeros))))
}

/// A spelled unit: its index and one of its names, in a random case.
fn a_unit() -> impl Strategy<Value = (Unit, String)> {
    (0..UNITS.len(), any::<prop::sample::Index>(), any::<u64>()).prop_map(|(u, i, cases)| {
        let names = UNITS[u].0;
        (u, recased(names[i.index(names.len())], cases))
    })
}

/// 1 to 3 parts, units strictly decreasing, each after the first below the next larger unit,
/// the first small enough that the span fits: as (count, unit) pairs.
fn some_parts(units: &[Unit]) -> impl Strategy<Value = Vec<(u64, Unit)>> + use<> {
    let first = units[0];
    let rest: Vec<Unit> = units[1..].to_vec();
    let top = (u64::MAX / UNITS[first].1 / 2).clamp(1, 100_000);
    let counts: Vec<_> = rest
        .iter()
        .map(|&u| 1..UNITS[u + 1].1 / UNITS[u].1)
        .collect();
    (1..=top, counts).prop_map(move |(n, counts)| {
        std::iter::once((n, first))
            .chain(counts.into_iter().zip(rest.iter().copied()))
            .collect()
    })
}

fn decreasing_units(lowest: Unit, highest: Unit) -> impl Strategy<Value = Vec<Unit>> {
    prop::sample::subsequence((lowest..=highest).collect::<Vec<_>>(), 1..=3).prop_map(|mut u| {
        u.reverse();
        u
    })
}

/// `part, { ws, part }`, each unit under one of its names, in a random case.
fn friendly_span() -> impl Strategy<Value = (String, u64)> {
    decreasing_units(0, UNITS.len() - 1)
        .prop_flat_map(|units| {
            let n = units.len();
            (
                some_parts(&units),
                prop::collection::vec((any::<prop::sample::Index>(), any::<u64>()), n),
                prop::collection::vec(blank(), n),
                prop::collection::vec(blank(), n),
            )
        })
        .prop_map(|(parts, names, inner, between)| {
            let mut text = String::new();
            let mut nanos = 0;
            for (i, &(n, u)) in parts.iter().enumerate() {
                let (name, cases) = names[i];
                let name = recased(UNITS[u].0[name.index(UNITS[u].0.len())], cases);
                if i > 0 {
                    text.push_str(&between[i]);
                }
                text.push_str(&format!("{n}{}{name}", inner[i]));
                nanos += n * UNITS[u].1;
            }
            (text, nanos)
        })
}

/// `iso`, in a random case.
fn iso_span() -> impl Strategy<Value = (String, u64)> {
    // W, D, H, M, S are units 7, 6, 5, 4, 3.
    (decreasing_units(3, 7), any::<u64>())
        .prop_flat_map(|(units, cases)| (some_parts(&units), Just(cases)))
        .prop_map(|(parts, cases)| {
            let mut text = String::from("P");
            let mut nanos = 0;
            for (n, u) in &parts {
                if *u <= 5 && !text.contains('T') {
                    text.push('T');
                }
                text.push_str(&format!("{n}{}", ["S", "M", "H", "D", "W"][*u - 3]));
                nanos += n * UNITS[*u].1;
            }
            (recased(&text.to_ascii_lowercase(), cases), nanos)
        })
}

fn a_span() -> impl Strategy<Value = (String, u64)> {
    prop_oneof![
        2 => a_unit().prop_map(|(u, name)| (name, UNITS[u].1)),
        3 => friendly_span(),
        1 => iso_span(),
    ]
}

fn valid() -> impl Strategy<Value = Valid> {
    let per = prop_oneof![
        (blank(), blank()).prop_map(|(a, b)| format!("{a}/{b}")),
        (blank1(), blank1(), any::<u64>())
            .prop_map(|(a, b, cases)| format!("{a}{}{b}", recased("per", cases))),
    ];
    let burst = prop::option::of((blank1(), blank1(), a_count(), any::<u64>()));
    (blank(), a_count(), per, a_span(), burst, blank()).prop_map(
        |(lead, (limit, digits), per, (span, nanos), burst, trail)| {
            let mut text = format!("{lead}{digits}{per}{span}");
            let mut quota = Quota::new(limit, Duration::from_nanos(nanos)).unwrap();
            if let Some((a, b, (burst, digits), cases)) = burst {
                text.push_str(&format!("{a}{}{b}{digits}", recased("burst", cases)));
                quota = quota.with_burst(burst).unwrap();
            }
            text.push_str(&trail);
            Valid { text, quota }
        },
    )
}

// ---- mutations and near-grammar strings ----------------------------------------------------

/// Characters the grammar uses, and some it refuses.
const ALPHABET: &[char] = &[
    '0', '1', '5', '9', ' ', '\t', '/', 'p', 'e', 'r', 'P', 'T', 's', 'S', 'm', 'M', 'h', 'H', 'd',
    'D', 'w', 'W', 'n', 'u', '\u{b5}', '\u{3bc}', 'i', 'b', 't', 'c', 'o', 'y', 'Y', '.', ',', ';',
    '+', '-', '_', '\n',
];

#[derive(Clone, Debug)]
enum Edit {
    Insert(prop::sample::Index, char),
    Delete(prop::sample::Index),
    Replace(prop::sample::Index, char),
}

fn an_edit() -> impl Strategy<Value = Edit> {
    let c = prop::sample::select(ALPHABET);
    prop_oneof![
        (any::<prop::sample::Index>(), c.clone()).prop_map(|(i, c)| Edit::Insert(i, c)),
        any::<prop::sample::Index>().prop_map(Edit::Delete),
        (any::<prop::sample::Index>(), c).prop_map(|(i, c)| Edit::Replace(i, c)),
    ]
}

fn edited(text: &str, edits: &[Edit]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for edit in edits {
        match *edit {
            Edit::Insert(i, c) => chars.insert(i.index(chars.len() + 1), c),
            Edit::Delete(i) if !chars.is_empty() => {
                chars.remove(i.index(chars.len()));
            }
            Edit::Replace(i, c) if !chars.is_empty() => {
                let i = i.index(chars.len());
                chars[i] = c;
            }
            _ => {}
        }
    }
    chars.into_iter().collect()
}

/// Short strings of pieces of the grammar, glued in any order.
fn near_grammar() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "1", "0", "10", "5", "/", " ", "\t", "per", "s", "ms", "m", "h", "d", "w", "us", "\u{b5}s",
        "burst", "P", "T", "S", "M", "H", "D", "W", "mo", "y", ".", ",", ";", "+", "sec", "minute",
        "25", "60", "24", "7", "1000",
    ]);
    prop::collection::vec(piece, 0..9).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Every text drawn from the grammar reads as the quota it was drawn for, and the
    /// reference derives it too.
    #[test]
    fn texts_from_the_grammar_read_as_drawn(valid in valid()) {
        prop_assert_eq!(valid.text.parse::<Quota>(), Ok(valid.quota), "{:?}", valid.text);
        agree(&valid.text)?;
    }

    /// Mutated, they are accepted exactly when the grammar derives them.
    #[test]
    fn mutated_texts_are_accepted_exactly_when_the_grammar_derives_them(
        valid in valid(),
        edits in prop::collection::vec(an_edit(), 1..4),
    ) {
        agree(&edited(&valid.text, &edits))?;
    }

    /// So are strings glued from the grammar's pieces.
    #[test]
    fn near_grammar_strings_are_accepted_exactly_when_the_grammar_derives_them(
        text in near_grammar(),
    ) {
        agree(&text)?;
    }

    /// Every quota, however built, prints a text that reads back to it.
    #[test]
    fn every_quota_prints_a_text_that_reads_back(
        limit in 1..=u64::MAX,
        span in prop_oneof![1..=u64::MAX, 1..1_000_000u64, (1..100_000u64).prop_map(|s| s * 1_000_000_000)],
        burst in prop::option::of(1..=u64::MAX),
    ) {
        let mut quota = Quota::new(limit, Duration::from_nanos(span)).unwrap();
        if let Some(burst) = burst {
            quota = quota.with_burst(burst).unwrap();
        }
        let shown = quota.to_string();
        prop_assert_eq!(shown.parse::<Quota>(), Ok(quota), "{}", shown);
        prop_assert_eq!(reference(&shown), vec![quota], "{}", shown);
    }
}

/// The reference itself, on the forms of the docs and the forms an older parser misread.
#[test]
fn the_reference_reads_the_docs_and_refuses_the_nonsense() {
    for text in [
        "100/minute",
        "100 per minute",
        "5 per 10 seconds",
        "10/s burst 20",
        "3 per 1m 30s",
        "3/PT1M30S",
        "1000/\u{b5}s",
        "10\tper\tminute",
    ] {
        assert_eq!(reference(text).len(), 1, "{text}");
        agree(text).unwrap();
    }
    for text in [
        "10/sburst20",
        "1/sburst 2",
        "1/0y 1s",
        "1/0mo 1s",
        "1/5,5s",
        "1/+5s",
        "1/1d 25h",
        "1/P1Y",
        "",
    ] {
        assert!(reference(text).is_empty(), "{text}");
        agree(text).unwrap();
    }
}
