//! Helpers shared by the integration tests: a log of which call's future was polled when, and
//! scripts of calls at given milliseconds under paused time.

// Each test crate uses a part.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};
use std::time::Duration;

use slidewin_shape::{Cancelled, Event, Pending, Subscription};
use tokio::time::{Instant, sleep_until};

/// Which calls' futures were polled, and at which millisecond since `start`.
#[derive(Clone)]
pub struct Log {
    start: Instant,
    polled: Arc<Mutex<Vec<(u32, u64)>>>,
}

impl Log {
    pub fn new() -> Log {
        Log {
            start: Instant::now(),
            polled: Arc::new(Mutex::new(Vec::new())),
        }
    }

    pub fn start(&self) -> Instant {
        self.start
    }

    /// The future of call `n`: records its first poll and returns `n`.
    pub fn job(&self, n: u32) -> impl Future<Output = u32> + Send + 'static {
        let log = self.clone();
        async move {
            let at = log.now_ms();
            log.polled.lock().unwrap().push((n, at));
            n
        }
    }

    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap()
    }

    /// `(call, ms)` for every future polled, in the order polled.
    pub fn runs(&self) -> Vec<(u32, u64)> {
        self.polled.lock().unwrap().clone()
    }

    /// Sleeps until `ms` after the start.
    pub async fn at(&self, ms: u64) {
        sleep_until(self.start + Duration::from_millis(ms)).await;
    }
}

/// Makes call `n` at each of `times` (ms), then waits until `until`; each call's answer.
pub async fn script(
    log: &Log,
    times: &[u64],
    until: u64,
    mut call: impl FnMut(u32) -> Pending<u32>,
) -> Vec<Result<u32, Cancelled>> {
    let mut answers = Vec::new();
    for (n, &t) in times.iter().enumerate() {
        log.at(t).await;
        answers.push(call(u32::try_from(n).unwrap()));
    }
    log.at(until).await;
    let mut results = Vec::new();
    for answer in answers {
        results.push(answer.await);
    }
    results
}

/// Every event received so far.
pub fn drain(events: &mut Subscription) -> Vec<Event> {
    std::iter::from_fn(|| events.try_recv()).collect()
}

/// Moves the paused clock forward without letting any other task run, as a synchronous call
/// that blocks the runtime's thread does (lodash #6003's "sync blocking operation").
pub fn block_runtime_for(duration: Duration) {
    // `advance` moves the clock when first polled, then yields; it is never polled again.
    let advance = pin!(tokio::time::advance(duration));
    let _ = advance.poll(&mut Context::from_waker(Waker::noop()));
}

/// A future that counts its polls and its drop, to prove a future was never polled.
pub struct Probe {
    pub polls: Arc<AtomicUsize>,
    pub drops: Arc<AtomicUsize>,
}

impl Probe {
    pub fn new() -> Probe {
        Probe {
            polls: Arc::new(AtomicUsize::new(0)),
            drops: Arc::new(AtomicUsize::new(0)),
        }
    }

    pub fn future(&self) -> impl Future<Output = u32> + Send + 'static {
        struct Counted(Arc<AtomicUsize>, Arc<AtomicUsize>);
        impl Future for Counted {
            type Output = u32;
            fn poll(self: std::pin::Pin<&mut Self>, _: &mut Context<'_>) -> std::task::Poll<u32> {
                self.0.fetch_add(1, Ordering::SeqCst);
                std::task::Poll::Ready(1)
            }
        }
        impl Drop for Counted {
            fn drop(&mut self) {
                self.1.fetch_add(1, Ordering::SeqCst);
            }
        }
        Counted(Arc::clone(&self.polls), Arc::clone(&self.drops))
    }

    pub fn counts(&self) -> (usize, usize) {
        (
            self.polls.load(Ordering::SeqCst),
            self.drops.load(Ordering::SeqCst),
        )
    }
}
