//! The `RateLimit` fields parsed back with `sfv`, as a client would: for random rule sets and
//! random checks, every field is a valid structured field whose numbers are the decisions'.

use crate::support;

use std::time::Duration;

use http::HeaderMap;
use proptest::prelude::*;
use sfv::Integer;
use slidewin::limit::{CalendarQuota, CalendarUnit, Kind, Rule, RuleSet};
use slidewin::{Decision, Limiter, Moment, Quota};
use slidewin_http::{RateLimitFields, retry_after};
use support::members;

fn rule(name: &str, kind: Kind, quota: &str) -> Rule {
    Rule::new(name, kind, quota.parse().unwrap()).unwrap()
}

#[test]
fn the_policy_lists_every_rule_with_its_quota_and_window() {
    let set = RuleSet::new([
        rule("burst", Kind::Gcra, "10/s burst 20"),
        rule("hourly", Kind::SlidingCounter, "1000/hour"),
        rule("fast", Kind::FixedWindow, "5 per 1500ms"),
    ])
    .unwrap();
    let fields = RateLimitFields::new(&set).unwrap();
    let policy = fields.policy().to_str().unwrap();
    assert_eq!(
        members(policy),
        [
            ("burst".into(), vec![("q".into(), 10), ("w".into(), 1)]),
            (
                "hourly".into(),
                vec![("q".into(), 1000), ("w".into(), 3600)]
            ),
            // 1.5 s is not whole seconds: no `w`, rather than a rounded one.
            ("fast".into(), vec![("q".into(), 5)]),
        ]
    );
}

/// Issue 33: a concurrency limit is in flight, not in a window: the draft's quota unit
/// `concurrent-requests`, and no `w`.
#[test]
fn a_leases_policy_names_concurrent_requests_and_no_window() {
    let set = RuleSet::new([
        rule("in_flight", Kind::Leases, "2 per 30s"),
        rule("hourly", Kind::SlidingLog, "1000/hour"),
    ])
    .unwrap();
    let fields = RateLimitFields::new(&set).unwrap();
    assert_eq!(
        fields.policy().to_str().unwrap(),
        r#""in_flight";q=2;qu="concurrent-requests", "hourly";q=1000;w=3600"#
    );
}

#[test]
fn the_largest_numbers_a_field_holds_and_one_past() {
    let most = RateLimitFields::MAX_NUMBER;
    let at = Quota::new(most, Duration::from_secs(1)).unwrap();
    let set = RuleSet::from(Rule::new("big", Kind::SlidingCounter, at).unwrap());
    let fields = RateLimitFields::new(&set).unwrap();
    assert_eq!(
        members(fields.policy().to_str().unwrap())[0].1[0].1,
        999_999_999_999_999
    );

    let past = Quota::new(most + 1, Duration::from_secs(1)).unwrap();
    let set = RuleSet::from(Rule::new("big", Kind::SlidingCounter, past).unwrap());
    let err = RateLimitFields::new(&set).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the rule `big` has a limit of 1000000000000000, larger than the RateLimit header fields \
         can carry (999999999999999 at most)"
    );
    // A burst past it too: the units left can reach the burst.
    let burst = Quota::new(1_000_000_000, Duration::from_secs(1))
        .unwrap()
        .with_burst(most + 1)
        .unwrap();
    let set = RuleSet::from(Rule::new("bucket", Kind::Gcra, burst).unwrap());
    assert!(RateLimitFields::new(&set).is_err());
}

#[test]
fn waits_round_up_to_whole_seconds() {
    let wait = |d: Duration| Decision::deny(1, 0, d, d);
    assert_eq!(retry_after(&wait(Duration::from_nanos(1))).unwrap(), "1");
    assert_eq!(retry_after(&wait(Duration::from_secs(1))).unwrap(), "1");
    assert_eq!(
        retry_after(&wait(Duration::from_millis(1_001))).unwrap(),
        "2"
    );
    assert_eq!(
        retry_after(&wait(Duration::MAX)).unwrap(),
        u64::MAX.to_string().as_str(),
        "a wait for ever is the largest number, not a wrap"
    );
}

