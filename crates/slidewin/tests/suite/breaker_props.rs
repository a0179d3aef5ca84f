//! `CircuitBreaker` against a direct transcription of resilience4j's state machine
//! (`CircuitBreakerStateMachine` and `CircuitBreakerMetrics`, time-based window), over random
//! acquires, outcomes (successes, errors, slow or not, with or without a permit) and times.
//!
//! The model keeps every call of the closed state in a list and judges it the obvious way.
//! Where slidewin differs from resilience4j by design (see the `breaker` module's docs), the
//! model follows slidewin and says so:
//!
//! * the window is `buckets` buckets aligned on the timeline, of `bucket` nanoseconds
//!   (resilience4j's are seconds): a call counts while its bucket is one of the last
//!   `buckets` at `now`;
//! * the wait ends at `opened + wait` (resilience4j: the instant after);
//! * the half-open state judges once as many outcomes as probes have been reported
//!   (resilience4j's code judges after `min(minimumNumberOfCalls, probes)`; its docs, as here,
//!   after all of them);
//! * the error count (Sentinel's rule) is judged as the ratios are, capped at the probes while
//!   half-open.
//!
//! Time never goes back here (the window's clamping of late calls is `WindowMetrics`', tested
//! with it, and the breaker's own back-steps are in `breaker.rs`), but it stands still, steps
//! exactly a bucket, a span or the wait, and jumps by 2^40 ns, up to `u64::MAX`.

use std::time::Duration;

use proptest::prelude::*;
use slidewin::Moment;
use slidewin::breaker::{CallStats, Cause, CircuitBreaker, Rule, State};

#[derive(Clone, Copy, Debug)]
struct Config {
    error_ratio: f64,
    error_count: Option<u64>,
    slow_ratio: f64,
    slow_above: Duration,
    min_calls: u64,
    wait: u64,
    probes: u64,
    bucket: u64,
    buckets: u64,
}

/// A call of the closed state: its bucket, whether it failed, whether it was slow.
type Call = (u64, bool, bool);

#[derive(Clone, Debug, PartialEq)]
enum ModelState {
    Closed { calls: Vec<Call> },
    Open { retry_at: u64 },
    HalfOpen { permits_left: u64, calls: Vec<Call> },
}

/// resilience4j's state machine, transcribed.
struct Model {
    config: Config,
    state: ModelState,
}

impl Model {
    fn name(&self) -> State {
        match self.state {
            ModelState::Closed { .. } => State::Closed,
            ModelState::Open { .. } => State::Open,
            ModelState::HalfOpen { .. } => State::HalfOpen,
        }
    }

    /// `CircuitBreakerMetrics.checkIfThresholdsExceeded`, with the error count after the
    /// failure rate and before the slow-call rate.
    fn exceeded(&self, calls: &[Call], min_calls: u64, error_count: Option<u64>) -> Option<Rule> {
        let total = calls.len() as u64;
        if total == 0 || total < min_calls {
            return None;
        }
        let failed = calls.iter().filter(|c| c.1).count() as u64;
        let slow = calls.iter().filter(|c| c.2).count() as u64;
        if failed as f64 / total as f64 >= self.config.error_ratio {
            Some(Rule::ErrorRatio)
        } else if error_count.is_some_and(|n| failed >= n) {
            Some(Rule::ErrorCount)
        } else if slow as f64 / total as f64 >= self.config.slow_ratio {
            Some(Rule::SlowCallRatio)
        } else {
            None
        }
    }

    /// The calls of the closed window at `now`: those of the last `buckets` buckets.
    fn window(&self, calls: &[Call], now: u64) -> Vec<Call> {
        let top = now / self.config.bucket;
        calls
            .iter()
            .copied()
            .filter(|c| c.0 + self.config.buckets > top)
            .collect()
    }

    fn open_at(&mut self, now: u64) {
        self.state = ModelState::Open {
            retry_at: now.saturating_add(self.config.wait),
        };
    }

