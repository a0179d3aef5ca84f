//! A property test that drives the in-memory limiters and the Redis script through random
//! traces, under random sets of one to three rules, and compares every decision, rule by
//! rule, field by field: the in-memory [`RuleSet`] is the reference.

use crate::support;

use std::time::Duration;

use proptest::prelude::*;
use slidewin::limit::{Decision, Decisions, Kind, Rule, RuleSet};
use std::collections::HashMap;

use slidewin::{Limiter, Moment, Quota};
use slidewin_redis::Rules;

/// One request of a random trace.
#[derive(Clone, Debug)]
struct Step {
    /// Microseconds to move; negative moves back.
    delta: i64,
    cost: u64,
    key: u8,
}

/// Spans and limits whose Redis arithmetic is the in-memory one exactly: whole microseconds,
/// and spans that the limits divide (GCRA's interval). Spans of seconds: a key's expiry
/// (about a span) runs on the server's own clock whatever time the checks give, and a case
/// must not see its keys vanish while a busy machine runs it.
fn quotas() -> impl Strategy<Value = (u64, u64, u64)> {
    (
        prop::sample::select(vec![1u64, 2, 4, 5, 10]),
        prop::sample::select(vec![10_000_000u64, 100_000_000, 1_000_000_000]),
        1u64..=12,
    )
}

fn trace(span: i64, most: u64) -> impl Strategy<Value = Vec<Step>> {
    let delta = prop_oneof![
        6 => 0..span / 3 + 1,
        2 => Just(span),
        1 => Just(0),
        1 => -span..0,
        1 => (span * 10)..(span * 1_000),
    ];
    let step = (delta, 0..=most, 0..2u8).prop_map(|(delta, cost, key)| Step { delta, cost, key });
    prop::collection::vec(step, 1..40)
}

/// Redis rounds one thing to the microsecond, towards waiting longer: the sliding counter's
/// `retry_after`. Everything else must be equal.
fn same(kind: Kind, memory: Decision, redis: Decision) -> bool {
    let up_to_micro = |d: Option<Duration>| {
        d.map(|d| Duration::from_micros(u64::try_from(d.as_nanos().div_ceil(1_000)).unwrap()))
    };
    let retry = match kind {
        Kind::SlidingCounter => up_to_micro(memory.retry_after()),
        _ => memory.retry_after(),
    };
    (
        memory.allowed(),
        memory.limit(),
        memory.remaining(),
        memory.reset_after(),
        retry,
    ) == (
        redis.allowed(),
        redis.limit(),
        redis.remaining(),
        redis.reset_after(),
        redis.retry_after(),
    )
}

/// Every rule's decision the same, and the same rule binding.
pub(crate) fn same_all(set: &RuleSet, memory: &Decisions, redis: &Decisions) -> bool {
    memory.binding() == redis.binding()
        && set
            .rules()
            .iter()
            .zip(memory.iter().zip(redis.iter()))
            .all(|(rule, (m, r))| same(rule.kind(), *m, *r))
}

/// The traces' first time, in microseconds of Unix time (1970-01-13T17:25:11.627776Z).
pub(crate) const START: i64 = 1 << 40;

/// One to three rules of any kinds, each on a quota from [`quotas`]. A calendar rule counts
/// calendar days (in UTC or Paris) whose boundary falls a few seconds after [`START`] (the
/// anchor's time of day, to the microsecond), so that the traces cross it, and back.
pub(crate) fn rule_sets() -> impl Strategy<Value = RuleSet> {
    let rule = (
        0..6usize,
        quotas(),
        -2_000_000..20_000_000i64,
        prop::bool::ANY,
    );
    prop::collection::vec(rule, 1..=3).prop_map(|rules| {
        let rules = rules.into_iter().enumerate().map(
            |(i, (kind, (limit, span, burst), boundary, paris))| {
                let kind = Kind::ALL[kind];
                if kind == Kind::Calendar {
                    return Rule::calendar(&format!("r{i}"), days(limit, boundary, paris)).unwrap();
                }
                let quota = Quota::new(limit, Duration::from_micros(span)).unwrap();
                let quota = match kind {
                    Kind::Gcra => quota.with_burst(burst).unwrap(),
                    _ => quota,
                };
                Rule::new(&format!("r{i}"), kind, quota).unwrap()
            },
        );
        RuleSet::new(rules).unwrap()
    })
}

