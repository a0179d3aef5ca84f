//! [`Kind`], [`Rule`] and [`RuleSet`]: limits chosen at run time, several to a key.
//!
//! A rule is here; a set of them, and its check of all its rules at once, is in `set`.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::error::ConfigError;
use crate::limit::algorithm::sealed::Enforce;
use crate::limit::{
    Calendar, CalendarQuota, FixedWindow, Gcra, Leases, Quota, SlidingCounter, SlidingLog,
};
use crate::time::Moment;

/// Which algorithm a [`Rule`] runs, chosen at run time (from a configuration file, say): one of
/// the four rates, [`Leases`], a concurrency limit, or [`Calendar`], a quota per calendar
/// window. Written and read as `sliding_log`, `sliding_counter`, `fixed_window`, `gcra`,
/// `leases` and `calendar`.
///
/// # Example
///
/// ```
/// use slidewin::limit::Kind;
///
/// let kind: Kind = "sliding_log".parse()?;
/// assert_eq!(kind, Kind::SlidingLog);
/// assert_eq!(Kind::Gcra.to_string(), "gcra");
/// assert!("leaky_bucket".parse::<Kind>().is_err());
/// # Ok::<(), slidewin::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The exact log, [`SlidingLog`].
    SlidingLog,
    /// The two-counter estimate, [`SlidingCounter`].
    SlidingCounter,
    /// A counter per aligned window, [`FixedWindow`].
    FixedWindow,
    /// The token bucket, [`Gcra`].
    Gcra,
    /// In flight at most, each unit until released or its lease ends, [`Leases`]; its quota's
    /// span is the lease.
    Leases,
    /// A counter per calendar day, week, month or year in a zone, [`Calendar`]; built with
    /// [`Rule::calendar`].
    Calendar,
}

impl Kind {
    /// Every kind, in the order of the docs.
    ///
    /// ```
    /// assert_eq!(slidewin::limit::Kind::ALL.len(), 6);
    /// ```
    pub const ALL: [Kind; 6] = [
        Kind::SlidingLog,
        Kind::SlidingCounter,
        Kind::FixedWindow,
        Kind::Gcra,
        Kind::Leases,
        Kind::Calendar,
    ];

    /// The four rates over a fixed span: not [`Leases`](Kind::Leases), whose units come
    /// back, nor [`Calendar`](Kind::Calendar), whose windows are the calendar's.
    ///
    /// ```
    /// use slidewin::limit::Kind;
    /// assert!(!Kind::RATES.contains(&Kind::Leases));
    /// assert!(!Kind::RATES.contains(&Kind::Calendar));
    /// ```
    pub const RATES: [Kind; 4] = [
        Kind::SlidingLog,
        Kind::SlidingCounter,
        Kind::FixedWindow,
        Kind::Gcra,
    ];