    /// `tryAcquirePermission`: `Ok(is a probe, made open -> half-open)` or `Err(retry after)`.
    fn try_acquire(&mut self, now: u64) -> Result<(bool, bool), Option<u64>> {
        match &mut self.state {
            ModelState::Closed { .. } => Ok((false, false)),
            ModelState::Open { retry_at } if now < *retry_at => Err(Some(*retry_at - now)),
            ModelState::Open { .. } => {
                self.state = ModelState::HalfOpen {
                    permits_left: self.config.probes - 1,
                    calls: Vec::new(),
                };
                Ok((true, true))
            }
            ModelState::HalfOpen { permits_left, .. } if *permits_left > 0 => {
                *permits_left -= 1;
                Ok((true, false))
            }
            ModelState::HalfOpen { .. } => Err(None),
        }
    }

    /// `onSuccess` / `onError`: the transition made, as (from, to, cause, stats).
    fn on_result(
        &mut self,
        now: u64,
        duration: Duration,
        error: bool,
    ) -> Option<(State, State, Cause, CallStats)> {
        let call = (
            now / self.config.bucket,
            error,
            duration > self.config.slow_above,
        );
        match &mut self.state {
            ModelState::Closed { calls } => {
                calls.push(call);
                let calls = calls.clone();
                let window = self.window(&calls, now);
                let rule =
                    self.exceeded(&window, self.config.min_calls, self.config.error_count)?;
                self.open_at(now);
                Some((
                    State::Closed,
                    State::Open,
                    Cause::Tripped(rule),
                    stats(&window),
                ))
            }
            ModelState::Open { .. } => None,
            ModelState::HalfOpen { calls, .. } => {
                calls.push(call);
                if (calls.len() as u64) < self.config.probes {
                    return None;
                }
                let calls = calls.clone();
                let count = self.config.error_count.map(|n| n.min(self.config.probes));
                match self.exceeded(&calls, self.config.probes, count) {
                    Some(rule) => {
                        self.open_at(now);
                        Some((
                            State::HalfOpen,
                            State::Open,
                            Cause::ProbesFailed(rule),
                            stats(&calls),
                        ))
                    }
                    None => {
                        self.state = ModelState::Closed { calls: Vec::new() };
                        Some((
                            State::HalfOpen,
                            State::Closed,
                            Cause::ProbesPassed,
                            stats(&calls),
                        ))
                    }
                }
            }
        }
    }

    /// The state a call at `now` would find (resilience4j's automatic open -> half-open).
    fn state(&self, now: u64) -> State {
        match self.state {
            ModelState::Open { retry_at } if now >= retry_at => State::HalfOpen,
            _ => self.name(),
        }
    }
}

fn stats(calls: &[Call]) -> CallStats {
    CallStats {
        calls: calls.len() as u64,
        errors: calls.iter().filter(|c| c.1).count() as u64,
        slow: calls.iter().filter(|c| c.2).count() as u64,
    }
}

#[derive(Clone, Debug)]
enum Op {
    Acquire,
    Report {
        duration: Duration,
        error: bool,
    },
    /// Acquire, and report the outcome only if permitted: a caller that follows the rules.
    Call {
        duration: Duration,
        error: bool,
    },
    State,
}

fn config() -> impl Strategy<Value = Config> {
    let ratio = prop_oneof![
        Just(0.25),
        Just(0.5),
        Just(1.0),
        (1_u32..=100).prop_map(|p| f64::from(p) / 100.0)
    ];
    (
        (ratio.clone(), prop::option::weighted(0.3, 1_u64..6), ratio),
        (1_u64..8, 1_u64..40, 1_u64..5),
        (2_u64..12, 1_u64..5, 0_u64..20),
    )
        .prop_map(
            |(
                (error_ratio, error_count, slow_ratio),
                (min_calls, wait, probes),
                (bucket, buckets, slow_above),
            )| Config {
                error_ratio,
                error_count,
                slow_ratio,
                slow_above: Duration::from_nanos(slow_above),
                min_calls,
                wait,
                probes,
                bucket,
                buckets,
            },
        )
}

