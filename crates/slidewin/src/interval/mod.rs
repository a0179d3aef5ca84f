//! Half-open intervals `[start, end)` over any ordered point, and sets of them.
//!
//! Everything follows one rule, from Facebook's `TimeInterval`: two intervals are compared by
//! `max(starts)` against `min(ends)`. So touching intervals (`[9, 10)` and `[10, 11)`) *abut*
//! but do not *overlap*, and still union into one piece. For calendar distances (years,
//! months, days between two dates) see [`period`](crate::period).
//!
//! | type | pick it for |
//! |---|---|
//! | [`Interval`] | one interval over integers, [`Moment`], [`jiff::Timestamp`], dates: contains, overlaps, intersect, union, gap, length |
//! | [`Relation`] | how two intervals sit: one of Allen's 13 relations |
//! | [`IntervalSet`] | a union of intervals given in any order, merged; union, intersection, difference, complement in linear merges |
//! | [`Gaps`] | the gaps between a set's pieces |
//! | [`Difference`] | a point type whose intervals have a length |
//! | [`IntervalError`] | a start after its end, naming both |
//!
//! # Example
//!
//! ```
//! use slidewin::Interval;
//! use slidewin::interval::{IntervalSet, Relation};
//!
//! let busy: IntervalSet<i32> = [(13, 14), (9, 10), (10, 11)]
//!     .into_iter()
//!     .map(|(s, e)| Interval::new(s, e))
//!     .collect::<Result<_, _>>()?;
//! assert_eq!(busy.to_string(), "{[9, 11), [13, 14)}");
//! assert_eq!(busy.complement(Interval::new(8, 18)?).to_string(), "{[8, 9), [11, 13), [14, 18)}");
//! assert_eq!(Interval::new(9, 10)?.relation(&Interval::new(10, 11)?), Relation::Meets);
//! # Ok::<(), slidewin::interval::IntervalError<i32>>(())
//! ```

mod relation;
mod set;

pub use relation::Relation;
pub use set::{Gaps, IntervalSet};

use std::fmt;
use std::time::Duration;

use crate::time::Moment;

/// A half-open interval `[start, end)`: it contains `start` and every point up to, but not
/// including, `end`.
///
/// `start == end` is the empty interval at that point: it contains nothing but still has a
/// place, so it can touch, start or end another interval. Any ordered, copyable type works as
/// the point type: integers, [`Moment`], [`jiff::Timestamp`], [`jiff::civil::Date`].
///
/// Comparisons follow Facebook's `TimeInterval`: everything is decided by `max(starts)` against `min(ends)`.
/// Touching intervals (`[9, 10)` and `[10, 11)`) *abut* but do not *overlap*, and still
/// [`union`](Interval::union) into one piece.
///
/// # Example
///
/// ```
/// use slidewin::interval::Relation;
/// use slidewin::Interval;
///
/// let nine = Interval::new(9, 10)?;
/// let ten = Interval::new(10, 11)?;
/// assert!(!nine.contains(10)); // the end is outside
/// assert!(nine.abuts(&ten) && !nine.overlaps(&ten));
/// assert_eq!(nine.union(&ten), Some(Interval::new(9, 11)?));
/// assert_eq!(nine.relation(&ten), Relation::Meets);
/// assert_eq!(nine.length(), 1);
/// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Interval<T> {
    start: T,
    end: T,
}

impl<T: Ord + Copy> Interval<T> {
    /// The interval `[start, end)`, or an error naming both ends when `start > end`.
    ///
    /// ```
    /// use slidewin::Interval;
    ///
    /// assert!(Interval::new(3, 3)?.is_empty());
    /// let err = Interval::new(5, 2).unwrap_err();
    /// assert_eq!(err.to_string(), "interval start 5 is after its end 2");
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    pub fn new(start: T, end: T) -> Result<Interval<T>, IntervalError<T>> {
        if start > end {
            return Err(IntervalError { start, end });
        }
        Ok(Interval { start, end })
    }

    /// The empty interval `[at, at)`.
    ///
    /// ```
    /// let e = slidewin::Interval::empty(4);
    /// assert!(e.is_empty() && !e.contains(4));
    /// ```
    #[must_use]
    pub fn empty(at: T) -> Interval<T> {
        Interval { start: at, end: at }
    }

