//! [`RuleSet`]: several rules checked together for one key, all or nothing, in one pass.

use std::fmt;

use super::{Engine, Rule, RuleState};
use crate::error::ConfigError;
use crate::limit::algorithm::sealed::Enforce;
use crate::limit::algorithm::{Algorithm, Locked};
use crate::limit::decision::Each;
use crate::limit::{
    Calendar, Decision, Decisions, FixedWindow, Gcra, LimitError, Reservation, SlidingCounter,
    SlidingLog,
};
use crate::time::Moment;

/// Several [`Rule`]s checked together for one key: a request is admitted only if **every**
/// rule admits it, and a denial consumes from none. A login allowed 5 times a minute AND 20
/// times an hour is one set of two rules.
///
/// It is an [`Algorithm`]: hold it in a [`Limiter`](crate::Limiter),
/// [`SharedLimiter`](crate::SharedLimiter) or [`Keyed`](crate::Keyed), as any other; each check
/// answers [`Decisions`], one per rule, and dereferences to the binding rule's. A key costs the
/// sum of its rules' states. `slidewin-redis` checks the same sets on Redis, in one script
/// call, with the same answers.
///
/// # Example
///
/// ```
/// use slidewin::{Keyed, Moment};
/// use slidewin::limit::{Kind, Rule, RuleSet};
///
/// let login = RuleSet::new([
///     Rule::new("minute", Kind::SlidingLog, "5/minute".parse()?)?,
///     Rule::new("hour", Kind::SlidingLog, "20/hour".parse()?)?,
/// ])?;
/// let limiter = Keyed::<String, _>::new(login);
/// for minute in 0..4 {
///     for _ in 0..5 {
///         let now = Moment::from_secs(minute * 60);
///         assert!(limiter.check("mallory", now, 1)?.allowed());
///     }
/// }
/// // Twenty in four minutes: the hour rule binds now, whatever the minute rule says.
/// let denied = limiter.check("mallory", Moment::from_secs(300), 1)?;
/// assert!(!denied.allowed());
/// assert_eq!(login_rule(&denied), "hour");
/// # fn login_rule(d: &slidewin::limit::Decisions) -> &'static str {
/// #     ["minute", "hour"][d.binding()]
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct RuleSet {
    rules: Box<[Rule]>,
    /// The smallest `max_cost` of the rules: a larger cost no rule set could admit.
    max_cost: u64,
}

impl RuleSet {
    /// The most rules a set holds.
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// let many = (0..=RuleSet::MAX_RULES)
    ///     .map(|i| Rule::new(&format!("r{i}"), Kind::Gcra, "1/s".parse().unwrap()).unwrap());
    /// assert!(RuleSet::new(many).is_err());
    /// ```
    pub const MAX_RULES: usize = 16;

    /// A set of `rules`, checked in their order.
    ///
    /// # Errors
    ///
    /// [`ConfigError::NoRules`], [`ConfigError::TooManyRules`] past
    /// [`MAX_RULES`](RuleSet::MAX_RULES), or [`ConfigError::DuplicateRule`] when two rules
    /// share a name.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::ConfigError;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    ///
    /// let burst = Rule::new("burst", Kind::Gcra, "10/s".parse()?)?;
    /// let set = RuleSet::new([burst.clone()])?;
    /// assert_eq!(set.rules(), [burst.clone()]);
    /// assert_eq!(
    ///     RuleSet::new([burst.clone(), burst]),
    ///     Err(ConfigError::DuplicateRule { name: "burst".into() })
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(rules: impl IntoIterator<Item = Rule>) -> Result<RuleSet, ConfigError> {
        let mut rules = rules.into_iter();
        let kept: Vec<Rule> = rules.by_ref().take(RuleSet::MAX_RULES).collect();
        // The rest is counted, not kept: memory follows what a set can hold.
        let more = rules.count();
        if more > 0 {
            return Err(ConfigError::TooManyRules {
                count: kept.len() + more,
                max: RuleSet::MAX_RULES,
            });
        }
        if kept.is_empty() {
            return Err(ConfigError::NoRules);
        }
        for (i, rule) in kept.iter().enumerate() {
            if kept[..i].iter().any(|other| other.name == rule.name) {
                return Err(ConfigError::DuplicateRule {
                    name: rule.name.to_string(),
                });
            }
        }
        let max_cost = kept.iter().map(Rule::max_cost).min().unwrap_or(0);
        Ok(RuleSet {
            rules: kept.into_boxed_slice(),
            max_cost,
        })
    }

