//! [`Rule`]: an algorithm and a quota, checked once for what Redis's scripts can represent.

use std::sync::LazyLock;

use redis::Script;
use slidewin::{
    Algorithm, FixedWindow, Gcra, LimitError, Moment, Quota, QuotaError, SlidingCounter, SlidingLog,
};

/// Lua's numbers are doubles: integers are exact below this.
const EXACT: u128 = 1 << 53;

/// Which of slidewin's algorithms a [`Rule`] runs. Each is one atomic Lua script that gives
/// the same answers as the in-memory algorithm of the same name.
///
/// ```
/// use slidewin_redis::{RedisAlgorithm, Rule};
/// let rule = Rule::new(RedisAlgorithm::Gcra, "10/s burst 20".parse()?)?;
/// assert_eq!(rule.algorithm(), RedisAlgorithm::Gcra);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RedisAlgorithm {
    /// Exact: a sorted set of the admission times, as seed 001 describes
    /// ([`slidewin::SlidingLog`]).
    SlidingLog,
    /// Cloudflare's two-counter estimate ([`slidewin::SlidingCounter`]).
    SlidingCounter,
    /// A counter per window aligned to the span ([`slidewin::FixedWindow`]).
    FixedWindow,
    /// The token bucket as one theoretical arrival time ([`slidewin::Gcra`]).
    Gcra,
}

impl RedisAlgorithm {
    fn name(self) -> &'static str {
        match self {
            RedisAlgorithm::SlidingLog => "SlidingLog on Redis",
            RedisAlgorithm::SlidingCounter => "SlidingCounter on Redis",
            RedisAlgorithm::FixedWindow => "FixedWindow on Redis",
            RedisAlgorithm::Gcra => "Gcra on Redis",
        }
    }

    pub(crate) fn script(self) -> &'static Script {
        static SCRIPTS: LazyLock<[Script; 4]> = LazyLock::new(|| {
            let with_common = |body: &str| {
                Script::new(&format!(
                    "{}\n{}\n{}",
                    include_str!("lua/common.lua"),
                    body,
                    include_str!("lua/common_end.lua")
                ))
            };
            [
                with_common(include_str!("lua/sliding_log.lua")),
                with_common(include_str!("lua/sliding_counter.lua")),
                with_common(include_str!("lua/fixed_window.lua")),
                with_common(include_str!("lua/gcra.lua")),
            ]
        });
        &SCRIPTS[self as usize]
    }

    /// Every algorithm, for loading all the scripts onto a node at once.
    pub(crate) fn all() -> impl Iterator<Item = RedisAlgorithm> {
        [
            RedisAlgorithm::SlidingLog,
            RedisAlgorithm::SlidingCounter,
            RedisAlgorithm::FixedWindow,
            RedisAlgorithm::Gcra,
        ]
        .into_iter()
    }

    /// The suffix of its keys, so that two algorithms on one user key never meet.
    fn suffix(self) -> &'static str {
        match self {
            RedisAlgorithm::SlidingLog => "log",
            RedisAlgorithm::SlidingCounter => "counter",
            RedisAlgorithm::FixedWindow => "fixed",
            RedisAlgorithm::Gcra => "gcra",
        }
    }
}

/// An algorithm and a quota, ready to run on Redis: the arithmetic its script will do has been
/// checked to be exact.
///
/// Redis's scripts count in whole **microseconds** (Lua's numbers are doubles, and nanoseconds
/// since 1970 do not fit their 53 exact bits): a span must be whole microseconds, an explicit
/// `Moment` is taken at its microsecond, and the quota's arithmetic must stay below 2^53.
/// Within that, every answer is the in-memory algorithm's, with two roundings to the
/// microsecond, both towards waiting longer: [`Gcra`](RedisAlgorithm::Gcra)'s emission
/// interval (exact when the span in microseconds divides by the limit) and
/// [`SlidingCounter`](RedisAlgorithm::SlidingCounter)'s `retry_after`.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use slidewin_redis::{RedisAlgorithm, Rule};
///
/// let rule = Rule::sliding_log("100/minute".parse()?)?;
/// assert_eq!(rule.quota().limit(), 100);
/// let err = Rule::gcra(slidewin::Quota::new(1, Duration::from_nanos(1_500))?).unwrap_err();
/// assert!(err.to_string().contains("whole microseconds"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    algorithm: RedisAlgorithm,
    quota: Quota,
    /// The span in microseconds.
    span: u64,
    /// GCRA's emission interval and tolerance, in microseconds.
    interval: u64,
    tolerance: u64,
}