    /// Built from a pair already known to be ordered (`start <= end`).
    pub(crate) fn from_ordered(start: T, end: T) -> Interval<T> {
        debug_assert!(start <= end);
        Interval { start, end }
    }

    /// The first point inside (unless the interval is empty).
    ///
    /// ```
    /// assert_eq!(slidewin::Interval::new(1, 4)?.start(), 1);
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn start(&self) -> T {
        self.start
    }

    /// The first point after the interval (outside it).
    ///
    /// ```
    /// assert_eq!(slidewin::Interval::new(1, 4)?.end(), 4);
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn end(&self) -> T {
        self.end
    }

    /// Whether `t` is inside: `start <= t < end`.
    ///
    /// ```
    /// let iv = slidewin::Interval::new(1, 4)?;
    /// assert!(iv.contains(1) && iv.contains(3) && !iv.contains(4) && !iv.contains(0));
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn contains(&self, t: T) -> bool {
        self.start <= t && t < self.end
    }

    /// Whether `other` lies wholly inside `self`. An empty interval is enclosed when its point
    /// is within `[start, end]`.
    ///
    /// ```
    /// use slidewin::Interval;
    /// let day = Interval::new(0, 24)?;
    /// assert!(day.encloses(&Interval::new(9, 17)?));
    /// assert!(!day.encloses(&Interval::new(20, 26)?));
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn encloses(&self, other: &Interval<T>) -> bool {
        self.start <= other.start && other.end <= self.end
    }

    /// Whether the interval contains no point (`start == end`).
    ///
    /// ```
    /// use slidewin::Interval;
    /// assert!(Interval::new(2, 2)?.is_empty());
    /// assert!(!Interval::new(2, 3)?.is_empty());
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Whether the two touch end to start, sharing no point: `max(starts) == min(ends)`.
    ///
    /// ```
    /// use slidewin::Interval;
    /// let a = Interval::new(0, 5)?;
    /// assert!(a.abuts(&Interval::new(5, 9)?));
    /// assert!(Interval::new(5, 9)?.abuts(&a));
    /// assert!(!a.abuts(&Interval::new(4, 9)?)); // they overlap
    /// assert!(!a.abuts(&Interval::new(6, 9)?)); // a gap between
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn abuts(&self, other: &Interval<T>) -> bool {
        self.start.max(other.start) == self.end.min(other.end)
    }

    /// Whether the two share at least one point: `max(starts) < min(ends)`. Touching is not
    /// overlapping: `[9, 10)` and `[10, 11)` do not overlap.
    ///
    /// ```
    /// use slidewin::Interval;
    /// let a = Interval::new(0, 5)?;
    /// assert!(a.overlaps(&Interval::new(4, 9)?));
    /// assert!(!a.overlaps(&Interval::new(5, 9)?));
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn overlaps(&self, other: &Interval<T>) -> bool {
        self.start.max(other.start) < self.end.min(other.end)
    }

    /// The common part. Touching intervals give the empty interval at the touch point;
    /// disjoint ones give `None`.
    ///
    /// ```
    /// use slidewin::Interval;
    /// let a = Interval::new(0, 5)?;
    /// assert_eq!(a.intersect(&Interval::new(3, 9)?), Some(Interval::new(3, 5)?));
    /// assert_eq!(a.intersect(&Interval::new(5, 9)?), Some(Interval::empty(5)));
    /// assert_eq!(a.intersect(&Interval::new(6, 9)?), None);
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn intersect(&self, other: &Interval<T>) -> Option<Interval<T>> {
        let start = self.start.max(other.start);
        let end = self.end.min(other.end);
        (start <= end).then_some(Interval { start, end })
    }

    /// The space between two disjoint intervals, or `None` when they touch or overlap.
    ///
    /// ```
    /// use slidewin::Interval;
    /// let a = Interval::new(0, 10)?;
    /// assert_eq!(a.gap(&Interval::new(15, 20)?), Some(Interval::new(10, 15)?));
    /// assert_eq!(Interval::new(15, 20)?.gap(&a), Some(Interval::new(10, 15)?));
    /// assert_eq!(a.gap(&Interval::new(10, 20)?), None);
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn gap(&self, other: &Interval<T>) -> Option<Interval<T>> {
        let start = self.end.min(other.end);
        let end = self.start.max(other.start);
        (start < end).then_some(Interval { start, end })
    }

