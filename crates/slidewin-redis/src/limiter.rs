//! [`RedisLimiter`]: checks on Redis or Redis Cluster, one atomic script each.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::Slot;
use redis::{Cmd, ErrorKind, Pipeline, RedisFuture, Script, ServerErrorKind, Value};
use slidewin::{Decision, Moment};
use tokio::task::JoinSet;

use crate::error::RedisError;
use crate::rule::{RedisAlgorithm, Rule, key_of};

/// How long a call waits for Redis by default.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

/// What a check answers when Redis cannot: for callers who want a decision anyway. The
/// [`RedisDecision`] then says it was made without Redis, and why.
///
/// ```
/// use slidewin_redis::FailurePolicy;
/// assert_ne!(FailurePolicy::Open, FailurePolicy::Closed);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailurePolicy {
    /// Admit: the service stays up, unlimited while Redis is away.
    Open,
    /// Deny, with `retry_after` one span: nothing passes unchecked.
    Closed,
}

impl FailurePolicy {
    fn decide(self, rule: &Rule, cost: u64) -> Decision {
        let quota = rule.quota();
        let most = match rule.algorithm() {
            RedisAlgorithm::Gcra => quota.burst(),
            _ => quota.limit(),
        };
        match self {
            FailurePolicy::Open => Decision::allow(most, most - cost, Duration::ZERO),
            FailurePolicy::Closed => Decision::deny(most, 0, quota.span(), quota.span()),
        }
    }
}

/// A [`Decision`] from Redis, or from a [`FailurePolicy`] when Redis could not answer.
/// Dereferences to the decision.
///
/// ```
/// use slidewin::Decision;
/// use std::time::Duration;
/// # fn show(d: slidewin_redis::RedisDecision) {
/// if let Some(why) = d.made_without_redis() {
///     eprintln!("decided without Redis: {why}");
/// }
/// let admitted: bool = d.allowed();
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisDecision {
    decision: Decision,
    without_redis: Option<RedisError>,
}

impl RedisDecision {
    /// The decision.
    #[must_use]
    pub fn decision(&self) -> Decision {
        self.decision
    }

    /// Why Redis could not answer, when the decision came from the [`FailurePolicy`].
    #[must_use]
    pub fn made_without_redis(&self) -> Option<&RedisError> {
        self.without_redis.as_ref()
    }
}

impl Deref for RedisDecision {
    type Target = Decision;

    fn deref(&self) -> &Decision {
        &self.decision
    }
}

/// One check of a batch for [`RedisLimiter::check_many`].
///
/// ```
/// use slidewin::Moment;
/// use slidewin_redis::{Check, Rule};
/// let rule = Rule::gcra("10/s".parse()?)?;
/// let at_server_time = Check::new(&rule, "alice", 1);
/// let replayed = Check::new(&rule, "bob", 2).at(Moment::from_secs(5));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Check<'a> {
    rule: &'a Rule,
    key: &'a str,
    cost: u64,
    at: Option<Moment>,
}

impl<'a> Check<'a> {
    /// `cost` for `key` under `rule`, at the server's time.
    #[must_use]
    pub fn new(rule: &'a Rule, key: &'a str, cost: u64) -> Check<'a> {
        Check {
            rule,
            key,
            cost,
            at: None,
        }
    }

    /// The same check at an explicit time (for tests and replays).
    #[must_use]
    pub fn at(self, now: Moment) -> Check<'a> {
        Check {
            at: Some(now),
            ..self
        }
    }
}

/// One connection, to a single Redis or to a cluster; both multiplex requests and reconnect by
/// themselves.
#[derive(Clone)]
enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(c) => c.req_packed_command(cmd),
            Connection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(c) => c.get_db(),
            Connection::Cluster(c) => c.get_db(),
        }
    }
}

