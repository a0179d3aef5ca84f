//! Group commit: checks that arrive while earlier ones are on their way to Redis wait, then go
//! together, many checks in one script call.
//!
//! A check finds a free slot (at most [`IN_FLIGHT`] calls on their way at once) and goes at
//! once, alone: when Redis is idle, batching adds nothing to a check's latency. Otherwise it
//! waits in a queue, and whichever call comes back first sends the queue, up to the batch
//! limit, as one script call per algorithm in one pipeline. Under load this is what bounds
//! throughput: a script call has a fixed cost in Redis (and in the client), and so does the
//! server's clock (`TIME`, read once per call), which a batch pays once for all its checks.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use slidewin::Decision;
use tokio::sync::oneshot;

use crate::connection::{Connection, parse_decisions, pipelined, query};
use crate::error::RedisError;
use crate::rule::{Call, script_call};

/// Calls on their way to Redis at once. One would leave Redis idle while the client reads an
/// answer and writes the next batch; two keep it busy (measured: see BENCHMARKS.md).
pub(crate) const IN_FLIGHT: usize = 2;

type Answer = oneshot::Sender<Result<Decision, RedisError>>;

/// The queue of checks waiting for a call to Redis, shared by a limiter's clones.
pub(crate) struct Batcher {
    connection: Connection,
    /// The most checks sent in one batch.
    most: usize,
    queue: Mutex<Queue>,
}

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

/// One of the [`IN_FLIGHT`] slots, held while a call is on its way; given back on drop, even
/// when the call's future is dropped, so that the queue always moves.
struct Lease(Arc<Batcher>);

impl Drop for Lease {
    fn drop(&mut self) {
        self.0.release();
    }
}

impl Batcher {
    /// A batcher sending at most `most` checks per batch.
    pub(crate) fn new(connection: Connection, most: usize) -> Arc<Batcher> {
        Arc::new(Batcher {
            connection,
            most,
            queue: Mutex::new(Queue {
                in_flight: 0,
                waiting: VecDeque::new(),
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        // Nothing panics while holding the lock; a poisoned queue is still a good queue.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `call`, alone if a slot is free or else in the next batch, waiting at most
    /// `timeout` in all.
    pub(crate) async fn check(
        self: &Arc<Self>,
        call: Call,
        timeout: Duration,
    ) -> Result<Decision, RedisError> {
        let route = {
            let mut queue = self.lock();
            if queue.in_flight < IN_FLIGHT {
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
                let _lease = Lease(Arc::clone(self));
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

    /// Gives a slot back: to the next batch when checks wait, else to the next check.
    fn release(self: &Arc<Self>) {
        let batch: Vec<Waiting> = {
            let mut queue = self.lock();
            // Callers that gave up (timed out, or dropped the check) are not sent.
            queue.waiting.retain(|w| !w.answer.is_closed());
            if queue.waiting.is_empty() {
                queue.in_flight -= 1;
                return;
            }
            let take = queue.waiting.len().min(self.most);
            queue.waiting.drain(..take).collect()
        };
        let lease = Lease(Arc::clone(self));
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
    let reply = query(connection, &script_call(&[call]), true, timeout).await?;
    parse_decisions(&reply, 1)?
        .pop()
        .ok_or_else(|| RedisError::Reply {
            detail: "no answer for the check".to_string(),
        })
}

/// Sends `batch` as one script call per algorithm, all in one pipeline, and answers each
/// check; `lease` goes back when done (or dropped).
async fn send(lease: Lease, batch: Vec<Waiting>) {
    let timeout = batch.iter().map(|w| w.timeout).max().unwrap_or_default();
    let mut answers = Vec::with_capacity(batch.len());
    let mut calls = Vec::with_capacity(batch.len());
    for waiting in batch {
        answers.push(Some(waiting.answer));
        calls.push(waiting.call);
    }
    // The checks of each algorithm, in the order they came.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (index, call) in calls.iter().enumerate() {
        match groups
            .iter_mut()
            .find(|g| calls[g[0]].algorithm == call.algorithm)
        {
            Some(group) => group.push(index),
            None => groups.push(vec![index]),
        }
    }
    let commands: Vec<_> = groups
        .iter()
        .map(|group| script_call(&group.iter().map(|&i| &calls[i]).collect::<Vec<_>>()))
        .collect();
    let mut connection = lease.0.connection.clone();
    let replies = pipelined(&mut connection, &commands, timeout).await;
    for (group, reply) in groups.iter().zip(replies) {
        match reply.and_then(|reply| parse_decisions(&reply, group.len())) {
            Ok(decisions) => {
                for (&index, decision) in group.iter().zip(decisions) {
                    if let Some(answer) = answers[index].take() {
                        // A caller that stopped waiting no longer needs its answer.
                        let _ = answer.send(Ok(decision));
                    }
                }
            }
            Err(err) => {
                for &index in group {
                    if let Some(answer) = answers[index].take() {
                        let _ = answer.send(Err(err.clone()));
                    }
                }
            }
        }
    }
    drop(lease);
}
