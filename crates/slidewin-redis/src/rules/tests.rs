//! The keys, arguments and script calls that `Rules` and `Call` make, as Redis receives them.

use super::*;

/// A call's arguments after `EVALSHA` and the script's hash, as text: space-separated,
/// `''` for an empty one.
fn args(cmd: &redis::Cmd) -> String {
    let args: Vec<String> = cmd
        .args_iter()
        .skip(2)
        .map(|arg| match arg {
            redis::Arg::Simple([]) => "''".to_string(),
            redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            _ => "<not bytes>".to_string(),
        })
        .collect();
    args.join(" ")
}

fn rule(name: &str, kind: Kind, quota: &str) -> Rule {
    Rule::new(name, kind, quota.parse().unwrap()).unwrap()
}

/// `10 per 10ms` with a burst of 10: interval 1000 µs, tolerance 9000, burst 10, idle 11 ms.
fn gcra() -> Rules {
    Rules::try_from(rule("g", Kind::Gcra, "10 per 10ms")).unwrap()
}

/// A sliding log on Redis keeps a time per unit: a check of 10^12 units (the in-memory log
/// takes it as one stamp) would run a script appending 7 TB, blocking the server for good. Its limit is bounded, and the message names the bound.
#[test]
fn a_sliding_log_above_its_largest_limit_is_refused_naming_it() {
    let at_most = format!("{}/s", Rules::MAX_SLIDING_LOG_LIMIT);
    assert!(Rules::try_from(rule("log", Kind::SlidingLog, &at_most)).is_ok());
    let err = Rules::try_from(rule("log", Kind::SlidingLog, "1000000000000/s")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "SlidingLog on Redis cannot represent the quota `1000000000000 per 1s`: it keeps a \
         time per unit admitted, so its limit can be at most 100000 \
         (Rules::MAX_SLIDING_LOG_LIMIT); SlidingCounter and Gcra keep two numbers"
    );
    assert!(Rules::try_from(rule("c", Kind::SlidingCounter, "1000000/s")).is_ok());
}

#[test]
fn a_quota_past_luas_exact_integers_or_finer_than_a_microsecond_is_refused() {
    let err = Rules::try_from(rule("c", Kind::SlidingCounter, "1000000000/1000000h")).unwrap_err();
    assert!(err.to_string().contains("2^53"), "{err}");
    let err = Rules::try_from(rule("g", Kind::Gcra, "2/1us")).unwrap_err();
    assert!(err.to_string().contains("per microsecond"), "{err}");
    let err = Rules::try_from(rule("f", Kind::FixedWindow, "1/1500ns")).unwrap_err();
    assert!(err.to_string().contains("whole microseconds"), "{err}");
}

#[test]
fn each_rule_has_a_key_of_its_own_under_the_keys_hash_tag() {
    let set = RuleSet::new([
        rule("minute", Kind::SlidingLog, "5/minute"),
        rule("hour", Kind::SlidingLog, "20/hour"),
    ])
    .unwrap();
    let rules = Rules::new(set).unwrap();
    assert_eq!(
        rules.keys(&tag_of("slidewin", "alice")),
        [
            "{slidewin:alice}:minute:stamps",
            "{slidewin:alice}:hour:stamps"
        ]
    );
}

#[test]
fn checks_of_one_cost_and_rule_send_them_once() {
    let (a, b) = (
        Call::new(&gcra(), "p", "a", None, 2, true),
        Call::new(&gcra(), "p", "b", None, 2, true),
    );
    // Keys; per 0; cost 2 and rule 1 once; no groups; the rule's five numbers.
    assert_eq!(
        args(&script_call(&[&a, &b], Keys::Declared)),
        "2 {p:a}:g:gcra {p:b}:g:gcra 0 2 1 0 5 4 1000 9000 10 11"
    );
    // With times: per 1, one each after the shared pair, '' for the server's clock.
    let timed = Call::new(&gcra(), "p", "a", Some(7), 2, true);
    assert_eq!(
        args(&script_call(&[&timed, &b], Keys::Declared)),
        "2 {p:a}:g:gcra {p:b}:g:gcra 1 2 1 7 '' 0 5 4 1000 9000 10 11"
    );
    // Alone, a check is its own batch of one; undeclared keys follow their count.
    assert_eq!(
        args(&script_call(&[&a], Keys::Undeclared)),
        "0 1 {p:a}:g:gcra 0 2 1 0 5 4 1000 9000 10 11"
    );
}

#[test]
fn checks_of_different_costs_rules_or_peeks_send_their_own() {
    let other = Rules::try_from(rule("g", Kind::Gcra, "20 per 10ms")).unwrap();
    let a = Call::new(&gcra(), "p", "a", None, 1, true);
    let peek = Call::new(&gcra(), "p", "a", None, 1, false);
    let b = Call::new(&other, "p", "b", None, 1, true);
    // Per 2: each check's cost and rule (negative: a peek); then both rules.
    assert_eq!(
        args(&script_call(&[&a, &peek, &b], Keys::Declared)),
        "3 {p:a}:g:gcra {p:a}:g:gcra {p:b}:g:gcra 2 1 1 1 -1 1 2 0 \
         5 4 1000 9000 10 11 4 500 9500 20 11"
    );
    // Per 3: the time too.
    let costly = Call::new(&gcra(), "p", "b", Some(5), 3, true);
    assert_eq!(
        args(&script_call(&[&a, &costly], Keys::Declared)),
        "2 {p:a}:g:gcra {p:b}:g:gcra 3 1 1 '' 3 1 5 0 5 4 1000 9000 10 11"
    );
}

#[test]
fn a_call_of_several_rules_sends_a_check_per_rule_and_its_group() {
    let login = Rules::new(
        RuleSet::new([
            rule("m", Kind::SlidingLog, "5/ms"),
            rule("h", Kind::FixedWindow, "20/10ms"),
        ])
        .unwrap(),
    )
    .unwrap();
    let both = Call::new(&login, "p", "a", None, 1, true);
    let alone = Call::new(&gcra(), "p", "b", None, 1, true);
    // Three checks: per 2 (two rules); groups 2 0 1; the three rules' numbers.
    assert_eq!(
        args(&script_call(&[&both, &alone], Keys::Declared)),
        "3 {p:a}:m:stamps {p:a}:h:fixed {p:b}:g:gcra 2 1 1 1 2 1 3 \
         1 2 0 1 5 1 1000 5 2 0 3 10000 20 11 0 4 1000 9000 10 11"
    );
}

#[test]
fn a_calendar_rule_is_taken_below_lua_exact_integers() {
    use slidewin::limit::{CalendarQuota, CalendarUnit};
    let daily = |limit| Rule::calendar("c", CalendarQuota::new(limit, CalendarUnit::Day).unwrap());
    let rules = Rules::try_from(daily((1 << 52) - 1).unwrap()).unwrap();
    // Its window is dated by each call: none yet.
    assert_eq!(rules.params(0), [6, 0, 0, (1 << 52) - 1, 0]);
    let err = Rules::try_from(daily(1 << 52).unwrap()).unwrap_err();
    assert!(err.to_string().contains("2^53"), "{err}");
    // A call at a time dates the window holding it, in whole microseconds.
    let call = Call::new(&rules, "p", "k", Some(90_000_000_000), 1, true);
    assert_eq!(
        call.params(0),
        &[6, 86_400_000_000, 172_800_000_000, (1 << 52) - 1, 0]
    );
}
