//! What a [`RedisLimiter`](super::RedisLimiter) answers: a [`RedisDecision`], from Redis or,
//! under a [`FailurePolicy`], made without it.

use std::fmt;
use std::ops::Deref;
use std::time::Duration;

use slidewin::limit::{Decision, Decisions};

use crate::error::RedisError;
use crate::rules::{Rules, calendar};

/// What a check answers when Redis cannot: for callers who want a decision anyway. The
/// [`RedisDecision`] then says it was made without Redis, and why.
///
/// It answers every check that Redis could not: those that failed, and while Redis is known to be
/// down (the limiter's circuit is open, see
/// [`RedisLimiter`](crate::RedisLimiter#when-redis-is-down)) every check, at once, without asking
/// it. A cost above the limit is still an error: no Redis could admit it.
///
/// ```
/// use slidewin_redis::FailurePolicy;
/// assert_ne!(FailurePolicy::Open, FailurePolicy::Closed);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailurePolicy {
    /// Admit: the service stays up, unlimited while Redis is away.
    Open,
    /// Deny, with `retry_after` one span (a calendar rule: until its window ends): nothing
    /// passes unchecked.
    Closed,
}

impl fmt::Display for FailurePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FailurePolicy {
    /// Its name, `open` or `closed`: in `slidewin serve --failure-policy`, the service's
    /// status and logs, and the `Slidewin-Degraded` field.
    ///
    /// ```
    /// use slidewin_redis::FailurePolicy;
    /// assert_eq!(FailurePolicy::Open.as_str(), "open");
    /// assert_eq!(FailurePolicy::Closed.to_string(), "closed");
    /// ```
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Open => "open",
            FailurePolicy::Closed => "closed",
        }
    }

    /// Each rule's answer while Redis cannot give one, for a check at `now` (microseconds of
    /// Unix time; `None` at the server's time, which this client's clock stands in for). A
    /// closed policy tells a rate to wait its span, and a calendar rule to wait for the end of
    /// the window `now` is in, where its count starts again.
    pub(super) fn decide(self, rules: &Rules, cost: u64, now: Option<u64>) -> Decisions {
        let each = rules
            .rule_set()
            .rules()
            .iter()
            .map(|rule| {
                let most = rule.max_cost();
                match self {
                    FailurePolicy::Open => {
                        Decision::allow(most, most.saturating_sub(cost), Duration::ZERO)
                    }
                    FailurePolicy::Closed => {
                        let wait = match rule.calendar_quota() {
                            Some(quota) => calendar::until_window_end(quota, now),
                            None => rule.quota().span(),
                        };
                        Decision::deny(most, 0, wait, wait)
                    }
                }
            })
            .collect();
        Decisions::new(each).unwrap_or_else(|| unreachable!("a rule set has a rule"))
    }
}

/// The [`Decisions`] of a check on Redis, one per rule, or a [`FailurePolicy`]'s when Redis
/// could not answer. Dereferences to the binding rule's [`Decision`] (see
/// [`Decisions::binding`]), as the in-memory limiters' answers do.
///
/// ```
/// # fn show(d: slidewin_redis::RedisDecision) {
/// if let Some(why) = d.degraded() {
///     eprintln!("decided without Redis: {why}");
/// }
/// let admitted: bool = d.allowed();
/// let each_rule = d.decisions().as_slice();
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisDecision {
    pub(super) decisions: Decisions,
    pub(super) without_redis: Option<RedisError>,
}

impl RedisDecision {
    /// The binding rule's decision: the one that denied, or when all admitted the one
    /// closest to its limit.
    #[must_use]
    pub fn decision(&self) -> Decision {
        self.decisions.decision()
    }

    /// Every rule's decision, in the order of the rules.
    #[must_use]
    pub fn decisions(&self) -> &Decisions {
        &self.decisions
    }

    /// When the decision is degraded (it came from the [`FailurePolicy`]), why Redis could not
    /// answer.
    #[must_use]
    pub fn degraded(&self) -> Option<&RedisError> {
        self.without_redis.as_ref()
    }
}

impl Deref for RedisDecision {
    type Target = Decision;

    fn deref(&self) -> &Decision {
        &self.decisions
    }
}
