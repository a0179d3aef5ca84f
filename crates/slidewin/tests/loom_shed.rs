//! Model checks of `AdaptiveLimit`'s atomics under loom: every interleaving of threads racing
//! for the last place under the limit, for the one cut of a cooldown, and of a cut racing an
//! increase.
//!
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p slidewin --test loom_shed --profile loom`
//!
//! The preemptions per execution are bounded to 3, as for the other models
//! (`LOOM_MAX_PREEMPTIONS` overrides it).
#![cfg(loom)]

use std::time::Duration;

use loom::sync::Arc;
use loom::thread;
use slidewin::Moment;
use slidewin::shed::AdaptiveLimit;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}

/// Slow above 10 ms, starting at `initial`, halved at most once a second.
fn limit(initial: u32) -> Arc<AdaptiveLimit> {
    let limit = AdaptiveLimit::builder(Duration::from_millis(10))
        .initial(initial)
        .backoff(0.5)
        .cooldown(Duration::from_secs(1))
        .build()
        .unwrap();
    Arc::new(limit)
}

const FAST: Duration = Duration::from_millis(1);
const SLOW: Duration = Duration::from_millis(20);

/// Three threads race for two places: exactly two are admitted, and every place comes back.
#[test]
fn racing_acquires_never_pass_the_limit() {
    model(|| {
        let limit = limit(2);
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let limit = Arc::clone(&limit);
                thread::spawn(move || {
                    let token = AdaptiveLimit::try_acquire_owned(Arc::clone(&limit), Moment::ZERO);
                    let admitted = token.is_ok();
                    assert!(limit.in_flight() <= 2);
                    (admitted, token.ok())
                })
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(results.iter().filter(|r| r.0).count(), 2);
        drop(results);
        assert_eq!(limit.in_flight(), 0);
    });
}

/// Two slow calls end within one cooldown: exactly one of them cuts the limit, once.
#[test]
fn one_of_two_racing_slow_calls_cuts() {
    model(|| {
        let limit = limit(8);
        let a = limit
            .try_acquire(Moment::ZERO)
            .unwrap()
            .done(Moment::ZERO, FAST, true);
        assert!(a.is_none());
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let limit = Arc::clone(&limit);
                thread::spawn(move || {
                    let token = limit.try_acquire(Moment::ZERO).unwrap();
                    token.done(Moment::from_millis(20), SLOW, true)
                })
            })
            .collect();
        let cuts: Vec<_> = threads
            .into_iter()
            .filter_map(|t| t.join().unwrap())
            .collect();
        assert_eq!(cuts.len(), 1, "{cuts:?}");
        assert_eq!(limit.limit(), 4);
        assert_eq!(limit.in_flight(), 0);
    });
}

/// A cut and an increase race: each is applied once, in one order or the other.
#[test]
fn a_cut_and_an_increase_both_apply() {
    model(|| {
        let limit = limit(4);
        let tokens: Vec<_> = (0..4)
            .map(|_| AdaptiveLimit::try_acquire_owned(Arc::clone(&limit), Moment::ZERO).unwrap())
            .collect();
        let mut tokens = tokens.into_iter();
        let (slow, fast) = (tokens.next().unwrap(), tokens.next().unwrap());
        let a = thread::spawn(move || slow.done(Moment::ZERO, SLOW, true));
        let b = thread::spawn(move || fast.done(Moment::ZERO, FAST, true));
        a.join().unwrap();
        b.join().unwrap();
        let l = limit.estimate();
        // Cut first: 4 * 0.5 + 1/2 = 2.5; grown first: (4 + 1/4) * 0.5 = 2.125.
        assert!(l == 2.5 || l == 2.125, "{l}");
        drop(tokens);
    });
}
