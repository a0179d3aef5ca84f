//! [`Rules`]: a [`RuleSet`] checked once for what Redis's script can represent, and the script
//! call that checks it.

pub(crate) mod calendar;
mod call;
mod names;

use std::fmt;
use std::sync::{Arc, LazyLock};

use redis::Script;
use slidewin::ConfigError;
use slidewin::limit::{Kind, LimitError, Rule, RuleSet};

/// Lua's numbers are doubles: integers are exact below this.
const EXACT: u128 = 1 << 53;

/// The checks' script: every algorithm, every batch (see `lua/check.lua`).
pub(crate) static SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/check.lua")));

pub(crate) use calendar::{counted_at, window_of};
/// The settles' script: a reservation changed under every rule of a key (see
/// `lua/settle.lua`).
pub(crate) use call::{Call, Keys, script_call, tag_of};
pub(crate) use names::suffix;
use names::{number, on_redis};

pub(crate) static SETTLE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/settle.lua")));

/// A [`RuleSet`] ready to run on Redis: the arithmetic the script will do for each rule has
/// been checked to be exact.
///
/// Each rule keeps its own state under a Redis key of its own, named after the rule:
/// `{prefix:key}:name:kind`, the kind `stamps`, `counter`, `fixed`, `gcra`, `leases` or
/// `calendar` (`{slidewin:alice}:minute:stamps`). So two rules on one key
/// never count each other's admissions, and a quota changed under the same name keeps its
/// counts (one lowered below a key's count denies until the count falls under it); a rule
/// renamed, or given another algorithm, starts afresh. The braces are a Redis Cluster hash tag:
/// all of a key's rules live on one slot, and a check of all of them is one script call,
/// all-or-nothing as in memory — admitted only if every rule admits, and a denial consumes
/// from none.
///
/// Redis's script counts in whole **microseconds** (Lua's numbers are doubles, and nanoseconds
/// since 1970 do not fit their 53 exact bits): a span must be whole microseconds, an explicit
/// time is taken at its microsecond, and a quota's arithmetic must stay below 2^53. Within
/// that, every answer is the in-memory algorithm's, with two roundings to the microsecond,
/// both towards waiting longer: [`Kind::Gcra`]'s emission interval (exact when the span in
/// microseconds divides by the limit) and [`Kind::SlidingCounter`]'s `retry_after`. A
/// [`Kind::Calendar`] rule's windows are dated by the client and sent with each call.
///
/// Cheap to clone: clones share the rules.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin::Quota;
/// use slidewin::limit::{Kind, Rule, RuleSet};
/// use slidewin_redis::Rules;
///
/// let login = Rules::new(RuleSet::new([
///     Rule::new("minute", Kind::SlidingLog, "5/minute".parse()?)?,
///     Rule::new("hour", Kind::SlidingLog, "20/hour".parse()?)?,
/// ])?)?;
/// assert_eq!(login.rule_set().rules().len(), 2);
///
/// let api = Rules::try_from(Rule::new("api", Kind::Gcra, "100/s burst 20".parse()?)?)?;
/// assert_eq!(api.rule_set().max_cost(), 20);
///
/// let odd = Rule::new("odd", Kind::Gcra, Quota::new(1, Duration::from_nanos(1_500))?)?;
/// let err = Rules::try_from(odd).unwrap_err();
/// assert!(err.to_string().contains("whole microseconds"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Rules {
    inner: Arc<Inner>,
}

struct Inner {
    set: RuleSet,
    each: Box<[Prepared]>,
    /// Whether a rule is [`Kind::Calendar`]: each call then dates its windows.
    calendar: bool,
}

/// One rule as the script takes it.
struct Prepared {
    /// `:name:kind`, after the key's hash tag.
    suffix: Box<str>,
    /// The algorithm's number and its four parameters (see `lua/check.lua`).
    params: [u64; 5],
    /// A decision's limit: the quota's limit, or a bucket's burst.
    limit: u64,
}

