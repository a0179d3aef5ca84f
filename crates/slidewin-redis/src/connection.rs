//! The connection to Redis, and sending scripts over it: timeouts, a script loaded again after
//! a `NOSCRIPT`, and the scripts' answers read back.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, ErrorKind, Pipeline, RedisFuture, ServerErrorKind, Value};
use slidewin::Moment;
use slidewin::limit::{Decision, Decisions};

use crate::cluster::Nodes;
use crate::error::RedisError;
use crate::rules::{Call, SCRIPT, SETTLE};
use crate::sentinel::SentinelPrimary;

/// One connection, to a single Redis or to a cluster; both multiplex requests and reconnect by
/// themselves. A single Redis's comes with its URL (its password hidden), for messages; a
/// cluster's with the map of which node serves which slot, for sending each node the checks
/// of its keys in one call.
#[derive(Clone)]
pub(crate) enum Connection {
    Single(ConnectionManager, Arc<str>),
    Cluster(ClusterConnection, Arc<Nodes>),
    /// The primary a Redis Sentinel names, asked for again after a failover.
    Sentinel(Arc<SentinelPrimary>),
}

impl Connection {
    /// Where `key` is served: the URL of a single Redis, a cluster node's `host:port`.
    pub(crate) fn place(&self, key: &str) -> Arc<str> {
        match self {
            Connection::Single(_, url) => Arc::clone(url),
            Connection::Cluster(_, nodes) => nodes.place(key),
            Connection::Sentinel(primary) => Arc::clone(&primary.shown),
        }
    }

    /// Where a group of checks (a batcher's) is served.
    pub(crate) fn place_of_group(&self, group: u32) -> Arc<str> {
        match self {
            Connection::Single(_, url) => Arc::clone(url),
            Connection::Cluster(_, nodes) => nodes.place_of_group(group),
            Connection::Sentinel(primary) => Arc::clone(&primary.shown),
        }
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(c, _) => c.req_packed_command(cmd),
            Connection::Cluster(c, _) => c.req_packed_command(cmd),
            Connection::Sentinel(primary) => Box::pin(primary.command(cmd)),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(c, _) => c.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(c, _) => c.req_packed_commands(pipeline, offset, count),
            Connection::Sentinel(primary) => Box::pin(primary.commands(pipeline, offset, count)),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(c, _) => c.get_db(),
            Connection::Cluster(c, _) => c.get_db(),
            Connection::Sentinel(_) => 0,
        }
    }
}

/// Why an attempt failed, before it is known where (the place is looked up only for an error).
pub(crate) enum Fault {
    /// No answer within this long.
    Timeout(Duration),
    /// What the client library said.
    Redis(redis::RedisError),
}

impl Fault {
    /// The error, met at `at`.
    pub(crate) fn at(self, at: &str) -> RedisError {
        match self {
            Fault::Timeout(after) => RedisError::Timeout {
                at: at.to_string(),
                after,
            },
            Fault::Redis(err) => RedisError::from_redis(&err, at.to_string()),
        }
    }
}

/// Runs `attempt` for at most `timeout`.
pub(crate) async fn within<T>(
    timeout: Duration,
    attempt: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, Fault> {
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) if err.is_timeout() => Err(Fault::Timeout(timeout)),
        Ok(Err(err)) => Err(Fault::Redis(err)),
        Err(_) => Err(Fault::Timeout(timeout)),
    }
}

