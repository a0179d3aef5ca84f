//! [`Decision`], the answer of every limiter, [`Decisions`], a rule set's, and [`LimitError`],
//! for requests that can never be answered yes.

use std::fmt;
use std::ops::Deref;
use std::time::Duration;

/// What a limiter decided about one request, with what a client needs to back off well
/// (the fields of the IETF `RateLimit` headers, and `Retry-After`).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::{Limiter, Moment};
/// use slidewin::limit::SlidingLog;
///
/// let mut limiter = Limiter::new(SlidingLog::new("2/10s".parse()?)?);
/// limiter.check(Moment::from_secs(1), 1)?;
/// let second = limiter.check(Moment::from_secs(4), 1)?;
/// assert!(second.allowed());
/// assert_eq!((second.limit(), second.remaining()), (2, 0));
/// assert_eq!(second.reset_after(), Duration::from_secs(10)); // until 14 s, when 4 s has left
///
/// let third = limiter.check(Moment::from_secs(5), 1)?;
/// assert!(!third.allowed());
/// assert_eq!(third.retry_after(), Some(Duration::from_secs(6))); // at 11 s, 1 s has left
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    // Plain nanoseconds: a check builds one of these on its hot path, and a `Duration` costs
    // a division to build.
    allowed: Verdict,
    limit: u64,
    remaining: u64,
    reset_after: u64,
    /// When denied; `u64::MAX` for never.
    retry_after: u64,
}

/// Whether a [`Decision`] admits, a whole word wide: with a `bool`, seven bytes of padding
/// follow it, and every copy of a decision (or of a `Result` or `Option` of one, whose tag
/// lives there) moves them with odd-sized loads that stall on the stores before them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u64)]
enum Verdict {
    Denied = 0,
    Allowed = 1,
}

impl Decision {
    /// An admission, in nanoseconds.
    #[inline]
    pub(crate) fn allow_nanos(limit: u64, remaining: u64, reset_after: u64) -> Decision {
        Decision {
            allowed: Verdict::Allowed,
            limit,
            remaining,
            reset_after,
            retry_after: 0,
        }
    }

    /// A denial, which consumed nothing, in nanoseconds. A `retry_after` of `u64::MAX` is never.
    #[inline]
    pub(crate) fn deny_nanos(
        limit: u64,
        remaining: u64,
        reset_after: u64,
        retry_after: u64,
    ) -> Decision {
        Decision {
            allowed: Verdict::Denied,
            limit,
            remaining,
            reset_after,
            retry_after,
        }
    }

    /// An admission, for a backend of your own (or another crate's, as `slidewin-redis`).
    /// Durations past 584 years are taken as 584 years.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Decision;
    /// let d = Decision::allow(10, 9, Duration::from_secs(1));
    /// assert!(d.allowed());
    /// assert_eq!((d.limit(), d.remaining(), d.reset_after()), (10, 9, Duration::from_secs(1)));
    /// ```
    #[must_use]
    pub fn allow(limit: u64, remaining: u64, reset_after: Duration) -> Decision {
        Decision::allow_nanos(limit, remaining, saturating_nanos(reset_after))
    }

    /// When denied, the wait in nanoseconds (`u64::MAX` for never); 0 when admitted.
    #[inline]
    pub(crate) fn retry_after_nanos(&self) -> u64 {
        self.retry_after
    }

    /// A denial, for a backend of your own; `Duration::MAX` as `retry_after` means never.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Decision;
    /// let d = Decision::deny(10, 0, Duration::from_secs(5), Duration::from_millis(100));
    /// assert!(!d.allowed());
    /// assert_eq!(d.retry_after(), Some(Duration::from_millis(100)));
    /// ```
    #[must_use]
    pub fn deny(
        limit: u64,
        remaining: u64,
        reset_after: Duration,
        retry_after: Duration,
    ) -> Decision {
        Decision::deny_nanos(
            limit,
            remaining,
            saturating_nanos(reset_after),
            saturating_nanos(retry_after),
        )
    }