    /// Its rules, in order: the order of a check's [`Decisions`].
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// let set = RuleSet::from(Rule::new("only", Kind::SlidingLog, "1/s".parse()?)?);
    /// assert_eq!(set.rules()[0].name(), "only");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The rule named `name`, and its place in the set.
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// let set = RuleSet::new([
    ///     Rule::new("burst", Kind::Gcra, "10/s".parse()?)?,
    ///     Rule::new("hourly", Kind::SlidingCounter, "1000/h".parse()?)?,
    /// ])?;
    /// assert_eq!(set.get("hourly").map(|(i, _)| i), Some(1));
    /// assert!(set.get("daily").is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn get(&self, name: &str) -> Option<(usize, &Rule)> {
        self.rules
            .iter()
            .enumerate()
            .find(|(_, r)| &*r.name == name)
    }

    /// The most cost the set admits at once: the smallest of its rules'
    /// [`max_cost`](Rule::max_cost).
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// let set = RuleSet::new([
    ///     Rule::new("a", Kind::Gcra, "10/s burst 3".parse()?)?,
    ///     Rule::new("b", Kind::SlidingLog, "100/minute".parse()?)?,
    /// ])?;
    /// assert_eq!(set.max_cost(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn max_cost(&self) -> u64 {
        self.max_cost
    }

    /// Refuses a cost that no check of the set could ever admit: more than its `max_cost`.
    #[inline]
    fn admits_cost(&self, cost: u64) -> Result<(), LimitError> {
        if cost > self.max_cost {
            return Err(LimitError::CostTooHigh {
                cost,
                max: self.max_cost,
            });
        }
        Ok(())
    }

    /// Each rule's answer, consuming nothing.
    fn peek_each(&self, state: &[RuleState], now: Moment, cost: u64) -> Result<Each, LimitError> {
        self.admits_cost(cost)?;
        Each::try_collect(
            self.rules.len(),
            self.rules
                .iter()
                .zip(state)
                .map(|(rule, state)| each_kind!(&rule.engine, state, |e, s| e.peek(s, now, cost))),
        )
    }
}

/// What one rule of a set records if the set admits: the first half of its check.
#[derive(Clone, Copy, Debug)]
#[allow(unreachable_pub)] // opaque: named by the sealed trait only
pub enum Pending {
    Log(<SlidingLog as Enforce>::Pending),
    Counter(<SlidingCounter as Enforce>::Pending),
    Fixed(<FixedWindow as Enforce>::Pending),
    Gcra(<Gcra as Enforce>::Pending),
    Calendar(<Calendar as Enforce>::Pending),
}

/// A rule's decision on `state`, and what it records if its set admits.
#[inline]
fn prepare(
    engine: &Engine,
    state: &RuleState,
    now: Moment,
    cost: u64,
) -> Result<(Decision, Pending), LimitError> {
    Ok(match (engine, state) {
        (Engine::Log(e), RuleState::Log(s)) => {
            let (decision, counted) = e.prepare(s, now, cost)?;
            (decision, Pending::Log(counted))
        }
        (Engine::Counter(e), RuleState::Counter(s)) => {
            let (decision, next) = e.prepare(s, now, cost)?;
            (decision, Pending::Counter(next))
        }
        (Engine::Fixed(e), RuleState::Fixed(s)) => {
            let (decision, next) = e.prepare(s, now, cost)?;
            (decision, Pending::Fixed(next))
        }
        (Engine::Gcra(e), RuleState::Gcra(s)) => {
            let (decision, next) = e.prepare(s, now, cost)?;
            (decision, Pending::Gcra(next))
        }
        (Engine::Leases(e), RuleState::Log(s)) => {
            let (decision, counted) = e.prepare(s, now, cost)?;
            (decision, Pending::Log(counted))
        }
        (Engine::Calendar(e), RuleState::Calendar(s)) => {
            let (decision, next) = e.prepare(s, now, cost)?;
            (decision, Pending::Calendar(next))
        }
        _ => unreachable!("a rule's state is of the rule's kind"),
    })
}