fn is_noscript(err: &redis::RedisError) -> bool {
    err.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

/// Loads the scripts (on the node a cluster routes them to).
async fn load_scripts(connection: &mut Connection) -> redis::RedisResult<()> {
    SCRIPT.load_async(connection).await?;
    SETTLE.load_async(connection).await.map(drop)
}

/// Sends one command of `key`; when it runs a script, after a `NOSCRIPT` (a restarted or new
/// node), loads every script and sends it once more.
pub(crate) async fn query(
    mut connection: Connection,
    command: &Cmd,
    script: bool,
    timeout: Duration,
    key: &str,
) -> Result<Value, RedisError> {
    let attempt = async {
        match command.query_async::<Value>(&mut connection).await {
            Err(err) if script && is_noscript(&err) => {
                load_scripts(&mut connection).await?;
                command.query_async::<Value>(&mut connection).await
            }
            other => other,
        }
    };
    let outcome = within(timeout, attempt).await;
    outcome.map_err(|fault| fault.at(&connection.place(key)))
}

/// Sends `commands` as one pipeline; after a `NOSCRIPT`, loads every script on the node and
/// sends it once more. One answer per command. On a cluster, the node of `key` gets the whole
/// pipeline (its scripts' keys undeclared).
pub(crate) async fn pipelined(
    connection: &mut Connection,
    commands: &[Cmd],
    timeout: Duration,
    key: &str,
) -> Vec<Result<Value, RedisError>> {
    let route = match &*connection {
        Connection::Cluster(..) => Some(SingleNodeRoutingInfo::SpecificNode(Route::with_key(
            key,
            SlotAddr::Master,
        ))),
        Connection::Single(..) | Connection::Sentinel(_) => None,
    };
    if let ([command], None) = (commands, &route) {
        // One command needs no pipeline (nor a copy of it).
        return vec![query(connection.clone(), command, true, timeout, key).await];
    }
    let attempt = async {
        let replies = send_pipeline(connection, commands, route.as_ref()).await?;
        let missing = replies.iter().any(
            |r| matches!(r, Value::ServerError(e) if e.kind() == Some(ServerErrorKind::NoScript)),
        );
        if !missing {
            return Ok(replies);
        }
        load_scripts(connection).await?;
        send_pipeline(connection, commands, route.as_ref()).await
    };
    let outcome = within(timeout, attempt).await;
    match outcome {
        Ok(replies) => replies
            .into_iter()
            .map(|reply| match reply {
                Value::ServerError(err) => Err(RedisError::from_redis(
                    &err.into(),
                    connection.place(key).to_string(),
                )),
                reply => Ok(reply),
            })
            .collect(),
        Err(fault) => vec![Err(fault.at(&connection.place(key))); commands.len()],
    }
}

/// `commands` as one pipeline, to where their keys are or on a cluster to `route`.
async fn send_pipeline(
    connection: &mut Connection,
    commands: &[Cmd],
    route: Option<&SingleNodeRoutingInfo>,
) -> redis::RedisResult<Vec<Value>> {
    let mut pipeline = redis::pipe();
    pipeline.ignore_errors();
    for command in commands {
        pipeline.add_command(command.clone());
    }
    match (connection, route) {
        (Connection::Cluster(cluster, _), Some(route)) => {
            let count = pipeline.len();
            // Taken by value: built for each attempt rather than copied.
            cluster
                .route_pipeline(pipeline, 0, count, route.clone())
                .await
        }
        (connection, _) => pipeline.query_async(connection).await,
    }
}

/// A script's answer for `calls`, from `at`: integers, each check's after the one before (see
/// [`parse_decision`]; waits in microseconds), a check per rule of each call; the limit is the
/// rule's own. `None` for a call the node did not answer (`reset_after` -1: its key is
/// elsewhere), which only a call with undeclared keys gives; [`RedisError::ClockSkew`] for one
/// whose calendar window did not hold the server's time (`reset_after` -2, then that time).
pub(crate) fn parse_decisions<'a>(
    reply: &Value,
    calls: impl ExactSizeIterator<Item = &'a Call>,
    at: impl Fn() -> Arc<str>,
) -> Result<Vec<Result<Option<Decisions>, RedisError>>, RedisError> {
    let count = calls.len();
    let wrong = || RedisError::Reply {
        at: at().to_string(),
        detail: format!(
            "expected answers of two or three numbers for {count} calls, got {reply:?}"
        ),
    };
    let Value::Array(items) = reply else {
        return Err(wrong());
    };
    let mut numbers = items.iter();
    let mut all = Vec::with_capacity(count);
    for call in calls {
        let mut each = Vec::with_capacity(call.len());
        let (mut elsewhere, mut skewed) = (false, None);
        for index in 0..call.len() {
            match parse_decision(&mut numbers, call.limit(index)).ok_or_else(wrong)? {
                Answer::Decided(decision) => each.push(decision),
                Answer::Elsewhere => elsewhere = true,
                Answer::Skewed(redis) => skewed = Some(redis),
            }
        }
        all.push(match (elsewhere, skewed) {
            (true, _) => Ok(None),
            (false, Some(redis)) => Err(RedisError::ClockSkew {
                at: at().to_string(),
                redis,
                client: call.dated_by().unwrap_or(redis),
            }),
            (false, None) => Ok(Decisions::new(each)),
        });
    }
    match numbers.next() {
        None => Ok(all),
        Some(_) => Err(wrong()),
    }
}

/// One check's answer.
enum Answer {
    Decided(Decision),
    /// Its key is on another node.
    Elsewhere,
    /// The server's time, outside the calendar window sent.
    Skewed(Moment),
}