impl Rules {
    /// The largest limit of a [`Kind::SlidingLog`] rule on Redis. The log keeps each unit
    /// admitted as a time of 7 bytes in one string, so its limit bounds a key's memory (0.7 MB
    /// at this limit, twice that before the times that left are dropped) and the longest
    /// script (a check of the whole limit appends it all at once: 7.5 ms at this limit, and a
    /// script blocks the server). A check of one unit costs the same whatever the count (a
    /// bisection of the string). For more, use [`Kind::SlidingCounter`] or [`Kind::Gcra`],
    /// whose state is two numbers whatever the limit.
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule};
    /// use slidewin_redis::Rules;
    ///
    /// let log = |quota: &str| Rule::new("log", Kind::SlidingLog, quota.parse().unwrap()).unwrap();
    /// assert!(Rules::try_from(log("100000/minute")).is_ok());
    /// let err = Rules::try_from(log("100001/minute")).unwrap_err();
    /// assert!(err.to_string().contains("at most 100000"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub const MAX_SLIDING_LOG_LIMIT: u64 = 100_000;

    /// `set`, checked for what the script can represent.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Unrepresentable`] when a rule's span is not whole microseconds, its
    /// arithmetic would pass 2^53, or a sliding log's limit is above
    /// [`MAX_SLIDING_LOG_LIMIT`](Rules::MAX_SLIDING_LOG_LIMIT).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_redis::Rules;
    ///
    /// let set = RuleSet::new([
    ///     Rule::new("burst", Kind::Gcra, "10/s".parse()?)?,
    ///     Rule::new("hourly", Kind::SlidingCounter, "1000/hour".parse()?)?,
    /// ])?;
    /// let rules = Rules::new(set.clone())?;
    /// assert_eq!(rules.rule_set(), &set);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(set: RuleSet) -> Result<Rules, ConfigError> {
        let each = set
            .rules()
            .iter()
            .map(prepare)
            .collect::<Result<Box<[Prepared]>, ConfigError>>()?;
        let calendar = set.rules().iter().any(|r| r.kind() == Kind::Calendar);
        Ok(Rules {
            inner: Arc::new(Inner {
                set,
                each,
                calendar,
            }),
        })
    }

    /// The rules, as given.
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule};
    /// use slidewin_redis::Rules;
    /// let rules = Rules::try_from(Rule::new("api", Kind::FixedWindow, "5/s".parse()?)?)?;
    /// assert_eq!(rules.rule_set().rules()[0].name(), "api");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn rule_set(&self) -> &RuleSet {
        &self.inner.set
    }

    /// An identity: the same for clones of one `Rules`, different for two made apart while
    /// both live (keep a clone beside the identity to keep it unique).
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule};
    /// use slidewin_redis::Rules;
    /// let rule = || Rule::new("api", Kind::Gcra, "10/s".parse().unwrap()).unwrap();
    /// let (one, other) = (Rules::try_from(rule()).unwrap(), Rules::try_from(rule()).unwrap());
    /// assert_eq!(one.identity(), one.clone().identity());
    /// assert_ne!(one.identity(), other.identity());
    /// ```
    #[must_use]
    pub fn identity(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    /// An error for a cost that can never be admitted: checked before Redis is asked.
    pub(crate) fn check_cost(&self, cost: u64) -> Result<(), LimitError> {
        let max = self.inner.set.max_cost();
        if cost > max {
            return Err(LimitError::CostTooHigh { cost, max });
        }
        Ok(())
    }

    /// How many rules.
    fn len(&self) -> usize {
        self.inner.each.len()
    }

    /// Rule `index`'s decision limit.
    fn limit(&self, index: usize) -> u64 {
        self.inner.each[index].limit
    }

    /// The Redis key of rule `index` for the hash tag `tag`.
    pub(crate) fn key(&self, tag: &str, index: usize) -> String {
        let suffix = &self.inner.each[index].suffix;
        let mut key = String::with_capacity(tag.len() + suffix.len());
        key.push_str(tag);
        key.push_str(suffix);
        key
    }

    /// Whether a rule is [`Kind::Calendar`], whose windows each call dates.
    pub(crate) fn dates_windows(&self) -> bool {
        self.inner.calendar
    }

    /// Rule `index`'s algorithm number and parameters, as the scripts take them.
    pub(crate) fn params(&self, index: usize) -> [u64; 5] {
        self.inner.each[index].params
    }

    /// Every Redis key of the user key `tag`.
    pub(crate) fn keys(&self, tag: &str) -> Vec<String> {
        (0..self.len()).map(|i| self.key(tag, i)).collect()
    }
}