#[test]
fn an_admission_clears_a_retry_after_left_from_before() {
    let set = RuleSet::from(rule("login", Kind::SlidingLog, "1/minute"));
    let fields = RateLimitFields::new(&set).unwrap();
    let mut limiter = Limiter::new(set);
    let mut headers = HeaderMap::new();
    limiter.check(Moment::ZERO, 1).unwrap();
    fields.insert(
        &limiter.check(Moment::from_secs(1), 1).unwrap(),
        &mut headers,
    );
    assert_eq!(headers["retry-after"], "59");
    fields.insert(
        &limiter.check(Moment::from_secs(60), 1).unwrap(),
        &mut headers,
    );
    assert!(headers.get("retry-after").is_none());
}

fn kinds() -> impl Strategy<Value = Kind> {
    prop::sample::select(Kind::ALL.to_vec())
}

/// One to four rules of any kind, limits from 1 to a million, spans from a millisecond to a day.
fn rule_sets() -> impl Strategy<Value = RuleSet> {
    let one = (kinds(), 1u64..=1_000_000, 1u64..=86_400_000);
    prop::collection::vec(one, 1..=4).prop_map(|rules| {
        RuleSet::new(rules.into_iter().enumerate().map(|(i, (kind, limit, ms))| {
            if kind == Kind::Calendar {
                let day = CalendarQuota::new(limit, CalendarUnit::Day).unwrap();
                return Rule::calendar(&format!("r{i}"), day).unwrap();
            }
            let quota = Quota::new(limit, Duration::from_millis(ms)).unwrap();
            Rule::new(&format!("r{i}"), kind, quota).unwrap()
        }))
        .unwrap()
    })
}

proptest! {
    #[test]
    fn every_field_parses_back_to_the_decisions_numbers(
        set in rule_sets(),
        steps in prop::collection::vec((0u64..2_000, 0u64..4), 1..30),
    ) {
        let fields = RateLimitFields::new(&set).unwrap();
        let policy = members(fields.policy().to_str().unwrap());
        prop_assert_eq!(policy.len(), set.rules().len());
        for ((name, params), rule) in policy.iter().zip(set.rules()) {
            prop_assert_eq!(name.as_str(), rule.name());
            prop_assert_eq!(params[0].clone(), ("q".to_string(), i64::try_from(rule.quota().limit()).unwrap()));
        }
        let mut limiter = Limiter::new(set.clone());
        let mut now = Moment::from_secs(1_000);
        for (ms, cost) in steps {
            now += Duration::from_millis(ms);
            let cost = cost.min(set.max_cost());
            let decisions = limiter.check(now, cost).unwrap();
            let mut headers = HeaderMap::new();
            fields.insert(&decisions, &mut headers);
            RateLimitFields::insert_legacy(&decisions, &mut headers);
            let rate = members(headers["ratelimit"].to_str().unwrap());
            prop_assert_eq!(rate.len(), 1);
            let binding = &set.rules()[decisions.binding()];
            let d = decisions.decision();
            let t = d.reset_after().as_secs() + u64::from(d.reset_after().subsec_nanos() > 0);
            prop_assert_eq!(rate[0].0.as_str(), binding.name());
            prop_assert_eq!(
                &rate[0].1,
                &vec![
                    ("r".to_string(), i64::try_from(d.remaining()).unwrap()),
                    ("t".to_string(), i64::try_from(t).unwrap()),
                ]
            );
            // Retry-After only on a denial, never sooner than the room.
            match d.retry_after() {
                Some(wait) => {
                    let secs: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
                    prop_assert!(Duration::from_secs(secs) >= wait);
                    prop_assert!(Duration::from_secs(secs) < wait + Duration::from_secs(1));
                }
                None => prop_assert!(headers.get("retry-after").is_none()),
            }
            prop_assert_eq!(headers["x-ratelimit-remaining"].to_str().unwrap(), d.remaining().to_string());
            prop_assert!(Integer::try_from(d.remaining()).is_ok());
        }
    }
}
