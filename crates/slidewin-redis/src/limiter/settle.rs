//! [`RedisLimiter::reserve`] and [`RedisLimiter::settle`]: a cost estimated before the work,
//! settled once it is known, in the windows it was admitted in.

use redis::Value;
use slidewin::Moment;
use slidewin::limit::{Kind, Reservation};

use super::check::micros;
use super::{RedisDecision, RedisLimiter};
use crate::error::RedisError;
use crate::rules::{Rules, SETTLE, counted_at, tag_of, window_of};

/// What Lua counts exactly: the script's numbers stay below it.
const EXACT: u64 = (1 << 53) - 1;

impl RedisLimiter {
    /// [`check`](RedisLimiter::check)s an `estimate` at `now` (Unix time) and, when every rule
    /// admits it, answers the [`Reservation`] that [`settle`](RedisLimiter::settle) changes to
    /// the actual cost: the time the rules counted it at (the latest of theirs, in whole
    /// microseconds) and the estimate. The same value settles in memory
    /// ([`Limiter::settle`](slidewin::Limiter::settle)) and here. None for a denial, an
    /// estimate of 0, or an answer the failure policy made while Redis was away (nothing was
    /// recorded to settle).
    ///
    /// # Errors
    ///
    /// As [`check`](RedisLimiter::check).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin::Moment;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_redis::{RedisLimiter, Rules};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let tokens = Rules::new(RuleSet::new([
    ///     Rule::new("minute", Kind::SlidingLog, "10000/minute".parse()?)?,
    ///     Rule::new("day", Kind::SlidingLog, "100000/day".parse()?)?,
    /// ])?)?;
    /// let at = Moment::from_secs(1_000);
    /// let (decision, reserved) = redis.reserve(&tokens, "key-1", at, 1_000).await?;
    /// assert!(decision.allowed());
    /// assert!(redis.settle(&tokens, "key-1", reserved.unwrap(), 2_500).await?);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reserve(
        &self,
        rules: &Rules,
        key: &str,
        now: Moment,
        estimate: u64,
    ) -> Result<(RedisDecision, Option<Reservation>), RedisError> {
        let at = micros(now)?;
        let decision = self.check(rules, key, now, estimate).await?;
        let reserved = reservation(rules, &decision, at, estimate);
        Ok((decision, reserved))
    }

    /// [`reserve`](RedisLimiter::reserve) at the Redis server's time: read first (`TIME`, one
    /// more round trip), since the reservation must name the time the rules counted it at.
    /// While Redis is away, the failure policy answers, and nothing is reserved.
    ///
    /// # Errors
    ///
    /// As [`check`](RedisLimiter::check).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin::limit::{Kind, Rule};
    /// use slidewin_redis::{RedisLimiter, Rules};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let bytes = Rules::try_from(Rule::new("bytes", Kind::Gcra, "1000000/minute".parse()?)?)?;
    /// let (_, reserved) = redis.reserve_now(&bytes, "alice", 64_000).await?;
    /// redis.settle(&bytes, "alice", reserved.unwrap(), 12_000).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reserve_now(
        &self,
        rules: &Rules,
        key: &str,
        estimate: u64,
    ) -> Result<(RedisDecision, Option<Reservation>), RedisError> {
        rules.check_cost(estimate)?;
        let first = rules.key(&tag_of(&self.prefix, key), 0);
        match self.server_time(&first).await {
            Ok(now) => self.reserve(rules, key, now, estimate).await,
            Err(err) => Ok((self.decide(rules, (estimate, None), Err(err))?, None)),
        }
    }

    /// Changes the cost of the admission `reservation` made for `key` under `rules` to
    /// `actual`, as [`Limiter::settle`](slidewin::Limiter::settle) does in memory, with the
    /// same answers: in one script call over the key's rules (one hash tag, so one slot, on a
    /// cluster too), atomic. Whether any rule still held it. An
    /// [`unreserved`](Reservation::unreserved) reservation is a charge: `actual` counted at
    /// its time whatever the limit, the key made if need be.
    ///
    /// # Errors
    ///
    /// [`RedisError::TimeOutOfRange`] for a reservation past
    /// [`MAX_TIME`](RedisLimiter::MAX_TIME); the [`RedisError`] that kept Redis from
    /// answering. A settle has no failure policy: the reservation then keeps its estimate, as
    /// one never settled does.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin::Moment;
    /// use slidewin::limit::{Kind, Rule};
    /// use slidewin_redis::{RedisLimiter, Rules};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let rules = Rules::try_from(Rule::new("tokens", Kind::FixedWindow, "1000/minute".parse()?)?)?;
    /// let at = Moment::from_secs(60_000);
    /// let (_, reserved) = redis.reserve(&rules, "alice", at, 600).await?;
    /// assert!(redis.settle(&rules, "alice", reserved.unwrap(), 100).await?);
    /// assert_eq!(redis.peek(&rules, "alice", at, 0).await?.decision().remaining(), 900);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn settle(
        &self,
        rules: &Rules,
        key: &str,
        reservation: Reservation,
        actual: u64,
    ) -> Result<bool, RedisError> {
        let at = micros(reservation.at())?;
        self.settle_at(rules, key, Some(at), reservation.units(), actual)
            .await
    }

    /// Charges `units` of `key` under `rules` at the Redis server's time (read in the script,
    /// no round trip more; read first where a calendar rule needs its window dated): [`settle`](RedisLimiter::settle) of an
    /// [`unreserved`](Reservation::unreserved) reservation at Redis's `TIME`, for a cost
    /// reported after the work where checks count at Redis's time. Whether anything was
    /// charged.
    ///
    /// # Errors
    ///
    /// The [`RedisError`] that kept Redis from answering: a charge has no failure policy.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin::limit::{Kind, Rule};
    /// use slidewin_redis::{RedisLimiter, Rules};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let tokens = Rules::try_from(Rule::new("tokens", Kind::SlidingLog, "10000/minute".parse()?)?)?;
    /// // The model answered with 1,250 tokens.
    /// assert!(redis.charge_now(&tokens, "key-1", 1_250).await?);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn charge_now(
        &self,
        rules: &Rules,
        key: &str,
        units: u64,
    ) -> Result<bool, RedisError> {
        if !rules.dates_windows() {
            return self.settle_at(rules, key, None, 0, units).await;
        }
        // A calendar window is dated by the client: Redis's time is read first, one round
        // trip more.
        let first = rules.key(&tag_of(&self.prefix, key), 0);
        let now = micros(self.server_time(&first).await?)?;
        self.settle_at(rules, key, Some(now), 0, units).await
    }

    /// The settle script's call: a reservation of `units` at `at` (µs; `None`: Redis's time)
    /// settled to `actual`.
    async fn settle_at(
        &self,
        rules: &Rules,
        key: &str,
        at: Option<u64>,
        units: u64,
        actual: u64,
    ) -> Result<bool, RedisError> {
        let more = actual.saturating_sub(units).min(EXACT);
        let less = units.saturating_sub(actual).min(EXACT);
        let tag = tag_of(&self.prefix, key);
        let count = rules.rule_set().rules().len();
        let mut command = redis::cmd("EVALSHA");
        command.arg(SETTLE.get_hash()).arg(count);
        for index in 0..count {
            command.arg(rules.key(&tag, index));
        }
        let charge = units == 0;
        match at {
            Some(at) => command.arg(at),
            None => command.arg(""),
        };
        command.arg(more).arg(less).arg(u8::from(charge));
        for (index, rule) in rules.rule_set().rules().iter().enumerate() {
            let limit = rule.quota().limit();
            let params = match (rule.calendar_quota(), at) {
                // The window the reservation's time is in: the one it counted in (a charge
                // at Redis's time was dated first: `charge_now`).
                (Some(quota), Some(at)) => {
                    let (start, end) = window_of(quota, at);
                    [rules.params(index)[0], start, end, quota.limit()]
                }
                _ => settle_params(rules.params(index), limit, at, actual),
            };
            command.arg(&params[..]);
        }
        let first = rules.key(&tag, 0);
        match self.query_script(&command, &first).await? {
            Value::Int(held) => Ok(held == 1),
            other => Err(RedisError::Reply {
                at: self.connection.place(&first).to_string(),
                detail: format!("the settle script answered {other:?}, not 0 or 1"),
            }),
        }
    }

    /// The Redis server's time, from the node of `key`.
    async fn server_time(&self, key: &str) -> Result<Moment, RedisError> {
        let reply = self.query(&redis::cmd("TIME"), key).await?;
        let bad = |detail: String| RedisError::Reply {
            at: self.connection.place(key).to_string(),
            detail,
        };
        let (secs, micros): (u64, u64) =
            redis::from_redis_value(reply).map_err(|e| bad(e.to_string()))?;
        let nanos = secs
            .checked_mul(1_000_000)
            .and_then(|m| m.checked_add(micros))
            .and_then(|m| m.checked_mul(1_000))
            .ok_or_else(|| bad(format!("TIME answered {secs} s and {micros} µs")))?;
        Ok(Moment::from_nanos(nanos))
    }
}