/// slidewin's rate limiters on Redis: every process that shares the Redis shares the limits.
///
/// Each check is one atomic Lua script (`EVALSHA`, loaded again after a `NOSCRIPT`), so
/// concurrent clients can never over-admit; it reads the time from the Redis server (`TIME`)
/// by default, so clients with skewed clocks cannot disagree, or takes an explicit time for
/// tests and replays. The answers are the in-memory algorithms' (see [`Rule`] for the
/// microsecond), so a service can move its limits to Redis without changing them.
///
/// Keys are `{prefix:key}:algorithm`: the braces are a hash tag, so all of a key's Redis keys
/// share one cluster slot. Idle keys expire by themselves.
///
/// Cheap to clone: clones share the connection.
///
/// # Example
///
/// ```no_run
/// use slidewin_redis::{RedisLimiter, Rule};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = RedisLimiter::connect("redis://127.0.0.1:6379/").await?;
/// let logins = Rule::sliding_log("3 per 10 seconds".parse()?)?;
/// let decision = redis.check(&logins, "alice", 1).await?;
/// if !decision.allowed() {
///     println!("try again in {:?}", decision.retry_after());
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisLimiter {
    connection: Connection,
    prefix: Arc<str>,
    timeout: Duration,
    policy: Option<FailurePolicy>,
}

impl std::fmt::Debug for RedisLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.connection {
            Connection::Single(_) => "single",
            Connection::Cluster(_) => "cluster",
        };
        f.debug_struct("RedisLimiter")
            .field("connection", &kind)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("policy", &self.policy)
            .finish()
    }
}

impl RedisLimiter {
    /// Connects to one Redis server, such as `redis://127.0.0.1:6379/`.
    ///
    /// # Errors
    ///
    /// [`RedisError::Config`] for a URL that is not one; [`RedisError::Unavailable`] or
    /// [`RedisError::Timeout`] if Redis cannot be reached now (later calls recover by
    /// themselves once it can).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), slidewin_redis::RedisError> {
    /// let redis = slidewin_redis::RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect(url: &str) -> Result<RedisLimiter, RedisError> {
        let client = redis::Client::open(url).map_err(|e| RedisError::Config {
            detail: format!("`{url}`: {e}"),
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(DEFAULT_TIMEOUT))
            .set_response_timeout(Some(DEFAULT_TIMEOUT))
            .set_max_delay(Duration::from_millis(500));
        let manager = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(|e| RedisError::from_redis(&e))?;
        Ok(RedisLimiter::with(Connection::Single(manager)))
    }