    /// Its name in configuration files: `sliding_log`, `sliding_counter`, `fixed_window`,
    /// `gcra`, `leases` or `calendar`.
    ///
    /// ```
    /// assert_eq!(slidewin::limit::Kind::FixedWindow.name(), "fixed_window");
    /// ```
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Kind::SlidingLog => "sliding_log",
            Kind::SlidingCounter => "sliding_counter",
            Kind::FixedWindow => "fixed_window",
            Kind::Gcra => "gcra",
            Kind::Leases => "leases",
            Kind::Calendar => "calendar",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kind {
    type Err = ConfigError;

    /// A kind from its [`name`](Kind::name), in any case.
    ///
    /// # Errors
    ///
    /// [`ConfigError::UnknownAlgorithm`], naming the text (cut to 64 bytes).
    fn from_str(text: &str) -> Result<Kind, ConfigError> {
        Kind::ALL
            .into_iter()
            .find(|kind| kind.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| ConfigError::UnknownAlgorithm {
                name: cut(text, Rule::MAX_NAME_LEN),
            })
    }
}

/// One algorithm for one quota, built when the rule is.
#[derive(Clone, Debug)]
enum Engine {
    Log(SlidingLog),
    Counter(SlidingCounter),
    Fixed(FixedWindow),
    Gcra(Gcra),
    Leases(Leases),
    Calendar(Calendar),
}

/// The state of one rule of a [`RuleSet`] (leases keep a sliding log's).
#[derive(Clone, Debug)]
#[allow(unreachable_pub)] // opaque: named by the sealed trait only
pub enum RuleState {
    Log(<SlidingLog as Enforce>::State),
    Counter(<SlidingCounter as Enforce>::State),
    Fixed(<FixedWindow as Enforce>::State),
    Gcra(<Gcra as Enforce>::State),
    Calendar(<Calendar as Enforce>::State),
}

/// Runs `$body` with `$engine` bound to the rule's algorithm and `$state` to its state of the
/// same kind (a rule's state is always of its own kind: both come from the rule).
macro_rules! each_kind {
    ($engine:expr, $state:expr, |$e:ident, $s:ident| $body:expr) => {
        match ($engine, $state) {
            (Engine::Log($e), RuleState::Log($s)) => $body,
            (Engine::Counter($e), RuleState::Counter($s)) => $body,
            (Engine::Fixed($e), RuleState::Fixed($s)) => $body,
            (Engine::Gcra($e), RuleState::Gcra($s)) => $body,
            (Engine::Leases($e), RuleState::Log($s)) => $body,
            (Engine::Calendar($e), RuleState::Calendar($s)) => $body,
            _ => unreachable!("a rule's state is of the rule's kind"),
        }
    };
}

mod set;

pub use set::RuleSet;

/// A named limit whose algorithm is chosen at run time: one of the rules a [`RuleSet`] checks
/// together, in memory or on Redis.
///
/// The name tells the rule's state apart from the other rules' on the same key (on Redis it is
/// part of the key), so a quota changed under the same name keeps its counts. It is 1 to 64
/// bytes of ASCII letters, digits, `_`, `-` and `.`.
///
/// # Example
///
/// ```
/// use slidewin::limit::{Kind, Rule};
///
/// let burst = Rule::new("burst", Kind::Gcra, "10/s burst 20".parse()?)?;
/// assert_eq!((burst.name(), burst.kind(), burst.max_cost()), ("burst", Kind::Gcra, 20));
///
/// let err = Rule::new("per ip", Kind::SlidingLog, "5/s".parse()?).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "the rule name `per ip` is not valid: only ASCII letters, digits, `_`, `-` and `.` are allowed"
/// );
/// assert!(Rule::new("log", Kind::SlidingLog, "10/s burst 20".parse()?).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Rule {
    name: Arc<str>,
    engine: Engine,
    /// A sliding log whose release gives back its oldest units ([`Rule::with_refunds`]).
    refunds: bool,
}