/// `limit` per calendar day, the days starting `boundary` µs after [`START`]'s time of day, in
/// UTC or in Paris.
fn days(limit: u64, boundary: i64, paris: bool) -> slidewin::limit::CalendarQuota {
    use jiff::tz::TimeZone;
    let zone = if paris {
        TimeZone::get("Europe/Paris").unwrap()
    } else {
        TimeZone::UTC
    };
    let first = jiff::Timestamp::from_microsecond(START + boundary).unwrap();
    let anchor = zone.to_datetime(first);
    slidewin::limit::CalendarQuota::new(limit, slidewin::limit::CalendarUnit::Day)
        .unwrap()
        .in_zone(zone)
        .anchored(anchor)
}

/// The span the traces move by: the shortest rule's, a second for a calendar rule.
pub(crate) fn trace_span(set: &RuleSet) -> i64 {
    let span = |r: &Rule| match r.kind() {
        Kind::Calendar => Duration::from_secs(1),
        _ => r.quota().span(),
    };
    let span = set.rules().iter().map(span).min().unwrap();
    i64::try_from(span.as_micros()).unwrap()
}

#[test]
fn random_traces_get_the_same_decisions_in_memory_and_on_redis() {
    let (runtime, _server, redis) = support::blocking_limiter();
    // Each case under a prefix of its own, so that cases share nothing on the server.
    let case = std::sync::atomic::AtomicU64::new(0);
    let config = ProptestConfig::with_cases(64);
    let cases = rule_sets().prop_flat_map(|set| {
        let span = trace_span(&set);
        let most = set.max_cost();
        (Just(set), trace(span, most))
    });
    proptest!(config, |((set, steps) in cases)| {
        let case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let redis = redis.clone().with_prefix(&format!("case{case}"));
        same_decisions(&runtime, &redis, &set, &steps)?;
    });
}

/// Issue 32: sliding logs of more times than one read of the packed log takes (128), so that
/// the count bisects the string itself, and old times gather past the live ones and are
/// dropped in bulk; costs up to the limit, the clock going back and jumping.
#[test]
fn sliding_logs_past_one_read_get_the_same_decisions_in_memory_and_on_redis() {
    let (runtime, _server, redis) = support::blocking_limiter();
    let case = std::sync::atomic::AtomicU64::new(0);
    let quota = (
        prop::sample::select(vec![127u64, 128, 129, 200, 333]),
        prop::sample::select(vec![10_000_000u64, 100_000_000]),
    );
    let cases = quota.prop_flat_map(|(limit, span)| {
        let quota = Quota::new(limit, Duration::from_micros(span)).unwrap();
        let set = RuleSet::new([Rule::new("big", Kind::SlidingLog, quota).unwrap()]).unwrap();
        let costs = prop_oneof![4 => 0..=8u64, 1 => 0..=limit];
        let delta = prop_oneof![
            6 => 0..i64::try_from(span / 50).unwrap(),
            1 => Just(0),
            1 => -i64::try_from(span).unwrap()..0,
            1 => i64::try_from(span / 2).unwrap()..i64::try_from(span * 3).unwrap(),
        ];
        let step = (delta, costs, 0..2u8).prop_map(|(delta, cost, key)| Step { delta, cost, key });
        (Just(set), prop::collection::vec(step, 1..120))
    });
    proptest!(ProptestConfig::with_cases(24), |((set, steps) in cases)| {
        let case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let redis = redis.clone().with_prefix(&format!("big{case}"));
        same_decisions(&runtime, &redis, &set, &steps)?;
    });
}