    /// Connects to a Redis Cluster through any of its nodes, such as
    /// `["redis://127.0.0.1:7000/"]`.
    ///
    /// # Errors
    ///
    /// As [`connect`](RedisLimiter::connect); [`RedisError::Config`] for no nodes.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), slidewin_redis::RedisError> {
    /// let nodes = ["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"];
    /// let redis = slidewin_redis::RedisLimiter::connect_cluster(&nodes).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect_cluster(nodes: &[&str]) -> Result<RedisLimiter, RedisError> {
        if nodes.is_empty() {
            return Err(RedisError::Config {
                detail: "a cluster needs at least one node, got none".to_string(),
            });
        }
        let client = ClusterClient::builder(nodes.iter().copied())
            .connection_timeout(DEFAULT_TIMEOUT)
            .response_timeout(DEFAULT_TIMEOUT)
            .retries(2)
            .build()
            .map_err(|e| RedisError::Config {
                detail: format!("{nodes:?}: {e}"),
            })?;
        let connection = client
            .get_async_connection()
            .await
            .map_err(|e| RedisError::from_redis(&e))?;
        Ok(RedisLimiter::with(Connection::Cluster(connection)))
    }

    fn with(connection: Connection) -> RedisLimiter {
        RedisLimiter {
            connection,
            prefix: Arc::from("slidewin"),
            timeout: DEFAULT_TIMEOUT,
            policy: None,
        }
    }

    /// The same limiter with its keys under `prefix` (`slidewin` by default): limiters with
    /// different prefixes share nothing.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), slidewin_redis::RedisError> {
    /// let redis = slidewin_redis::RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let api = redis.clone().with_prefix("api");
    /// let login = redis.with_prefix("login");
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn with_prefix(self, prefix: &str) -> RedisLimiter {
        RedisLimiter {
            prefix: Arc::from(prefix),
            ..self
        }
    }

    /// The same limiter waiting at most `timeout` for each call (1 s by default).
    ///
    /// # Errors
    ///
    /// [`RedisError::Config`] for a zero timeout.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), slidewin_redis::RedisError> {
    /// use std::time::Duration;
    /// let redis = slidewin_redis::RedisLimiter::connect("redis://127.0.0.1/").await?
    ///     .with_timeout(Duration::from_millis(50))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_timeout(self, timeout: Duration) -> Result<RedisLimiter, RedisError> {
        if timeout.is_zero() {
            return Err(RedisError::Config {
                detail: "the timeout must be longer than zero, got 0ns".to_string(),
            });
        }
        Ok(RedisLimiter { timeout, ..self })
    }

    /// The same limiter answering by `policy` when Redis cannot; without a policy, such
    /// checks return the error.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), slidewin_redis::RedisError> {
    /// use slidewin_redis::{FailurePolicy, RedisLimiter};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?
    ///     .with_failure_policy(FailurePolicy::Open);
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn with_failure_policy(self, policy: FailurePolicy) -> RedisLimiter {
        RedisLimiter {
            policy: Some(policy),
            ..self
        }
    }

    /// Decides about `cost` for `key` under `rule` at the Redis server's time, and consumes it
    /// when admitted.
    ///
    /// # Errors
    ///
    /// [`RedisError::Limit`] for a cost that can never be admitted; without a
    /// [`FailurePolicy`], the [`RedisError`] that kept Redis from answering.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin_redis::{RedisLimiter, Rule};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let api = Rule::gcra("100/s burst 20".parse()?)?;
    /// assert!(redis.check(&api, "client-7", 1).await?.allowed());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check(
        &self,
        rule: &Rule,
        key: &str,
        cost: u64,
    ) -> Result<RedisDecision, RedisError> {
        self.decide(rule, cost, self.eval(rule, key, None, cost, true).await)
    }

    /// [`check`](RedisLimiter::check) at an explicit time (taken at its microsecond): for tests
    /// and replays, and for clients that share a clock they trust.
    ///
    /// # Errors
    ///
    /// As [`check`](RedisLimiter::check).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin::Moment;
    /// use slidewin_redis::{RedisLimiter, Rule};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let rule = Rule::sliding_log("1/s".parse()?)?;
    /// assert!(redis.check_at(&rule, "replay", Moment::from_secs(10), 1).await?.allowed());
    /// assert!(!redis.check_at(&rule, "replay", Moment::from_millis(10_500), 1).await?.allowed());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check_at(
        &self,
        rule: &Rule,
        key: &str,
        now: Moment,
        cost: u64,
    ) -> Result<RedisDecision, RedisError> {
        self.decide(
            rule,
            cost,
            self.eval(rule, key, Some(now), cost, true).await,
        )
    }

    /// Decides as [`check`](RedisLimiter::check) would, at the server's time, without consuming
    /// anything.
    ///
    /// # Errors
    ///
    /// As [`check`](RedisLimiter::check).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin_redis::{RedisLimiter, Rule};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let logins = Rule::sliding_log("3/10s".parse()?)?;
    /// if !redis.peek(&logins, "alice", 1).await?.allowed() {
    ///     println!("locked: no need to check the password");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn peek(
        &self,
        rule: &Rule,
        key: &str,
        cost: u64,
    ) -> Result<RedisDecision, RedisError> {
        self.decide(rule, cost, self.eval(rule, key, None, cost, false).await)
    }

    /// [`peek`](RedisLimiter::peek) at an explicit time.
    ///
    /// # Errors
    ///
    /// As [`check`](RedisLimiter::check).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin::Moment;
    /// use slidewin_redis::{RedisLimiter, Rule};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let rule = Rule::gcra("1/s".parse()?)?;
    /// assert!(redis.peek_at(&rule, "k", Moment::from_secs(3), 1).await?.allowed());
    /// assert!(redis.check_at(&rule, "k", Moment::from_secs(3), 1).await?.allowed());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn peek_at(
        &self,
        rule: &Rule,
        key: &str,
        now: Moment,
        cost: u64,
    ) -> Result<RedisDecision, RedisError> {
        self.decide(
            rule,
            cost,
            self.eval(rule, key, Some(now), cost, false).await,
        )
    }

    /// Many checks in one round trip: pipelined, and on a cluster grouped by slot, each group
    /// sent to its node at once, so the batch costs one round trip, not one per node. The
    /// answers come in the order of the checks.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin_redis::{Check, RedisLimiter, Rule};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let per_user = Rule::sliding_counter("100/minute".parse()?)?;
    /// let global = Rule::gcra("10000/minute".parse()?)?;
    /// let answers = redis
    ///     .check_many(&[Check::new(&per_user, "alice", 1), Check::new(&global, "all", 1)])
    ///     .await;
    /// let admitted = answers.iter().all(|a| a.as_ref().is_ok_and(|d| d.allowed()));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check_many(&self, checks: &[Check<'_>]) -> Vec<Result<RedisDecision, RedisError>> {
        let mut answers: Vec<Option<Result<Decision, RedisError>>> = vec![None; checks.len()];
        // One group per cluster slot (all of a key's Redis keys share its hash tag's slot).
        let mut groups: HashMap<Option<Slot>, Vec<(usize, Cmd)>> = HashMap::new();
        for (index, check) in checks.iter().enumerate() {
            if let Err(err) = check.rule.check_cost(check.cost) {
                answers[index] = Some(Err(err.into()));
                continue;
            }
            let command =
                check
                    .rule
                    .invocation(&self.prefix, check.key, check.at, check.cost, true);
            let slot = match self.connection {
                Connection::Cluster(_) => {
                    Some(Slot::for_key(check.rule.key(&self.prefix, check.key)))
                }
                Connection::Single(_) => None,
            };
            groups.entry(slot).or_default().push((index, command));
        }
        let mut sent = JoinSet::new();
        for (_, group) in groups {
            let mut connection = self.connection.clone();
            let timeout = self.timeout;
            sent.spawn(async move {
                let (indices, commands): (Vec<usize>, Vec<Cmd>) = group.into_iter().unzip();
                let replies = pipelined(&mut connection, &commands, timeout).await;
                indices.into_iter().zip(replies).collect::<Vec<_>>()
            });
        }
        while let Some(done) = sent.join_next().await {
            // A group's task only panics if the client library does; its checks stay unanswered.
            for (index, reply) in done.unwrap_or_default() {
                answers[index] = Some(reply.and_then(parse_decision));
            }
        }
        answers
            .into_iter()
            .zip(checks)
            .map(|(answer, check)| {
                let answer = answer.unwrap_or_else(|| {
                    Err(RedisError::Reply {
                        detail: "the batch's task ended before answering".to_string(),
                    })
                });
                self.decide(check.rule, check.cost, answer)
            })
            .collect()
    }

    /// Gives `key` its full quota back under `rule`.
    ///
    /// # Errors
    ///
    /// The [`RedisError`] that kept Redis from answering.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin_redis::{RedisLimiter, Rule};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let rule = Rule::fixed_window("1/minute".parse()?)?;
    /// redis.check(&rule, "alice", 1).await?;
    /// redis.reset(&rule, "alice").await?;
    /// assert!(redis.check(&rule, "alice", 1).await?.allowed());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reset(&self, rule: &Rule, key: &str) -> Result<(), RedisError> {
        let mut command = redis::cmd("DEL");
        command.arg(rule.key(&self.prefix, key));
        self.query(&command, None).await.map(drop)
    }

    /// The admitted units of `key`'s [sliding log](RedisAlgorithm::SlidingLog) with times in
    /// `[from, to]`, oldest first: to see what a limit is holding, as seed 001 suggests
    /// (`ZRANGEBYSCORE`).
    ///
    /// # Errors
    ///
    /// The [`RedisError`] that kept Redis from answering.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin::Moment;
    /// use slidewin_redis::{RedisLimiter, Rule};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let rule = Rule::sliding_log("10/s".parse()?)?;
    /// redis.check_at(&rule, "alice", Moment::from_secs(3), 2).await?;
    /// let held = redis.inspect("alice", Moment::ZERO, Moment::from_secs(10)).await?;
    /// assert_eq!(held, [Moment::from_secs(3), Moment::from_secs(3)]);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn inspect(
        &self,
        key: &str,
        from: Moment,
        to: Moment,
    ) -> Result<Vec<Moment>, RedisError> {
        let mut command = redis::cmd("ZRANGEBYSCORE");
        command
            .arg(key_of(&self.prefix, key, RedisAlgorithm::SlidingLog))
            .arg(from.as_nanos() / 1_000)
            .arg(to.as_nanos() / 1_000)
            .arg("WITHSCORES");
        let reply = self.query(&command, None).await?;
        let entries: Vec<(String, u64)> =
            redis::from_redis_value(reply).map_err(|e| RedisError::Reply {
                detail: e.to_string(),
            })?;
        Ok(entries
            .into_iter()
            .map(|(_, micros)| Moment::from_nanos(micros.saturating_mul(1_000)))
            .collect())
    }

    async fn eval(
        &self,
        rule: &Rule,
        key: &str,
        now: Option<Moment>,
        cost: u64,
        commit: bool,
    ) -> Result<Decision, RedisError> {
        rule.check_cost(cost)?;
        let command = rule.invocation(&self.prefix, key, now, cost, commit);
        parse_decision(self.query(&command, Some(rule.script())).await?)
    }

    /// Sends one command, loading `script` and sending it again after a `NOSCRIPT`.
    async fn query(&self, command: &Cmd, script: Option<&Script>) -> Result<Value, RedisError> {
        let mut connection = self.connection.clone();
        let attempt = async {
            match command.query_async::<Value>(&mut connection).await {
                Err(err) if is_noscript(&err) && script.is_some() => {
                    if let Some(script) = script {
                        script.load_async(&mut connection).await?;
                    }
                    command.query_async::<Value>(&mut connection).await
                }
                other => other,
            }
        };
        within(self.timeout, attempt).await
    }

    fn decide(
        &self,
        rule: &Rule,
        cost: u64,
        answer: Result<Decision, RedisError>,
    ) -> Result<RedisDecision, RedisError> {
        match (answer, self.policy) {
            (Ok(decision), _) => Ok(RedisDecision {
                decision,
                without_redis: None,
            }),
            (Err(err), Some(policy)) if !matches!(err, RedisError::Limit(_)) => Ok(RedisDecision {
                decision: policy.decide(rule, cost),
                without_redis: Some(err),
            }),
            (Err(err), _) => Err(err),
        }
    }
}

