//! The memory backend's tests: keys hashed and compared by their bits, and its answers.

use std::hash::{BuildHasher, RandomState};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use slidewin::limit::{Kind, Rule};

use super::*;

fn keys() -> Vec<RequestKey<'static>> {
    let v4 = Ipv4Addr::new(203, 0, 113, 7);
    vec![
        RequestKey::Address(IpAddr::V4(v4)),
        RequestKey::Address(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 8))),
        RequestKey::Address(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        RequestKey::Address(IpAddr::V4(Ipv4Addr::BROADCAST)),
        RequestKey::Address(IpAddr::V6(v4.to_ipv6_mapped())),
        RequestKey::Address(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        RequestKey::Address(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1))),
        RequestKey::Text("203.0.113.7"),
        RequestKey::Text(""),
        RequestKey::Text("k-42"),
    ]
}

/// A lookup hashes as the key it makes, and stands for that key and no other: the
/// contract of `Keyed::check_equivalent`.
#[test]
fn a_lookup_hashes_as_its_key_and_matches_only_it() {
    let hasher = RandomState::new();
    let keys = keys();
    for (i, asked) in keys.iter().enumerate() {
        let lookup = Lookup(*asked);
        let kept = MemoryKey::from(&lookup);
        assert_eq!(
            hasher.hash_one(&lookup),
            hasher.hash_one(&kept),
            "{asked:?}"
        );
        for (j, other) in keys.iter().enumerate() {
            let other = MemoryKey::from(&Lookup(*other));
            assert_eq!(lookup.equivalent(&other), i == j, "{asked:?} and {other:?}");
        }
    }
}

/// Each key is counted apart, an address and the text that spells it included, and the
/// same key together.
#[tokio::test]
async fn each_key_has_its_own_count_in_memory() {
    let memory = Memory::new();
    let rule = Rule::new("api", Kind::SlidingLog, "2/minute".parse().unwrap()).unwrap();
    let store = memory.store(RuleSet::from(rule)).unwrap();
    for round in 0..3u64 {
        for key in keys() {
            let checked = memory.check(&store, key, Moment::ZERO, 1).await.unwrap();
            assert_eq!(checked.allowed(), round < 2, "{key:?}, round {round}");
            assert_eq!(checked.decision().remaining(), 1u64.saturating_sub(round));
        }
    }
    assert_eq!(store.len(), keys().len());
}

/// Issue 33: a log alone that refunds gives back its oldest units on release, one that does
/// not keeps them; a reload that turns refunds on or off carries the counts either way (no
/// client gets a fresh quota from it).
#[tokio::test]
async fn a_log_alone_refunds_and_keeps_its_counts_when_refunds_change() {
    let memory = Memory::new();
    let log = Rule::new("api", Kind::SlidingLog, "10/minute".parse().unwrap()).unwrap();
    let plain = memory.store(RuleSet::from(log.clone())).unwrap();
    let ann = RequestKey::Text("ann");
    assert!(
        memory
            .check(&plain, ann, Moment::ZERO, 8)
            .await
            .unwrap()
            .allowed()
    );
    assert_eq!(
        memory.release(&plain, ann, Moment::ZERO, 3).await.unwrap(),
        0
    );
    let refunds = memory
        .store(RuleSet::from(log.clone().with_refunds().unwrap()))
        .unwrap();
    assert_eq!(refunds.carry_from(&plain, Moment::ZERO), 1);
    let left = memory.check(&refunds, ann, Moment::ZERO, 0).await.unwrap();
    assert_eq!(left.decision().remaining(), 2, "carried, not fresh");
    assert_eq!(
        memory
            .release(&refunds, ann, Moment::ZERO, 3)
            .await
            .unwrap(),
        3
    );
    let again = memory.store(RuleSet::from(log)).unwrap();
    assert_eq!(again.carry_from(&refunds, Moment::ZERO), 1);
    let back = memory.check(&again, ann, Moment::ZERO, 0).await.unwrap();
    assert_eq!(back.decision().remaining(), 5);
}
