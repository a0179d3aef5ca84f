//! One snapshot a tick, shared by all who look.
//!
//! A snapshot reads every rule's minute of statistics: on a config of thousands of rules that
//! is work, so it is never done per reader nor on the workers that answer checks. A [`Feed`]
//! builds one a tick, on tokio's blocking threads, one build at a time, and only while someone
//! looks: while an event stream is open, or when `/api/stats` asks and the last one is older
//! than a tick. Its readers share the serialised bytes.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use super::SnapshotSource;

/// How often a snapshot is built while someone looks; `/api/stats` reuses one younger than
/// this.
pub(crate) const TICK: Duration = Duration::from_secs(1);

/// A snapshot serialised once for all its readers.
pub(crate) struct Frame {
    /// When it was asked for.
    taken: Instant,
    /// Its build's number: the feed counts the builds it starts, from 1.
    build: u64,
    /// The source's generation then.
    generation: u64,
    /// As a server-sent event: `data: {json}\n\n`, or an `error` event saying why not.
    pub(crate) event: Bytes,
    /// The JSON alone (a slice of `event`); none when there is none.
    pub(crate) json: Option<Bytes>,
}

impl Frame {
    fn of(source: &dyn SnapshotSource, taken: Instant, build: u64, generation: u64) -> Frame {
        let snapshot = source.snapshot();
        match serde_json::to_vec(&snapshot) {
            Ok(json) => {
                // Compact JSON has no line break (strings escape theirs): one `data:` line.
                let mut event = Vec::with_capacity(json.len() + 8);
                event.extend_from_slice(b"data: ");
                event.extend_from_slice(&json);
                event.extend_from_slice(b"\n\n");
                let event = Bytes::from(event);
                let json = event.slice(6..6 + json.len());
                Frame {
                    taken,
                    build,
                    generation,
                    event,
                    json: Some(json),
                }
            }
            Err(error) => {
                tracing::warn!(%error, "dashboard: a snapshot did not serialize");
                Frame::error(taken, build, generation, "the snapshot did not serialize")
            }
        }
    }

    fn error(taken: Instant, build: u64, generation: u64, why: &str) -> Frame {
        Frame {
            taken,
            build,
            generation,
            event: Bytes::from(format!("event: error\ndata: {why}\n\n")),
            json: None,
        }
    }

    /// Whether it may stand for a snapshot now: younger than `age`, of `generation`.
    fn reusable(&self, age: Duration, generation: u64) -> bool {
        self.generation == generation && self.taken.elapsed() < age
    }
}

/// The latest frame; none before the first build.
pub(crate) type Latest = watch::Receiver<Option<Arc<Frame>>>;

/// One snapshot a tick of a source, for every reader: the event streams follow it, and
/// `/api/stats` reads it.
pub(crate) struct Feed {
    source: Arc<dyn SnapshotSource>,
    /// The service's stop: the ticks end with it.
    stop: watch::Receiver<bool>,
    latest: watch::Sender<Option<Arc<Frame>>>,
    state: Mutex<FeedState>,
}

#[derive(Default)]
struct FeedState {
    /// Event streams open.
    streams: usize,
    /// Whether the task that asks for a snapshot each tick runs.
    ticking: bool,
    /// Whether a build runs: there is never a second.
    building: bool,
    /// Builds started.
    started: u64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Feed {
    /// A feed of `source`'s snapshots, whose ticks end when `stop` turns `true`.
    pub(crate) fn new(source: Arc<dyn SnapshotSource>, stop: watch::Receiver<bool>) -> Arc<Feed> {
        Arc::new(Feed {
            source,
            stop,
            latest: watch::Sender::new(None),
            state: Mutex::new(FeedState::default()),
        })
    }

    fn state(&self) -> MutexGuard<'_, FeedState> {
        lock(&self.state)
    }

    /// Every frame from now on.
    pub(crate) fn subscribe(&self) -> Latest {
        self.latest.subscribe()
    }

