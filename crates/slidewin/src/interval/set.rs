//! `IntervalSet`: a union of intervals, kept merged and sorted.

use std::fmt;

use super::{Difference, Interval};

/// A set of points stored as sorted, disjoint, non-touching, non-empty intervals.
///
/// Build it from any intervals in any order: overlapping and touching ones merge (sort by
/// start, then one scan), and empty intervals, which hold no point, are dropped. Building from
/// `n` intervals is `O(n log n)`; [`union`](IntervalSet::union),
/// [`intersection`](IntervalSet::intersection) and [`difference`](IntervalSet::difference) are
/// linear merges of the two sorted lists; [`contains`](IntervalSet::contains) is a binary
/// search.
///
/// # Example
///
/// ```
/// use slidewin::interval::IntervalSet;
/// use slidewin::Interval;
///
/// let busy: IntervalSet<i32> = [(5, 8), (0, 2), (2, 4), (7, 9)]
///     .into_iter()
///     .map(|(s, e)| Interval::new(s, e).unwrap())
///     .collect();
/// let pieces: Vec<(i32, i32)> = busy.iter().map(|iv| (iv.start(), iv.end())).collect();
/// assert_eq!(pieces, [(0, 4), (5, 9)]);
///
/// let day = Interval::new(0, 12).unwrap();
/// let free = busy.complement(day);
/// assert_eq!(free.to_string(), "{[4, 5), [9, 12)}");
/// assert_eq!(busy.total_length(), 8u32);
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct IntervalSet<T> {
    // Invariant: sorted by start; each interval non-empty; `a.end < b.start` for neighbours.
    pieces: Vec<Interval<T>>,
}

impl<T> Default for IntervalSet<T> {
    fn default() -> IntervalSet<T> {
        IntervalSet { pieces: Vec::new() }
    }
}

impl<T: Ord + Copy> IntervalSet<T> {
    /// The empty set.
    ///
    /// ```
    /// assert!(slidewin::interval::IntervalSet::<i32>::new().is_empty());
    /// ```
    #[must_use]
    pub fn new() -> IntervalSet<T> {
        IntervalSet::default()
    }

    /// A set from already merged pieces (sorted, disjoint, non-touching, non-empty).
    fn from_canonical(pieces: Vec<Interval<T>>) -> IntervalSet<T> {
        debug_assert!(pieces.iter().all(|p| !p.is_empty()));
        debug_assert!(pieces.windows(2).all(|w| w[0].end < w[1].start));
        IntervalSet { pieces }
    }

    /// The number of disjoint pieces.
    ///
    /// ```
    /// use slidewin::interval::IntervalSet;
    /// use slidewin::Interval;
    /// let set = IntervalSet::from_iter([Interval::new(0, 2)?, Interval::new(1, 3)?]);
    /// assert_eq!(set.len(), 1);
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    /// Whether the set holds no point.
    ///
    /// ```
    /// use slidewin::interval::IntervalSet;
    /// use slidewin::Interval;
    /// assert!(IntervalSet::from_iter([Interval::empty(3)]).is_empty());
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// The pieces, in order.
    ///
    /// ```
    /// use slidewin::interval::IntervalSet;
    /// use slidewin::Interval;
    /// let set = IntervalSet::from_iter([Interval::new(4, 6)?, Interval::new(0, 1)?]);
    /// assert_eq!(set.as_slice(), [Interval::new(0, 1)?, Interval::new(4, 6)?]);
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn as_slice(&self) -> &[Interval<T>] {
        &self.pieces
    }