/// The time a rule counts the admission [`prepare`] found at `now` at.
fn counted_at(engine: &Engine, pending: &Pending, now: Moment) -> Moment {
    match (engine, pending) {
        (Engine::Log(e), Pending::Log(p)) => e.counted_at(p, now),
        (Engine::Leases(e), Pending::Log(p)) => e.counted_at(p, now),
        (Engine::Counter(e), Pending::Counter(p)) => e.counted_at(p, now),
        (Engine::Fixed(e), Pending::Fixed(p)) => e.counted_at(p, now),
        (Engine::Gcra(e), Pending::Gcra(p)) => e.counted_at(p, now),
        (Engine::Calendar(e), Pending::Calendar(p)) => e.counted_at(p, now),
        _ => unreachable!("a rule's pending record is of the rule's kind"),
    }
}

/// Records what [`prepare`] found, on the state it was found on.
#[inline(always)]
fn commit(state: &mut RuleState, pending: Pending, cost: u64) {
    match (state, pending) {
        (RuleState::Log(s), Pending::Log(p)) => SlidingLog::commit(s, p, cost),
        (RuleState::Counter(s), Pending::Counter(p)) => SlidingCounter::commit(s, p, cost),
        (RuleState::Fixed(s), Pending::Fixed(p)) => FixedWindow::commit(s, p, cost),
        (RuleState::Gcra(s), Pending::Gcra(p)) => Gcra::commit(s, p, cost),
        (RuleState::Calendar(s), Pending::Calendar(p)) => Calendar::commit(s, p, cost),
        _ => unreachable!("a rule's pending record is of the rule's kind"),
    }
}

impl RuleSet {
    /// The check of a set of one rule, for a cost the set admits: [`Enforce::check`]'s pass
    /// with the decision and what the rule would record kept in place rather than returned.
    #[inline]
    fn check_one(rule: &Rule, state: &mut RuleState, now: Moment, cost: u64) -> Decisions {
        let (decision, next) = prepare_admissible(&rule.engine, state, now, cost);
        if cost > 0 && decision.allowed() {
            commit(state, next, cost);
        }
        let each = Each::try_collect(1, std::iter::once(Ok::<_, LimitError>(decision)));
        each.ok()
            .and_then(Decisions::from_each)
            .unwrap_or_else(|| unreachable!("one decision"))
    }

    /// The check of a set of two rules (a burst and a longer window, the usual pair), for a
    /// cost the set admits: as [`check_one`](RuleSet::check_one), for two.
    #[inline]
    fn check_pair(
        [first, second]: [&Rule; 2],
        [a, b]: [&mut RuleState; 2],
        now: Moment,
        cost: u64,
    ) -> Decisions {
        let (first_decision, first_next) = prepare_admissible(&first.engine, a, now, cost);
        let (second_decision, second_next) = prepare_admissible(&second.engine, b, now, cost);
        if cost > 0 && first_decision.allowed() && second_decision.allowed() {
            commit(a, first_next, cost);
            commit(b, second_next, cost);
        }
        Decisions::pair(first_decision, second_decision)
    }
}

