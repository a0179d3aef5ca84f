//! [`RedisLimiter`]: checks on Redis or Redis Cluster, one atomic script each.

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use redis::{Cmd, Value};
use slidewin::Moment;
use slidewin::limit::{Decision, Decisions, Kind, Rule};

use crate::batch::{Batcher, IN_FLIGHT, alone, answer_all};
use crate::circuit::{CircuitState, Circuits, FIRST_WAIT, LONGEST_WAIT, ProbeFn};
use crate::connection::{Connection, query};
use crate::error::RedisError;
use crate::rules::{Call, Rules, suffix, tag_of};

/// The shortest sleep of [`RedisLimiter::until_ready`] between tries: a denial's wait rounds
/// to the microsecond, and a zero wait would spin.
const MIN_RETRY: Duration = Duration::from_micros(1);

/// How long a call waits for Redis by default.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

/// The most checks in one script call by default: enough to spread a call's fixed cost thin,
/// few enough that one call holds Redis (which runs one script at a time) for well under a
/// millisecond.
const DEFAULT_BATCH_LIMIT: usize = 64;

/// What a check answers when Redis cannot: for callers who want a decision anyway. The
/// [`RedisDecision`] then says it was made without Redis, and why.
///
/// It answers every check that Redis could not: those that failed, and while Redis is known
/// to be down (the limiter's circuit is open, see
/// [`RedisLimiter`](RedisLimiter#when-redis-is-down)) every check, at once, without asking it.
/// A cost above the limit is still an error: no Redis could admit it.
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
    fn decide(self, rules: &Rules, cost: u64) -> Decisions {
        let each = rules
            .rule_set()
            .rules()
            .iter()
            .map(|rule| {
                let (most, span) = (rule.max_cost(), rule.quota().span());
                match self {
                    FailurePolicy::Open => {
                        Decision::allow(most, most.saturating_sub(cost), Duration::ZERO)
                    }
                    FailurePolicy::Closed => Decision::deny(most, 0, span, span),
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
/// if let Some(why) = d.made_without_redis() {
///     eprintln!("decided without Redis: {why}");
/// }
/// let admitted: bool = d.allowed();
/// let each_rule = d.decisions().as_slice();
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisDecision {
    decisions: Decisions,
    without_redis: Option<RedisError>,
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

    /// Why Redis could not answer, when the decision came from the [`FailurePolicy`].
    #[must_use]
    pub fn made_without_redis(&self) -> Option<&RedisError> {
        self.without_redis.as_ref()
    }
}

impl Deref for RedisDecision {
    type Target = Decision;

    fn deref(&self) -> &Decision {
        &self.decisions
    }
}

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

/// slidewin's rate limiters on Redis: every process that shares the Redis shares the limits.
///
/// Each check runs atomically in one Lua script (`EVALSHA`, loaded again after a `NOSCRIPT`),
/// so concurrent clients can never over-admit. A check names its [`Rules`]: one rule, or
/// several checked together, all-or-nothing, as a [`RuleSet`](slidewin::limit::RuleSet) does
/// in memory. The answers are the in-memory algorithms' (see [`Rules`] for the microsecond),
/// so a service can move its limits to Redis without changing them. Under load, checks that
/// wait for Redis go together as one script call
/// ([`with_batch_limit`](RedisLimiter::with_batch_limit)).
///
/// # Time
///
/// The methods follow slidewin's one vocabulary: [`check`](RedisLimiter::check) and
/// [`peek`](RedisLimiter::peek) take the time to decide at, an explicit [`Moment`] on the Unix
/// timeline (taken at its microsecond) — for tests, replays and clients that share a clock
/// they trust; [`check_now`](RedisLimiter::check_now) and [`peek_now`](RedisLimiter::peek_now)
/// decide at the current time, which on Redis is the **server's** clock (`TIME`), so that
/// clients with skewed clocks cannot disagree.
///
/// # Keys
///
/// Each rule of a key keeps its state under a Redis key of its own,
/// `{prefix:key}:name:kind`: the braces are a hash tag, so all of a key's rules share one
/// cluster slot and one script call checks them all. Idle keys expire by themselves.
///
/// Cheap to clone: clones share the connection.
///
/// # When Redis is down
///
/// A call that fails with an error saying Redis may be down ([`RedisError::Unavailable`],
/// [`Timeout`](RedisError::Timeout), [`Cluster`](RedisError::Cluster)) opens the limiter's
/// circuit: from then on, checks answer at once, without asking Redis, until it is back. Each
/// answers by the [`FailurePolicy`] if there is one (the decision says it was made without
/// Redis); without one, with an `Unavailable` error naming Redis's URL, saying the circuit is
/// open and when it will try again. Meanwhile a task of the limiter's own tries Redis again,
/// one probe at a time: 50 ms after the failure, then after twice the wait before, up to 2 s
/// ([`with_circuit_backoff`](RedisLimiter::with_circuit_backoff)); the first probe Redis
/// answers closes the circuit, and checks go to Redis again. So during an outage a check
/// answers at once rather than after a timeout, and Redis is used again about 2 s at most
/// after it is back (and a probe's round trip).
/// The probe is a task rather than a caller's check so that no caller waits on a Redis known
/// to be down. [`is_available`](RedisLimiter::is_available) and
/// [`circuit_state`](RedisLimiter::circuit_state) tell the state;
/// [`circuit_changed`](RedisLimiter::circuit_changed) waits for it to change. On a cluster
/// each node has a circuit of its own: a lost node's keys answer at once while the other
/// nodes' keys still go to Redis; when a replica takes the lost master's place (a failover),
/// the probe finds its keys served there and they go to it. A closed circuit costs a check one
/// atomic load.
///
/// A limiter made while Redis cannot be reached
/// ([`connect_lazily`](RedisLimiter::connect_lazily),
/// [`connect_cluster_lazily`](RedisLimiter::connect_cluster_lazily)) starts with its circuit
/// open, as if its first call had failed: a service restarted during an outage answers by its
/// policy from the start, and goes to Redis from its first answer.
///
/// Errors that are Redis's answers ([`RedisError::Reply`], such as a script error) are not
/// outages and leave the circuit closed.
///
/// # Example
///
/// ```no_run
/// use slidewin::limit::{Kind, Rule};
/// use slidewin_redis::{RedisLimiter, Rules};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = RedisLimiter::connect("redis://127.0.0.1:6379/").await?;
/// let logins = Rules::try_from(Rule::new("login", Kind::SlidingLog, "3 per 10 seconds".parse()?)?)?;
/// let decision = redis.check_now(&logins, "alice", 1).await?;
/// if !decision.allowed() {
///     println!("try again in {:?}", decision.retry_after());
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisLimiter {
    connection: Connection,
    /// Shared by the clones made after the last `with_circuit_backoff`.
    circuits: Arc<Circuits>,
    prefix: Arc<str>,
    timeout: Duration,
    policy: Option<FailurePolicy>,
    batch_limit: usize,
    calls_in_flight: usize,
    /// Group commit (on a cluster, per node); `None` when the batch limit is 1.
    batcher: Option<Arc<Batcher>>,
}

impl std::fmt::Debug for RedisLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.connection {
            Connection::Single(..) => "single",
            Connection::Cluster(..) => "cluster",
        };
        f.debug_struct("RedisLimiter")
            .field("connection", &kind)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("policy", &self.policy)
            .field("batch_limit", &self.batch_limit)
            .field("calls_in_flight", &self.calls_in_flight)
            .field("circuit", &self.circuits.state())
            .finish()
    }
}

impl RedisLimiter {
    /// The last time [`check`](RedisLimiter::check) and [`peek`](RedisLimiter::peek) take:
    /// 2^52 microseconds of Unix time, in the year 2112. The script counts in Lua's doubles,
    /// exact below 2^53, and a time needs room for a span added to it.
    ///
    /// ```
    /// use slidewin::Moment;
    /// use slidewin_redis::RedisLimiter;
    /// assert_eq!(RedisLimiter::MAX_TIME, Moment::from_nanos((1 << 52) * 1_000));
    /// assert!(RedisLimiter::MAX_TIME > Moment::from_secs(4_000_000_000)); // 2096
    /// ```
    pub const MAX_TIME: Moment = Moment::from_nanos((1 << 52) * 1_000);

    /// A limiter on `connection`, with every setting its default.
    pub(crate) fn with(connection: Connection) -> RedisLimiter {
        RedisLimiter {
            batcher: batcher_for(&connection, DEFAULT_BATCH_LIMIT, IN_FLIGHT),
            circuits: Circuits::new(FIRST_WAIT, LONGEST_WAIT, prober(connection.clone())),
            connection,
            prefix: Arc::from("slidewin"),
            timeout: DEFAULT_TIMEOUT,
            policy: None,
            batch_limit: DEFAULT_BATCH_LIMIT,
            calls_in_flight: IN_FLIGHT,
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

    /// The same limiter sending at most `limit` checks in one script call (64 by default); 1
    /// sends every check alone.
    ///
    /// Checks made while earlier ones are on their way to Redis wait and then go together, as
    /// one script call whatever their rules, a key's checks in the order they came: the call's fixed
    /// cost and the read of the server's clock are paid once for all of them (measured: under
    /// load a GCRA check costs 1.9x to 2.7x less than alone, see BENCHMARKS.md), and a key the
    /// call names many times is read once and written once (a sliding log adds each entry).
    /// A check that finds Redis idle goes at once, so batching adds no latency; a batch's
    /// checks happen at one instant of the server's clock.
    /// The timeout covers the wait in the queue; a check whose caller stopped waiting before
    /// it was sent is not sent. The queue is shared by the clones made after this call.
    /// [`check_many`](RedisLimiter::check_many) uses the same limit.
    ///
    /// On a cluster, a batch goes to each node at once, one call carrying the checks of all
    /// the node's keys, of whatever slot: such a call names its keys as
    /// arguments rather than as `KEYS` (Redis would refuse keys of several slots there), and
    /// is sent by this client's map of the slots (`CLUSTER SLOTS`, read on connecting). A node
    /// that does not serve a key (a slot moved) answers that check as not its own without
    /// touching it; the check then goes again alone, routed as any single call is, and the map
    /// is read again.
    ///
    /// # Errors
    ///
    /// [`RedisError::Config`] for a limit of 0.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), slidewin_redis::RedisError> {
    /// let redis = slidewin_redis::RedisLimiter::connect("redis://127.0.0.1/").await?
    ///     .with_batch_limit(1)?; // every check its own call
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_batch_limit(self, limit: usize) -> Result<RedisLimiter, RedisError> {
        if limit == 0 {
            return Err(RedisError::Config {
                detail: "the batch limit must be at least 1, got 0".to_string(),
            });
        }
        Ok(RedisLimiter {
            batcher: batcher_for(&self.connection, limit, self.calls_in_flight),
            batch_limit: limit,
            ..self
        })
    }

    /// The same limiter with at most `calls` script calls on their way to Redis at once (to
    /// each node, on a cluster): 8 by default.
    ///
    /// A check that finds fewer than two calls on their way goes at once, alone; the others
    /// wait in a queue. The queue goes as one call as soon as it holds sixteen checks (a full
    /// batch, or the [batch limit](RedisLimiter::with_batch_limit) if lower) while fewer than
    /// `calls` are on their way, and otherwise when a call comes back and at most two are left
    /// on their way. So the calls follow the load and the round trip: when Redis answers
    /// quickly, two calls carry everything; when answers are slow to come back (a long round
    /// trip, a busy client), more go, each full enough to pay its fixed cost in Redis. Fewer
    /// calls make bigger batches: 2 is group commit with two calls, 1 one call at a time.
    /// With a batch limit of 1 every check is its own call and this does not apply. The
    /// queue is shared by the clones made after this call.
    ///
    /// # Errors
    ///
    /// [`RedisError::Config`] for 0 calls.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), slidewin_redis::RedisError> {
    /// // At most two calls at once, however slow the answers: bigger batches, for a Redis
    /// // whose CPU is the scarce part.
    /// let redis = slidewin_redis::RedisLimiter::connect("redis://10.0.0.7/").await?
    ///     .with_calls_in_flight(2)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_calls_in_flight(self, calls: usize) -> Result<RedisLimiter, RedisError> {
        if calls == 0 {
            return Err(RedisError::Config {
                detail: "the calls in flight must be at least 1, got 0".to_string(),
            });
        }
        Ok(RedisLimiter {
            batcher: batcher_for(&self.connection, self.batch_limit, calls),
            calls_in_flight: calls,
            ..self
        })
    }

    /// The same limiter with a circuit (see [When Redis is down](RedisLimiter#when-redis-is-down))
    /// that waits `first` after a failure before it tries Redis again, then twice the wait
    /// before after each failed try, up to `longest`: 50 ms and 2 s by default. A shorter
    /// longest wait finds Redis sooner once it is back, for a probe every so often while it
    /// is not. The circuit is shared by the clones made after this call; what is open now
    /// stays open (as for a limiter made while Redis was away), probed with the new waits.
    ///
    /// # Errors
    ///
    /// [`RedisError::Config`] for a `first` of zero, or a `longest` below `first` or above an
    /// hour.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), slidewin_redis::RedisError> {
    /// use std::time::Duration;
    /// let redis = slidewin_redis::RedisLimiter::connect("redis://127.0.0.1/").await?
    ///     .with_circuit_backoff(Duration::from_millis(10), Duration::from_millis(500))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_circuit_backoff(
        self,
        first: Duration,
        longest: Duration,
    ) -> Result<RedisLimiter, RedisError> {
        Circuits::check_waits(first, longest)?;
        let circuits = Circuits::new(first, longest, prober(self.connection.clone()));
        // What the old circuits know is down stays so (a limiter that started without Redis).
        circuits.open_as(&self.circuits, self.timeout);
        Ok(RedisLimiter { circuits, ..self })
    }

    /// Whether checks go to Redis: false while the circuit is open (on a cluster, any
    /// node's), when they answer at once without it.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), slidewin_redis::RedisError> {
    /// let redis = slidewin_redis::RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// if !redis.is_available() {
    ///     eprintln!("Redis is down: limits are decided without it");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn is_available(&self) -> bool {
        self.circuit_state() == CircuitState::Closed
    }

    /// The circuit's state (on a cluster, all nodes' together, see [`CircuitState`]).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), slidewin_redis::RedisError> {
    /// use slidewin_redis::CircuitState;
    /// let redis = slidewin_redis::RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// assert_eq!(redis.circuit_state(), CircuitState::Closed);
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn circuit_state(&self) -> CircuitState {
        self.circuits.state()
    }

    /// Why checks answer without Redis now: while the circuit is open (on a cluster, a
    /// node's), the failure that opened it or the latest probe's, naming where (the URL, its
    /// password hidden); `None` while it is closed. For a log line or a status page.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), slidewin_redis::RedisError> {
    /// let redis = slidewin_redis::RedisLimiter::connect_lazily("redis://:pw@127.0.0.1:1/").await?;
    /// let why = redis.why_unavailable().expect("nothing listens on port 1");
    /// assert!(why.to_string().starts_with("Redis at redis://:***@127.0.0.1:1/ is unavailable"));
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn why_unavailable(&self) -> Option<RedisError> {
        self.circuits.cause()
    }

    /// Waits until the circuit's state is other than `from`, and returns it (at once if it
    /// already is): to log an outage and its end, or for a readiness check to wait on. A
    /// state held only briefly may be missed; the one returned is the state then.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), slidewin_redis::RedisError> {
    /// use slidewin_redis::CircuitState;
    /// let redis = slidewin_redis::RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// let watcher = redis.clone();
    /// tokio::spawn(async move {
    ///     let mut state = watcher.circuit_state();
    ///     loop {
    ///         let now = watcher.circuit_changed(state).await;
    ///         match now {
    ///             CircuitState::Closed => eprintln!("Redis is back"),
    ///             _ if state == CircuitState::Closed => eprintln!("Redis is down"),
    ///             _ => {}
    ///         }
    ///         state = now;
    ///     }
    /// });
    /// # Ok(())
    /// # }
    /// ```
    pub async fn circuit_changed(&self, from: CircuitState) -> CircuitState {
        self.circuits.changed(from).await
    }

    /// Decides about `cost` for `key` under every rule of `rules` at `now`, Unix time (taken
    /// at its microsecond), and consumes it from each when all admit: a denial consumes from
    /// none.
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
        self.decide(rules, cost, self.eval(rules, key, now, cost, true).await)
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
        self.decide(rules, cost, self.eval(rules, key, None, cost, true).await)
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
        self.decide(rules, cost, self.eval(rules, key, now, cost, false).await)
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
        self.decide(rules, cost, self.eval(rules, key, None, cost, false).await)
    }

    /// Waits until `cost` for `key` is admitted under `rules` at the server's time, and
    /// consumes it: governor's `until_ready`, across processes. Each denial sleeps its
    /// `retry_after` (on tokio's clock) and asks again; another process may take the room
    /// first, and then it waits again. A decision made without Redis by
    /// [`FailurePolicy::Closed`] waits too (a span at a time); bound the wait with
    /// `tokio::time::timeout` if Redis may stay away.
    ///
    /// # Errors
    ///
    /// [`RedisError::Limit`] at once for a cost that can never be admitted; without a
    /// [`FailurePolicy`], the first [`RedisError`] that kept Redis from answering.
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
        let decisions = answer_all(&self.connection, calls, self.batch_limit, self.timeout).await;
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
                self.decide(check.rules, check.cost, answer)
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
    /// to]` (Unix time), oldest first: to see what a limit is holding (`ZRANGEBYSCORE`). Units
    /// that have left the window may still be listed: an admission removes them once the log's
    /// time enters a new stretch of its idle time (a span and a millisecond).
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
        let mut command = redis::cmd("ZRANGEBYSCORE");
        command
            .arg(&key)
            .arg(from.as_nanos() / 1_000)
            .arg(to.as_nanos() / 1_000)
            .arg("WITHSCORES");
        let reply = self.query(&command, &key).await?;
        let entries: Vec<(String, u64)> =
            redis::from_redis_value(reply).map_err(|e| RedisError::Reply {
                at: self.connection.place(&key).to_string(),
                detail: e.to_string(),
            })?;
        Ok(entries
            .into_iter()
            .map(|(_, micros)| Moment::from_nanos(micros.saturating_mul(1_000)))
            .collect())
    }

    /// This limiter, not connected because of `err`: with its circuit open when `err` says
    /// Redis may be down (its probe asking about a key of the limiter's own), else the error.
    pub(crate) fn started_down(self, err: RedisError) -> Result<RedisLimiter, RedisError> {
        if !err.is_transient() {
            return Err(err);
        }
        let key = tag_of(&self.prefix, "probe");
        self.circuits.failed(&err, || key, self.timeout);
        Ok(self)
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
        self.gate(call.tag())?;
        let answer = match &self.batcher {
            Some(batcher) => batcher.check(call, self.timeout).await,
            None => alone(self.connection.clone(), &call, self.timeout).await,
        };
        if let Err(err) = &answer {
            self.failed(err, || rules.key(&tag_of(&self.prefix, key), 0));
        }
        answer
    }

    /// Sends one command of `key` that runs no script.
    async fn query(&self, command: &Cmd, key: &str) -> Result<Value, RedisError> {
        self.gate(key)?;
        let answer = query(self.connection.clone(), command, false, self.timeout, key).await;
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
    fn failed(&self, err: &RedisError, key: impl FnOnce() -> String) {
        if err.is_transient() {
            self.circuits.failed(err, key, self.timeout);
        }
    }

    fn decide(
        &self,
        rules: &Rules,
        cost: u64,
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
                    RedisError::Limit(_) | RedisError::TimeOutOfRange { .. }
                ) =>
            {
                Ok(RedisDecision {
                    decisions: policy.decide(rules, cost),
                    without_redis: Some(err),
                })
            }
            (Err(err), _) => Err(err),
        }
    }
}

