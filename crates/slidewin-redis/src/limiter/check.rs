//! A [`RedisLimiter`]'s checks: one at a time, in batches ([`Check`]), until admitted, and the
//! calls behind them, each through the limiter's circuit and, under a
//! [`FailurePolicy`](super::FailurePolicy), answered without Redis when Redis cannot answer.

use std::time::Duration;

use redis::{Cmd, Value};
use slidewin::Moment;
use slidewin::limit::{Decisions, Kind, Rule};

use super::{RedisDecision, RedisLimiter};
use crate::batch::{alone, answer_all};
use crate::connection::query;
use crate::error::RedisError;
use crate::rules::{Call, Rules, suffix, tag_of};

/// The shortest sleep of [`RedisLimiter::until_ready`] between tries: a denial's wait rounds
/// to the microsecond, and a zero wait would spin.
const MIN_RETRY: Duration = Duration::from_micros(1);

/// One check of a batch for [`RedisLimiter::check_many`]: `cost` for a key under some
/// [`Rules`], at the server's time or an explicit one.
///
/// ```
/// use slidewin::Moment;
/// use slidewin::limit::{Kind, Rule};
/// use slidewin_redis::{Check, Rules};
/// let rules = Rules::try_from(Rule::new("api", Kind::Gcra, "10/s".parse()?)?)?;
/// let at_server_time = Check::new(&rules, "alice", 1);
/// let replayed = Check::new(&rules, "bob", 2).at(Moment::from_secs(5));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Check<'a> {
    rules: &'a Rules,
    key: &'a str,
    cost: u64,
    at: Option<Moment>,
}

impl<'a> Check<'a> {
    /// `cost` for `key` under `rules`, at the server's time.
    #[must_use]
    pub fn new(rules: &'a Rules, key: &'a str, cost: u64) -> Check<'a> {
        Check {
            rules,
            key,
            cost,
            at: None,
        }
    }

    /// The same check at an explicit time, Unix time (for tests and replays).
    #[must_use]
    pub fn at(self, now: Moment) -> Check<'a> {
        Check {
            at: Some(now),
            ..self
        }
    }
}