    /// The smallest interval that covers both (and anything between them).
    ///
    /// ```
    /// use slidewin::Interval;
    /// let hull = Interval::new(0, 2)?.hull(&Interval::new(7, 9)?);
    /// assert_eq!(hull, Interval::new(0, 9)?);
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn hull(&self, other: &Interval<T>) -> Interval<T> {
        Interval {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    /// Both together, when that is one piece (they overlap or touch); `None` when a gap is
    /// between them.
    ///
    /// ```
    /// use slidewin::Interval;
    /// let a = Interval::new(9, 10)?;
    /// assert_eq!(a.union(&Interval::new(10, 11)?), Some(Interval::new(9, 11)?));
    /// assert_eq!(a.union(&Interval::new(12, 13)?), None);
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn union(&self, other: &Interval<T>) -> Option<Interval<T>> {
        self.intersect(other).map(|_| self.hull(other))
    }

    /// How `self` sits against `other`: exactly one of Allen's 13 relations.
    ///
    /// See [`Relation`] for how empty intervals are classified.
    ///
    /// ```
    /// use slidewin::interval::Relation;
    /// use slidewin::Interval;
    /// let day = Interval::new(0, 24)?;
    /// let work = Interval::new(9, 17)?;
    /// assert_eq!(work.relation(&day), Relation::During);
    /// assert_eq!(day.relation(&work), Relation::Contains);
    /// # Ok::<(), slidewin::interval::IntervalError<i32>>(())
    /// ```
    #[must_use]
    pub fn relation(&self, other: &Interval<T>) -> Relation {
        Relation::classify(self.start, self.end, other.start, other.end)
    }
}

impl<T: Difference> Interval<T> {
    /// `end - start`, in the point type's [`Difference::Length`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Interval, Moment};
    ///
    /// let iv = Interval::new(Moment::from_secs(2), Moment::from_secs(5)).unwrap();
    /// assert_eq!(iv.length(), Duration::from_secs(3));
    /// assert_eq!(Interval::new(-5i8, 120).unwrap().length(), 125u8); // never overflows
    /// ```
    #[must_use]
    pub fn length(&self) -> T::Length {
        T::difference(self.start, self.end)
    }
}

impl<T: fmt::Debug> fmt::Debug for Interval<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:?}, {:?})", self.start, self.end)
    }
}

/// Written as `[start, end)`.
impl<T: fmt::Display> fmt::Display for Interval<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {})", self.start, self.end)
    }
}

impl<T: Ord + Copy> TryFrom<(T, T)> for Interval<T> {
    type Error = IntervalError<T>;

    fn try_from((start, end): (T, T)) -> Result<Interval<T>, IntervalError<T>> {
        Interval::new(start, end)
    }
}

/// An interval's start was after its end. Names both values.
///
/// # Example
///
/// ```
/// use slidewin::{Interval, Moment};
///
/// let err = Interval::new(Moment::from_secs(9), Moment::from_secs(1)).unwrap_err();
/// assert_eq!((err.start(), err.end()), (Moment::from_secs(9), Moment::from_secs(1)));
/// assert_eq!(err.to_string(), "interval start 9s is after its end 1s");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntervalError<T> {
    start: T,
    end: T,
}

impl<T: Copy> IntervalError<T> {
    /// The start that was given.
    ///
    /// ```
    /// assert_eq!(slidewin::Interval::new(2, 1).unwrap_err().start(), 2);
    /// ```
    #[must_use]
    pub fn start(&self) -> T {
        self.start
    }

    /// The end that was given.
    ///
    /// ```
    /// assert_eq!(slidewin::Interval::new(2, 1).unwrap_err().end(), 1);
    /// ```
    #[must_use]
    pub fn end(&self) -> T {
        self.end
    }
}

impl<T: fmt::Display> fmt::Display for IntervalError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "interval start {} is after its end {}",
            self.start, self.end
        )
    }
}

impl<T: fmt::Debug + fmt::Display> std::error::Error for IntervalError<T> {}