    /// Whether the request was admitted. A denied request consumes nothing.
    ///
    /// ```
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::Gcra;
    ///
    /// let mut limiter = Limiter::new(Gcra::new("1/s".parse()?)?);
    /// assert!(limiter.check(Moment::ZERO, 1)?.allowed());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn allowed(&self) -> bool {
        self.allowed == Verdict::Allowed
    }

    /// The most cost the limiter admits: the quota's limit (for [`Gcra`](crate::limit::Gcra),
    /// its burst, the most it admits at once).
    ///
    /// ```
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::Gcra;
    ///
    /// let mut limiter = Limiter::new(Gcra::new("10/s burst 3".parse()?)?);
    /// assert_eq!(limiter.check(Moment::ZERO, 1)?.limit(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// How much more cost would be admitted right now, after this decision.
    ///
    /// ```
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::SlidingLog;
    ///
    /// let mut limiter = Limiter::new(SlidingLog::new("10/s".parse()?)?);
    /// assert_eq!(limiter.check(Moment::ZERO, 3)?.remaining(), 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// How long until the full quota is back, if nothing more is admitted.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::FixedWindow;
    ///
    /// let mut limiter = Limiter::new(FixedWindow::new("10/s".parse()?)?);
    /// let decision = limiter.check(Moment::from_millis(250), 1)?;
    /// assert_eq!(decision.reset_after(), Duration::from_millis(750)); // the window's end
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn reset_after(&self) -> Duration {
        Duration::from_nanos(self.reset_after)
    }

    /// When denied: the exact time after which the same cost would be admitted, if nothing
    /// else is admitted meanwhile (`Duration::MAX` if never, which only happens at the end of
    /// the timeline). `None` when allowed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::{Limiter, Moment};
    /// use slidewin::limit::Gcra;
    ///
    /// let mut limiter = Limiter::new(Gcra::new("4/s burst 1".parse()?)?);
    /// assert_eq!(limiter.check(Moment::ZERO, 1)?.retry_after(), None);
    /// assert_eq!(limiter.check(Moment::ZERO, 1)?.retry_after(), Some(Duration::from_millis(250)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        match (self.allowed(), self.retry_after) {
            (true, _) => None,
            (false, u64::MAX) => Some(Duration::MAX),
            (false, nanos) => Some(Duration::from_nanos(nanos)),
        }
    }
}

impl AsRef<Decision> for Decision {
    fn as_ref(&self) -> &Decision {
        self
    }
}

fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl fmt::Debug for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decision")
            .field("allowed", &self.allowed())
            .field("limit", &self.limit)
            .field("remaining", &self.remaining)
            .field("reset_after", &self.reset_after())
            .field("retry_after", &self.retry_after())
            .finish()
    }
}

/// A [`RuleSet`](crate::limit::RuleSet)'s answer: one [`Decision`] per rule, in the rules'
/// order, and which of them binds.
///
/// A set admits a request only if every rule admits it, and a denial consumes from none. Each
/// rule's decision is what that rule answered: on a denial, rules that would have admitted say
/// so, yet nothing was consumed from them. The **binding** rule is the one a client must heed,
/// and the `Decisions` dereferences to its decision:
///
/// - denied: the denying rule with the longest `retry_after`, so its `retry_after` is when
///   every rule admits the cost, if nothing else is admitted meanwhile;
/// - admitted: the rule closest to its limit (the least `remaining` for its `limit`), the
///   first of those on a tie: the one the IETF `RateLimit` header reports.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::{Limiter, Moment};
/// use slidewin::limit::{Kind, Rule, RuleSet};
///
/// let login = RuleSet::new([
///     Rule::new("minute", Kind::SlidingLog, "3/minute".parse()?)?,
///     Rule::new("hour", Kind::SlidingLog, "5/hour".parse()?)?,
/// ])?;
/// let mut limiter = Limiter::new(login);
/// for _ in 0..3 {
///     assert!(limiter.check(Moment::ZERO, 1)?.allowed());
/// }
/// let denied = limiter.check(Moment::from_secs(10), 1)?;
/// assert!(!denied.allowed());
/// assert_eq!(denied.binding(), 0); // the minute rule denies
/// assert_eq!(denied.retry_after(), Some(Duration::from_secs(50)));
/// assert!(denied[1].allowed()); // the hour rule would have admitted, and kept its 2
/// let later = limiter.check(Moment::from_secs(60), 1)?;
/// assert_eq!((later.binding(), later.remaining()), (1, 1)); // 1 of 5 left this hour
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Decisions {
    each: Each,
    binding: usize,
}

/// How many decisions a [`Decisions`] holds without an allocation: rule sets are small, and a
/// check of one is on a hot path.
const INLINE: usize = 2;

/// The decisions, in place when they are few.
#[derive(Clone)]
pub(crate) enum Each {
    /// The count is a whole word, as [`Verdict`] is: a narrower one leaves padding that
    /// every move copies with odd-sized loads.
    Inline(usize, [Decision; INLINE]),
    Heap(Box<[Decision]>),
}