impl TryFrom<RuleSet> for Rules {
    type Error = ConfigError;

    /// As [`Rules::new`].
    fn try_from(set: RuleSet) -> Result<Rules, ConfigError> {
        Rules::new(set)
    }
}

impl TryFrom<Rule> for Rules {
    type Error = ConfigError;

    /// A set of one rule, as [`Rules::new`].
    fn try_from(rule: Rule) -> Result<Rules, ConfigError> {
        Rules::new(RuleSet::from(rule))
    }
}

impl PartialEq for Rules {
    fn eq(&self, other: &Rules) -> bool {
        self.inner.set == other.inner.set
    }
}

impl Eq for Rules {}

impl fmt::Debug for Rules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Rules").field(&self.inner.set).finish()
    }
}

fn prepare(rule: &Rule) -> Result<Prepared, ConfigError> {
    let (kind, quota) = (rule.kind(), rule.quota());
    let refuse = |reason| ConfigError::Unrepresentable {
        algorithm: on_redis(kind),
        quota,
        reason,
    };
    if kind == Kind::Calendar {
        let params = calendar::prepare(rule, refuse)?;
        let (suffix, limit) = (suffix(rule).into_boxed_str(), rule.max_cost());
        return Ok(Prepared {
            suffix,
            params,
            limit,
        });
    }
    let logged = matches!(kind, Kind::SlidingLog | Kind::Leases);
    if logged && quota.limit() > Rules::MAX_SLIDING_LOG_LIMIT {
        return Err(refuse(
            "it keeps a time per unit admitted, so its limit can be at most 100000 \
             (Rules::MAX_SLIDING_LOG_LIMIT); SlidingCounter and Gcra keep two numbers",
        ));
    }
    let nanos = quota.span().as_nanos();
    if nanos % 1_000 != 0 {
        return Err(refuse(
            "Redis counts in whole microseconds, and the span is not",
        ));
    }
    let span = u64::try_from(nanos / 1_000).map_err(|_| refuse("the span is too long"))?;
    let (limit, burst) = (u128::from(quota.limit()), u128::from(quota.burst()));
    let (interval, tolerance) = match kind {
        Kind::Gcra => {
            if u128::from(span) < limit {
                return Err(refuse("more than one unit of cost per microsecond"));
            }
            let interval = span.div_ceil(quota.limit());
            (interval, u128::from(interval) * (burst - 1))
        }
        _ => (0, 0),
    };
    // The largest number the script computes, against Lua's exact integers (with room for a
    // timestamp of up to 2^52 microseconds, past the year 2100).
    let largest = match kind {
        Kind::SlidingLog | Kind::Leases | Kind::FixedWindow | Kind::Calendar => {
            u128::from(span) * 2
        }
        Kind::SlidingCounter => 4 * limit * u128::from(span),
        Kind::Gcra => tolerance + u128::from(interval) * (burst + 1),
    };
    if largest >= EXACT / 2 || limit >= EXACT / 2 || burst >= EXACT / 2 {
        return Err(refuse(
            "its arithmetic would pass 2^53, where Lua's numbers stop being exact",
        ));
    }
    // Idle keys vanish: a state untouched for this long equals a fresh one.
    let ttl_ms = span.div_ceil(1_000) + 1;
    let params = match kind {
        // A log's last number: 1 when a release gives its oldest units back.
        Kind::SlidingLog | Kind::Leases | Kind::FixedWindow | Kind::Calendar => [
            number(kind),
            span,
            quota.limit(),
            ttl_ms,
            u64::from(rule.refunds()),
        ],
        Kind::SlidingCounter => [number(kind), span, quota.limit(), 2 * ttl_ms, 0],
        // Below 2^52, checked above.
        Kind::Gcra => [
            number(kind),
            interval,
            u64::try_from(tolerance).unwrap_or(u64::MAX),
            quota.burst(),
            ttl_ms,
        ],
    };
    Ok(Prepared {
        suffix: suffix(rule).into_boxed_str(),
        params,
        limit: rule.max_cost(),
    })
}

#[cfg(test)]
mod tests;