fn parse_decision<'v>(numbers: &mut impl Iterator<Item = &'v Value>, limit: u64) -> Option<Answer> {
    let mut next = || match numbers.next() {
        Some(Value::Int(n)) => Some(*n),
        _ => None,
    };
    let (left, reset_after) = (next()?, next()?);
    let micros = |n: i64| u64::try_from(n).ok().map(Duration::from_micros);
    if let Ok(remaining) = u64::try_from(left) {
        if reset_after == -1 {
            return Some(Answer::Elsewhere);
        }
        if reset_after == -2 {
            let redis = u64::try_from(next()?).ok()?.checked_mul(1_000)?;
            return Some(Answer::Skewed(Moment::from_nanos(redis)));
        }
        return Some(Answer::Decided(Decision::allow(
            limit,
            remaining,
            micros(reset_after)?,
        )));
    }
    let retry_after = next()?;
    let remaining = u64::try_from(-1 - left).ok()?;
    Some(Answer::Decided(Decision::deny(
        limit,
        remaining,
        micros(reset_after)?,
        micros(retry_after)?,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::Rules;
    use slidewin::limit::{Kind, Rule, RuleSet};

    fn ints(numbers: &[i64]) -> Value {
        Value::Array(numbers.iter().map(|n| Value::Int(*n)).collect())
    }

    fn gcra() -> Rules {
        Rules::try_from(Rule::new("g", Kind::Gcra, "5/s".parse().unwrap()).unwrap()).unwrap()
    }

    #[test]
    fn answers_of_two_and_three_numbers_are_read_in_order() {
        let rules = gcra();
        let calls: Vec<Call> = (0..3)
            .map(|_| Call::new(&rules, "p", "k", None, 1, true))
            .collect();
        // Admitted (4 left), denied (0 left, retry after 150 µs), not this node's.
        let reply = ints(&[4, 200_000, -1, 400_000, 150, 0, -1]);
        let decisions = parse_decisions(&reply, calls.iter(), || Arc::from("here")).unwrap();
        let micros = Duration::from_micros;
        let one = |d| Ok(Decisions::new(vec![d]));
        assert_eq!(
            decisions,
            [
                one(Decision::allow(5, 4, micros(200_000))),
                one(Decision::deny(5, 0, micros(400_000), micros(150))),
                Ok(None),
            ]
        );
    }

    #[test]
    fn a_clock_skew_answer_is_an_error_of_that_call_alone() {
        let rules = gcra();
        let calls: Vec<Call> = (0..2)
            .map(|_| Call::new(&rules, "p", "k", None, 1, true))
            .collect();
        // Redis's time outside the calendar window sent, then an admission.
        let reply = ints(&[0, -2, 1_700_000_000_000_000, 4, 200_000]);
        let decisions = parse_decisions(&reply, calls.iter(), || Arc::from("here")).unwrap();
        let redis = Moment::from_secs(1_700_000_000);
        assert_eq!(
            decisions[0],
            Err(RedisError::ClockSkew {
                at: "here".into(),
                redis,
                client: redis,
            })
        );
        assert!(decisions[1].as_ref().unwrap().is_some());
    }

    #[test]
    fn a_call_of_several_rules_reads_an_answer_per_rule() {
        let set = RuleSet::new([
            Rule::new("a", Kind::SlidingLog, "3/s".parse().unwrap()).unwrap(),
            Rule::new("b", Kind::Gcra, "5/s burst 2".parse().unwrap()).unwrap(),
        ])
        .unwrap();
        let rules = Rules::new(set).unwrap();
        let calls = [Call::new(&rules, "p", "k", None, 1, true)];
        let reply = ints(&[2, 1_000_000, -1, 200_000, 200_000]);
        let decisions = parse_decisions(&reply, calls.iter(), || Arc::from("here")).unwrap();
        let micros = Duration::from_micros;
        let both = decisions[0].as_ref().unwrap().as_ref().unwrap();
        assert_eq!(
            both.as_slice(),
            [
                Decision::allow(3, 2, micros(1_000_000)),
                Decision::deny(2, 0, micros(200_000), micros(200_000)),
            ]
        );
        assert_eq!(both.binding(), 1);
    }

    #[test]
    fn an_answer_short_long_or_not_numbers_is_a_reply_error_showing_it() {
        let rules = gcra();
        let calls = [Call::new(&rules, "p", "k", None, 1, true)];
        for reply in [
            ints(&[4]),
            ints(&[-1, 400_000]),
            ints(&[4, 200_000, 7]),
            Value::Array(vec![Value::Int(4), Value::Nil]),
            Value::Int(1),
        ] {
            let err = parse_decisions(&reply, calls.iter(), || Arc::from("here")).unwrap_err();
            assert!(
                matches!(&err, RedisError::Reply { at, detail }
                    if at == "here" && detail.contains("for 1 calls")),
                "{reply:?}: {err:?}"
            );
        }
    }
}