    /// The pieces, in order.
    ///
    /// ```
    /// use slidewin::interval::IntervalSet;
    /// use slidewin::Interval;
    /// let set = IntervalSet::from_iter([Interval::new(4, 6)?, Interval::new(0, 1)?]);
    /// assert_eq!(set.iter().next(), Some(&Interval::new(0, 1)?));
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    pub fn iter(&self) -> std::slice::Iter<'_, Interval<T>> {
        self.pieces.iter()
    }

    /// The smallest interval covering the whole set, or `None` when it is empty.
    ///
    /// ```
    /// use slidewin::interval::IntervalSet;
    /// use slidewin::Interval;
    /// let set = IntervalSet::from_iter([Interval::new(4, 6)?, Interval::new(0, 1)?]);
    /// assert_eq!(set.hull(), Some(Interval::new(0, 6)?));
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn hull(&self) -> Option<Interval<T>> {
        let first = self.pieces.first()?;
        let last = self.pieces.last()?;
        Some(Interval::from_ordered(first.start, last.end))
    }

    /// The index of the last piece starting at or before `t`, if any.
    fn piece_at_or_before(&self, t: T) -> Option<usize> {
        self.pieces.partition_point(|p| p.start <= t).checked_sub(1)
    }

    /// Whether `t` is inside one of the pieces. `O(log n)`.
    ///
    /// ```
    /// use slidewin::interval::IntervalSet;
    /// use slidewin::Interval;
    /// let set = IntervalSet::from_iter([Interval::new(0, 2)?, Interval::new(5, 7)?]);
    /// assert!(set.contains(1) && set.contains(5));
    /// assert!(!set.contains(2) && !set.contains(7) && !set.contains(-1));
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn contains(&self, t: T) -> bool {
        self.piece_at_or_before(t)
            .is_some_and(|i| t < self.pieces[i].end)
    }

    /// Whether every point of `interval` is in the set (an empty interval is covered when its
    /// point is inside a piece or at a piece's end). `O(log n)`.
    ///
    /// ```
    /// use slidewin::interval::IntervalSet;
    /// use slidewin::Interval;
    /// let set = IntervalSet::from_iter([Interval::new(0, 4)?, Interval::new(5, 7)?]);
    /// assert!(set.covers(&Interval::new(1, 4)?));
    /// assert!(!set.covers(&Interval::new(3, 6)?)); // 4 is missing
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn covers(&self, interval: &Interval<T>) -> bool {
        self.piece_at_or_before(interval.start)
            .is_some_and(|i| self.pieces[i].encloses(interval))
    }

    /// Adds every point of `interval`, merging with the pieces it overlaps or touches.
    /// `O(log n)` to find the place, plus the shift of the pieces after it.
    ///
    /// ```
    /// use slidewin::interval::IntervalSet;
    /// use slidewin::Interval;
    /// let mut set = IntervalSet::from_iter([Interval::new(0, 2)?, Interval::new(5, 7)?]);
    /// set.insert(Interval::new(2, 5)?);
    /// assert_eq!(set.as_slice(), [Interval::new(0, 7)?]);
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    pub fn insert(&mut self, interval: Interval<T>) {
        if interval.is_empty() {
            return;
        }
        // The pieces that touch or overlap `interval` are a contiguous run [lo, hi).
        let lo = self.pieces.partition_point(|p| p.end < interval.start);
        let hi = self.pieces.partition_point(|p| p.start <= interval.end);
        if lo == hi {
            self.pieces.insert(lo, interval);
            return;
        }
        let merged = Interval::from_ordered(
            interval.start.min(self.pieces[lo].start),
            interval.end.max(self.pieces[hi - 1].end),
        );
        self.pieces.splice(lo..hi, [merged]);
    }

    /// Takes every point of `interval` out, splitting a piece when `interval` is inside it.
    ///
    /// ```
    /// use slidewin::interval::IntervalSet;
    /// use slidewin::Interval;
    /// let mut set = IntervalSet::from_iter([Interval::new(0, 10)?]);
    /// set.remove(Interval::new(3, 5)?);
    /// assert_eq!(set.as_slice(), [Interval::new(0, 3)?, Interval::new(5, 10)?]);
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    pub fn remove(&mut self, interval: Interval<T>) {
        if interval.is_empty() {
            return;
        }
        // The pieces that share a point with `interval` are a contiguous run [lo, hi).
        let lo = self.pieces.partition_point(|p| p.end <= interval.start);
        let hi = self.pieces.partition_point(|p| p.start < interval.end);
        if lo >= hi {
            return;
        }
        let first = self.pieces[lo];
        let last = self.pieces[hi - 1];
        let left = Interval::from_ordered(first.start, interval.start.max(first.start));
        let right = Interval::from_ordered(interval.end.min(last.end), last.end);
        let kept = [left, right].into_iter().filter(|p| !p.is_empty());
        self.pieces.splice(lo..hi, kept);
    }

    /// Every point in either set. A linear merge: `O(n + m)`.
    ///
    /// ```
    /// use slidewin::interval::IntervalSet;
    /// use slidewin::Interval;
    /// let a = IntervalSet::from_iter([Interval::new(0, 2)?, Interval::new(6, 8)?]);
    /// let b = IntervalSet::from_iter([Interval::new(2, 3)?]);
    /// assert_eq!(a.union(&b).to_string(), "{[0, 3), [6, 8)}");
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn union(&self, other: &IntervalSet<T>) -> IntervalSet<T> {
        let (a, b) = (&self.pieces, &other.pieces);
        let mut out: Vec<Interval<T>> = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            // Take the piece that starts first, as a sort-merge would.
            let next = if j == b.len() || (i < a.len() && a[i].start <= b[j].start) {
                i += 1;
                a[i - 1]
            } else {
                j += 1;
                b[j - 1]
            };
            push_merging(&mut out, next);
        }
        IntervalSet::from_canonical(out)
    }

    /// Every point in both sets. A linear merge: `O(n + m)`.
    ///
    /// ```
    /// use slidewin::interval::IntervalSet;
    /// use slidewin::Interval;
    /// let a = IntervalSet::from_iter([Interval::new(0, 5)?, Interval::new(6, 9)?]);
    /// let b = IntervalSet::from_iter([Interval::new(3, 7)?]);
    /// assert_eq!(a.intersection(&b).to_string(), "{[3, 5), [6, 7)}");
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn intersection(&self, other: &IntervalSet<T>) -> IntervalSet<T> {
        let (a, b) = (&self.pieces, &other.pieces);
        let mut out = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            let start = a[i].start.max(b[j].start);
            let end = a[i].end.min(b[j].end);
            if start < end {
                out.push(Interval::from_ordered(start, end));
            }
            // The piece that ends first can meet nothing further on the other side.
            if a[i].end < b[j].end {
                i += 1;
            } else {
                j += 1;
            }
        }
        IntervalSet::from_canonical(out)
    }

    /// Every point in `self` and not in `other`. A linear merge: `O(n + m)`.
    ///
    /// ```
    /// use slidewin::interval::IntervalSet;
    /// use slidewin::Interval;
    /// let a = IntervalSet::from_iter([Interval::new(0, 10)?]);
    /// let b = IntervalSet::from_iter([Interval::new(2, 3)?, Interval::new(8, 12)?]);
    /// assert_eq!(a.difference(&b).to_string(), "{[0, 2), [3, 8)}");
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn difference(&self, other: &IntervalSet<T>) -> IntervalSet<T> {
        let b = &other.pieces;
        let mut out = Vec::with_capacity(self.pieces.len());
        let mut j = 0;
        for piece in &self.pieces {
            let mut start = piece.start;
            // Skip the pieces of `other` wholly before this one; they cannot reach later ones.
            while j < b.len() && b[j].end <= start {
                j += 1;
            }
            let mut k = j;
            while k < b.len() && b[k].start < piece.end {
                if start < b[k].start {
                    out.push(Interval::from_ordered(start, b[k].start));
                }
                start = start.max(b[k].end);
                k += 1;
            }
            if start < piece.end {
                out.push(Interval::from_ordered(start, piece.end));
            }
            // The last piece of `other` seen may reach into the next piece of `self`.
            j = k.saturating_sub(1).max(j);
        }
        IntervalSet::from_canonical(out)
    }

    /// Every point of `within` that is not in the set. `O(n)`.
    ///
    /// ```
    /// use slidewin::interval::IntervalSet;
    /// use slidewin::Interval;
    /// let busy = IntervalSet::from_iter([Interval::new(9, 10)?, Interval::new(13, 14)?]);
    /// let free = busy.complement(Interval::new(8, 18)?);
    /// assert_eq!(free.to_string(), "{[8, 9), [10, 13), [14, 18)}");
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn complement(&self, within: Interval<T>) -> IntervalSet<T> {
        IntervalSet::from_iter([within]).difference(self)
    }

    /// The gaps between consecutive pieces, in order.
    ///
    /// ```
    /// use slidewin::interval::IntervalSet;
    /// use slidewin::Interval;
    /// let set = IntervalSet::from_iter([Interval::new(0, 2)?, Interval::new(5, 6)?, Interval::new(9, 10)?]);
    /// let gaps: Vec<_> = set.gaps().collect();
    /// assert_eq!(gaps, [Interval::new(2, 5)?, Interval::new(6, 9)?]);
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    pub fn gaps(&self) -> Gaps<'_, T> {
        Gaps {
            pieces: self.pieces.windows(2),
        }
    }

    /// The sum of the pieces' lengths (saturating at the length type's largest value).
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::interval::IntervalSet;
    /// use slidewin::{Interval, Moment};
    ///
    /// let s = Moment::from_secs;
    /// let set = IntervalSet::from_iter([Interval::new(s(0), s(2))?, Interval::new(s(1), s(3))?, Interval::new(s(10), s(11))?]);
    /// assert_eq!(set.total_length(), Duration::from_secs(4));
    /// # Ok::<(), slidewin::interval::IntervalError<Moment>>(())
    /// ```
    #[must_use]
    pub fn total_length(&self) -> T::Length
    where
        T: Difference,
    {
        self.pieces
            .iter()
            .fold(T::ZERO, |sum, p| T::add_lengths(sum, p.length()))
    }
}

