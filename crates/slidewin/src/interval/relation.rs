//! Allen's interval relations.

use std::fmt;

/// How one interval sits against another: exactly one of Allen's 13 relations.
///
/// Read `a.relation(&b) == r` as "a *r* b". The six relations besides [`Equals`] come in
/// pairs, and [`inverse`](Relation::inverse) swaps a pair: `b.relation(&a)` is always
/// `a.relation(&b).inverse()`.
///
/// | relation | picture (`a` above `b`) | endpoints |
/// |---|---|---|
/// | [`Precedes`] | `aa···` / `···bb` | `a.end < b.start` |
/// | [`Meets`] | `aa··` / `··bb` | `a.end == b.start` |
/// | [`Overlaps`] | `aaa·` / `·bbb` | `a.start < b.start < a.end < b.end` |
/// | [`Starts`] | `aa··` / `bbbb` | `a.start == b.start`, `a.end < b.end` |
/// | [`During`] | `·aa·` / `bbbb` | `b.start < a.start`, `a.end < b.end` |
/// | [`Finishes`] | `··aa` / `bbbb` | `b.start < a.start`, `a.end == b.end` |
/// | [`Equals`] | `aaaa` / `bbbb` | same start, same end |
///
/// and their inverses [`PrecededBy`], [`MetBy`], [`OverlappedBy`], [`StartedBy`],
/// [`Contains`], [`FinishedBy`].
///
/// Allen defined the relations for intervals of positive length, where exactly one holds.
/// With an empty interval two can hold at once (`[5, 5)` both meets and starts `[5, 8)`), so
/// the first that holds in this order wins: equals, precedes/preceded-by,
/// meets/met-by, starts/started-by, finishes/finished-by, during/contains,
/// overlaps/overlapped-by. Each step tests a relation and its inverse together, so the
/// inverse law holds for empty intervals too.
///
/// [`Precedes`]: Relation::Precedes
/// [`Meets`]: Relation::Meets
/// [`Overlaps`]: Relation::Overlaps
/// [`Starts`]: Relation::Starts
/// [`During`]: Relation::During
/// [`Finishes`]: Relation::Finishes
/// [`Equals`]: Relation::Equals
/// [`PrecededBy`]: Relation::PrecededBy
/// [`MetBy`]: Relation::MetBy
/// [`OverlappedBy`]: Relation::OverlappedBy
/// [`StartedBy`]: Relation::StartedBy
/// [`Contains`]: Relation::Contains
/// [`FinishedBy`]: Relation::FinishedBy
///
/// # Example
///
/// ```
/// use slidewin::interval::Relation;
/// use slidewin::Interval;
///
/// let meeting = Interval::new(9, 10)?;
/// let lunch = Interval::new(12, 13)?;
/// assert_eq!(meeting.relation(&lunch), Relation::Precedes);
/// assert_eq!(lunch.relation(&meeting), Relation::PrecededBy);
/// assert_eq!(Relation::Precedes.inverse(), Relation::PrecededBy);
/// assert_eq!(Interval::empty(5).relation(&Interval::new(5, 8)?), Relation::Meets);
/// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Relation {
    /// `a` ends before `b` starts, with a gap between.
    Precedes,
    /// `a` ends exactly where `b` starts.
    Meets,
    /// `a` starts first and ends inside `b`.
    Overlaps,
    /// Same start; `a` ends first.
    Starts,
    /// `a` lies strictly inside `b`.
    During,
    /// Same end; `a` starts later.
    Finishes,
    /// Same start and same end.
    Equals,
    /// Same end; `a` starts first (the inverse of [`Finishes`](Relation::Finishes)).
    FinishedBy,
    /// `b` lies strictly inside `a` (the inverse of [`During`](Relation::During)).
    Contains,
    /// Same start; `a` ends later (the inverse of [`Starts`](Relation::Starts)).
    StartedBy,
    /// `b` starts first and ends inside `a` (the inverse of [`Overlaps`](Relation::Overlaps)).
    OverlappedBy,
    /// `a` starts exactly where `b` ends (the inverse of [`Meets`](Relation::Meets)).
    MetBy,
    /// `a` starts after `b` ends, with a gap between (the inverse of
    /// [`Precedes`](Relation::Precedes)).
    PrecededBy,
}

impl Relation {
    /// All 13, in the order of the table above.
    ///
    /// ```
    /// assert_eq!(slidewin::interval::Relation::ALL.len(), 13);
    /// ```
    pub const ALL: [Relation; 13] = [
        Relation::Precedes,
        Relation::Meets,
        Relation::Overlaps,
        Relation::Starts,
        Relation::During,
        Relation::Finishes,
        Relation::Equals,
        Relation::FinishedBy,
        Relation::Contains,
        Relation::StartedBy,
        Relation::OverlappedBy,
        Relation::MetBy,
        Relation::PrecededBy,
    ];