impl Each {
    /// `n` decisions from `each`, in place when they fit; the first error, if any.
    pub(crate) fn try_collect<E>(
        n: usize,
        each: impl Iterator<Item = Result<Decision, E>>,
    ) -> Result<Each, E> {
        match n {
            len if len <= INLINE => {
                let mut items = [Decision::allow(0, 0, Duration::ZERO); INLINE];
                for (slot, decision) in items.iter_mut().zip(each) {
                    *slot = decision?;
                }
                Ok(Each::Inline(len, items))
            }
            _ => each
                .collect::<Result<Vec<_>, E>>()
                .map(|all| Each::Heap(all.into_boxed_slice())),
        }
    }

    pub(crate) fn as_slice(&self) -> &[Decision] {
        match self {
            Each::Inline(len, items) => &items[..*len],
            Each::Heap(all) => all,
        }
    }
}

impl PartialEq for Decisions {
    fn eq(&self, other: &Decisions) -> bool {
        self.binding == other.binding && self.each.as_slice() == other.each.as_slice()
    }
}

impl Eq for Decisions {}

impl std::hash::Hash for Decisions {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.each.as_slice().hash(state);
        self.binding.hash(state);
    }
}

impl Decisions {
    /// The set's answer from each rule's, for a backend of your own (or another crate's, as
    /// `slidewin-redis`); `None` for no decision at all.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Decision;
    /// use slidewin::limit::Decisions;
    ///
    /// let burst = Decision::allow(10, 1, Duration::from_secs(1));
    /// let hourly = Decision::allow(1000, 500, Duration::from_secs(3600));
    /// let both = Decisions::new(vec![burst, hourly]).unwrap();
    /// assert_eq!(both.binding(), 0); // 1 of 10 left is closer to the limit than 500 of 1000
    /// assert!(Decisions::new(Vec::new()).is_none());
    /// ```
    #[must_use]
    pub fn new(each: Vec<Decision>) -> Option<Decisions> {
        let each = if each.len() <= INLINE {
            Each::try_collect(each.len(), each.into_iter().map(Ok::<_, ()>)).ok()?
        } else {
            Each::Heap(each.into_boxed_slice())
        };
        Decisions::from_each(each)
    }

    /// Two rules' decisions, in place.
    #[inline]
    pub(crate) fn pair(first: Decision, second: Decision) -> Decisions {
        let items = [first, second];
        let binding = binding(&items).unwrap_or(0); // two decisions: always one
        Decisions {
            each: Each::Inline(2, items),
            binding,
        }
    }

    /// The set's answer from each rule's, as a rule set's check collects them.
    pub(crate) fn from_each(each: Each) -> Option<Decisions> {
        let binding = binding(each.as_slice())?;
        Some(Decisions { each, binding })
    }

    /// Whether the request was admitted: by every rule. A denied request consumed nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Decision;
    /// use slidewin::limit::Decisions;
    ///
    /// let yes = Decision::allow(10, 9, Duration::from_secs(1));
    /// let no = Decision::deny(5, 0, Duration::from_secs(1), Duration::from_secs(1));
    /// assert!(!Decisions::new(vec![yes, no]).unwrap().allowed());
    /// ```
    #[inline]
    #[must_use]
    pub fn allowed(&self) -> bool {
        self.each.as_slice()[self.binding].allowed()
    }

    /// The index of the binding rule (see the type's docs), whose decision this dereferences
    /// to.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Decision;
    /// use slidewin::limit::Decisions;
    ///
    /// let soon = Decision::deny(5, 0, Duration::from_secs(1), Duration::from_secs(1));
    /// let late = Decision::deny(50, 0, Duration::from_secs(60), Duration::from_secs(30));
    /// let both = Decisions::new(vec![soon, late]).unwrap();
    /// assert_eq!(both.binding(), 1);
    /// assert_eq!(both.retry_after(), Some(Duration::from_secs(30)));
    /// ```
    #[inline]
    #[must_use]
    pub fn binding(&self) -> usize {
        self.binding
    }

    /// Each rule's decision, in the rules' order.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Decision;
    /// use slidewin::limit::Decisions;
    ///
    /// let one = Decisions::new(vec![Decision::allow(3, 2, Duration::ZERO)]).unwrap();
    /// assert_eq!(one.as_slice().len(), 1);
    /// ```
    #[inline]
    #[must_use]
    pub fn as_slice(&self) -> &[Decision] {
        self.each.as_slice()
    }