impl Rule {
    /// The largest limit of a [`SlidingLog`](RedisAlgorithm::SlidingLog) rule. The log keeps a
    /// member of its sorted set per unit admitted (its count is `ZCOUNT`), so its limit bounds
    /// both a key's memory (measured: about 130 bytes a member, 1.3 MB at this limit) and a
    /// check's work (one check of the whole limit adds every member in one script, and a
    /// script blocks the server: 10 ms at this limit, 160 ms at ten times it). For more, use
    /// [`SlidingCounter`](RedisAlgorithm::SlidingCounter) or [`Gcra`](RedisAlgorithm::Gcra),
    /// whose state is two numbers whatever the limit (within Lua's exact integers).
    ///
    /// ```
    /// use slidewin_redis::Rule;
    /// assert!(Rule::sliding_log("10000/minute".parse()?).is_ok());
    /// let err = Rule::sliding_log("10001/minute".parse()?).unwrap_err();
    /// assert!(err.to_string().contains("at most 10000"));
    /// assert!(Rule::gcra("1000000/minute".parse()?).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub const MAX_SLIDING_LOG_LIMIT: u64 = 10_000;

    /// `quota` under `algorithm`.
    ///
    /// # Errors
    ///
    /// The [`QuotaError`] the in-memory algorithm gives (a burst where it has none, say), or
    /// [`QuotaError::Unrepresentable`] when the span is not whole microseconds, the script's
    /// arithmetic would pass 2^53, or a sliding log's limit is above
    /// [`MAX_SLIDING_LOG_LIMIT`](Rule::MAX_SLIDING_LOG_LIMIT).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin_redis::{RedisAlgorithm, Rule};
    /// let rule = Rule::new(RedisAlgorithm::FixedWindow, "5 per 10 seconds".parse()?)?;
    /// assert_eq!(rule.quota().to_string(), "5 per 10s");
    /// assert!(Rule::new(RedisAlgorithm::SlidingLog, "5/s burst 9".parse()?).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(algorithm: RedisAlgorithm, quota: Quota) -> Result<Rule, QuotaError> {
        // The in-memory rules refuse what they cannot do: the same quotas are refused here.
        match algorithm {
            RedisAlgorithm::SlidingLog => SlidingLog::new(quota).map(drop),
            RedisAlgorithm::SlidingCounter => SlidingCounter::new(quota).map(drop),
            RedisAlgorithm::FixedWindow => FixedWindow::new(quota).map(drop),
            RedisAlgorithm::Gcra => Gcra::new(quota).map(drop),
        }?;
        let refuse = |reason| QuotaError::Unrepresentable {
            algorithm: algorithm.name(),
            quota,
            reason,
        };
        if algorithm == RedisAlgorithm::SlidingLog && quota.limit() > Rule::MAX_SLIDING_LOG_LIMIT {
            return Err(refuse(
                "it keeps a member per unit admitted, so its limit can be at most 10000 \
                 (Rule::MAX_SLIDING_LOG_LIMIT); SlidingCounter and Gcra keep two numbers",
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
        let (interval, tolerance) = match algorithm {
            RedisAlgorithm::Gcra => {
                if u128::from(span) < limit {
                    return Err(refuse("more than one unit of cost per microsecond"));
                }
                let interval = span.div_ceil(quota.limit());
                (interval, u128::from(interval) * (burst - 1))
            }
            _ => (0, 0),
        };
        // The largest number each script computes, against Lua's exact integers (with room for
        // a timestamp of up to 2^52 microseconds, past the year 2100).
        let largest = match algorithm {
            RedisAlgorithm::SlidingLog | RedisAlgorithm::FixedWindow => u128::from(span) * 2,
            RedisAlgorithm::SlidingCounter => 4 * limit * u128::from(span),
            RedisAlgorithm::Gcra => tolerance + u128::from(interval) * (burst + 1),
        };
        if largest >= EXACT / 2 || limit >= EXACT / 2 || burst >= EXACT / 2 {
            return Err(refuse(
                "its arithmetic would pass 2^53, where Lua's numbers stop being exact",
            ));
        }
        Ok(Rule {
            algorithm,
            quota,
            span,
            interval,
            tolerance: u64::try_from(tolerance).unwrap_or(u64::MAX),
        })
    }

    /// [`Rule::new`] with [`RedisAlgorithm::SlidingLog`].
    ///
    /// # Errors
    ///
    /// As [`Rule::new`].
    ///
    /// ```
    /// let rule = slidewin_redis::Rule::sliding_log("3/10s".parse()?)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sliding_log(quota: Quota) -> Result<Rule, QuotaError> {
        Rule::new(RedisAlgorithm::SlidingLog, quota)
    }

    /// [`Rule::new`] with [`RedisAlgorithm::SlidingCounter`].
    ///
    /// # Errors
    ///
    /// As [`Rule::new`].
    ///
    /// ```
    /// let rule = slidewin_redis::Rule::sliding_counter("100/minute".parse()?)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sliding_counter(quota: Quota) -> Result<Rule, QuotaError> {
        Rule::new(RedisAlgorithm::SlidingCounter, quota)
    }

