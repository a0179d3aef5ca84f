//! Group commit: checks that arrive while earlier ones are on their way to Redis wait, then go
//! together, many checks in one script call.
//!
//! A check finds a free slot (at most [`IN_FLIGHT`] calls on their way at once by default) and
//! goes at once, alone: when Redis is idle, batching adds nothing to a check's latency.
//! Otherwise it waits in a queue, and whichever call comes back first sends the queue, up to
//! the batch limit, as one script call per algorithm in one pipeline. Under load this is what bounds
//! throughput: a script call has a fixed cost in Redis (and in the client), and so does the
//! server's clock (`TIME`, read once per call), which a batch pays once for all its checks.
//! On a cluster, each node has a queue and slots of its own, and its batches go to it alone
//! (see `cluster.rs`): a slow node holds back only its own checks.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use slidewin::Decision;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use crate::cluster::Nodes;
use crate::connection::{Connection, parse_decisions, pipelined, query};
use crate::error::RedisError;
use crate::rule::{Call, Keys, script_call};

/// Calls on their way to Redis at once, by default. One would leave Redis idle while the
/// client reads an answer and writes the next batch; two keep it busy when the round trip is
/// short next to Redis's work, as on one machine (measured: see BENCHMARKS.md); a longer round
/// trip needs more
/// ([`RedisLimiter::with_calls_in_flight`](crate::RedisLimiter::with_calls_in_flight)).
pub(crate) const IN_FLIGHT: usize = 2;

type Answer = oneshot::Sender<Result<Decision, RedisError>>;