/// A rule's four numbers for the settle script (see `lua/settle.lua`), from the check
/// script's: the logs and the windows keep their span, limit and idle ttl; GCRA (whose
/// quota's limit is `limit`) its interval, the earliest TAT a settle down leaves (none for a
/// charge at Redis's time, `at` unknown: a charge only adds), and how far past the time
/// settled at a settle up may take it (a span and a full bucket), as in memory.
fn settle_params(params: [u64; 5], limit: u64, at: Option<u64>, actual: u64) -> [u64; 4] {
    let [number, first, second, third, _] = params;
    if number != 4 {
        return [number, first, second, third];
    }
    let interval = u128::from(first);
    let exact = |t: u128| u64::try_from(t).map_or(EXACT, |t| t.min(EXACT));
    let earliest = at.map_or(0, |at| {
        exact(u128::from(at) + u128::from(actual) * interval)
    });
    let ahead = exact((u128::from(limit) + u128::from(third)) * interval);
    [number, first, earliest, ahead]
}

/// The reservation an admission of `estimate` at `now` (µs) made: the latest of the times its
/// rules counted it at, each read back from its answer (a log counts at its newest time, whose
/// window ends `reset_after` from now; a window at its start if later than now).
fn reservation(
    rules: &Rules,
    decision: &RedisDecision,
    now: u64,
    estimate: u64,
) -> Option<Reservation> {
    if estimate == 0 || decision.degraded().is_some() || !decision.allowed() {
        return None;
    }
    let each = rules
        .rule_set()
        .rules()
        .iter()
        .zip(decision.decisions().iter());
    let counted = each.enumerate().map(|(index, (rule, decision))| {
        let span = rules.params(index)[1];
        let reset = u64::try_from(decision.reset_after().as_micros()).unwrap_or(u64::MAX);
        let ends = now.saturating_add(reset);
        // Not before `now`: the fold below starts there.
        match (rule.kind(), rule.calendar_quota()) {
            (Kind::SlidingLog | Kind::Leases | Kind::FixedWindow, _) => ends.saturating_sub(span),
            (Kind::SlidingCounter, _) => ends.saturating_sub(span.saturating_mul(2)),
            // At the request's time, or the start of the later window a clock gone back
            // counted in (its end is further than the request's window's).
            (Kind::Calendar, Some(quota)) => counted_at(quota, now, ends),
            (Kind::Gcra | Kind::Calendar, _) => now,
        }
    });
    let at = counted.fold(now, u64::max);
    Some(Reservation::new(
        Moment::from_nanos(at.saturating_mul(1_000)),
        estimate,
    ))
}