/// Runs `attempt` for at most `timeout`, sorting its errors.
async fn within<T>(
    timeout: Duration,
    attempt: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, RedisError> {
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) if err.is_timeout() => Err(RedisError::Timeout { after: timeout }),
        Ok(Err(err)) => Err(RedisError::from_redis(&err)),
        Err(_) => Err(RedisError::Timeout { after: timeout }),
    }
}

fn is_noscript(err: &redis::RedisError) -> bool {
    err.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

/// Sends `commands` as one pipeline; after a `NOSCRIPT`, loads every script on the node and
/// sends it once more. One answer per command.
async fn pipelined(
    connection: &mut Connection,
    commands: &[Cmd],
    timeout: Duration,
) -> Vec<Result<Value, RedisError>> {
    let mut pipeline = redis::pipe();
    pipeline.ignore_errors();
    for command in commands {
        pipeline.add_command(command.clone());
    }
    let attempt = async {
        let replies: Vec<Value> = pipeline.query_async(connection).await?;
        let missing = replies.iter().any(
            |r| matches!(r, Value::ServerError(e) if e.kind() == Some(ServerErrorKind::NoScript)),
        );
        if !missing {
            return Ok(replies);
        }
        for script in RedisAlgorithm::all_scripts() {
            script.load_async(connection).await?;
        }
        pipeline.query_async(connection).await
    };
    match within(timeout, attempt).await {
        Ok(replies) => replies
            .into_iter()
            .map(|reply| match reply {
                Value::ServerError(err) => Err(RedisError::from_redis(&err.into())),
                reply => Ok(reply),
            })
            .collect(),
        Err(err) => vec![Err(err); commands.len()],
    }
}

/// A script's reply, `"allowed limit remaining reset_after retry_after"`, waits in microseconds.
fn parse_decision(reply: Value) -> Result<Decision, RedisError> {
    let wrong = |reply: &Value| RedisError::Reply {
        detail: format!("expected five numbers, got {reply:?}"),
    };
    let Value::BulkString(bytes) = &reply else {
        return Err(wrong(&reply));
    };
    let mut fields = [0u64; 5];
    let mut words = bytes.split(|b| *b == b' ');
    for field in &mut fields {
        *field = words
            .next()
            .and_then(|word| std::str::from_utf8(word).ok()?.parse().ok())
            .ok_or_else(|| wrong(&reply))?;
    }
    if words.next().is_some() {
        return Err(wrong(&reply));
    }
    let [allowed, limit, remaining, reset_after, retry_after] = fields;
    let micros = Duration::from_micros;
    Ok(if allowed == 1 {
        Decision::allow(limit, remaining, micros(reset_after))
    } else {
        Decision::deny(limit, remaining, micros(reset_after), micros(retry_after))
    })
}
