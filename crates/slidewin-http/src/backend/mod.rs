//! [`Backend`]: where a layer keeps its counts: [`Memory`], or Redis with the `redis` feature.

mod memory;
#[cfg(feature = "redis")]
mod redis;

use std::fmt;
use std::future::Future;

use slidewin::limit::{Decisions, LimitError, RuleSet};
use slidewin::{Decision, Moment};

use crate::error::ConfigError;
use crate::limit::RequestKey;

pub use self::memory::Memory;
#[cfg(feature = "redis")]
pub use self::redis::Redis;

/// Where a [`RateLimitLayer`](crate::RateLimitLayer) keeps its counts: one trait over
/// [`Memory`] and [`Redis`](crate::Redis), so one layer type and one test serve both.
///
/// A backend makes a **store** for each rule set the layer holds, and checks a key of a store
/// (a [`RequestKey`]: an address or text): every rule of the set admits, and then all are
/// charged, or none is (all-or-nothing).
///
/// # Example
///
/// ```
/// use slidewin::Moment;
/// use slidewin::limit::{Kind, Rule, RuleSet};
/// use slidewin_http::{Backend, Memory};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let memory = Memory::new();
/// let store = memory.store(RuleSet::from(Rule::new("api", Kind::SlidingLog, "1/s".parse()?)?))?;
/// assert!(memory.check(&store, "ann".into(), Moment::ZERO, 1).await?.allowed());
/// assert!(!memory.check(&store, "ann".into(), Moment::ZERO, 1).await?.allowed());
/// # Ok(()) }
/// ```
pub trait Backend: Send + Sync + 'static {
    /// The counts of one rule set, for every key.
    type Store: Send + Sync + 'static;

    /// A store for `rules`.
    ///
    /// # Errors
    ///
    /// What the backend cannot hold, named.
    fn store(&self, rules: RuleSet) -> Result<Self::Store, ConfigError>;

    /// Decides about `cost` for `key` in `store` at `now` (the layer's clock; a backend may
    /// keep time of its own, as Redis does by default), and charges it when every rule admits.
    fn check<'a>(
        &'a self,
        store: &'a Self::Store,
        key: RequestKey<'a>,
        now: Moment,
        cost: u64,
    ) -> impl Future<Output = Result<Checked, BackendError>> + Send + 'a;

    /// Moves the counts of `from`, a store being retired (its rule set changed by a reload),
    /// into `to`, the store replacing it, converted to `to`'s quotas at `now`; returns how
    /// many keys were carried. So a limit kept by name across a reload keeps its counts, and
    /// every answer afterwards is against the new quota.
    ///
    /// The default carries nothing and answers 0: for a backend whose counts do not live in
    /// the store, which has nothing to move. [`Redis`](crate::Redis) is one: it keeps a rule's
    /// counts in Redis under `{prefix:key}:name:kind`, a key without the quota in it, so a
    /// quota changed under the same name and kind is read from the same counts by the new
    /// store. [`Memory`] moves its keys, converted as [`Keyed::carry_from`](slidewin::Keyed::carry_from) says.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::{Backend, Memory};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let memory = Memory::new();
    /// let api = |quota: &str| Rule::new("api", Kind::SlidingLog, quota.parse().unwrap());
    /// let old = memory.store(RuleSet::from(api("2/minute")?))?;
    /// assert!(memory.check(&old, "ann".into(), Moment::ZERO, 2).await?.allowed());
    ///
    /// // The reload raises the limit to 3: ann has used 2 of them.
    /// let new = memory.store(RuleSet::from(api("3/minute")?))?;
    /// assert_eq!(memory.carry(&new, &old, Moment::ZERO), 1);
    /// let checked = memory.check(&new, "ann".into(), Moment::ZERO, 1).await?;
    /// assert!(checked.allowed());
    /// assert_eq!((checked.decision().limit(), checked.decision().remaining()), (3, 0));
    /// # Ok(()) }
    /// ```
    fn carry(&self, to: &Self::Store, from: &Self::Store, now: Moment) -> usize {
        let _ = (to, from, now);
        0
    }

    /// [`check`](Backend::check), answered at once by a backend that never waits (memory):
    /// the layer then needs no boxed future for the request. `None`, the default, means the
    /// backend did nothing and must be asked with `check`. A backend answers at once always or
    /// never.
    fn check_at_once(
        &self,
        store: &Self::Store,
        key: RequestKey<'_>,
        now: Moment,
        cost: u64,
    ) -> Option<Result<Checked, BackendError>> {
        let _ = (store, key, now, cost);
        None
    }
}

/// A backend's answer: each rule's decision, and whether it was made without the store.
///
/// ```
/// use std::time::Duration;
/// use slidewin::Decision;
/// use slidewin::limit::Decisions;
/// use slidewin_http::Checked;
///
/// let each = Decisions::new(vec![Decision::allow(10, 9, Duration::ZERO)]).unwrap();
/// let checked = Checked::new(each);
/// assert!(checked.allowed() && checked.degraded().is_none());
/// assert_eq!(checked, Checked::one(Decision::allow(10, 9, Duration::ZERO)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    answer: Answer,
    without_store: Option<String>,
}

