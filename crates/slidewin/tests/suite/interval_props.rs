//! The interval algebra's laws, against a brute-force model: intervals on the points 0..20
//! as bitsets (bit `p` is set when `p` is inside).

use proptest::prelude::*;
use slidewin::Interval;
use slidewin::interval::{IntervalSet, Relation};

const POINTS: u8 = 20;

fn bits(iv: &Interval<u8>) -> u32 {
    (iv.start()..iv.end()).fold(0, |b, p| b | (1 << p))
}

fn set_bits(set: &IntervalSet<u8>) -> u32 {
    set.iter().fold(0, |b, iv| b | bits(iv))
}

/// The canonical set for a bitset: its maximal runs of points.
fn from_bits(b: u32) -> IntervalSet<u8> {
    let mut pieces = Vec::new();
    let mut p = 0;
    while p < POINTS {
        if b & (1 << p) != 0 {
            let start = p;
            while p < POINTS && b & (1 << p) != 0 {
                p += 1;
            }
            pieces.push(Interval::new(start, p).unwrap());
        } else {
            p += 1;
        }
    }
    pieces.into_iter().collect()
}

fn interval() -> impl Strategy<Value = Interval<u8>> {
    (0..=POINTS, 0..8u8).prop_map(|(s, len)| Interval::new(s, (s + len).min(POINTS)).unwrap())
}

fn intervals() -> impl Strategy<Value = Vec<Interval<u8>>> {
    prop::collection::vec(interval(), 0..8)
}

fn set() -> impl Strategy<Value = IntervalSet<u8>> {
    intervals().prop_map(IntervalSet::from_iter)
}

/// Canonical form: sorted, non-empty, separated by at least one missing point.
fn assert_canonical(set: &IntervalSet<u8>) {
    let pieces = set.as_slice();
    assert!(pieces.iter().all(|p| !p.is_empty()), "{set:?}");
    assert!(
        pieces.windows(2).all(|w| w[0].end() < w[1].start()),
        "{set:?}"
    );
}