/// Appends `next` (which starts at or after the last piece's start), merging when it overlaps
/// or touches the last piece; empty intervals are dropped.
fn push_merging<T: Ord + Copy>(out: &mut Vec<Interval<T>>, next: Interval<T>) {
    if next.is_empty() {
        return;
    }
    match out.last_mut() {
        Some(last) if next.start <= last.end => {
            if next.end > last.end {
                last.end = next.end;
            }
        }
        _ => out.push(next),
    }
}

/// Collects any intervals in any order: sorts by start, then merges in one scan.
impl<T: Ord + Copy> FromIterator<Interval<T>> for IntervalSet<T> {
    fn from_iter<I: IntoIterator<Item = Interval<T>>>(iter: I) -> IntervalSet<T> {
        let mut pieces: Vec<Interval<T>> = iter.into_iter().filter(|p| !p.is_empty()).collect();
        pieces.sort_unstable_by_key(|p| p.start);
        // Merge in place: `w` is the last kept piece.
        let mut w = 0;
        for r in 1..pieces.len() {
            if pieces[r].start <= pieces[w].end {
                if pieces[r].end > pieces[w].end {
                    pieces[w].end = pieces[r].end;
                }
            } else {
                w += 1;
                pieces[w] = pieces[r];
            }
        }
        pieces.truncate(if pieces.is_empty() { 0 } else { w + 1 });
        IntervalSet::from_canonical(pieces)
    }
}