/// One rule's decision on its own, or a set's.
#[derive(Clone, Debug)]
pub(crate) enum Answer {
    One(Decision),
    Many(Decisions),
}

/// Equal when they say the same: one rule's decision, or a set of one rule that decided it.
impl PartialEq for Answer {
    fn eq(&self, other: &Answer) -> bool {
        self.as_slice() == other.as_slice() && self.binding() == other.binding()
    }
}

impl Eq for Answer {}

impl Answer {
    pub(crate) fn as_slice(&self) -> &[Decision] {
        match self {
            Answer::One(decision) => std::slice::from_ref(decision),
            Answer::Many(decisions) => decisions.as_slice(),
        }
    }

    pub(crate) fn binding(&self) -> usize {
        match self {
            Answer::One(_) => 0,
            Answer::Many(decisions) => decisions.binding(),
        }
    }

    pub(crate) fn decision(&self) -> Decision {
        match self {
            Answer::One(decision) => *decision,
            Answer::Many(decisions) => decisions.decision(),
        }
    }
}

impl Checked {
    /// A rule set's decisions, made by the store.
    #[must_use]
    pub fn new(decisions: Decisions) -> Checked {
        Checked {
            answer: Answer::Many(decisions),
            without_store: None,
        }
    }

    /// One rule's decision, made by the store.
    #[must_use]
    pub fn one(decision: Decision) -> Checked {
        Checked {
            answer: Answer::One(decision),
            without_store: None,
        }
    }

    /// Degraded decisions: made without the store, by a failure policy, and why.
    #[must_use]
    pub fn degraded_by(decisions: Decisions, why: String) -> Checked {
        Checked {
            answer: Answer::Many(decisions),
            without_store: Some(why),
        }
    }

    /// Whether every rule admitted.
    #[must_use]
    pub fn allowed(&self) -> bool {
        self.answer.decision().allowed()
    }

    /// Each rule's decision, in the order of the store's rules.
    #[must_use]
    pub fn decisions(&self) -> &[Decision] {
        self.answer.as_slice()
    }

    /// The binding rule's index (see [`Decisions::binding`]).
    #[must_use]
    pub fn binding(&self) -> usize {
        self.answer.binding()
    }

    /// The binding rule's decision.
    #[must_use]
    pub fn decision(&self) -> Decision {
        self.answer.decision()
    }

    /// When the answer is degraded (a failure policy decided, not the store), why.
    #[must_use]
    pub fn degraded(&self) -> Option<&str> {
        self.without_store.as_deref()
    }

    pub(crate) fn into_parts(self) -> (Answer, Option<String>) {
        (self.answer, self.without_store)
    }
}

/// A check a backend could not decide.
///
/// ```
/// use slidewin_http::BackendError;
/// let err = BackendError::CostTooHigh { cost: 20, max: 10 };
/// assert_eq!(err.to_string(), "a cost of 20 can never be admitted: the most at once is 10");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendError {
    /// The cost is more than the rules ever admit at once.
    CostTooHigh {
        /// The cost asked for.
        cost: u64,
        /// The most the rules admit at once.
        max: u64,
    },
    /// The store holds its cap of keys, none idle: a new key must wait.
    KeysFull {
        /// The cap.
        cap: usize,
    },
    /// The stores' memory budget ([`Memory::with_max_memory`]) is spent: a new key, or a key's
    /// growth, must wait.
    MemoryFull {
        /// The budget, in bytes.
        max_bytes: usize,
    },
    /// The store could not answer, and no failure policy answers for it.
    Unavailable {
        /// What failed (for logs: it may name internal addresses).
        detail: String,
    },
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendError::CostTooHigh { cost, max } => LimitError::CostTooHigh {
                cost: *cost,
                max: *max,
            }
            .fmt(f),
            BackendError::KeysFull { cap } => LimitError::KeysFull { cap: *cap }.fmt(f),
            BackendError::MemoryFull { max_bytes } => LimitError::MemoryFull {
                max_bytes: *max_bytes,
            }
            .fmt(f),
            BackendError::Unavailable { detail } => {
                write!(f, "the rate limit store could not answer: {detail}")
            }
        }
    }
}

impl std::error::Error for BackendError {}

impl From<LimitError> for BackendError {
    fn from(err: LimitError) -> BackendError {
        match err {
            LimitError::CostTooHigh { cost, max } => BackendError::CostTooHigh { cost, max },
            LimitError::KeysFull { cap } => BackendError::KeysFull { cap },
            LimitError::MemoryFull { max_bytes } => BackendError::MemoryFull { max_bytes },
            // A variant the core adds later: still an error, named.
            other => BackendError::Unavailable {
                detail: other.to_string(),
            },
        }
    }
}