/// Allen's relations from their textbook definitions, for intervals of positive length.
fn allen(a: &Interval<u8>, b: &Interval<u8>) -> Vec<Relation> {
    let (s1, e1, s2, e2) = (a.start(), a.end(), b.start(), b.end());
    let table = [
        (e1 < s2, Relation::Precedes),
        (e1 == s2, Relation::Meets),
        (s1 < s2 && s2 < e1 && e1 < e2, Relation::Overlaps),
        (s1 == s2 && e1 < e2, Relation::Starts),
        (s2 < s1 && e1 < e2, Relation::During),
        (s2 < s1 && e1 == e2, Relation::Finishes),
        (s1 == s2 && e1 == e2, Relation::Equals),
        (s1 < s2 && e1 == e2, Relation::FinishedBy),
        (s1 < s2 && e2 < e1, Relation::Contains),
        (s1 == s2 && e2 < e1, Relation::StartedBy),
        (s2 < s1 && s1 < e2 && e2 < e1, Relation::OverlappedBy),
        (e2 == s1, Relation::MetBy),
        (e2 < s1, Relation::PrecededBy),
    ];
    table
        .iter()
        .filter(|(holds, _)| *holds)
        .map(|&(_, r)| r)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn merge_matches_the_model_and_is_canonical(list in intervals()) {
        let set: IntervalSet<u8> = list.iter().copied().collect();
        assert_canonical(&set);
        let model = list.iter().fold(0, |b, iv| b | bits(iv));
        prop_assert_eq!(set_bits(&set), model);
        prop_assert_eq!(&set, &from_bits(model));
    }

    #[test]
    fn merge_is_idempotent_and_order_independent(list in intervals(), seed in any::<u64>()) {
        let set: IntervalSet<u8> = list.iter().copied().collect();
        let again: IntervalSet<u8> = set.iter().copied().collect();
        prop_assert_eq!(&again, &set);
        let mut shuffled = list.clone();
        // A deterministic shuffle from the seed.
        let mut x = seed | 1;
        for i in (1..shuffled.len()).rev() {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            let j = usize::try_from(x % (i as u64 + 1)).unwrap();
            shuffled.swap(i, j);
        }
        prop_assert_eq!(shuffled.into_iter().collect::<IntervalSet<u8>>(), set);
    }

    #[test]
    fn set_operations_match_the_model(a in set(), b in set()) {
        let (ma, mb) = (set_bits(&a), set_bits(&b));
        for (got, want) in [
            (a.union(&b), ma | mb),
            (a.intersection(&b), ma & mb),
            (a.difference(&b), ma & !mb),
        ] {
            assert_canonical(&got);
            prop_assert_eq!(set_bits(&got), want);
        }
        for p in 0..POINTS {
            prop_assert_eq!(a.contains(p), ma & (1 << p) != 0);
        }
        let total: u32 = a.iter().map(|iv| u32::from(iv.length())).sum();
        prop_assert_eq!(u32::from(a.total_length()), ma.count_ones());
        prop_assert_eq!(total, ma.count_ones());
        let gaps: u32 = a.gaps().fold(0, |g, iv| g | bits(&iv));
        let hull = a.hull().map_or(0, |h| bits(&h));
        prop_assert_eq!(gaps, hull & !ma);
    }

    #[test]
    fn union_and_intersection_commute_and_associate(a in set(), b in set(), c in set()) {
        prop_assert_eq!(a.union(&b), b.union(&a));
        prop_assert_eq!(a.intersection(&b), b.intersection(&a));
        prop_assert_eq!(a.union(&b).union(&c), a.union(&b.union(&c)));
        prop_assert_eq!(a.intersection(&b).intersection(&c), a.intersection(&b.intersection(&c)));
        // Distribution, for good measure.
        prop_assert_eq!(a.intersection(&b.union(&c)), a.intersection(&b).union(&a.intersection(&c)));
    }

    #[test]
    fn difference_and_complement_agree(a in set(), b in set(), within in interval()) {
        let bounds = IntervalSet::from(within);
        // a \ b == a ∩ complement(b) inside any bounds holding both.
        let everything = Interval::new(0, POINTS).unwrap();
        prop_assert_eq!(a.difference(&b), a.intersection(&b.complement(everything)));
        prop_assert_eq!(a.complement(within), bounds.difference(&a));
        let c = a.complement(within);
        assert_canonical(&c);
        prop_assert_eq!(set_bits(&c), bits(&within) & !set_bits(&a));
        prop_assert!(c.intersection(&a).is_empty());
        prop_assert_eq!(c.union(&a.intersection(&bounds)), bounds);
    }

    #[test]
    fn insert_and_remove_match_the_model(a in set(), iv in interval()) {
        let mut inserted = a.clone();
        inserted.insert(iv);
        assert_canonical(&inserted);
        prop_assert_eq!(set_bits(&inserted), set_bits(&a) | bits(&iv));
        let mut removed = a.clone();
        removed.remove(iv);
        assert_canonical(&removed);
        prop_assert_eq!(set_bits(&removed), set_bits(&a) & !bits(&iv));
        prop_assert_eq!(a.covers(&iv), !iv.is_empty() && bits(&iv) & !set_bits(&a) == 0
            || iv.is_empty() && a.iter().any(|p| p.start() <= iv.start() && iv.start() <= p.end()));
    }

    #[test]
    fn pairwise_operations_match_the_model(a in interval(), b in interval()) {
        let (ma, mb) = (bits(&a), bits(&b));
        prop_assert_eq!(a.overlaps(&b), ma & mb != 0);
        prop_assert_eq!(a.overlaps(&b), b.overlaps(&a));
        prop_assert_eq!(a.abuts(&b), b.abuts(&a));
        match a.intersect(&b) {
            Some(i) => prop_assert_eq!(bits(&i), ma & mb),
            None => prop_assert!(a.gap(&b).is_some()),
        }
        match a.union(&b) {
            Some(u) => prop_assert_eq!(bits(&u), ma | mb),
            None => prop_assert!(a.gap(&b).is_some()),
        }
        if let Some(g) = a.gap(&b) {
            prop_assert!(!g.is_empty() && g.intersect(&a).is_some() && g.intersect(&b).is_some());
            prop_assert_eq!(bits(&a.hull(&b)), ma | mb | bits(&g));
        }
        for p in 0..=POINTS {
            prop_assert_eq!(a.contains(p), ma & (1 << p) != 0);
        }
    }

    #[test]
    fn relation_is_exactly_one_of_thirteen_and_its_inverse_swaps(a in interval(), b in interval()) {
        let r = a.relation(&b);
        prop_assert_eq!(b.relation(&a), r.inverse());
        prop_assert_eq!(Relation::ALL.iter().filter(|&&x| x == r).count(), 1);
        if !a.is_empty() && !b.is_empty() {
            // On proper intervals, Allen's definitions hold for exactly one relation: ours.
            prop_assert_eq!(allen(&a, &b), vec![r]);
        } else {
            // With an empty interval, ours is one of those whose definition holds.
            prop_assert!(allen(&a, &b).contains(&r), "{:?} {:?} {:?} {:?}", a, b, r, allen(&a, &b));
        }
        prop_assert_eq!(r == Relation::Equals, a == b);
    }
}

#[test]
fn every_relation_is_reached() {
    let b = Interval::new(5u8, 10).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for s in 0..=15 {
        for e in s..=15 {
            seen.insert(Interval::new(s, e).unwrap().relation(&b));
        }
    }
    assert_eq!(seen.len(), 13);
}