/// `now` in microseconds, for the script; an error past [`RedisLimiter::MAX_TIME`].
fn micros(now: Moment) -> Result<u64, RedisError> {
    if now > RedisLimiter::MAX_TIME {
        return Err(RedisError::TimeOutOfRange { now });
    }
    Ok(now.as_nanos() / 1_000)
}

/// The probe of an open circuit (see `circuit.rs`): `EXISTS` on a key of the place, routed as
/// the key's checks are, which a node that cannot serve the key (a cluster without it) fails
/// as it would fail them. When a cluster's node answers, the slot map is read again: a node
/// back after a failover may be serving other slots.
fn prober(connection: Connection) -> Box<ProbeFn> {
    Box::new(move |key, timeout| {
        let connection = connection.clone();
        Box::pin(async move {
            let mut exists = redis::cmd("EXISTS");
            exists.arg(&key);
            let answer = query(connection.clone(), &exists, false, timeout, &key).await;
            if answer.is_ok()
                && let Connection::Cluster(cluster, nodes) = &connection
            {
                nodes.refresh_soon(cluster.clone());
            }
            answer.map(drop)
        })
    })
}

/// The batcher, when batches hold more than one check.
fn batcher_for(connection: &Connection, limit: usize, in_flight: usize) -> Option<Arc<Batcher>> {
    (limit > 1).then(|| Batcher::new(connection.clone(), limit, in_flight))
}