    /// An event stream opens: the ticks begin (if they had ended), until every stream's
    /// [`Looking`] is dropped.
    pub(crate) fn look(self: &Arc<Feed>) -> Looking {
        let mut state = self.state();
        state.streams += 1;
        if !state.ticking {
            state.ticking = true;
            tokio::spawn(Arc::clone(self).tick());
        }
        Looking(Arc::clone(self))
    }

    /// Each tick, while a stream is open and the service runs, a snapshot unless one was
    /// taken within half a tick (for `/api/stats`, or for a stream that just opened).
    async fn tick(self: Arc<Feed>) {
        let mut ticks = tokio::time::interval_at(Instant::now() + TICK, TICK);
        // Late ticks are skipped, never sent as a burst.
        ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut stop = self.stop.clone();
        loop {
            let stopped = tokio::select! {
                biased;
                _ = stop.wait_for(|stop| *stop) => true,
                _ = ticks.tick() => false,
            };
            let mut state = self.state();
            // Decided under the lock that `look` takes: a stream that opens now finds the
            // ticks running, or starts them again.
            if stopped || state.streams == 0 {
                state.ticking = false;
                return;
            }
            self.build_unless_younger_than(&mut state, TICK / 2);
        }
    }

    /// The frame of this tick: the latest if it is younger than a tick and of the source's
    /// generation now, else the next such, or one whose build began after this call (a build
    /// starts unless one runs). Marks it seen in `latest`.
    pub(crate) async fn current(self: &Arc<Feed>, latest: &mut Latest) -> Arc<Frame> {
        let asked = self.state().started;
        loop {
            {
                let generation = self.source.generation();
                let mut state = self.state();
                let ready = latest
                    .borrow_and_update()
                    .as_ref()
                    .filter(|frame| frame.reusable(TICK, generation) || frame.build > asked)
                    .map(Arc::clone);
                if let Some(frame) = ready {
                    return frame;
                }
                // A build ends under this lock: none can end between the look above and this.
                self.build_unless_younger_than(&mut state, TICK);
            }
            if latest.changed().await.is_err() {
                // Unreachable: the sender is in `self`.
                return Arc::new(Frame::error(Instant::now(), 0, 0, "the feed ended"));
            }
        }
    }

    /// Starts a build, off the async workers, unless one runs or the latest is younger than
    /// `age` (and of the source's generation now).
    fn build_unless_younger_than(self: &Arc<Feed>, state: &mut FeedState, age: Duration) {
        if state.building {
            return;
        }
        let generation = self.source.generation();
        if self
            .latest
            .borrow()
            .as_ref()
            .is_some_and(|frame| frame.reusable(age, generation))
        {
            return;
        }
        state.building = true;
        state.started += 1;
        let build = state.started;
        let feed = Arc::clone(self);
        let taken = Instant::now();
        tokio::task::spawn_blocking(move || feed.build(taken, build, generation));
    }

    /// Builds and publishes a frame. A source that panics gives an `error` event: the readers
    /// waiting for this build never wait for good.
    fn build(&self, taken: Instant, build: u64, generation: u64) {
        let source = self.source.as_ref();
        let frame = std::panic::catch_unwind(AssertUnwindSafe(|| {
            Frame::of(source, taken, build, generation)
        }))
        .unwrap_or_else(|_| {
            tracing::error!("dashboard: taking a snapshot panicked");
            Frame::error(taken, build, generation, "the snapshot could not be taken")
        });
        let mut state = self.state();
        state.building = false;
        self.latest.send_replace(Some(Arc::new(frame)));
    }
}

/// An open event stream of a [`Feed`]; dropping it closes it.
pub(crate) struct Looking(Arc<Feed>);

impl Drop for Looking {
    fn drop(&mut self) {
        self.0.state().streams -= 1;
    }
}

/// `GET /api/stats`: the snapshot of this tick of `feed`, which the dashboard's event streams
/// share; one younger than a tick is reused.
pub(crate) async fn stats_answer(feed: Arc<Feed>) -> Response {
    let frame = feed.current(&mut feed.subscribe()).await;
    match &frame.json {
        Some(json) => ([(header::CONTENT_TYPE, "application/json")], json.clone()).into_response(),
        None => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "application/json")],
            r#"{"error":"the snapshot could not be taken"}"#,
        )
            .into_response(),
    }
}
