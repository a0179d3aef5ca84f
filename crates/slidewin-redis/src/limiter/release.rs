//! [`RedisLimiter::release`]: units of [`Kind::Leases`](slidewin::limit::Kind::Leases) rules
//! given back when the requests holding them end, and of sliding logs that refund
//! ([`Rule::with_refunds`](slidewin::limit::Rule::with_refunds)) when a request cost less.

use slidewin::Moment;

use super::RedisLimiter;
use super::check::micros;
use crate::error::RedisError;
use crate::rules::{Call, Rules};

impl RedisLimiter {
    /// Gives back up to `units` that `key` holds under the
    /// [`Leases`](slidewin::limit::Leases) rules of `rules` at `now` (Unix time): the oldest
    /// units held, whose leases end first, as in memory; a sliding log built
    /// [`with_refunds`](slidewin::limit::Rule::with_refunds) gives back its oldest units in
    /// the window the same way. The most any rule gave back; other rates give back nothing.
    /// One script call, batched with checks like them; the log is written again with the
    /// units still held alone.
    ///
    /// # Errors
    ///
    /// [`RedisError::TimeOutOfRange`] past [`MAX_TIME`](RedisLimiter::MAX_TIME); the
    /// [`RedisError`] that kept Redis from answering (a release has no failure policy: what
    /// was not given back leaves with its lease).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin::Moment;
    /// use slidewin::limit::{Kind, Rule};
    /// use slidewin_redis::{RedisLimiter, Rules};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let in_flight = Rules::try_from(Rule::new("in_flight", Kind::Leases, "2 per 30s".parse()?)?)?;
    /// let at = Moment::from_secs(1_000);
    /// assert!(redis.check(&in_flight, "alice", at, 2).await?.allowed());
    /// assert!(!redis.check(&in_flight, "alice", at, 1).await?.allowed());
    /// assert_eq!(redis.release(&in_flight, "alice", at, 1).await?, 1);
    /// assert!(redis.check(&in_flight, "alice", at, 1).await?.allowed());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn release(
        &self,
        rules: &Rules,
        key: &str,
        now: Moment,
        units: u64,
    ) -> Result<u64, RedisError> {
        self.give_back(rules, key, Some(micros(now)?), units).await
    }

    /// [`release`](RedisLimiter::release) at the Redis server's time.
    ///
    /// # Errors
    ///
    /// As [`release`](RedisLimiter::release).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin::limit::{Kind, Rule};
    /// use slidewin_redis::{RedisLimiter, Rules};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let in_flight = Rules::try_from(Rule::new("in_flight", Kind::Leases, "2 per 30s".parse()?)?)?;
    /// redis.check_now(&in_flight, "alice", 1).await?;
    /// assert_eq!(redis.release_now(&in_flight, "alice", 1).await?, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn release_now(
        &self,
        rules: &Rules,
        key: &str,
        units: u64,
    ) -> Result<u64, RedisError> {
        self.give_back(rules, key, None, units).await
    }

    async fn give_back(
        &self,
        rules: &Rules,
        key: &str,
        now: Option<u64>,
        units: u64,
    ) -> Result<u64, RedisError> {
        if units == 0 {
            return Ok(0);
        }
        let call = Call::new(rules, &self.prefix, key, now, units, true).releasing();
        // The script answers each rule's units given back where a check's remaining goes.
        let answer = self.send(rules, key, call).await?;
        Ok(answer.iter().map(|d| d.remaining()).max().unwrap_or(0))
    }
}