/// A point type whose intervals have a length: `end - start` as [`Difference::Length`].
///
/// Implemented for the integers (the length is the unsigned type of the same width, so it
/// never overflows), [`Moment`] (a [`Duration`]) and [`jiff::Timestamp`] (a
/// [`jiff::SignedDuration`]).
///
/// # Example
///
/// ```
/// use slidewin::interval::Difference;
/// assert_eq!(i32::difference(-3, 4), 7u32);
/// assert_eq!(u8::add_lengths(200, 100), 255); // saturates
/// ```
pub trait Difference: Ord + Copy {
    /// The type of `end - start`.
    type Length: Copy + Ord + fmt::Debug;
    /// The length of an empty interval.
    const ZERO: Self::Length;
    /// `end - start`, for `start <= end`.
    fn difference(start: Self, end: Self) -> Self::Length;
    /// `a + b`, saturating at the length type's largest value.
    fn add_lengths(a: Self::Length, b: Self::Length) -> Self::Length;
}

macro_rules! integer_difference {
    ($($t:ty => $len:ty),* $(,)?) => {$(
        impl Difference for $t {
            type Length = $len;
            const ZERO: $len = 0;
            fn difference(start: $t, end: $t) -> $len {
                end.abs_diff(start)
            }
            fn add_lengths(a: $len, b: $len) -> $len {
                a.saturating_add(b)
            }
        }
    )*};
}

integer_difference!(
    i8 => u8, i16 => u16, i32 => u32, i64 => u64, i128 => u128, isize => usize,
    u8 => u8, u16 => u16, u32 => u32, u64 => u64, u128 => u128, usize => usize,
);

impl Difference for Moment {
    type Length = Duration;
    const ZERO: Duration = Duration::ZERO;
    fn difference(start: Moment, end: Moment) -> Duration {
        end.saturating_duration_since(start)
    }
    fn add_lengths(a: Duration, b: Duration) -> Duration {
        a.saturating_add(b)
    }
}

impl Difference for jiff::Timestamp {
    type Length = jiff::SignedDuration;
    const ZERO: jiff::SignedDuration = jiff::SignedDuration::ZERO;
    fn difference(start: jiff::Timestamp, end: jiff::Timestamp) -> jiff::SignedDuration {
        // Timestamps span about 20,000 years; a SignedDuration holds far more, so this is exact.
        end.duration_since(start)
    }
    fn add_lengths(a: jiff::SignedDuration, b: jiff::SignedDuration) -> jiff::SignedDuration {
        a.saturating_add(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(s: i32, e: i32) -> Interval<i32> {
        Interval::new(s, e).unwrap()
    }

    #[test]
    fn reversed_input_is_an_error_naming_both() {
        let err = Interval::new(7, 3).unwrap_err();
        assert_eq!((err.start(), err.end()), (7, 3));
        assert!(err.to_string().contains('7') && err.to_string().contains('3'));
        assert_eq!(Interval::try_from((7, 3)), Err(err));
    }

    #[test]
    fn empty_intervals_contain_nothing_but_have_a_place() {
        let e = Interval::empty(5);
        assert!(e.is_empty() && !e.contains(5));
        assert!(e.abuts(&iv(5, 9)) && e.abuts(&iv(0, 5)));
        assert!(!e.overlaps(&iv(0, 9)));
        assert_eq!(e.intersect(&iv(0, 9)), Some(e));
        assert_eq!(e.intersect(&iv(6, 9)), None);
        assert_eq!(e.union(&iv(5, 9)), Some(iv(5, 9)));
        assert_eq!(e.length(), 0);
    }

    #[test]
    fn equal_and_nested() {
        let a = iv(2, 8);
        assert!(a.overlaps(&a) && !a.abuts(&a));
        assert_eq!(a.intersect(&a), Some(a));
        assert_eq!(a.union(&a), Some(a));
        assert_eq!(a.gap(&a), None);
        let inner = iv(3, 4);
        assert_eq!(a.intersect(&inner), Some(inner));
        assert_eq!(inner.union(&a), Some(a));
        assert!(a.encloses(&inner) && !inner.encloses(&a));
    }

    #[test]
    fn timestamp_lengths() {
        let a: jiff::Timestamp = "2024-03-10T06:00:00Z".parse().unwrap();
        let b: jiff::Timestamp = "2024-03-11T06:00:00Z".parse().unwrap();
        assert_eq!(
            Interval::new(a, b).unwrap().length(),
            jiff::SignedDuration::from_hours(24)
        );
    }

    #[test]
    fn extreme_integers_do_not_overflow() {
        let full = Interval::new(i64::MIN, i64::MAX).unwrap();
        assert_eq!(full.length(), u64::MAX);
    }
}
