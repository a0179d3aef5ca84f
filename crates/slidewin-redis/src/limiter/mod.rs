//! [`RedisLimiter`]: checks on Redis or Redis Cluster, one atomic script each.
//!
//! The limiter, its settings and its circuit are here; its checks are in `check`, and what
//! they answer in `decision`.

#[cfg(test)]
mod calendar_tests;
mod check;
mod decision;
mod release;
mod settle;

use std::sync::Arc;
use std::time::Duration;

use slidewin::Moment;

use crate::batch::{Batcher, IN_FLIGHT};
use crate::circuit::{CircuitState, Circuits, FIRST_WAIT, LONGEST_WAIT, ProbeFn};
use crate::connection::{Connection, query};
use crate::error::RedisError;
use crate::rules::tag_of;

pub use check::Check;
pub use decision::{FailurePolicy, RedisDecision};

/// How long a call waits for Redis by default.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

/// The most checks in one script call by default: enough to spread a call's fixed cost thin,
/// few enough that one call holds Redis (which runs one script at a time) for well under a
/// millisecond.
const DEFAULT_BATCH_LIMIT: usize = 64;

/// slidewin's rate limiters on Redis: every process that shares the Redis shares the limits.
///
/// Each check runs atomically in one Lua script (`EVALSHA`, loaded again after a `NOSCRIPT`), so
/// concurrent clients can never over-admit. A check names its [`Rules`](crate::Rules): one rule, or
/// several checked together, all-or-nothing, as a [`RuleSet`](slidewin::limit::RuleSet) does in
/// memory. The answers are the in-memory algorithms' (see [`Rules`](crate::Rules) for the
/// microsecond), so a service can move its limits to Redis without changing them. Under load,
/// checks that wait for Redis go together as one script call
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
            Connection::Sentinel(_) => "sentinel",
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

    /// The policy it answers by when Redis cannot, if one is set.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), slidewin_redis::RedisError> {
    /// use slidewin_redis::{FailurePolicy, RedisLimiter};
    /// let redis = RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// assert_eq!(redis.failure_policy(), None);
    /// let redis = redis.with_failure_policy(FailurePolicy::Closed);
    /// assert_eq!(redis.failure_policy(), Some(FailurePolicy::Closed));
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn failure_policy(&self) -> Option<FailurePolicy> {
        self.policy
    }

    /// Whether it checks on a Redis Cluster (made by
    /// [`connect_cluster`](RedisLimiter::connect_cluster) or its lazy form).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), slidewin_redis::RedisError> {
    /// let redis = slidewin_redis::RedisLimiter::connect("redis://127.0.0.1/").await?;
    /// assert!(!redis.is_cluster());
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn is_cluster(&self) -> bool {
        matches!(self.connection, Connection::Cluster(..))
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