    /// Each rule's decision, in the rules' order.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Decision;
    /// use slidewin::limit::Decisions;
    ///
    /// let two = Decisions::new(vec![Decision::allow(3, 2, Duration::ZERO); 2]).unwrap();
    /// assert_eq!(two.iter().filter(|d| d.allowed()).count(), 2);
    /// ```
    pub fn iter(&self) -> std::slice::Iter<'_, Decision> {
        self.each.as_slice().iter()
    }

    /// The binding rule's decision.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Decision;
    /// use slidewin::limit::Decisions;
    ///
    /// let d = Decision::allow(3, 2, Duration::ZERO);
    /// assert_eq!(Decisions::new(vec![d]).unwrap().decision(), d);
    /// ```
    #[inline]
    #[must_use]
    pub fn decision(&self) -> Decision {
        self.each.as_slice()[self.binding]
    }
}

/// The binding decision's index, by [`Decision::binds_before`]; the first on a tie.
fn binding(each: &[Decision]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, d) in each.iter().enumerate() {
        if best.is_none_or(|b| d.binds_before(&each[b])) {
            best = Some(i);
        }
    }
    best
}

impl Deref for Decisions {
    type Target = Decision;

    #[inline]
    fn deref(&self) -> &Decision {
        &self.each.as_slice()[self.binding]
    }
}

impl AsRef<Decision> for Decisions {
    #[inline]
    fn as_ref(&self) -> &Decision {
        &self.each.as_slice()[self.binding]
    }
}

impl std::ops::Index<usize> for Decisions {
    type Output = Decision;

    /// The decision of the rule at `index`, in the rules' order.
    fn index(&self, index: usize) -> &Decision {
        &self.each.as_slice()[index]
    }
}

impl<'a> IntoIterator for &'a Decisions {
    type Item = &'a Decision;
    type IntoIter = std::slice::Iter<'a, Decision>;

    fn into_iter(self) -> Self::IntoIter {
        self.each.as_slice().iter()
    }
}

impl fmt::Debug for Decisions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decisions")
            .field("binding", &self.binding)
            .field("each", &self.each.as_slice())
            .finish()
    }
}

/// A request a limiter can never answer with yes, or cannot take on right now for a reason
/// other than its quota. A denial is not an error: it is a [`Decision`].
///
/// # Example
///
/// ```
/// use slidewin::{Limiter, Moment};
/// use slidewin::limit::{LimitError, SlidingLog};
///
/// let mut limiter = Limiter::new(SlidingLog::new("5/s".parse()?)?);
/// let err = limiter.check(Moment::ZERO, 6).unwrap_err();
/// assert_eq!(err, LimitError::CostTooHigh { cost: 6, max: 5 });
/// assert_eq!(err.to_string(), "a cost of 6 can never be admitted: the most at once is 5");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitError {
    /// The cost is more than the limiter ever admits at once (the limit, or a GCRA's burst;
    /// for a rule set, the smallest of its rules').
    CostTooHigh {
        /// The cost asked for.
        cost: u64,
        /// The most the limiter admits at once.
        max: u64,
    },
    /// A [`Keyed`](crate::Keyed) limiter holds its cap of keys (in all its shards), none of
    /// which is back at full quota, so a new key cannot be tracked. Refusing it (rather than
    /// evicting a key that is being limited) keeps every key within its limit; it clears as
    /// keys go quiet.
    KeysFull {
        /// The cap on live keys.
        cap: usize,
    },
    /// The [`MemoryBudget`](crate::limit::MemoryBudget) of a [`Keyed`](crate::Keyed)
    /// limiter is spent: a new key cannot be tracked, or a key's state cannot grow to record
    /// an admission. As with [`LimitError::KeysFull`], no key is evicted to make room; it
    /// clears as keys go quiet.
    MemoryFull {
        /// The budget, in bytes.
        max_bytes: usize,
    },
}

impl fmt::Display for LimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitError::CostTooHigh { cost, max } => write!(
                f,
                "a cost of {cost} can never be admitted: the most at once is {max}"
            ),
            LimitError::KeysFull { cap } => write!(
                f,
                "the limiter holds its cap of {cap} key{} and none is idle; a new key must wait",
                if *cap == 1 { "" } else { "s" }
            ),
            LimitError::MemoryFull { max_bytes } => write!(
                f,
                "the limiters' memory budget of {max_bytes} bytes is spent; a new key, or a \
                 key's growth, must wait for keys to go idle"
            ),
        }
    }
}

impl std::error::Error for LimitError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decision is four words and its verdict's word, with no padding; an `Option` of one
    /// takes its tag from the verdict's spare values, not from more room.
    #[test]
    fn a_decision_is_five_whole_words() {
        assert_eq!(size_of::<Decision>(), 40);
        assert_eq!(size_of::<Option<Decision>>(), 40);
    }
}
