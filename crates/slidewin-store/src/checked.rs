//! [`Checked`]: a backend's answer to one check.

use slidewin::Decision;
use slidewin::limit::Decisions;

/// A backend's answer: each rule's decision, and whether it was made without the store.
///
/// ```
/// use std::time::Duration;
/// use slidewin::Decision;
/// use slidewin::limit::Decisions;
/// use slidewin_store::Checked;
///
/// let each = Decisions::new(vec![Decision::allow(10, 9, Duration::ZERO)]).unwrap();
/// let checked = Checked::new(each);
/// assert!(checked.allowed() && checked.degraded().is_none());
/// assert_eq!(checked, Checked::one(Decision::allow(10, 9, Duration::ZERO)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    answer: Answer,
    degraded: Option<String>,
}

/// One rule's decision on its own, or a set's.
#[derive(Clone, Debug)]
enum Answer {
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
    fn as_slice(&self) -> &[Decision] {
        match self {
            Answer::One(decision) => std::slice::from_ref(decision),
            Answer::Many(decisions) => decisions.as_slice(),
        }
    }

    fn binding(&self) -> usize {
        match self {
            Answer::One(_) => 0,
            Answer::Many(decisions) => decisions.binding(),
        }
    }

    fn decision(&self) -> Decision {
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
            degraded: None,
        }
    }

    /// One rule's decision, made by the store.
    #[must_use]
    pub fn one(decision: Decision) -> Checked {
        Checked {
            answer: Answer::One(decision),
            degraded: None,
        }
    }

    /// Degraded decisions: made without the store, by a failure policy, and why.
    #[must_use]
    pub fn degraded_by(decisions: Decisions, why: String) -> Checked {
        Checked {
            answer: Answer::Many(decisions),
            degraded: Some(why),
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
        self.degraded.as_deref()
    }

    /// Takes why the answer is degraded out of it, leaving the decisions: for a caller that
    /// keeps the reason apart from them.
    ///
    /// ```
    /// use std::time::Duration;
    /// use slidewin::Decision;
    /// use slidewin::limit::Decisions;
    /// use slidewin_store::Checked;
    ///
    /// let each = Decisions::new(vec![Decision::allow(10, 10, Duration::ZERO)]).unwrap();
    /// let mut checked = Checked::degraded_by(each, "Redis timed out".into());
    /// assert_eq!(checked.take_degraded().as_deref(), Some("Redis timed out"));
    /// assert!(checked.degraded().is_none() && checked.allowed());
    /// ```
    pub fn take_degraded(&mut self) -> Option<String> {
        self.degraded.take()
    }
}