/// Runs `steps` on Redis and in memory, a peek then a check each, and compares every answer.
fn same_decisions(
    runtime: &tokio::runtime::Runtime,
    redis: &slidewin_redis::RedisLimiter,
    set: &RuleSet,
    steps: &[Step],
) -> Result<(), TestCaseError> {
    let rules = Rules::new(set.clone()).unwrap();
    // The reference keeps every key's state for good: a `Keyed` forgets a key once it is
    // idle, as Redis expires it, and a clock going back further than that finds it fresh on
    // both, but at times that differ (a sweep's, the server's clock).
    let mut memory: HashMap<&str, Limiter<RuleSet>> = HashMap::new();
    let mut now: i64 = START;
    for step in steps {
        now += step.delta;
        let at = Moment::from_nanos(u64::try_from(now).unwrap() * 1_000);
        let key = if step.key == 0 { "a" } else { "b" };
        let cost = step.cost;
        let (peeked, r) = runtime.block_on(async {
            let peeked = redis.peek(&rules, key, at, cost).await.unwrap();
            (peeked, redis.check(&rules, key, at, cost).await.unwrap())
        });
        let limiter = memory
            .entry(key)
            .or_insert_with(|| Limiter::new(set.clone()));
        let peeked_in_memory = limiter.peek(at, cost).unwrap();
        let m = limiter.check(at, cost).unwrap();
        prop_assert!(
            same_all(set, &peeked_in_memory, peeked.decisions()),
            "peek {set:?} at {now} µs cost {cost}: memory {peeked_in_memory:?}, redis {:?}",
            peeked.decisions()
        );
        prop_assert_eq!(&peeked_in_memory, &m, "peek then check disagree in memory");
        prop_assert!(
            same_all(set, &m, r.decisions()),
            "{set:?} at {now} µs cost {cost}: memory {m:?}, redis {:?}",
            r.decisions()
        );
    }
    Ok(())
}

/// Issue 33: leases, alone or beside a rate, and a sliding log that refunds, alone or beside
/// leases, through acquisitions, releases (of more than is held too), holders that never
/// release and the clock going back: Redis answers as memory, and gives back as many units.
#[test]
fn leases_and_refunds_acquired_and_released_answer_as_in_memory() {
    let (runtime, _server, redis) = support::blocking_limiter();
    let case = std::sync::atomic::AtomicU64::new(0);
    let span = 1_000_000_000u64;
    // The rate: none, a log that keeps what it admitted, or a log that refunds.
    let shapes = (1..=4u64, prop::bool::ANY, 0..3u8).prop_filter("a rule", |s| s.1 || s.2 > 0);
    let sets = shapes.prop_map(move |(limit, leases, rate)| {
        let lease = Quota::new(limit, Duration::from_micros(span)).unwrap();
        let mut rules = Vec::new();
        if leases {
            rules.push(Rule::new("in_flight", Kind::Leases, lease).unwrap());
        }
        if rate > 0 {
            let rate_limit = if leases { 6 } else { limit };
            let quota = Quota::new(rate_limit, Duration::from_micros(span * 2)).unwrap();
            let log = Rule::new("rate", Kind::SlidingLog, quota).unwrap();
            rules.push(if rate == 2 {
                log.with_refunds().unwrap()
            } else {
                log
            });
        }
        RuleSet::new(rules).unwrap()
    });
    let span = i64::try_from(span).unwrap();
    let step = (
        prop_oneof![6 => 0..span / 4, 1 => Just(span), 1 => -span..0, 1 => span..span * 3],
        0..=5u64,
        0..2u8,
        prop::bool::weighted(0.4),
    );
    let cases = (sets, prop::collection::vec(step, 1..60));
    proptest!(ProptestConfig::with_cases(48), |((set, steps) in cases)| {
        let case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let redis = redis.clone().with_prefix(&format!("leases{case}"));
        let rules = Rules::new(set.clone()).unwrap();
        let mut memory: HashMap<&str, Limiter<RuleSet>> = HashMap::new();
        let mut now: i64 = 1 << 40;
        for (delta, units, key, release) in steps {
            now += delta;
            let at = Moment::from_nanos(u64::try_from(now).unwrap() * 1_000);
            let key = if key == 0 { "a" } else { "b" };
            let limiter = memory.entry(key).or_insert_with(|| Limiter::new(set.clone()));
            if release {
                let given = runtime.block_on(redis.release(&rules, key, at, units)).unwrap();
                prop_assert_eq!(given, limiter.release(at, units), "release at {}", now);
                continue;
            }
            let cost = units.min(set.max_cost());
            let r = runtime.block_on(redis.check(&rules, key, at, cost)).unwrap();
            let m = limiter.check(at, cost).unwrap();
            prop_assert!(same_all(&set, &m, r.decisions()), "at {now}: memory {m:?}, redis {:?}", r.decisions());
        }
    });
}