/// [`prepare`] for a cost the set has found within every rule's most at once, so that no rule
/// can refuse it as too high.
#[inline]
fn prepare_admissible(
    engine: &Engine,
    state: &RuleState,
    now: Moment,
    cost: u64,
) -> (Decision, Pending) {
    match prepare(engine, state, now, cost) {
        Ok(both) => both,
        Err(_) => unreachable!("the set's most at once is at most every rule's"),
    }
}

impl From<Rule> for RuleSet {
    /// A set of one rule.
    fn from(rule: Rule) -> RuleSet {
        RuleSet {
            max_cost: rule.max_cost(),
            rules: Box::new([rule]),
        }
    }
}

impl fmt::Debug for RuleSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.rules.iter()).finish()
    }
}

impl Algorithm for RuleSet {}

impl Enforce for RuleSet {
    type Output = Decisions;
    type State = Box<[RuleState]>;
    type Cell = Locked<Box<[RuleState]>>;

    fn sweep_every(&self) -> u64 {
        self.rules
            .iter()
            .map(|rule| rule.quota().span_nanos())
            .max()
            .unwrap_or(u64::MAX)
    }

    fn fresh(&self) -> Box<[RuleState]> {
        self.rules.iter().map(Rule::fresh).collect()
    }

    /// Each rule's record, in the rules' order.
    type Pending = Vec<Pending>;

    /// One pass decides every rule and keeps what each would record; only when all admit is
    /// anything recorded, from what the pass found (not counted again).
    #[inline]
    fn prepare(
        &self,
        state: &Box<[RuleState]>,
        now: Moment,
        cost: u64,
    ) -> Result<(Decisions, Vec<Pending>), LimitError> {
        self.admits_cost(cost)?;
        let mut pending = Vec::with_capacity(self.rules.len());
        let each = Each::try_collect(
            self.rules.len(),
            self.rules.iter().zip(state.iter()).map(|(rule, state)| {
                let (decision, next) = prepare(&rule.engine, state, now, cost)?;
                pending.push(next);
                Ok(decision)
            }),
        )?;
        let decisions =
            Decisions::from_each(each).unwrap_or_else(|| unreachable!("a rule set has a rule"));
        Ok((decisions, pending))
    }

    #[inline]
    fn commit(state: &mut Box<[RuleState]>, pending: Vec<Pending>, cost: u64) {
        for (state, next) in state.iter_mut().zip(pending) {
            commit(state, next, cost);
        }
    }

    /// The provided check, but for a set of one or two rules (the usual sets) decided and
    /// recorded in one place, with no list of records to allocate: through `prepare`'s list a
    /// two-rule check took 11% more instructions, a one-rule check a quarter more.
    fn check(
        &self,
        state: &mut Box<[RuleState]>,
        now: Moment,
        cost: u64,
    ) -> Result<Decisions, LimitError> {
        match (&*self.rules, &mut **state) {
            ([rule], [s]) => {
                self.admits_cost(cost)?;
                Ok(RuleSet::check_one(rule, s, now, cost))
            }
            ([first, second], [a, b]) => {
                self.admits_cost(cost)?;
                Ok(RuleSet::check_pair([first, second], [a, b], now, cost))
            }
            _ => {
                let (decisions, pending) = self.prepare(state, now, cost)?;
                if cost > 0 && decisions.allowed() {
                    Self::commit(state, pending, cost);
                }
                Ok(decisions)
            }
        }
    }

    /// Each rule's answer, without [`prepare`](Enforce::prepare)'s records (for a set of
    /// more than two rules, a list to allocate).
    fn peek(
        &self,
        state: &Box<[RuleState]>,
        now: Moment,
        cost: u64,
    ) -> Result<Decisions, LimitError> {
        let each = self.peek_each(state, now, cost)?;
        Ok(Decisions::from_each(each).unwrap_or_else(|| unreachable!("a rule set has a rule")))
    }