fn steps(config: Config) -> impl Strategy<Value = Vec<(u64, Op)>> {
    let span = config.bucket * config.buckets;
    let advance = prop_oneof![
        4 => Just(0),
        6 => 0..config.bucket,
        1 => Just(config.bucket),
        1 => Just(span),
        1 => Just(config.wait),
        1 => Just(config.wait - 1),
        1 => Just(1_u64 << 40),
    ];
    let duration = prop_oneof![
        3 => Just(Duration::ZERO),
        2 => Just(config.slow_above),
        2 => Just(config.slow_above + Duration::from_nanos(1)),
        2 => (0_u64..40).prop_map(Duration::from_nanos),
        1 => Just(Duration::from_nanos(u64::MAX)),
        1 => Just(Duration::MAX),
    ];
    let op = prop_oneof![
        2 => Just(Op::Acquire),
        3 => (duration.clone(), any::<bool>()).prop_map(|(duration, error)| Op::Report { duration, error }),
        6 => (duration, prop::bool::weighted(0.4)).prop_map(|(duration, error)| Op::Call { duration, error }),
        1 => Just(Op::State),
    ];
    prop::collection::vec((advance, op), 1..200)
}

fn case() -> impl Strategy<Value = (Config, u64, Vec<(u64, Op)>)> {
    config().prop_flat_map(|config| {
        let start = prop_oneof![4 => 0_u64..1_000, 1 => Just(u64::MAX - (1 << 41))];
        (Just(config), start, steps(config))
    })
}

fn breaker(config: Config, start: u64) -> CircuitBreaker {
    let mut builder = CircuitBreaker::builder()
        .error_ratio(config.error_ratio)
        .slow_call_ratio(config.slow_ratio, config.slow_above)
        .min_calls(config.min_calls)
        .wait(Duration::from_nanos(config.wait))
        .probes(u32::try_from(config.probes).unwrap())
        .window(
            Duration::from_nanos(config.bucket * config.buckets),
            u32::try_from(config.buckets).unwrap(),
        );
    if let Some(n) = config.error_count {
        builder = builder.error_count(n);
    }
    builder.build(Moment::from_nanos(start)).unwrap()
}

/// Runs one step on both; panics where they differ.
fn step(breaker: &CircuitBreaker, model: &mut Model, now: u64, op: &Op) {
    let at = Moment::from_nanos(now);
    let report = |model: &mut Model, duration: Duration, error: bool| {
        let got = breaker.on_result(at, duration, error);
        let want = model.on_result(now, duration, error);
        let got = got.map(|t| {
            assert_eq!(t.at, at);
            (t.from, t.to, t.cause, t.stats)
        });
        assert_eq!(got, want, "report at {now}");
    };
    match *op {
        Op::Acquire | Op::Call { .. } => {
            let got = breaker.try_acquire(at);
            let want = model.try_acquire(now);
            match (&got, want) {
                (Ok(permit), Ok((probe, transition))) => {
                    assert_eq!(
                        (permit.is_probe(), permit.transition().is_some()),
                        (probe, transition),
                        "acquire at {now}"
                    );
                }
                (Err(rejected), Err(after)) => {
                    assert_eq!(
                        rejected.retry_after,
                        after.map(Duration::from_nanos),
                        "acquire at {now}"
                    );
                    assert_eq!(rejected.state, model.name());
                }
                _ => panic!("acquire at {now}: got {got:?}, want {want:?}"),
            }
            if let (Op::Call { duration, error }, Ok(_)) = (op, got) {
                report(model, *duration, *error);
            }
        }
        Op::Report { duration, error } => report(model, duration, error),
        Op::State => {}
    }
    assert_eq!(breaker.state(at), model.state(now), "state at {now}");
    if let ModelState::Closed { calls } = &model.state {
        assert_eq!(
            breaker.window(at),
            stats(&model.window(calls, now)),
            "window at {now}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn the_breaker_is_resilience4js_state_machine((config, start, steps) in case()) {
        let breaker = breaker(config, start);
        let mut model = Model { config, state: ModelState::Closed { calls: Vec::new() } };
        let mut now = start;
        for (advance, op) in &steps {
            now = now.saturating_add(*advance);
            step(&breaker, &mut model, now, op);
        }
    }
}