impl Rule {
    /// The longest name a rule can have, in bytes.
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule};
    /// let long = "x".repeat(Rule::MAX_NAME_LEN + 1);
    /// assert!(Rule::new(&long, Kind::Gcra, "1/s".parse()?).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub const MAX_NAME_LEN: usize = 64;

    /// The rule `name`: `quota` under the algorithm `kind`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::BadRuleName`] for a name that is empty, longer than
    /// [`MAX_NAME_LEN`](Rule::MAX_NAME_LEN) or has other characters than ASCII letters,
    /// digits, `_`, `-` and `.`; the algorithm's own error for a quota it cannot take (a burst
    /// where it has none, say).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule};
    ///
    /// let hourly = Rule::new("hourly", Kind::SlidingCounter, "1000/hour".parse()?)?;
    /// assert_eq!(hourly.quota().to_string(), "1000 per 1h");
    /// assert!(Rule::new("", Kind::SlidingCounter, "1/s".parse()?).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(name: &str, kind: Kind, quota: Quota) -> Result<Rule, ConfigError> {
        let engine = match kind {
            Kind::SlidingLog => Engine::Log(SlidingLog::new(quota)?),
            Kind::SlidingCounter => Engine::Counter(SlidingCounter::new(quota)?),
            Kind::FixedWindow => Engine::Fixed(FixedWindow::new(quota)?),
            Kind::Gcra => Engine::Gcra(Gcra::new(quota)?),
            Kind::Leases => Engine::Leases(Leases::from_quota(quota)?),
            Kind::Calendar => return Err(Calendar::needs_calendar_quota()),
        };
        Rule::named(name, engine)
    }

    /// The rule `name`: a [`Calendar`] counter for `quota`, of [`Kind::Calendar`].
    ///
    /// # Errors
    ///
    /// [`ConfigError::BadRuleName`], as for [`Rule::new`].
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule};
    ///
    /// let monthly = Rule::calendar("monthly", "10000 per calendar month".parse()?)?;
    /// assert_eq!(monthly.kind(), Kind::Calendar);
    /// assert_eq!(monthly.to_string(), "monthly: 10000 per calendar month (calendar)");
    /// assert_eq!(monthly.calendar_quota().map(|q| q.limit()), Some(10000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn calendar(name: &str, quota: CalendarQuota) -> Result<Rule, ConfigError> {
        Rule::named(name, Engine::Calendar(Calendar::new(quota)))
    }

    /// The same rule under another name: its algorithm and quota (a calendar one too).
    ///
    /// # Errors
    ///
    /// [`ConfigError::BadRuleName`], as for [`Rule::new`].
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::limit::Rule;
    ///
    /// let monthly = Rule::calendar("monthly", "10 per calendar month".parse()?)?;
    /// let renamed = monthly.renamed("api.monthly")?;
    /// assert_eq!(renamed.to_string(), "api.monthly: 10 per calendar month (calendar)");
    /// assert!(monthly.renamed("no spaces").is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn renamed(&self, name: &str) -> Result<Rule, ConfigError> {
        Ok(Rule {
            refunds: self.refunds,
            ..Rule::named(name, self.engine.clone())?
        })
    }

    /// The rule `name` running `engine`, once the name is checked.
    fn named(name: &str, engine: Engine) -> Result<Rule, ConfigError> {
        let bad = |reason| ConfigError::BadRuleName {
            name: cut(name, Rule::MAX_NAME_LEN),
            reason,
        };
        if name.is_empty() {
            return Err(bad("a rule needs a name"));
        }
        if name.len() > Rule::MAX_NAME_LEN {
            return Err(bad("it is longer than 64 bytes"));
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            return Err(bad(
                "only ASCII letters, digits, `_`, `-` and `.` are allowed",
            ));
        }
        Ok(Rule {
            name: name.into(),
            engine,
            refunds: false,
        })
    }

    /// The same rule, giving units back when asked: a [`Kind::SlidingLog`] whose
    /// [`release`](crate::Limiter::release) (in a [`RuleSet`]) gives back up to that many of
    /// its oldest units in the window, for a caller that charged more than a request cost
    /// and corrects it after the work (Envoy's negative hits, which name no admission).
    ///
    /// The oldest units are the safe ones to give back: an admission leaves the window no
    /// later than the one corrected, so the log never admits more than giving back the
    /// corrected admission's own units would, as long as that admission is still in the
    /// window (a request shorter than the span). A correction that comes later, when the
    /// admission has left the window and its cost with it, gives back later units: at most
    /// what it names, once. [`Kind::Leases`] always give back; the windows and the bucket
    /// cannot (a window's count of the admission may be in a window that has passed, a
    /// bucket's may have refilled), and are refused.
    ///
    /// # Errors
    ///
    /// [`ConfigError::RefundUnsupported`], naming the kind, for a window or a bucket.
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin::Keyed;
    ///
    /// let tokens = Rule::new("tokens", Kind::SlidingLog, "100/minute".parse()?)?.with_refunds()?;
    /// assert!(tokens.gives_back());
    /// assert_eq!(tokens.to_string(), "tokens: 100 per 1m (sliding_log, refunds)");
    /// let budget = Keyed::new(RuleSet::from(tokens));
    /// assert!(budget.check("ann", Moment::ZERO, 100)?.allowed());
    /// // The request used 30 of the 100 it was charged: 70 come back.
    /// assert_eq!(budget.release("ann", Moment::from_secs(1), 70), 70);
    /// assert_eq!(budget.peek("ann", Moment::from_secs(1), 0)?.remaining(), 70);
    /// assert!(Rule::new("w", Kind::FixedWindow, "5/s".parse()?)?.with_refunds().is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_refunds(self) -> Result<Rule, ConfigError> {
        match self.kind() {
            Kind::SlidingLog => Ok(Rule {
                refunds: true,
                ..self
            }),
            Kind::Leases => Ok(self),
            kind => Err(ConfigError::RefundUnsupported {
                algorithm: kind.name(),
            }),
        }
    }

    /// Whether its release gives units back: [`Kind::Leases`], and a sliding log built
    /// [`with_refunds`](Rule::with_refunds). Counts that go down are not kept as certain
    /// denials by a cache of them.
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule};
    /// assert!(Rule::new("f", Kind::Leases, "2 per 30s".parse()?)?.gives_back());
    /// assert!(!Rule::new("r", Kind::SlidingLog, "2/s".parse()?)?.gives_back());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn gives_back(&self) -> bool {
        self.refunds || self.kind() == Kind::Leases
    }

    /// Whether it is a sliding log built [`with_refunds`](Rule::with_refunds).
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule};
    /// let log = Rule::new("r", Kind::SlidingLog, "2/s".parse()?)?;
    /// assert!(!log.refunds());
    /// assert!(log.with_refunds()?.refunds());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn refunds(&self) -> bool {
        self.refunds
    }

    /// Its name.
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule};
    /// assert_eq!(Rule::new("login", Kind::SlidingLog, "5/minute".parse()?)?.name(), "login");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its algorithm.
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule};
    /// assert_eq!(Rule::new("a", Kind::FixedWindow, "5/s".parse()?)?.kind(), Kind::FixedWindow);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn kind(&self) -> Kind {
        match self.engine {
            Engine::Log(_) => Kind::SlidingLog,
            Engine::Counter(_) => Kind::SlidingCounter,
            Engine::Fixed(_) => Kind::FixedWindow,
            Engine::Gcra(_) => Kind::Gcra,
            Engine::Leases(_) => Kind::Leases,
            Engine::Calendar(_) => Kind::Calendar,
        }
    }

    /// Its quota. For a [`Kind::Calendar`] rule, whose windows vary, the limit per the longest
    /// window of its unit in a zone of ordinary rules (a day of 25 hours, a month of 31 days
    /// and an hour): [`calendar_quota`](Rule::calendar_quota) has the windows.
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule};
    /// let rule = Rule::new("a", Kind::Gcra, "5/s burst 2".parse()?)?;
    /// assert_eq!(rule.quota().burst(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn quota(&self) -> Quota {
        match &self.engine {
            Engine::Log(e) => e.quota(),
            Engine::Counter(e) => e.quota(),
            Engine::Fixed(e) => e.quota(),
            Engine::Gcra(e) => e.quota(),
            Engine::Leases(e) => e.quota(),
            Engine::Calendar(e) => {
                let q = e.quota();
                let span = std::time::Duration::from_nanos(q.unit().longest_nanos());
                Quota::new(q.limit(), span)
                    .unwrap_or_else(|_| unreachable!("a calendar quota's limit is not zero"))
            }
        }
    }

    /// Its calendar quota, for a [`Kind::Calendar`] rule.
    ///
    /// ```
    /// use slidewin::limit::{CalendarUnit, Kind, Rule};
    /// let daily = Rule::calendar("daily", "100 per calendar day".parse()?)?;
    /// assert_eq!(daily.calendar_quota().map(|q| q.unit()), Some(CalendarUnit::Day));
    /// assert!(Rule::new("a", Kind::Gcra, "5/s".parse()?)?.calendar_quota().is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn calendar_quota(&self) -> Option<&CalendarQuota> {
        match &self.engine {
            Engine::Calendar(e) => Some(e.quota()),
            _ => None,
        }
    }

    /// Its quota as text: the calendar quota's for a [`Kind::Calendar`] rule
    /// (`10000 per calendar month in Europe/Paris`), the [`Quota`]'s otherwise.
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule};
    /// assert_eq!(Rule::new("a", Kind::Gcra, "5/s".parse()?)?.quota_text(), "5 per 1s");
    /// let weekly = Rule::calendar("w", "5 per calendar week from sunday".parse()?)?;
    /// assert_eq!(weekly.quota_text(), "5 per calendar week from sunday");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn quota_text(&self) -> String {
        match self.calendar_quota() {
            Some(q) => q.to_string(),
            None => self.quota().to_string(),
        }
    }

    /// The most cost it admits at once: the limit, or for [`Kind::Gcra`] the burst. A larger
    /// cost is [`LimitError::CostTooHigh`](crate::limit::LimitError::CostTooHigh).
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule};
    /// assert_eq!(Rule::new("a", Kind::SlidingLog, "5/s".parse()?)?.max_cost(), 5);
    /// assert_eq!(Rule::new("b", Kind::Gcra, "5/s burst 2".parse()?)?.max_cost(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn max_cost(&self) -> u64 {
        match &self.engine {
            Engine::Gcra(e) => e.quota().burst(),
            _ => self.quota().limit(),
        }
    }

    /// `state`, kept by `old` (a rule of the same name), as a state of this rule: carried
    /// by the kind's own rules when the kind is the same, fresh (`None`) otherwise.
    fn carry(&self, old: &Rule, state: RuleState, now: Moment) -> Option<RuleState> {
        match (&self.engine, &old.engine, state) {
            (Engine::Log(e), Engine::Log(o), RuleState::Log(s)) => {
                e.carry(o, s, now).map(RuleState::Log)
            }
            (Engine::Counter(e), Engine::Counter(o), RuleState::Counter(s)) => {
                e.carry(o, s, now).map(RuleState::Counter)
            }
            (Engine::Fixed(e), Engine::Fixed(o), RuleState::Fixed(s)) => {
                e.carry(o, s, now).map(RuleState::Fixed)
            }
            (Engine::Gcra(e), Engine::Gcra(o), RuleState::Gcra(s)) => {
                e.carry(o, s, now).map(RuleState::Gcra)
            }
            (Engine::Leases(e), Engine::Leases(o), RuleState::Log(s)) => {
                e.carry(o, s, now).map(RuleState::Log)
            }
            (Engine::Calendar(e), Engine::Calendar(o), RuleState::Calendar(s)) => {
                e.carry(o, s, now).map(RuleState::Calendar)
            }
            _ => None, // another kind: its state means something else
        }
    }

    fn fresh(&self) -> RuleState {
        match &self.engine {
            Engine::Log(e) => RuleState::Log(e.fresh()),
            Engine::Counter(e) => RuleState::Counter(e.fresh()),
            Engine::Fixed(e) => RuleState::Fixed(e.fresh()),
            Engine::Gcra(e) => RuleState::Gcra(e.fresh()),
            Engine::Leases(e) => RuleState::Log(e.fresh()),
            Engine::Calendar(e) => RuleState::Calendar(e.fresh()),
        }
    }
}

impl PartialEq for Rule {
    fn eq(&self, other: &Rule) -> bool {
        self.name == other.name
            && self.kind() == other.kind()
            && self.quota() == other.quota()
            && self.calendar_quota() == other.calendar_quota()
            && self.refunds == other.refunds
    }
}

impl Eq for Rule {}

impl fmt::Debug for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rule")
            .field("name", &self.name)
            .field("kind", &self.kind())
            .field("quota", &self.quota_text())
            .field("refunds", &self.refunds)
            .finish()
    }
}

/// `name: quota (kind)`, as in `burst: 10 per 1s burst 20 (gcra)` or `monthly: 10000 per
/// calendar month (calendar)`; a log that refunds is `(sliding_log, refunds)`.
impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({}", self.name, self.quota_text(), self.kind())?;
        if self.refunds {
            f.write_str(", refunds")?;
        }
        f.write_str(")")
    }
}

/// `text` cut to at most `max` bytes, on a char boundary.
fn cut(text: &str, max: usize) -> String {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}