    /// The relation seen from the other side: `b.relation(&a)` when `self` is
    /// `a.relation(&b)`.
    ///
    /// ```
    /// use slidewin::interval::Relation;
    /// assert_eq!(Relation::During.inverse(), Relation::Contains);
    /// assert_eq!(Relation::Equals.inverse(), Relation::Equals);
    /// for r in Relation::ALL {
    ///     assert_eq!(r.inverse().inverse(), r);
    /// }
    /// ```
    #[must_use]
    pub const fn inverse(self) -> Relation {
        match self {
            Relation::Precedes => Relation::PrecededBy,
            Relation::Meets => Relation::MetBy,
            Relation::Overlaps => Relation::OverlappedBy,
            Relation::Starts => Relation::StartedBy,
            Relation::During => Relation::Contains,
            Relation::Finishes => Relation::FinishedBy,
            Relation::Equals => Relation::Equals,
            Relation::FinishedBy => Relation::Finishes,
            Relation::Contains => Relation::During,
            Relation::StartedBy => Relation::Starts,
            Relation::OverlappedBy => Relation::Overlaps,
            Relation::MetBy => Relation::Meets,
            Relation::PrecededBy => Relation::Precedes,
        }
    }

    /// Classifies `[s1, e1)` against `[s2, e2)`, in the documented order.
    pub(crate) fn classify<T: Ord>(s1: T, e1: T, s2: T, e2: T) -> Relation {
        use std::cmp::Ordering::{Equal, Greater, Less};

        if s1 == s2 && e1 == e2 {
            return Relation::Equals;
        }
        if e1 < s2 {
            return Relation::Precedes;
        }
        if e2 < s1 {
            return Relation::PrecededBy;
        }
        if e1 == s2 {
            return Relation::Meets;
        }
        if e2 == s1 {
            return Relation::MetBy;
        }
        // From here the two share a point: s1 < e2 and s2 < e1.
        match (s1.cmp(&s2), e1.cmp(&e2)) {
            (Equal, Less) => Relation::Starts,
            (Equal, _) => Relation::StartedBy,
            (Greater, Equal) => Relation::Finishes,
            (Less, Equal) => Relation::FinishedBy,
            (Greater, Less) => Relation::During,
            (Less, Greater) => Relation::Contains,
            (Less, Less) => Relation::Overlaps,
            (Greater, Greater) => Relation::OverlappedBy,
        }
    }
}

/// The relation's name in words: `"precedes"`, `"met by"`, `"contains"`.
impl fmt::Display for Relation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Relation::Precedes => "precedes",
            Relation::Meets => "meets",
            Relation::Overlaps => "overlaps",
            Relation::Starts => "starts",
            Relation::During => "during",
            Relation::Finishes => "finishes",
            Relation::Equals => "equals",
            Relation::FinishedBy => "finished by",
            Relation::Contains => "contains",
            Relation::StartedBy => "started by",
            Relation::OverlappedBy => "overlapped by",
            Relation::MetBy => "met by",
            Relation::PrecededBy => "preceded by",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Interval;

    #[test]
    fn each_of_the_thirteen_on_proper_intervals() {
        let b = Interval::new(10, 20).unwrap();
        let cases = [
            ((0, 5), Relation::Precedes),
            ((0, 10), Relation::Meets),
            ((5, 15), Relation::Overlaps),
            ((10, 15), Relation::Starts),
            ((12, 18), Relation::During),
            ((15, 20), Relation::Finishes),
            ((10, 20), Relation::Equals),
            ((5, 20), Relation::FinishedBy),
            ((5, 25), Relation::Contains),
            ((10, 25), Relation::StartedBy),
            ((15, 25), Relation::OverlappedBy),
            ((20, 25), Relation::MetBy),
            ((21, 25), Relation::PrecededBy),
        ];
        for ((s, e), want) in cases {
            let a = Interval::new(s, e).unwrap();
            assert_eq!(a.relation(&b), want, "{a:?} vs {b:?}");
            assert_eq!(b.relation(&a), want.inverse(), "{b:?} vs {a:?}");
        }
    }

    #[test]
    fn empty_intervals_follow_the_documented_order() {
        let b = Interval::new(10, 20).unwrap();
        assert_eq!(Interval::empty(10).relation(&b), Relation::Meets);
        assert_eq!(Interval::empty(20).relation(&b), Relation::MetBy);
        assert_eq!(Interval::empty(15).relation(&b), Relation::During);
        assert_eq!(
            Interval::empty(15).relation(&Interval::empty(15)),
            Relation::Equals
        );
        assert_eq!(
            Interval::empty(3).relation(&Interval::empty(4)),
            Relation::Precedes
        );
    }
}