    /// [`Rule::new`] with [`RedisAlgorithm::FixedWindow`].
    ///
    /// # Errors
    ///
    /// As [`Rule::new`].
    ///
    /// ```
    /// let rule = slidewin_redis::Rule::fixed_window("1000/day".parse()?)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fixed_window(quota: Quota) -> Result<Rule, QuotaError> {
        Rule::new(RedisAlgorithm::FixedWindow, quota)
    }

    /// [`Rule::new`] with [`RedisAlgorithm::Gcra`].
    ///
    /// # Errors
    ///
    /// As [`Rule::new`].
    ///
    /// ```
    /// let rule = slidewin_redis::Rule::gcra("10/s burst 20".parse()?)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn gcra(quota: Quota) -> Result<Rule, QuotaError> {
        Rule::new(RedisAlgorithm::Gcra, quota)
    }

    /// The algorithm.
    ///
    /// ```
    /// use slidewin_redis::{RedisAlgorithm, Rule};
    /// assert_eq!(Rule::gcra("1/s".parse()?)?.algorithm(), RedisAlgorithm::Gcra);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn algorithm(&self) -> RedisAlgorithm {
        self.algorithm
    }

    /// The quota.
    ///
    /// ```
    /// let rule = slidewin_redis::Rule::gcra("10/s burst 20".parse()?)?;
    /// assert_eq!(rule.quota().burst(), 20);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// An error for a cost that can never be admitted: checked before Redis is asked.
    pub(crate) fn check_cost(&self, cost: u64) -> Result<(), LimitError> {
        let max = match self.algorithm {
            RedisAlgorithm::Gcra => self.quota.burst(),
            _ => self.quota.limit(),
        };
        if cost > max {
            return Err(LimitError::CostTooHigh { cost, max });
        }
        Ok(())
    }

    /// One check of `key` under `prefix`, at `now` (the server's when `None`), ready to be sent
    /// alone or in a batch.
    pub(crate) fn call(
        &self,
        prefix: &str,
        key: &str,
        now: Option<Moment>,
        cost: u64,
        commit: bool,
    ) -> Call {
        let limit = self.quota.limit();
        // Idle keys vanish: a state untouched for this long equals a fresh one.
        let ttl_ms = self.span.div_ceil(1_000) + 1;
        let (params, len) = match self.algorithm {
            RedisAlgorithm::SlidingLog | RedisAlgorithm::FixedWindow => {
                ([self.span, limit, ttl_ms, 0], 3)
            }
            RedisAlgorithm::SlidingCounter => ([self.span, limit, 2 * ttl_ms, 0], 3),
            RedisAlgorithm::Gcra => (
                [self.interval, self.tolerance, self.quota.burst(), ttl_ms],
                4,
            ),
        };
        Call {
            algorithm: self.algorithm,
            key: self.key(prefix, key),
            now: now.map(|t| t.as_nanos() / 1_000),
            cost,
            commit,
            params,
            len,
            limit: match self.algorithm {
                RedisAlgorithm::Gcra => self.quota.burst(),
                _ => limit,
            },
        }
    }

    /// The Redis key of `key` under `prefix` and this rule: `{prefix:key}:algorithm`. The hash
    /// tag keeps a user key's keys of every rule on one cluster slot.
    pub(crate) fn key(&self, prefix: &str, key: &str) -> String {
        key_of(prefix, key, self.algorithm)
    }
}

