//! Issue 33 on Redis: reserve, then settle, answers as in memory. A property test drives the
//! in-memory rule sets (the reference) and the scripts through random traces of reserves,
//! settles of any earlier reservation (up, down, to 0, far past the limit), charges of costs
//! reported with nothing reserved, and checks, and
//! compares every decision, every reservation and every settle's answer.

use std::collections::HashMap;

use proptest::prelude::*;
use slidewin::limit::{Kind, Reservation, Rule, RuleSet};
use slidewin::{Limiter, Moment};
use slidewin_redis::Rules;

use crate::same_answers::{START, rule_sets, same_all};
use crate::support;

/// One step of a trace: microseconds to move (negative: back), a cost, a key, and what to do
/// (0: settle the reservation `pick` chooses to `actual`; 1: check; 2: now and then a charge
/// of `actual` with nothing reserved; else reserve).
type Step = (i64, u64, u8, u8, u64, prop::sample::Index);

fn trace(span: i64) -> impl Strategy<Value = Vec<Step>> {
    let delta = prop_oneof![
        6 => 0..span / 3 + 1,
        1 => Just(0),
        1 => -span..0,
        1 => span..span * 3,
    ];
    let actual = prop_oneof![3 => 0..12u64, 1 => Just(u64::MAX)];
    let step = (
        delta,
        0..=12u64,
        0..2u8,
        0..4u8,
        actual,
        any::<prop::sample::Index>(),
    );
    prop::collection::vec(step, 1..50)
}

#[test]
fn reserves_and_settles_answer_on_redis_as_in_memory() {
    let (runtime, _server, redis) = support::blocking_limiter();
    let case = std::sync::atomic::AtomicU64::new(0);
    // How many settles found their reservation: the traces must reach the interesting part.
    let held_any = std::sync::atomic::AtomicU64::new(0);
    let cases = (rule_sets(), trace(1_000_000));
    proptest!(ProptestConfig::with_cases(64), |((set, steps) in cases)| {
        let case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let redis = redis.clone().with_prefix(&format!("settle{case}"));
        let rules = Rules::new(set.clone()).unwrap();
        let mut memory: HashMap<&str, Limiter<RuleSet>> = HashMap::new();
        let mut reserved: Vec<(&str, Reservation)> = Vec::new();
        let mut now: i64 = START;
        for (delta, cost, key, what, actual, pick) in steps {
            now += delta;
            let at = Moment::from_nanos(u64::try_from(now).unwrap() * 1_000);
            let key = if key == 0 { "a" } else { "b" };
            let limiter = memory.entry(key).or_insert_with(|| Limiter::new(set.clone()));
            if what == 0 && !reserved.is_empty() {
                let (key, r) = reserved[pick.index(reserved.len())];
                let limiter = memory.get_mut(key).unwrap();
                let held = runtime.block_on(redis.settle(&rules, key, r, actual)).unwrap();
                prop_assert_eq!(held, limiter.settle(r, actual), "settle {:?} to {} at {}", r, actual, now);
                held_any.fetch_add(u64::from(held), std::sync::atomic::Ordering::Relaxed);
                continue;
            }
            if what == 2 && pick.index(3) == 0 {
                // A cost reported after the work, with nothing reserved: charged at `at`.
                let report = Reservation::unreserved(at);
                let charged = runtime.block_on(redis.settle(&rules, key, report, actual)).unwrap();
                prop_assert_eq!(charged, limiter.settle(report, actual), "charge {} at {}", actual, now);
                continue;
            }
            let cost = cost.min(set.max_cost());
            if what == 1 {
                let r = runtime.block_on(redis.check(&rules, key, at, cost)).unwrap();
                let m = limiter.check(at, cost).unwrap();
                prop_assert!(same_all(&set, &m, r.decisions()), "check at {now}: memory {m:?}, redis {:?}", r.decisions());
                continue;
            }
            let (r, on_redis) = runtime.block_on(redis.reserve(&rules, key, at, cost)).unwrap();
            let (m, in_memory) = limiter.reserve(at, cost).unwrap();
            prop_assert!(same_all(&set, &m, r.decisions()), "reserve at {now}: memory {m:?}, redis {:?}", r.decisions());
            prop_assert_eq!(on_redis, in_memory, "reservation at {}", now);
            if let Some(r) = in_memory {
                reserved.push((key, r));
            }
        }
    });
    assert!(held_any.into_inner() > 0, "no settle found its reservation");
}