impl<T: Ord + Copy> From<Interval<T>> for IntervalSet<T> {
    fn from(interval: Interval<T>) -> IntervalSet<T> {
        IntervalSet::from_iter([interval])
    }
}

impl<T: Ord + Copy> Extend<Interval<T>> for IntervalSet<T> {
    fn extend<I: IntoIterator<Item = Interval<T>>>(&mut self, iter: I) {
        // Rebuilding is O((n + k) log(n + k)); inserting one by one could be O(n k).
        let pieces = std::mem::take(&mut self.pieces);
        *self = pieces.into_iter().chain(iter).collect();
    }
}

impl<'a, T> IntoIterator for &'a IntervalSet<T> {
    type Item = &'a Interval<T>;
    type IntoIter = std::slice::Iter<'a, Interval<T>>;

    fn into_iter(self) -> Self::IntoIter {
        self.pieces.iter()
    }
}

impl<T> IntoIterator for IntervalSet<T> {
    type Item = Interval<T>;
    type IntoIter = std::vec::IntoIter<Interval<T>>;

    fn into_iter(self) -> Self::IntoIter {
        self.pieces.into_iter()
    }
}

impl<T: fmt::Debug> fmt::Debug for IntervalSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(&self.pieces).finish()
    }
}

/// Written as `{[0, 4), [5, 9)}`.
impl<T: fmt::Display> fmt::Display for IntervalSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, p) in self.pieces.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{p}")?;
        }
        f.write_str("}")
    }
}