/// One check, as its script takes it.
#[derive(Clone, Debug)]
pub(crate) struct Call {
    pub(crate) algorithm: RedisAlgorithm,
    /// The Redis key.
    pub(crate) key: String,
    /// In microseconds; the server's time when `None`.
    now: Option<u64>,
    cost: u64,
    commit: bool,
    /// The rule's numbers, `len` of them.
    params: [u64; 4],
    len: usize,
    /// The decision's limit (a bucket's burst): the client's to fill in, not the script's.
    pub(crate) limit: u64,
}

/// How a script call names its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Keys {
    /// As `KEYS`, as Redis asks of scripts: all of one slot on a cluster.
    Declared,
    /// In `ARGV`, for a call carrying the checks of one cluster node, whose keys are of many
    /// slots; a check whose key is not on that node comes back as not answered.
    Undeclared,
}

/// One `EVALSHA` running `calls`, all of one algorithm, in order: one key each, how many
/// arguments a check has, then each check's (cost, the index of its rule, negative for a peek,
/// and its time unless all use the server's; the cost and index once for all when every check
/// has the same), then each distinct rule's numbers once (see `lua/common.lua`). Built with as
/// few allocations as it takes: the client's work shares the machine with Redis's (measured: a
/// fifth of a check's time on two cores).
pub(crate) fn script_call(calls: &[&Call], keys: Keys) -> redis::Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    let algorithm = calls.first().map_or(RedisAlgorithm::Gcra, |c| c.algorithm);
    cmd.arg(algorithm.script().get_hash());
    match keys {
        Keys::Declared => cmd.arg(calls.len()),
        Keys::Undeclared => cmd.arg(0).arg(calls.len()),
    };
    for call in calls {
        debug_assert_eq!(call.algorithm, algorithm, "one algorithm per script call");
        cmd.arg(&call.key);
    }
    // The distinct rules, in order of first use; a batch has few (a linear search is cheapest).
    let mut rules: Vec<&[u64]> = Vec::new();
    let mut checks: Vec<(u64, i64)> = Vec::with_capacity(calls.len());
    for call in calls {
        let params = &call.params[..call.len];
        let index = match rules.iter().position(|r| *r == params) {
            Some(found) => found + 1,
            None => {
                rules.push(params);
                rules.len()
            }
        };
        // At most a batch's length: far below i64::MAX.
        let index = i64::try_from(index).unwrap_or(i64::MAX);
        checks.push((call.cost, if call.commit { index } else { -index }));
    }
    let timed = calls.iter().any(|c| c.now.is_some());
    let shared = match checks.split_first() {
        Some((first, rest)) if rest.iter().all(|check| check == first) => Some(*first),
        _ => None,
    };
    cmd.arg(match (shared.is_some(), timed) {
        (true, false) => 0,
        (true, true) => 1,
        (false, false) => 2,
        (false, true) => 3,
    });
    if let Some((cost, index)) = shared {
        cmd.arg(cost).arg(index);
    }
    for (call, (cost, index)) in calls.iter().zip(checks) {
        if shared.is_none() {
            cmd.arg(cost).arg(index);
        }
        if timed {
            match call.now {
                Some(micros) => cmd.arg(micros),
                None => cmd.arg(""),
            };
        }
    }
    cmd.arg(rules.first().map_or(0, |r| r.len()));
    for rule in rules {
        for param in rule {
            cmd.arg(*param);
        }
    }
    cmd
}

