//! Model checks of `SharedLimiter`'s lock-free compare-and-swap loop (for `Gcra` and `FixedWindow`) under loom: every
//! interleaving of the threads, not just the ones a run happens to hit.
//!
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p slidewin --test loom_atomic_limiter --profile loom`
//! (scripts/test runs it, in its own target directory).
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use slidewin::limit::{FixedWindow, Gcra};
use slidewin::{Moment, SharedLimiter};

/// Two threads, two checks each, on a GCRA with room for three at once: exactly three are
/// admitted, whatever the interleaving.
#[test]
fn gcra_admits_exactly_the_burst_in_every_interleaving() {
    loom::model(|| {
        let limiter = Arc::new(SharedLimiter::new(
            Gcra::new("3/s".parse().unwrap()).unwrap(),
        ));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let limiter = Arc::clone(&limiter);
                thread::spawn(move || {
                    (0..2)
                        .filter(|_| limiter.check(Moment::ZERO, 1).unwrap().allowed())
                        .count()
                })
            })
            .collect();
        let admitted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(admitted, 3);
    });
}

/// Threads in two different windows: the one in the later window moves the state on, and an
/// earlier check landing after it counts in the later window. Never more than the limit in a
/// window, and the later window's count is exact.
#[test]
fn fixed_window_never_loses_or_doubles_a_count() {
    loom::model(|| {
        let limiter = Arc::new(SharedLimiter::new(
            FixedWindow::new("1/s".parse().unwrap()).unwrap(),
        ));
        let early = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || {
                limiter
                    .check(Moment::from_millis(500), 1)
                    .unwrap()
                    .allowed()
            })
        };
        let late = {
            let limiter = Arc::clone(&limiter);
            thread::spawn(move || {
                limiter
                    .check(Moment::from_millis(1_500), 1)
                    .unwrap()
                    .allowed()
            })
        };
        let (early, late) = (early.join().unwrap(), late.join().unwrap());
        // The later window admits one: either the late check, or the early one landing after it.
        assert!(late || early);
        assert!(
            late,
            "the late check comes first or after a check of an earlier window"
        );
        let third = limiter.check(Moment::from_millis(1_600), 1).unwrap();
        assert!(!third.allowed(), "the window of 1 s already holds its one");
    });
}