impl RedisLimiter {
    /// Decides about `cost` for `key` under every rule of `rules` at `now`, Unix time (taken
    /// at its microsecond), and consumes it from each when all admit: a denial consumes from
    /// none.
    ///
    /// # Errors
    ///
    /// [`RedisError::Limit`] for a cost that can never be admitted; without a
    /// [`FailurePolicy`](crate::FailurePolicy), the [`RedisError`] that kept Redis from answering.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin::Moment;
    /// use slidewin::limit::{Kind, Rule};
    /// use slidewin_redis::{RedisLimiter, Rules};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let rules = Rules::try_from(Rule::new("replay", Kind::SlidingLog, "1/s".parse()?)?)?;
    /// assert!(redis.check(&rules, "k", Moment::from_secs(10), 1).await?.allowed());
    /// assert!(!redis.check(&rules, "k", Moment::from_millis(10_500), 1).await?.allowed());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check(
        &self,
        rules: &Rules,
        key: &str,
        now: Moment,
        cost: u64,
    ) -> Result<RedisDecision, RedisError> {
        let now = Some(micros(now)?);
        self.decide(
            rules,
            (cost, now),
            self.eval(rules, key, now, cost, true).await,
        )
    }

    /// [`check`](RedisLimiter::check) at the Redis server's time.
    ///
    /// # Errors
    ///
    /// As [`check`](RedisLimiter::check).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_redis::{RedisLimiter, Rules};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let login = Rules::new(RuleSet::new([
    ///     Rule::new("minute", Kind::SlidingLog, "5/minute".parse()?)?,
    ///     Rule::new("hour", Kind::SlidingLog, "20/hour".parse()?)?,
    /// ])?)?;
    /// let decision = redis.check_now(&login, "alice", 1).await?;
    /// if !decision.allowed() {
    ///     println!("try again in {:?}", decision.retry_after());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check_now(
        &self,
        rules: &Rules,
        key: &str,
        cost: u64,
    ) -> Result<RedisDecision, RedisError> {
        self.decide(
            rules,
            (cost, None),
            self.eval(rules, key, None, cost, true).await,
        )
    }

    /// Decides as [`check`](RedisLimiter::check) would at `now`, Unix time, without consuming
    /// anything.
    ///
    /// # Errors
    ///
    /// As [`check`](RedisLimiter::check).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin::Moment;
    /// use slidewin::limit::{Kind, Rule};
    /// use slidewin_redis::{RedisLimiter, Rules};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let rules = Rules::try_from(Rule::new("g", Kind::Gcra, "1/s".parse()?)?)?;
    /// assert!(redis.peek(&rules, "k", Moment::from_secs(3), 1).await?.allowed());
    /// assert!(redis.check(&rules, "k", Moment::from_secs(3), 1).await?.allowed());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn peek(
        &self,
        rules: &Rules,
        key: &str,
        now: Moment,
        cost: u64,
    ) -> Result<RedisDecision, RedisError> {
        let now = Some(micros(now)?);
        self.decide(
            rules,
            (cost, now),
            self.eval(rules, key, now, cost, false).await,
        )
    }

    /// [`peek`](RedisLimiter::peek) at the Redis server's time.
    ///
    /// # Errors
    ///
    /// As [`check`](RedisLimiter::check).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin::limit::{Kind, Rule};
    /// use slidewin_redis::{RedisLimiter, Rules};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let logins = Rules::try_from(Rule::new("login", Kind::SlidingLog, "3/10s".parse()?)?)?;
    /// if !redis.peek_now(&logins, "alice", 1).await?.allowed() {
    ///     println!("locked: no need to check the password");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn peek_now(
        &self,
        rules: &Rules,
        key: &str,
        cost: u64,
    ) -> Result<RedisDecision, RedisError> {
        self.decide(
            rules,
            (cost, None),
            self.eval(rules, key, None, cost, false).await,
        )
    }

    /// Waits until `cost` for `key` is admitted under `rules` at the server's time, and consumes
    /// it: governor's `until_ready`, across processes. Each denial sleeps its `retry_after` (on
    /// tokio's clock) and asks again; another process may take the room first, and then it waits
    /// again. A decision made without Redis by
    /// [`FailurePolicy::Closed`](crate::FailurePolicy::Closed) waits too (a span at a time); bound
    /// the wait with `tokio::time::timeout` if Redis may stay away.
    ///
    /// # Errors
    ///
    /// [`RedisError::Limit`] at once for a cost that can never be admitted; without a
    /// [`FailurePolicy`](crate::FailurePolicy), the first [`RedisError`] that kept Redis from
    /// answering.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin::limit::{Kind, Rule};
    /// use slidewin_redis::{RedisLimiter, Rules};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let upstream = Rules::try_from(Rule::new("upstream", Kind::Gcra, "50/s".parse()?)?)?;
    /// for page in 0..100 {
    ///     redis.until_ready(&upstream, "partner-api", 1).await?;
    ///     // fetch `page`: never more than 50 a second across every worker
    /// #   let _ = page;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn until_ready(
        &self,
        rules: &Rules,
        key: &str,
        cost: u64,
    ) -> Result<RedisDecision, RedisError> {
        loop {
            let decision = self.check_now(rules, key, cost).await?;
            match decision.retry_after() {
                None => return Ok(decision),
                Some(wait) => tokio::time::sleep(wait.max(MIN_RETRY)).await,
            }
        }
    }

    /// Many checks in one round trip: pipelined, and on a cluster grouped by node, each group
    /// sent to its node at once, so the batch costs one round trip, not one per node (envoy
    /// ratelimit #1149), as in [`with_batch_limit`](RedisLimiter::with_batch_limit). A key's
    /// checks run in their order; the answers come in the order of the checks.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin::limit::{Kind, Rule};
    /// use slidewin_redis::{Check, RedisLimiter, Rules};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let per_user = Rules::try_from(Rule::new("user", Kind::SlidingCounter, "100/minute".parse()?)?)?;
    /// let global = Rules::try_from(Rule::new("global", Kind::Gcra, "10000/minute".parse()?)?)?;
    /// let answers = redis
    ///     .check_many(&[Check::new(&per_user, "alice", 1), Check::new(&global, "all", 1)])
    ///     .await;
    /// let admitted = answers.iter().all(|a| a.as_ref().is_ok_and(|d| d.allowed()));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check_many(&self, checks: &[Check<'_>]) -> Vec<Result<RedisDecision, RedisError>> {
        let mut answers: Vec<Option<Result<Decisions, RedisError>>> = vec![None; checks.len()];
        let mut sent = Vec::with_capacity(checks.len());
        let mut calls = Vec::with_capacity(checks.len());
        for (index, check) in checks.iter().enumerate() {
            let call = check
                .rules
                .check_cost(check.cost)
                .map_err(RedisError::from)
                .and_then(|()| {
                    let now = check.at.map(micros).transpose()?;
                    Ok(Call::new(
                        check.rules,
                        &self.prefix,
                        check.key,
                        now,
                        check.cost,
                        true,
                    ))
                })
                .and_then(|call| self.gate(call.tag()).map(|()| call));
            match call {
                Ok(call) => {
                    sent.push(index);
                    calls.push(call);
                }
                Err(err) => answers[index] = Some(Err(err)),
            }
        }
        // Calendar checks at the server's time, their windows dated by this client's clock:
        // once more in the windows of the server's time if the script finds them wrong.
        let again: Vec<Option<Call>> = if calls.iter().any(Call::dated_by_a_clock) {
            let again = |c: &Call| c.dated_by_a_clock().then(|| c.clone());
            calls.iter().map(again).collect()
        } else {
            Vec::new()
        };
        let mut decisions =
            answer_all(&self.connection, calls, self.batch_limit, self.timeout).await;
        let mut redated = Vec::new();
        for (at, (decision, call)) in decisions.iter().zip(again).enumerate() {
            if let (Err(RedisError::ClockSkew { redis, .. }), Some(mut call)) = (decision, call) {
                call.redate(checks[sent[at]].rules, redis.as_nanos() / 1_000);
                redated.push((at, call));
            }
        }
        if !redated.is_empty() {
            let (at, calls): (Vec<usize>, Vec<Call>) = redated.into_iter().unzip();
            let answers = answer_all(&self.connection, calls, self.batch_limit, self.timeout);
            for (at, answer) in at.into_iter().zip(answers.await) {
                decisions[at] = answer;
            }
        }
        for (index, decision) in sent.into_iter().zip(decisions) {
            if let Err(err) = &decision {
                let check = &checks[index];
                self.failed(err, || check.rules.key(&tag_of(&self.prefix, check.key), 0));
            }
            answers[index] = Some(decision);
        }
        answers
            .into_iter()
            .zip(checks)
            .map(|(answer, check)| {
                let answer = answer.unwrap_or_else(|| {
                    Err(RedisError::Reply {
                        at: self
                            .connection
                            .place(&tag_of(&self.prefix, check.key))
                            .to_string(),
                        detail: "no answer for the check".to_string(),
                    })
                });
                let now = check.at.and_then(|at| micros(at).ok());
                self.decide(check.rules, (check.cost, now), answer)
            })
            .collect()
    }

    /// Gives `key` its full quota back under every rule of `rules`.
    ///
    /// # Errors
    ///
    /// The [`RedisError`] that kept Redis from answering.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin::limit::{Kind, Rule};
    /// use slidewin_redis::{RedisLimiter, Rules};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let rules = Rules::try_from(Rule::new("daily", Kind::FixedWindow, "1/day".parse()?)?)?;
    /// redis.check_now(&rules, "alice", 1).await?;
    /// redis.reset(&rules, "alice").await?;
    /// assert!(redis.check_now(&rules, "alice", 1).await?.allowed());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reset(&self, rules: &Rules, key: &str) -> Result<(), RedisError> {
        let tag = tag_of(&self.prefix, key);
        let mut command = redis::cmd("DEL");
        for key in rules.keys(&tag) {
            command.arg(key);
        }
        self.query(&command, &tag).await.map(drop)
    }

    /// The admitted units of `key` under the sliding-log rule `rule` with times in `[from,
    /// to]` (Unix time), oldest first: to see what a limit is holding (one `GET` of its packed
    /// times). Units that have left the window may still be listed: an admission drops them
    /// once they are as many as the units inside it (and 32 or more).
    ///
    /// # Errors
    ///
    /// [`RedisError::Config`] for a rule of another kind; the [`RedisError`] that kept Redis
    /// from answering.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin::Moment;
    /// use slidewin::limit::{Kind, Rule};
    /// use slidewin_redis::{RedisLimiter, Rules};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let rule = Rule::new("api", Kind::SlidingLog, "10/s".parse()?)?;
    /// let rules = Rules::try_from(rule.clone())?;
    /// redis.check(&rules, "alice", Moment::from_secs(3), 2).await?;
    /// let held = redis.inspect(&rule, "alice", Moment::ZERO, Moment::from_secs(10)).await?;
    /// assert_eq!(held, [Moment::from_secs(3), Moment::from_secs(3)]);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn inspect(
        &self,
        rule: &Rule,
        key: &str,
        from: Moment,
        to: Moment,
    ) -> Result<Vec<Moment>, RedisError> {
        if rule.kind() != Kind::SlidingLog {
            return Err(RedisError::Config {
                detail: format!(
                    "inspect reads a sliding log, and the rule `{}` is {}",
                    rule.name(),
                    rule.kind()
                ),
            });
        }
        let mut key = tag_of(&self.prefix, key);
        key.push_str(&suffix(rule));
        let reply = self.query(redis::cmd("GET").arg(&key), &key).await?;
        let packed: Option<Vec<u8>> =
            redis::from_redis_value(reply).map_err(|e| RedisError::Reply {
                at: self.connection.place(&key).to_string(),
                detail: e.to_string(),
            })?;
        let (from, to) = (from.as_nanos() / 1_000, to.as_nanos() / 1_000);
        Ok(unpack_stamps(&packed.unwrap_or_default())
            .filter(|micros| (from..=to).contains(micros))
            .map(|micros| Moment::from_nanos(micros.saturating_mul(1_000)))
            .collect())
    }

    async fn eval(
        &self,
        rules: &Rules,
        key: &str,
        now: Option<u64>,
        cost: u64,
        commit: bool,
    ) -> Result<Decisions, RedisError> {
        rules.check_cost(cost)?;
        let call = Call::new(rules, &self.prefix, key, now, cost, commit);
        self.send(rules, key, call).await
    }

    /// Sends `call` of `key` under `rules`, through the batcher if there is one.
    pub(super) async fn send(
        &self,
        rules: &Rules,
        key: &str,
        call: Call,
    ) -> Result<Decisions, RedisError> {
        self.gate(call.tag())?;
        // A calendar check at the server's time, its windows dated by this client's clock: once
        // more in the windows of the server's time if the script finds them wrong.
        let again = call.dated_by_a_clock().then(|| call.clone());
        let mut answer = self.send_once(call).await;
        if let (Err(RedisError::ClockSkew { redis, .. }), Some(mut call)) = (&answer, again) {
            call.redate(rules, redis.as_nanos() / 1_000);
            answer = self.send_once(call).await;
        }
        if let Err(err) = &answer {
            self.failed(err, || rules.key(&tag_of(&self.prefix, key), 0));
        }
        answer
    }

    async fn send_once(&self, call: Call) -> Result<Decisions, RedisError> {
        match &self.batcher {
            Some(batcher) => batcher.check(call, self.timeout).await,
            None => alone(self.connection.clone(), &call, self.timeout).await,
        }
    }

    /// Sends one command of `key` that runs no script.
    pub(super) async fn query(&self, command: &Cmd, key: &str) -> Result<Value, RedisError> {
        self.send_one(command, false, key).await
    }

    /// Sends one command of `key` that runs a script (`EVALSHA`): after a `NOSCRIPT` (a node
    /// restarted, or new), the scripts are loaded and it goes once more.
    pub(super) async fn query_script(&self, command: &Cmd, key: &str) -> Result<Value, RedisError> {
        self.send_one(command, true, key).await
    }

    async fn send_one(&self, command: &Cmd, script: bool, key: &str) -> Result<Value, RedisError> {
        self.gate(key)?;
        let answer = query(self.connection.clone(), command, script, self.timeout, key).await;
        if let Err(err) = &answer {
            self.failed(err, || key.to_string());
        }
        answer
    }

    /// Whether a call of `key` (a Redis key) goes to Redis: not while its circuit is open.
    #[inline]
    fn gate(&self, key: &str) -> Result<(), RedisError> {
        self.circuits.gate(|| self.connection.place(key))
    }

    /// Notes a call's failure, which may open the circuit of its place; `key` names a Redis
    /// key there, for the probe.
    pub(super) fn failed(&self, err: &RedisError, key: impl FnOnce() -> String) {
        if err.is_transient() {
            self.circuits.failed(err, key, self.timeout);
        }
    }

    /// Redis's answer, or where it failed the failure policy's (for a check at `now`,
    /// microseconds of Unix time; `None` at the server's), or the error.
    pub(super) fn decide(
        &self,
        rules: &Rules,
        (cost, now): (u64, Option<u64>),
        answer: Result<Decisions, RedisError>,
    ) -> Result<RedisDecision, RedisError> {
        match (answer, self.policy) {
            (Ok(decisions), _) => Ok(RedisDecision {
                decisions,
                without_redis: None,
            }),
            (Err(err), Some(policy))
                if !matches!(
                    err,
                    RedisError::Limit(_)
                        | RedisError::TimeOutOfRange { .. }
                        | RedisError::ClockSkew { .. }
                ) =>
            {
                Ok(RedisDecision {
                    decisions: policy.decide(rules, cost, now),
                    without_redis: Some(err),
                })
            }
            (Err(err), _) => Err(err),
        }
    }
}

/// `now` in microseconds, for the script; an error past [`RedisLimiter::MAX_TIME`].
pub(super) fn micros(now: Moment) -> Result<u64, RedisError> {
    if now > RedisLimiter::MAX_TIME {
        return Err(RedisError::TimeOutOfRange { now });
    }
    Ok(now.as_nanos() / 1_000)
}

/// A sliding log's times as `check.lua` packs them: 7 bytes each, big-endian microseconds,
/// after a slot of the same width holding its expiry deadline plus 2^55 (no time reaches it).
fn unpack_stamps(packed: &[u8]) -> impl Iterator<Item = u64> + '_ {
    packed
        .chunks_exact(7)
        .map(|stamp| {
            let mut wide = [0; 8];
            wide[1..].copy_from_slice(stamp);
            u64::from_be_bytes(wide)
        })
        .filter(|micros| *micros < 1 << 55)
}
