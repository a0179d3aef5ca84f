//! Group commit: checks that arrive while earlier ones are on their way to Redis wait, then go
//! together, many checks in one script call.
//!
//! A check that finds fewer than [`ALONE`] calls on their way goes at once, alone: when Redis
//! is idle, batching adds nothing to a check's latency. Otherwise it waits in a queue. The
//! queue goes, up to the batch limit, as one script call (a pipeline of them past the limit): as
//! soon as it holds a full batch ([`FULL`] checks), while fewer than the most calls allowed
//! ([`IN_FLIGHT`] by default) are on their way; else when a call comes back and no more than
//! [`ALONE`] are left on their way. Under load this is what bounds throughput: a script call
//! has a fixed cost in Redis (and in the client), and so does the server's clock (`TIME`, read
//! once per call), which a batch pays once for all its checks. Full batches are what hold up
//! over a slow round trip: with a fixed number of calls, checks wait for answers while Redis
//! sits idle; here the calls follow the queue, and each carries enough checks to pay its
//! fixed cost (BENCHMARKS.md has a model and the measurements).
//! On a cluster, each node has a queue and calls of its own, and its batches go to it alone
//! (see `cluster.rs`): a slow node holds back only its own checks.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use slidewin::limit::Decisions;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use crate::cluster::Nodes;
use crate::connection::{Connection, parse_decisions, pipelined, query};
use crate::error::RedisError;
use crate::rules::{Call, Keys, script_call};

/// Checks go alone, without waiting for others, while fewer than this many calls are on their
/// way (fewer, if fewer calls are allowed). One would leave Redis idle while the client reads
/// an answer and writes the next call; two keep it busy when the round trip is short.
pub(crate) const ALONE: usize = 2;

/// A queue holding this many checks (or the batch limit, if lower) goes at once, without
/// waiting for a call to come back, while fewer than the most calls allowed are on their way.
/// Spread over sixteen checks, a call's fixed cost in Redis (about four GCRA checks' worth)
/// adds a quarter to each; fewer would spend Redis's time on calls, more would leave it
/// waiting on round trips (BENCHMARKS.md).
pub(crate) const FULL: usize = 16;

/// The most calls on their way to Redis at once (to each node, on a cluster), by default
/// ([`RedisLimiter::with_calls_in_flight`](crate::RedisLimiter::with_calls_in_flight)). Enough
/// for a queue of 128 callers to go as full batches; more callers make bigger batches.
pub(crate) const IN_FLIGHT: usize = 8;

type Answer = oneshot::Sender<Result<Decisions, RedisError>>;

/// The queues of checks waiting for a call to Redis, shared by a limiter's clones: one on a
/// single node, one per node on a cluster.
pub(crate) struct Batcher {
    connection: Connection,
    /// The most checks sent in one batch.
    most: usize,
    /// The most calls of a group on their way at once.
    in_flight: usize,
    /// Checks go alone while fewer calls than this are on their way.
    alone: usize,
    /// A queue this long goes without waiting for a call to come back.
    full: usize,
    /// By group: the node's (see [`Nodes::group`]), 0 on a single node.
    queues: Mutex<HashMap<u32, Queue>>,
}

#[derive(Default)]
struct Queue {
    in_flight: usize,
    waiting: VecDeque<Waiting>,
}

struct Waiting {
    call: Call,
    timeout: Duration,
    answer: Answer,
}

/// How a check goes: alone, or in the queue (with the batch to send now, if it filled one).
enum Route {
    Alone(Call),
    Queued(
        oneshot::Receiver<Result<Decisions, RedisError>>,
        Option<Vec<Waiting>>,
    ),
}

/// One of a group's calls on its way (see [`IN_FLIGHT`]), held while the call is on its way;
/// given back on drop, even when the call's future is dropped, so that the queue always moves.
struct Lease(Arc<Batcher>, u32);

impl Drop for Lease {
    fn drop(&mut self) {
        self.0.release(self.1);
    }
}