/// The gaps between consecutive pieces of an [`IntervalSet`], from [`IntervalSet::gaps`].
///
/// ```
/// use slidewin::interval::IntervalSet;
/// use slidewin::Interval;
/// let set = IntervalSet::from_iter([Interval::new(0, 1)?, Interval::new(3, 4)?]);
/// assert_eq!(set.gaps().count(), 1);
/// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Gaps<'a, T> {
    pieces: std::slice::Windows<'a, Interval<T>>,
}

impl<T: Ord + Copy> Iterator for Gaps<'_, T> {
    type Item = Interval<T>;

    fn next(&mut self) -> Option<Interval<T>> {
        let pair = self.pieces.next()?;
        Some(Interval::from_ordered(pair[0].end, pair[1].start))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.pieces.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(i32, i32)]) -> IntervalSet<i32> {
        pairs
            .iter()
            .map(|&(s, e)| Interval::new(s, e).unwrap())
            .collect()
    }

    #[test]
    fn fb_merge_intervals_any_order() {
        // The test of `mergeIntervals` in the Facebook `TimeInterval` rewrite: [5,8), [0,2),
        // [2,4), [7,9) merge into [0,4), [5,9).
        assert_eq!(
            set(&[(5, 8), (0, 2), (2, 4), (7, 9)]),
            set(&[(0, 4), (5, 9)])
        );
        assert_eq!(set(&[(5, 8), (0, 2), (2, 4), (7, 9)]).len(), 2);
    }

    #[test]
    fn empty_and_nested_inputs() {
        assert!(set(&[]).is_empty());
        assert!(set(&[(3, 3), (4, 4)]).is_empty());
        assert_eq!(set(&[(0, 10), (2, 3), (4, 5)]), set(&[(0, 10)]));
        assert_eq!(set(&[(0, 1), (1, 1), (1, 2)]).len(), 1);
    }

    #[test]
    fn insert_and_remove_at_edges() {
        let mut s = set(&[(0, 2), (4, 6)]);
        s.insert(Interval::new(2, 4).unwrap());
        assert_eq!(s, set(&[(0, 6)]));
        s.remove(Interval::new(0, 6).unwrap());
        assert!(s.is_empty());
        let mut s = set(&[(0, 2), (4, 6), (8, 10)]);
        s.remove(Interval::new(1, 9).unwrap());
        assert_eq!(s, set(&[(0, 1), (9, 10)]));
        s.remove(Interval::new(1, 9).unwrap()); // nothing there any more
        assert_eq!(s, set(&[(0, 1), (9, 10)]));
        s.insert(Interval::new(-5, -3).unwrap());
        assert_eq!(s, set(&[(-5, -3), (0, 1), (9, 10)]));
    }

    #[test]
    fn complement_of_empty_is_the_bounds() {
        let within = Interval::new(0, 5).unwrap();
        assert_eq!(set(&[]).complement(within), set(&[(0, 5)]));
        assert!(set(&[(-1, 6)]).complement(within).is_empty());
        assert!(set(&[(1, 2)]).complement(Interval::empty(3)).is_empty());
    }
}
