//! Reserve, then settle, through the store: every kind of store `Memory` makes (a rule alone
//! of each kind, and a set) answers as the core's `Limiter` of the same rules.

use std::time::Duration;

use slidewin::limit::{CalendarQuota, CalendarUnit, Kind, Reservation, Rule, RuleSet};
use slidewin::{Limiter, Moment, Quota};
use slidewin_store::{Backend, Memory};

fn at(secs: u64) -> Moment {
    Moment::from_secs(secs)
}

/// Reserves 6, settles to `actual`, and checks: the store and the core agree at each step.
async fn agree(set: RuleSet, actual: u64) {
    let memory = Memory::new();
    let store = memory.store(set.clone()).unwrap();
    let mut core = Limiter::new(set);
    let (checked, reserved) = memory
        .reserve(&store, "ann".into(), at(1), 6)
        .await
        .unwrap();
    let (decisions, expected) = core.reserve(at(1), 6).unwrap();
    assert_eq!(
        (checked.decisions(), reserved),
        (decisions.as_slice(), expected)
    );
    let reserved = reserved.unwrap();
    let settled = memory.settle(&store, "ann".into(), reserved, actual).await;
    assert_eq!(settled.unwrap(), core.settle(reserved, actual));
    // Another key holds nothing of it.
    assert!(
        !memory
            .settle(&store, "bob".into(), reserved, actual)
            .await
            .unwrap()
    );
    for now in [at(2), at(11)] {
        let checked = memory.check(&store, "ann".into(), now, 1).await.unwrap();
        assert_eq!(checked.decisions(), core.check(now, 1).unwrap().as_slice());
    }
}

/// One rule of `kind`, 10 a span of 10 s (a calendar day for a calendar rule), as a set.
fn one(kind: Kind) -> RuleSet {
    let rule = match kind {
        Kind::Calendar => Rule::calendar("r", CalendarQuota::new(10, CalendarUnit::Day).unwrap()),
        _ => Rule::new("r", kind, Quota::new(10, Duration::from_secs(10)).unwrap()),
    };
    RuleSet::from(rule.unwrap())
}

#[tokio::test]
async fn every_kind_of_store_settles_as_the_core_does() {
    for kind in Kind::ALL {
        let set = one(kind);
        for actual in [0, 3, 6, 9, 40, u64::MAX] {
            agree(set.clone(), actual).await;
        }
    }
    let budget = RuleSet::new([
        Rule::new("minute", Kind::SlidingLog, "10/minute".parse().unwrap()).unwrap(),
        Rule::new("day", Kind::Gcra, "100/day burst 20".parse().unwrap()).unwrap(),
    ])
    .unwrap();
    agree(budget, 15).await;
}

#[tokio::test]
async fn a_denied_reserve_holds_nothing_to_settle() {
    let memory = Memory::new();
    let rule = Rule::new("r", Kind::FixedWindow, "5/s".parse().unwrap()).unwrap();
    let store = memory.store(RuleSet::from(rule)).unwrap();
    memory.check(&store, "ann".into(), at(0), 5).await.unwrap();
    let (checked, reserved) = memory
        .reserve(&store, "ann".into(), at(0), 1)
        .await
        .unwrap();
    assert!(!checked.allowed());
    assert_eq!(reserved, None);
    assert!(
        memory
            .reserve(&store, "ann".into(), at(0), 6)
            .await
            .is_err()
    ); // never admitted
}

/// Issue 33: a cost reported after the response, with nothing reserved, is charged on a key
/// never seen (made as a check makes it) as the core charges it, past the limit too.
#[tokio::test]
async fn an_unreserved_settle_charges_a_new_key_as_the_core_does() {
    for kind in Kind::ALL {
        let set = one(kind);
        let memory = Memory::new();
        let store = memory.store(set.clone()).unwrap();
        let mut core = Limiter::new(set);
        for (t, units) in [(1, 0), (1, 4), (2, 25), (30, 3)] {
            let report = Reservation::unreserved(at(t));
            let charged = memory.settle(&store, "ann".into(), report, units).await;
            assert_eq!(charged.unwrap(), core.settle(report, units), "{kind}");
            let checked = memory.check(&store, "ann".into(), at(t), 1).await.unwrap();
            assert_eq!(
                checked.decisions(),
                core.check(at(t), 1).unwrap().as_slice()
            );
        }
    }
}
