//! Model checks of `CircuitBreaker`'s state word under loom: every interleaving of the threads
//! racing for a transition, a probe, or a read of what a transition wrote beside the word.
//!
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p slidewin --test loom_breaker --profile loom`
//!
//! The breakers here have a window of one bucket of 1 s and trip at 2 errors. The preemptions
//! per execution are bounded to 3, as for `WindowMetrics` (`LOOM_MAX_PREEMPTIONS` overrides it).
#![cfg(loom)]

use std::time::Duration;

use loom::sync::Arc;
use loom::thread;
use slidewin::Moment;
use slidewin::breaker::{CircuitBreaker, State, Transition};

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}

/// Trips at 2 errors (of at least 2 calls), opens for 10 s, then lets `probes` probes through.
fn breaker(probes: u32) -> Arc<CircuitBreaker> {
    let breaker = CircuitBreaker::builder()
        .error_count(2)
        .min_calls(2)
        .window(Duration::from_secs(1), 1)
        .wait(Duration::from_secs(10))
        .probes(probes)
        .build(Moment::ZERO)
        .unwrap();
    Arc::new(breaker)
}

fn at(secs: u64) -> Moment {
    Moment::from_secs(secs)
}

fn spawn<T: Send + 'static>(
    breaker: &Arc<CircuitBreaker>,
    f: impl FnOnce(&CircuitBreaker) -> T + Send + 'static,
) -> thread::JoinHandle<T> {
    let breaker = Arc::clone(breaker);
    thread::spawn(move || f(&breaker))
}

fn error(breaker: &CircuitBreaker, now: Moment) -> Option<Transition> {
    breaker.on_error(now, Duration::ZERO)
}

/// Two threads report the error that trips the breaker: exactly one of them returns the
/// transition, with both errors behind it.
#[test]
fn one_of_two_racing_errors_trips_it() {
    model(|| {
        let breaker = breaker(1);
        let _ = breaker.on_success(at(0), Duration::ZERO);
        let a = spawn(&breaker, |b| error(b, at(0)));
        let b = spawn(&breaker, |b| error(b, at(0)));
        let made: Vec<_> = [a, b]
            .into_iter()
            .filter_map(|t| t.join().unwrap())
            .collect();
        assert_eq!(made.len(), 1, "{made:?}");
        assert_eq!(made[0].stats.errors, 2);
        assert_eq!(breaker.state(at(0)), State::Open);
    });
}

/// Two threads race for the one probe after the wait: one gets it and makes the open to
/// half-open transition, the other is refused.
#[test]
fn one_of_two_racing_calls_is_the_probe() {
    model(|| {
        let breaker = breaker(1);
        let _ = error(&breaker, at(0));
        let _ = error(&breaker, at(0));
        let a = spawn(&breaker, |b| b.try_acquire(at(10)).ok());
        let b = spawn(&breaker, |b| b.try_acquire(at(10)).ok());
        let permits: Vec<_> = [a, b]
            .into_iter()
            .filter_map(|t| t.join().unwrap())
            .collect();
        assert_eq!(permits.len(), 1);
        assert!(permits[0].is_probe() && permits[0].transition().is_some());
        assert_eq!(breaker.state(at(10)), State::HalfOpen);
    });
}

/// The last two probes complete at once: exactly one of them closes the breaker, and the
/// window it closes into is empty (the errors that tripped it share its bucket).
#[test]
fn one_of_the_last_two_probes_closes_it() {
    model(|| {
        let breaker = breaker(2);
        let _ = error(&breaker, at(20));
        let _ = error(&breaker, at(20));
        let probes = [breaker.try_acquire(at(30)), breaker.try_acquire(at(30))];
        assert!(probes.iter().all(|p| p.is_ok()));
        let a = spawn(&breaker, |b| b.on_success(at(30), Duration::ZERO));
        let b = spawn(&breaker, |b| b.on_success(at(30), Duration::ZERO));
        let made: Vec<_> = [a, b]
            .into_iter()
            .filter_map(|t| t.join().unwrap())
            .collect();
        assert_eq!(made.len(), 1);
        assert_eq!((made[0].to, made[0].stats.calls), (State::Closed, 2));
        assert_eq!(breaker.window(at(30)).calls, 0);
    });
}

/// A call races the trip: it passes (before) or is refused for the whole wait from the trip's
/// time (after). It never reads the new open state with the old state's time beside it, which
/// would end the wait at once and make it a probe.
#[test]
fn a_call_racing_the_trip_never_sees_a_stale_open_time() {
    model(|| {
        let breaker = breaker(1);
        let _ = error(&breaker, at(20));
        let trip = spawn(&breaker, |b| error(b, at(20)).is_some());
        let call = spawn(&breaker, |b| b.try_acquire(at(25)));
        assert!(trip.join().unwrap());
        match call.join().unwrap() {
            Ok(permit) => assert!(!permit.is_probe() && permit.transition().is_none()),
            Err(rejected) => assert_eq!(rejected.retry_after, Some(Duration::from_secs(5))),
        }
    });
}

/// A reset races an error that would trip the breaker: the error counts in the window before
/// the reset (and trips it, then the reset closes it), or after it (one error: closed).
#[test]
fn a_reset_racing_a_trip_leaves_it_closed() {
    model(|| {
        let breaker = breaker(1);
        let _ = error(&breaker, at(0));
        let reset = spawn(&breaker, |b| b.reset(at(0)).from);
        let trip = spawn(&breaker, |b| error(b, at(0)).is_some());
        let (from, tripped) = (reset.join().unwrap(), trip.join().unwrap());
        assert_eq!(from == State::Open, tripped);
        assert_eq!(breaker.state(at(0)), State::Closed);
        assert!(breaker.window(at(0)).errors <= 1);
    });
}

/// A call reads an open breaker's time while another call ends the wait (open to half-open,
/// writing its own time): it is refused with the time left of the wait it read, or as
/// half-open with the one probe out; never with a wait counted from the probe's time.
#[test]
fn a_call_racing_the_probe_reads_the_open_time_of_its_own_state() {
    model(|| {
        let breaker = breaker(1);
        let _ = error(&breaker, at(0));
        let _ = error(&breaker, at(0));
        let probe = spawn(&breaker, |b| b.try_acquire(at(10)).is_ok());
        let call = spawn(&breaker, |b| b.try_acquire(at(5)).unwrap_err());
        assert!(probe.join().unwrap());
        let refused = call.join().unwrap();
        let seen = (refused.state, refused.retry_after);
        let open = (State::Open, Some(Duration::from_secs(5)));
        assert!(seen == open || seen == (State::HalfOpen, None), "{seen:?}");
    });
}
