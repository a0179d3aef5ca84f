//! A search box: a request per keystroke is what the box asks for; the screen
//! must only ever show the answer for what is typed. Three layers do it:
//!
//! 1. a [`Debouncer`] merges keystrokes less than 300 ms apart, so only the last is sent;
//! 2. [`Latest`] cancels the request still in flight when a newer one is sent;
//! 3. a [`SequenceGuard`] discards an answer older than the one shown, because the search
//!    backend ignores cancellation: once asked, it answers.
//!
//! Typing is simulated on tokio's paused clock, so the run is the same every time:
//!
//! ```text
//! cargo run -p slidewin-shape --example search_box
//! ```

use std::sync::{Arc, Mutex};
use std::time::Duration;

use slidewin_shape::{Cancelled, Debouncer, Latest, Runtime, SequenceGuard, Ticket};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

/// What the user types, and when (ms).
const TYPING: [(u64, &str); 7] = [
    (0, "r"),
    (100, "ru"),
    (200, "rus"),
    (600, "rust"),
    (1_300, "rust a"),
    (1_400, "rust as"),
    (1_450, "rust asy"),
];

/// The backend takes longer for shorter queries (they match more).
fn latency(query: &str) -> Duration {
    Duration::from_millis(match query.len() {
        0..=3 => 700,
        4..=5 => 200,
        _ => 100,
    })
}

/// Prints with the time since `start`; kept in order for the test.
#[derive(Clone)]
struct Out {
    start: Instant,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Out {
    fn say(&self, what: String) {
        let ms = self.start.elapsed().as_millis();
        self.lines
            .lock()
            .unwrap()
            .push(format!("{ms:>6} ms  {what}"));
    }
}

/// Runs the simulation; the lines it prints.
pub(crate) async fn search_box() -> Vec<String> {
    let out = Out {
        start: Instant::now(),
        lines: Arc::new(Mutex::new(Vec::new())),
    };
    let rt = Runtime::new(4).expect("a runtime");
    let typing: Debouncer<&str, &str> =
        Debouncer::new(&rt, Duration::from_millis(300)).expect("a 300 ms debouncer");
    let requests = Latest::new(&rt);
    let guard = Arc::new(SequenceGuard::new());
    let (answers, mut inbox) = mpsc::unbounded_channel::<(Ticket, &str, usize)>();
    let screen = {
        let (out, guard) = (out.clone(), Arc::clone(&guard));
        tokio::spawn(async move {
            while let Some((ticket, query, hits)) = inbox.recv().await {
                if guard.accept(ticket) {
                    out.say(format!("shown #{} {query:?}: {hits} hits", ticket.get()));
                } else {
                    out.say(format!(
                        "discarded #{} {query:?}: older than what is shown",
                        ticket.get()
                    ));
                }
            }
        })
    };

    let mut handlers = Vec::new();
    for (at, text) in TYPING {
        sleep_until(out.start + Duration::from_millis(at)).await;
        out.say(format!("typed {text:?}"));
        let pending = typing.call("box", async move { text });
        let (out, requests, guard, answers) = (
            out.clone(),
            requests.clone(),
            Arc::clone(&guard),
            answers.clone(),
        );
        handlers.push(tokio::spawn(async move {
            let Ok(query) = pending.await else {
                out.say(format!(
                    "{text:?} merged into a later keystroke, never sent"
                ));
                return;
            };
            let ticket = guard.issue();
            out.say(format!("sent #{} {query:?}", ticket.get()));
            let request = requests.call("box", async move {
                // The backend works on its own task: cancelling the request does not stop it.
                let backend = tokio::spawn(async move {
                    tokio::time::sleep(latency(query)).await;
                    let _ = answers.send((ticket, query, 12 - query.len()));
                });
                let _ = backend.await;
            });
            if request.await == Err(Cancelled) {
                out.say(format!(
                    "request #{} {query:?} cancelled: a newer search restarted it",
                    ticket.get()
                ));
            }
        }));
    }
    drop(answers);
    for handler in handlers {
        handler.await.expect("a keystroke handler");
    }
    screen.await.expect("the screen");
    let stats = rt.inspect();
    out.say(format!(
        "{} keystrokes, {} tasks registered (a debounced keystroke and a request per search)",
        TYPING.len(),
        stats.registered
    ));
    out.lines.lock().unwrap().clone()
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    for line in search_box().await {
        println!("{line}");
    }
}