impl Batcher {
    /// A batcher sending at most `most` checks per batch and `in_flight` calls at once.
    pub(crate) fn new(connection: Connection, most: usize, in_flight: usize) -> Arc<Batcher> {
        Arc::new(Batcher {
            connection,
            most,
            in_flight,
            alone: ALONE.min(in_flight),
            full: FULL.min(most),
            queues: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Queue>> {
        // Nothing panics while holding the lock; a poisoned queue is still a good queue.
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `call`, alone if few calls are on their way or else in a batch, waiting at most
    /// `timeout` in all.
    pub(crate) async fn check(
        self: &Arc<Self>,
        call: Call,
        timeout: Duration,
    ) -> Result<Decisions, RedisError> {
        let group = match &self.connection {
            Connection::Single(..) | Connection::Sentinel(_) => 0,
            Connection::Cluster(_, nodes) => Nodes::group(&nodes.map(), call.tag()),
        };
        let route = {
            let mut queues = self.lock();
            let queue = queues.entry(group).or_default();
            if queue.in_flight < self.alone {
                queue.in_flight += 1;
                Route::Alone(call)
            } else {
                let (answer, answered) = oneshot::channel();
                queue.waiting.push_back(Waiting {
                    call,
                    timeout,
                    answer,
                });
                Route::Queued(answered, self.full_batch(queue))
            }
        };
        match route {
            Route::Alone(call) => {
                let _lease = Lease(Arc::clone(self), group);
                alone(self.connection.clone(), &call, timeout).await
            }
            Route::Queued(answered, full) => {
                if let Some(batch) = full {
                    self.dispatch(group, batch);
                }
                self.wait(answered, timeout, group).await
            }
        }
    }

    /// The answer of a queued check of `group`, or the error saying why there is none.
    async fn wait(
        &self,
        answered: oneshot::Receiver<Result<Decisions, RedisError>>,
        timeout: Duration,
        group: u32,
    ) -> Result<Decisions, RedisError> {
        let at = || self.connection.place_of_group(group).to_string();
        match tokio::time::timeout(timeout, answered).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(RedisError::Unavailable {
                at: at(),
                detail: "the batch carrying the check was dropped before Redis answered \
                             (the runtime is shutting down)"
                    .to_string(),
            }),
            // The check may still reach Redis, as a check whose answer timed out may.
            Err(_) => Err(RedisError::Timeout {
                at: at(),
                after: timeout,
            }),
        }
    }

    /// The queue of `queue`'s group as a batch to send now, taking a call, when it holds a
    /// full batch and fewer than the most calls are on their way.
    fn full_batch(&self, queue: &mut Queue) -> Option<Vec<Waiting>> {
        if queue.waiting.len() < self.full || queue.in_flight >= self.in_flight {
            return None;
        }
        // Callers that gave up (timed out, or dropped the check) are not sent.
        queue.waiting.retain(|w| !w.answer.is_closed());
        if queue.waiting.len() < self.full {
            return None;
        }
        queue.in_flight += 1;
        let take = queue.waiting.len().min(self.most);
        Some(queue.waiting.drain(..take).collect())
    }

    /// Sends `batch` to `group` on a task of its own, on a call already counted as on its way.
    fn dispatch(self: &Arc<Self>, group: u32, batch: Vec<Waiting>) {
        let lease = Lease(Arc::clone(self), group);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(send(lease, batch));
            }
            // No runtime to send from: the batch's callers hear so (their answers drop), and
            // the call passes to the rest of the queue, which goes the same way.
            Err(_) => drop((batch, lease)),
        }
    }

    /// Gives a call of `group` back: to its next batch when checks wait and the batch is full
    /// or no more than [`ALONE`] calls are on their way, else to a later call or check.
    fn release(self: &Arc<Self>, group: u32) {
        let batch: Vec<Waiting> = {
            let mut queues = self.lock();
            let Some(queue) = queues.get_mut(&group) else {
                return;
            };
            // Callers that gave up (timed out, or dropped the check) are not sent.
            queue.waiting.retain(|w| !w.answer.is_closed());
            // A short queue behind more calls than the ones alone waits to fill, or for the
            // last of them: sent now, it would be a call for a few checks, which costs Redis
            // nearly what a full one does. A queue is never left without a call on its way.
            let short = queue.waiting.len() < self.full && queue.in_flight > self.alone;
            if queue.waiting.is_empty() || short {
                queue.in_flight -= 1;
                if queue.in_flight == 0 {
                    // An idle group's queue goes (a cluster's map may name new nodes).
                    queues.remove(&group);
                }
                return;
            }
            let take = queue.waiting.len().min(self.most);
            queue.waiting.drain(..take).collect()
        };
        self.dispatch(group, batch);
    }
}

/// Runs `call` as a script call of its own.
pub(crate) async fn alone(
    connection: Connection,
    call: &Call,
    timeout: Duration,
) -> Result<Decisions, RedisError> {
    let reply = query(
        connection.clone(),
        &script_call(&[call], Keys::Declared),
        true,
        timeout,
        call.tag(),
    )
    .await?;
    let at = || connection.place(call.tag());
    match parse_decisions(&reply, std::iter::once(call), at)?.pop() {
        Some(Ok(Some(decision))) => Ok(decision),
        Some(Err(err)) => Err(err),
        _ => Err(RedisError::Reply {
            at: at().to_string(),
            detail: "no answer for the check".to_string(),
        }),
    }
}

/// Sends `batch` with [`answer_all`] and answers each check; `lease` goes back when done (or
/// dropped).
async fn send(lease: Lease, batch: Vec<Waiting>) {
    let timeout = batch.iter().map(|w| w.timeout).max().unwrap_or_default();
    let mut answers = Vec::with_capacity(batch.len());
    let mut calls = Vec::with_capacity(batch.len());
    for waiting in batch {
        answers.push(waiting.answer);
        calls.push(waiting.call);
    }
    let decisions = answer_all(&lease.0.connection, calls, lease.0.most, timeout).await;
    for (answer, decision) in answers.into_iter().zip(decisions) {
        // A caller that stopped waiting no longer needs its answer.
        let _ = answer.send(decision);
    }
    drop(lease);
}

/// Runs `calls`, an answer for each in order: on a single node one pipeline of script calls of
/// `most` requests each; on a cluster one such pipeline per node, all at once,
/// then each check a node found not to be its own again, alone.
pub(crate) async fn answer_all(
    connection: &Connection,
    calls: Vec<Call>,
    most: usize,
    timeout: Duration,
) -> Vec<Result<Decisions, RedisError>> {
    if calls.is_empty() {
        return Vec::new();
    }
    let (keys, groups) = node_groups(connection, &calls);
    // Where a group's pipeline goes on a cluster: its first key's node.
    let to = |members: &[usize]| calls[members[0]].tag();
    let mut answers: Vec<Option<Result<Decisions, RedisError>>> = vec![None; calls.len()];
    let mut elsewhere = Vec::new();
    if let [members] = &groups[..] {
        // One group (a single node, or one node's queue): no task to spawn.
        let (indices, commands) = plan(&calls, members, most, keys);
        let replies = pipelined(&mut connection.clone(), &commands, timeout, to(members)).await;
        settle(
            connection,
            &calls,
            &mut answers,
            &mut elsewhere,
            indices,
            replies,
        );
    } else {
        let mut sent = JoinSet::new();
        for members in &groups {
            let (indices, commands) = plan(&calls, members, most, keys);
            let (to, mut connection) = (to(members).to_string(), connection.clone());
            sent.spawn(async move {
                let replies = pipelined(&mut connection, &commands, timeout, &to).await;
                (indices, replies)
            });
        }
        while let Some(done) = sent.join_next().await {
            // A task only panics if the client library does; its checks stay unanswered.
            if let Ok((indices, replies)) = done {
                settle(
                    connection,
                    &calls,
                    &mut answers,
                    &mut elsewhere,
                    indices,
                    replies,
                );
            }
        }
    }
    if !elsewhere.is_empty() {
        again_alone(connection, &calls, elsewhere, timeout, &mut answers).await;
    }
    answers
        .into_iter()
        .zip(&calls)
        .map(|(answer, call)| {
            answer.unwrap_or_else(|| {
                Err(RedisError::Reply {
                    at: connection.place(call.tag()).to_string(),
                    detail: "the task sending the check ended before Redis answered".to_string(),
                })
            })
        })
        .collect()
}

/// The calls of each node (all of them on a single node), by index, and how a call names its
/// keys.
fn node_groups(connection: &Connection, calls: &[Call]) -> (Keys, Vec<Vec<usize>>) {
    match connection {
        Connection::Single(..) | Connection::Sentinel(_) => {
            (Keys::Declared, vec![(0..calls.len()).collect()])
        }
        Connection::Cluster(_, nodes) => {
            let map = nodes.map();
            let mut per_node: HashMap<u32, Vec<usize>> = HashMap::new();
            for (index, call) in calls.iter().enumerate() {
                per_node
                    .entry(Nodes::group(&map, call.tag()))
                    .or_default()
                    .push(index);
            }
            (Keys::Undeclared, per_node.into_values().collect::<Vec<_>>())
        }
    }
}

/// Sends again `elsewhere`, the calls a node found not to be its own, each alone, to the node
/// the cluster's map names now, into `answers`: each key's calls one after the other, in their
/// order (a key's checks answer as if made in turn); different keys at once.
async fn again_alone(
    connection: &Connection,
    calls: &[Call],
    mut elsewhere: Vec<usize>,
    timeout: Duration,
    answers: &mut [Option<Result<Decisions, RedisError>>],
) {
    if let Connection::Cluster(cluster, nodes) = connection {
        nodes.refresh_soon(cluster.clone());
    }
    elsewhere.sort_unstable();
    let mut per_key: HashMap<&str, Vec<(usize, Call)>> = HashMap::new();
    for index in elsewhere {
        let call = &calls[index];
        per_key
            .entry(call.tag())
            .or_default()
            .push((index, call.clone()));
    }
    let mut again = JoinSet::new();
    for checks in per_key.into_values() {
        let connection = connection.clone();
        again.spawn(async move {
            let mut answered = Vec::with_capacity(checks.len());
            for (index, call) in checks {
                answered.push((index, alone(connection.clone(), &call, timeout).await));
            }
            answered
        });
    }
    while let Some(done) = again.join_next().await {
        if let Ok(answered) = done {
            for (index, answer) in answered {
                answers[index] = Some(answer);
            }
        }
    }
}

/// The script calls for `members` of `calls`, `most` calls each, each with the indices of its
/// calls.
fn plan(
    calls: &[Call],
    members: &[usize],
    most: usize,
    keys: Keys,
) -> (Vec<Vec<usize>>, Vec<redis::Cmd>) {
    let mut members = members.to_vec();
    // A key's checks one after the other, in their order (the sort is stable): each after the
    // first takes the state the one before left (see check.lua), and other keys are
    // independent.
    members.sort_by(|&a, &b| calls[a].tag().cmp(calls[b].tag()));
    let mut indices = Vec::new();
    let mut commands = Vec::new();
    for chunk in members.chunks(most) {
        let chunk_calls: Vec<&Call> = chunk.iter().map(|&i| &calls[i]).collect();
        commands.push(script_call(&chunk_calls, keys));
        indices.push(chunk.to_vec());
    }
    (indices, commands)
}

/// Files each script call's answers under its checks; the checks a node said are not its own
/// go to `elsewhere`.
fn settle(
    connection: &Connection,
    calls: &[Call],
    answers: &mut [Option<Result<Decisions, RedisError>>],
    elsewhere: &mut Vec<usize>,
    indices: Vec<Vec<usize>>,
    replies: Vec<Result<redis::Value, RedisError>>,
) {
    for (group, reply) in indices.into_iter().zip(replies) {
        let group_calls = group.iter().map(|&i| &calls[i]);
        let at = || connection.place(calls[group[0]].tag());
        match reply.and_then(|reply| parse_decisions(&reply, group_calls, at)) {
            Ok(decisions) => {
                for (index, decision) in group.into_iter().zip(decisions) {
                    match decision {
                        Ok(Some(decision)) => answers[index] = Some(Ok(decision)),
                        Ok(None) => elsewhere.push(index),
                        Err(err) => answers[index] = Some(Err(err)),
                    }
                }
            }
            Err(err) => {
                for index in group {
                    answers[index] = Some(Err(err.clone()));
                }
            }
        }
    }
}