/// A settle runs its script by its hash: after a `SCRIPT FLUSH` (a restarted node) it loads
/// the scripts again and goes once more.
#[tokio::test]
async fn a_settle_after_the_scripts_were_flushed_loads_them_again() {
    let server = support::RedisServer::start();
    let redis = slidewin_redis::RedisLimiter::connect(&server.url())
        .await
        .unwrap();
    let rules = Rules::try_from(rule("tokens", Kind::SlidingLog, "100/minute")).unwrap();
    let at = Moment::from_secs(1_000);
    let (_, reserved) = redis.reserve(&rules, "k", at, 10).await.unwrap();
    assert_eq!(server.cli(&["SCRIPT", "FLUSH"]).trim(), "OK");
    assert!(
        redis
            .settle(&rules, "k", reserved.unwrap(), 30)
            .await
            .unwrap()
    );
    let left = redis.peek(&rules, "k", at, 0).await.unwrap();
    assert_eq!(left.decision().remaining(), 70);
}

/// At Redis's time on a cluster: the time is read first (from a node), the reservation names
/// it, and the settle of a key's two rules goes to the key's node in one call.
#[tokio::test]
async fn a_reservation_at_redis_time_settles_on_a_cluster() {
    let (_cluster, redis) = on_the_cluster("settle_on_a_cluster").await;
    let tokens = Rules::new(
        RuleSet::new([
            rule("minute", Kind::SlidingLog, "1000/minute"),
            rule("day", Kind::SlidingCounter, "5000/day"),
        ])
        .unwrap(),
    )
    .unwrap();
    for key in ["a", "b", "c", "d", "e", "f"] {
        let (_, reserved) = redis.reserve_now(&tokens, key, 200).await.unwrap();
        let reserved = reserved.unwrap();
        assert!(
            reserved.at() > Moment::from_secs(1_700_000_000),
            "{reserved:?}"
        );
        assert!(redis.settle(&tokens, key, reserved, 50).await.unwrap());
        let left = redis.peek_now(&tokens, key, 0).await.unwrap();
        assert_eq!(left.decisions()[0].remaining(), 950);
    }
}

/// Issue 33: a cost reported after the response is charged on a cluster to a key never seen,
/// on every rule of it, past the limit as debt: the key's checks wait it out.
#[tokio::test]
async fn a_charge_makes_its_key_on_a_cluster_and_is_owed() {
    let (_cluster, redis) = on_the_cluster("charge_on_a_cluster").await;
    let set = RuleSet::new([
        rule("minute", Kind::SlidingLog, "1000/minute"),
        rule("hour", Kind::FixedWindow, "5000/hour"),
        rule("bucket", Kind::Gcra, "3000/hour"),
    ])
    .unwrap();
    let tokens = Rules::new(set.clone()).unwrap();
    let at = Moment::from_secs(7_200);
    for key in ["a", "b", "c", "d"] {
        let mut memory = Limiter::new(set.clone());
        for (t, units) in [(0, 700), (1, 900), (30, 0)] {
            let report = Reservation::unreserved(Moment::from_secs(7_200 + t));
            assert_eq!(
                redis.settle(&tokens, key, report, units).await.unwrap(),
                memory.settle(report, units)
            );
        }
        let owed = redis.check(&tokens, key, at, 1).await.unwrap();
        assert!(!owed.allowed());
        assert!(same_all(
            &set,
            &memory.check(at, 1).unwrap(),
            owed.decisions()
        ));
    }
}

/// The shared cluster (kept alive by the first) and a limiter on it, its keys under `prefix`.
async fn on_the_cluster(
    prefix: &str,
) -> (
    std::sync::Arc<support::RedisCluster>,
    slidewin_redis::RedisLimiter,
) {
    let cluster = support::RedisCluster::shared();
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let redis = slidewin_redis::RedisLimiter::connect_cluster(&urls)
        .await
        .unwrap()
        .with_prefix(prefix);
    (cluster, redis)
}

fn rule(name: &str, kind: Kind, quota: &str) -> Rule {
    Rule::new(name, kind, quota.parse().unwrap()).unwrap()
}