/// `{prefix:key}:algorithm`.
pub(crate) fn key_of(prefix: &str, key: &str, algorithm: RedisAlgorithm) -> String {
    let suffix = algorithm.suffix();
    let mut redis_key = String::with_capacity(prefix.len() + key.len() + suffix.len() + 4);
    redis_key.push('{');
    redis_key.push_str(prefix);
    redis_key.push(':');
    redis_key.push_str(key);
    redis_key.push_str("}:");
    redis_key.push_str(suffix);
    redis_key
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call's arguments after `EVALSHA` and the script's hash, as text: space-separated,
    /// `''` for an empty one.
    fn args(cmd: &redis::Cmd) -> String {
        let args: Vec<String> = cmd
            .args_iter()
            .skip(2)
            .map(|arg| match arg {
                redis::Arg::Simple([]) => "''".to_string(),
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => "<not bytes>".to_string(),
            })
            .collect();
        args.join(" ")
    }

    fn at(micros: u64) -> Option<Moment> {
        Some(Moment::from_nanos(micros * 1_000))
    }

    /// `10 per 10ms` with a burst of 10: interval 1000 µs, tolerance 9000, burst 10, idle 11 ms.
    fn gcra() -> Rule {
        Rule::gcra("10 per 10ms".parse().unwrap()).unwrap()
    }

    /// A sliding log on Redis adds a member per unit: a check of 10^12 units (the in-memory
    /// log takes it as one stamp) would have run a script adding 10^12 members, blocking the
    /// server for good. Its limit is bounded, and the message names the bound.
    #[test]
    fn a_sliding_log_above_its_largest_limit_is_refused_naming_it() {
        let at_most = Rule::sliding_log(
            format!("{}/s", Rule::MAX_SLIDING_LOG_LIMIT)
                .parse()
                .unwrap(),
        );
        assert!(at_most.is_ok());
        let err = Rule::sliding_log("1000000000000/s".parse().unwrap()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "SlidingLog on Redis cannot represent the quota `1000000000000 per 1s`: it keeps a \
             member per unit admitted, so its limit can be at most 10000 \
             (Rule::MAX_SLIDING_LOG_LIMIT); SlidingCounter and Gcra keep two numbers"
        );
        assert!(Rule::sliding_counter("1000000/s".parse().unwrap()).is_ok());
    }

    #[test]
    fn checks_of_one_cost_and_rule_send_them_once() {
        let (a, b) = (
            gcra().call("p", "a", None, 2, true),
            gcra().call("p", "b", None, 2, true),
        );
        // Keys; per 0; cost 2 and rule 1 once; the rule's four numbers.
        assert_eq!(
            args(&script_call(&[&a, &b], Keys::Declared)),
            "2 {p:a}:gcra {p:b}:gcra 0 2 1 4 1000 9000 10 11"
        );
        // With times: per 1, one each after the shared pair, '' for the server's clock.
        let timed = gcra().call("p", "a", at(7), 2, true);
        assert_eq!(
            args(&script_call(&[&timed, &b], Keys::Declared)),
            "2 {p:a}:gcra {p:b}:gcra 1 2 1 7 '' 4 1000 9000 10 11"
        );
        // Alone, a check is its own batch of one; undeclared keys follow their count.
        assert_eq!(
            args(&script_call(&[&a], Keys::Undeclared)),
            "0 1 {p:a}:gcra 0 2 1 4 1000 9000 10 11"
        );
    }

    #[test]
    fn checks_of_different_costs_rules_or_peeks_send_their_own() {
        let other = Rule::gcra("20 per 10ms".parse().unwrap()).unwrap();
        let a = gcra().call("p", "a", None, 1, true);
        let peek = gcra().call("p", "a", None, 1, false);
        let b = other.call("p", "b", None, 1, true);
        // Per 2: each check's cost and rule (negative: a peek); then both rules.
        assert_eq!(
            args(&script_call(&[&a, &peek, &b], Keys::Declared)),
            "3 {p:a}:gcra {p:a}:gcra {p:b}:gcra 2 1 1 1 -1 1 2 \
             4 1000 9000 10 11 500 9500 20 11"
        );
        // Per 3: the time too.
        let costly = gcra().call("p", "b", at(5), 3, true);
        assert_eq!(
            args(&script_call(&[&a, &costly], Keys::Declared)),
            "2 {p:a}:gcra {p:b}:gcra 3 1 1 '' 3 1 5 4 1000 9000 10 11"
        );
    }
}