/// The queues of checks waiting for a call to Redis, shared by a limiter's clones: one on a
/// single node, one per node on a cluster.
pub(crate) struct Batcher {
    connection: Connection,
    /// The most checks sent in one batch.
    most: usize,
    /// The most calls of a group on their way at once.
    in_flight: usize,
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

/// How a check goes: alone in a free slot, or in the queue for the next batch.
enum Route {
    Alone(Call),
    Queued(oneshot::Receiver<Result<Decision, RedisError>>),
}

/// One of a group's slots (see [`IN_FLIGHT`]), held while a call is on its way; given back on
/// drop, even when the call's future is dropped, so that the queue always moves.
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
            queues: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Queue>> {
        // Nothing panics while holding the lock; a poisoned queue is still a good queue.
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `call`, alone if a slot is free or else in the next batch, waiting at most
    /// `timeout` in all.
    pub(crate) async fn check(
        self: &Arc<Self>,
        call: Call,
        timeout: Duration,
    ) -> Result<Decision, RedisError> {
        let group = match &self.connection {
            Connection::Single(_) => 0,
            Connection::Cluster(_, nodes) => Nodes::group(&nodes.map(), &call.key),
        };
        let route = {
            let mut queues = self.lock();
            let queue = queues.entry(group).or_default();
            if queue.in_flight < self.in_flight {
                queue.in_flight += 1;
                Route::Alone(call)
            } else {
                let (answer, answered) = oneshot::channel();
                queue.waiting.push_back(Waiting {
                    call,
                    timeout,
                    answer,
                });
                Route::Queued(answered)
            }
        };
        match route {
            Route::Alone(call) => {
                let _lease = Lease(Arc::clone(self), group);
                alone(self.connection.clone(), &call, timeout).await
            }
            Route::Queued(answered) => match tokio::time::timeout(timeout, answered).await {
                Ok(Ok(answer)) => answer,
                Ok(Err(_)) => Err(RedisError::Unavailable {
                    detail: "the batch carrying the check was dropped before Redis answered \
                             (the runtime is shutting down)"
                        .to_string(),
                }),
                // The check may still reach Redis, as a check whose answer timed out may.
                Err(_) => Err(RedisError::Timeout { after: timeout }),
            },
        }
    }

    /// Gives a slot of `group` back: to its next batch when checks wait, else to its next
    /// check.
    fn release(self: &Arc<Self>, group: u32) {
        let batch: Vec<Waiting> = {
            let mut queues = self.lock();
            let Some(queue) = queues.get_mut(&group) else {
                return;
            };
            // Callers that gave up (timed out, or dropped the check) are not sent.
            queue.waiting.retain(|w| !w.answer.is_closed());
            if queue.waiting.is_empty() {
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
        let lease = Lease(Arc::clone(self), group);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(send(lease, batch));
            }
            // No runtime to send from: the batch's callers hear so (their answers drop), and
            // the lease passes to the rest of the queue, which goes the same way.
            Err(_) => drop((batch, lease)),
        }
    }
}

/// Runs `call` as a script call of its own.
pub(crate) async fn alone(
    connection: Connection,
    call: &Call,
    timeout: Duration,
) -> Result<Decision, RedisError> {
    let reply = query(
        connection,
        &script_call(&[call], Keys::Declared),
        true,
        timeout,
    )
    .await?;
    match parse_decisions(&reply, std::iter::once(call))?.pop() {
        Some(Some(decision)) => Ok(decision),
        _ => Err(RedisError::Reply {
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

/// Runs `calls`, an answer for each in order: on a single node one pipeline of script calls,
/// one per algorithm and `most` checks; on a cluster one such pipeline per node, all at once,
/// then each check a node found not to be its own again, alone.
pub(crate) async fn answer_all(
    connection: &Connection,
    calls: Vec<Call>,
    most: usize,
    timeout: Duration,
) -> Vec<Result<Decision, RedisError>> {
    if calls.is_empty() {
        return Vec::new();
    }
    // The checks of each node (all of them on a single node), and how a call names its keys.
    let (keys, groups) = match connection {
        Connection::Single(_) => (Keys::Declared, vec![(0..calls.len()).collect()]),
        Connection::Cluster(_, nodes) => {
            let map = nodes.map();
            let mut per_node: HashMap<u32, Vec<usize>> = HashMap::new();
            for (index, call) in calls.iter().enumerate() {
                per_node
                    .entry(Nodes::group(&map, &call.key))
                    .or_default()
                    .push(index);
            }
            (Keys::Undeclared, per_node.into_values().collect::<Vec<_>>())
        }
    };
    // Where a group's pipeline goes on a cluster: its first key's node.
    let to = |members: &[usize]| (keys == Keys::Undeclared).then(|| calls[members[0]].key.clone());
    let mut answers: Vec<Option<Result<Decision, RedisError>>> = vec![None; calls.len()];
    let mut elsewhere = Vec::new();
    if let [members] = &groups[..] {
        // One group (a single node, or one node's queue): no task to spawn.
        let (indices, commands) = plan(&calls, members, most, keys);
        let to = to(members);
        let replies = pipelined(&mut connection.clone(), &commands, timeout, to.as_deref()).await;
        settle(&calls, &mut answers, &mut elsewhere, indices, replies);
    } else {
        let mut sent = JoinSet::new();
        for members in &groups {
            let (indices, commands) = plan(&calls, members, most, keys);
            let (to, mut connection) = (to(members), connection.clone());
            sent.spawn(async move {
                let replies = pipelined(&mut connection, &commands, timeout, to.as_deref()).await;
                (indices, replies)
            });
        }
        while let Some(done) = sent.join_next().await {
            // A task only panics if the client library does; its checks stay unanswered.
            if let Ok((indices, replies)) = done {
                settle(&calls, &mut answers, &mut elsewhere, indices, replies);
            }
        }
    }
    if !elsewhere.is_empty() {
        if let Connection::Cluster(cluster, nodes) = connection {
            nodes.refresh_soon(cluster.clone());
        }
        // Each key's checks one after the other, in their order (a key's checks answer as if
        // made in turn); different keys at once.
        elsewhere.sort_unstable();
        let mut per_key: HashMap<&str, Vec<(usize, Call)>> = HashMap::new();
        for index in elsewhere {
            let call = &calls[index];
            per_key
                .entry(call.key.as_str())
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
    answers
        .into_iter()
        .map(|answer| {
            answer.unwrap_or_else(|| {
                Err(RedisError::Reply {
                    detail: "the task sending the check ended before Redis answered".to_string(),
                })
            })
        })
        .collect()
}

/// The script calls for `members` of `calls`: one per algorithm (in order of first use) and
/// `most` checks, each with the indices of its checks.
fn plan(
    calls: &[Call],
    members: &[usize],
    most: usize,
    keys: Keys,
) -> (Vec<Vec<usize>>, Vec<redis::Cmd>) {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for &index in members {
        let algorithm = calls[index].algorithm;
        match groups
            .iter_mut()
            .find(|g| calls[g[0]].algorithm == algorithm)
        {
            Some(group) => group.push(index),
            None => groups.push(vec![index]),
        }
    }
    let mut indices = Vec::new();
    let mut commands = Vec::new();
    for group in &mut groups {
        // A key's checks one after the other, in their order: each after the first takes the
        // state the one before left (see common.lua), and other keys are independent.
        group.sort_by(|&a, &b| calls[a].key.cmp(&calls[b].key));
        for chunk in group.chunks(most) {
            let chunk_calls: Vec<&Call> = chunk.iter().map(|&i| &calls[i]).collect();
            commands.push(script_call(&chunk_calls, keys));
            indices.push(chunk.to_vec());
        }
    }
    (indices, commands)
}

/// Files each script call's answers under its checks; the checks a node said are not its own
/// go to `elsewhere`.
fn settle(
    calls: &[Call],
    answers: &mut [Option<Result<Decision, RedisError>>],
    elsewhere: &mut Vec<usize>,
    indices: Vec<Vec<usize>>,
    replies: Vec<Result<redis::Value, RedisError>>,
) {
    for (group, reply) in indices.into_iter().zip(replies) {
        let group_calls = group.iter().map(|&i| &calls[i]);
        match reply.and_then(|reply| parse_decisions(&reply, group_calls)) {
            Ok(decisions) => {
                for (index, decision) in group.into_iter().zip(decisions) {
                    match decision {
                        Some(decision) => answers[index] = Some(Ok(decision)),
                        None => elsewhere.push(index),
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