    /// The rules' states, and each one's own.
    fn heap_bytes(&self, state: &Box<[RuleState]>) -> usize {
        let own = |(rule, state): (&Rule, &RuleState)| {
            each_kind!(&rule.engine, state, |e, s| e.heap_bytes(s))
        };
        size_of_val::<[RuleState]>(state)
            + self.rules.iter().zip(state.iter()).map(own).sum::<usize>()
    }

    fn growth_bytes(&self, state: &Box<[RuleState]>, now: Moment) -> usize {
        let own = |(rule, state): (&Rule, &RuleState)| {
            each_kind!(&rule.engine, state, |e, s| e.growth_bytes(s, now))
        };
        self.rules.iter().zip(state.iter()).map(own).sum()
    }

    /// Rule by rule, by name: a rule whose name the old set has, with the same kind, carries
    /// that rule's state by the kind's own rules (whatever the rules' order); any other rule
    /// (new, renamed, or of another kind) starts fresh. `None` when no rule carries anything.
    fn carry(
        &self,
        old: &RuleSet,
        state: Box<[RuleState]>,
        now: Moment,
    ) -> Option<Box<[RuleState]>> {
        let mut states: Vec<Option<RuleState>> = state.into_vec().into_iter().map(Some).collect();
        let mut carried = false;
        let rules = self.rules.iter().enumerate().map(|(i, rule)| {
            // Usually a reload keeps the order: the same place first, then by name.
            let same_place = old.rules.get(i).filter(|o| o.name == rule.name);
            let from = same_place.map(|o| (i, o)).or_else(|| old.get(&rule.name));
            let state = from.and_then(|(j, o)| Some((o, states.get_mut(j)?.take()?)));
            match state.and_then(|(o, s)| rule.carry(o, s, now)) {
                Some(state) => {
                    carried = true;
                    state
                }
                None => rule.fresh(),
            }
        });
        let rules: Box<[RuleState]> = rules.collect();
        carried.then_some(rules)
    }

    /// The latest of the rules' times: the request's, unless the clock went back. Every rule
    /// admitted together, so each finds its place from it: a log's newest stamp is that time,
    /// a window's start is at or before it.
    fn counted_at(&self, pending: &Vec<Pending>, now: Moment) -> Moment {
        self.rules
            .iter()
            .zip(pending)
            .map(|(rule, pending)| counted_at(&rule.engine, pending, now))
            .fold(now, Moment::max)
    }

    /// Every rule settles by its own rules, from the one reservation (a set reserved all or
    /// nothing, so every rule counted it). Whether any rule still held it.
    fn settle(&self, state: &mut Box<[RuleState]>, reservation: Reservation, actual: u64) -> bool {
        self.rules
            .iter()
            .zip(state.iter_mut())
            .map(|(rule, state)| {
                each_kind!(&rule.engine, state, |e, s| e.settle(s, reservation, actual))
            })
            .fold(false, |any, changed| any | changed)
    }

    /// Each [`Leases`](crate::limit::Leases) rule, and each sliding log built
    /// [`with_refunds`](Rule::with_refunds), gives back up to `units`, its oldest first; the
    /// other rates give back nothing. The most any rule gave back.
    fn release(&self, state: &mut Box<[RuleState]>, now: Moment, units: u64) -> u64 {
        self.rules
            .iter()
            .zip(state.iter_mut())
            .map(|(rule, state)| match (&rule.engine, state) {
                (Engine::Log(log), RuleState::Log(s)) if rule.refunds => {
                    log.release_oldest(s, now, units)
                }
                (engine, state) => each_kind!(engine, state, |e, s| e.release(s, now, units)),
            })
            .max()
            .unwrap_or(0)
    }

    /// When the last of its rules is idle.
    fn idle_at(&self, state: &Box<[RuleState]>) -> Option<Moment> {
        self.rules
            .iter()
            .zip(state.iter())
            .map(|(rule, state)| each_kind!(&rule.engine, state, |e, s| e.idle_at(s)))
            .try_fold(Moment::ZERO, |latest, at| at.map(|at| latest.max(at)))
    }
}
