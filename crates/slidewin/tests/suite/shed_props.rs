//! `AdaptiveLimit` against a reference model of the same AIMD rules, written the obvious way
//! (one owner, plain fields, a list of the calls in flight), over random sequences of
//! acquires, reports (fast, exactly at the threshold, slow, failed, `Duration::MAX`) and
//! dropped tokens, at times that stand still, step forward, go back, and reach `u64::MAX`.

#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "the model's limit is within [1, 60]"
)]

use std::time::Duration;

use proptest::prelude::*;
use slidewin::Moment;
use slidewin::shed::{AdaptiveLimit, Cause, Change, Shed, Token};

#[derive(Clone, Copy, Debug)]
struct Config {
    min: u32,
    max: u32,
    initial: u32,
    backoff: f64,
    slower_than: Duration,
    cooldown: u64,
}

/// The rules of the `shed` module's docs, transcribed.
struct Model {
    config: Config,
    l: f64,
    in_flight: u64,
    next_cut: u64,
}

impl Model {
    fn acquire(&mut self) -> Result<(), Shed> {
        let limit = self.l.floor() as u32;
        if self.in_flight >= u64::from(limit) {
            return Err(Shed {
                limit,
                in_flight: self.in_flight,
            });
        }
        self.in_flight += 1;
        Ok(())
    }

    fn done(&mut self, now: u64, latency: Duration, ok: bool) -> Option<Change> {
        let in_flight = self.in_flight; // with this call
        self.in_flight -= 1;
        let cause = if !ok {
            Cause::Failed
        } else if latency > self.config.slower_than {
            Cause::Slow
        } else {
            Cause::Fast
        };
        let old = self.l;
        match cause {
            Cause::Fast if in_flight * 2 >= old.floor() as u64 => {
                self.l = (old + 1.0 / old).min(f64::from(self.config.max));
            }
            Cause::Slow | Cause::Failed if now >= self.next_cut => {
                self.next_cut = now.saturating_add(self.config.cooldown);
                self.l = (old * self.config.backoff).max(f64::from(self.config.min));
            }
            _ => return None,
        }
        let (from, to) = (old.floor() as u32, self.l.floor() as u32);
        (from != to).then_some(Change {
            from,
            to,
            at: Moment::from_nanos(now),
            cause,
        })
    }
}

#[derive(Clone, Debug)]
enum Op {
    Acquire,
    /// Reports the `i % len`-th call in flight.
    Done {
        i: usize,
        latency: Duration,
        ok: bool,
    },
    /// Drops the `i % len`-th call in flight unreported.
    Drop {
        i: usize,
    },
}

fn config() -> impl Strategy<Value = Config> {
    (
        1_u32..6,
        0_u32..30,
        0_u32..30,
        50_u32..100,
        1_u64..50,
        0_u64..60,
    )
        .prop_map(|(min, above, initial, ratio, slow, cooldown)| {
            let max = min + above;
            Config {
                min,
                max,
                initial: min + initial % (above + 1),
                backoff: f64::from(ratio) / 100.0,
                slower_than: Duration::from_nanos(slow),
                cooldown,
            }
        })
}

fn steps(config: Config) -> impl Strategy<Value = Vec<(u64, Op)>> {
    let slow = config.slower_than;
    let latency = prop_oneof![
        4 => (0_u64..5).prop_map(Duration::from_nanos),
        2 => Just(slow),
        2 => Just(slow + Duration::from_nanos(1)),
        1 => Just(Duration::MAX),
    ];
    let op = prop_oneof![
        5 => Just(Op::Acquire),
        6 => (any::<usize>(), latency, prop::bool::weighted(0.9))
            .prop_map(|(i, latency, ok)| Op::Done { i, latency, ok }),
        1 => any::<usize>().prop_map(|i| Op::Drop { i }),
    ];
    // Time: mostly small steps forward, sometimes back, sometimes to the end.
    let time = prop_oneof![
        10 => 0_u64..200,
        1 => Just(u64::MAX - 1),
        1 => Just(u64::MAX),
    ];
    prop::collection::vec((time, op), 1..300)
}

fn check(config: Config, steps: &[(u64, Op)]) -> Result<(), TestCaseError> {
    let limit = AdaptiveLimit::builder(config.slower_than)
        .min(config.min)
        .max(config.max)
        .initial(config.initial)
        .backoff(config.backoff)
        .cooldown(Duration::from_nanos(config.cooldown))
        .build()
        .unwrap();
    let mut model = Model {
        config,
        l: f64::from(config.initial),
        in_flight: 0,
        next_cut: 0,
    };
    // The calls in flight: tokens, with their start times for the model's dropped ones.
    let mut tokens: Vec<(u64, Token<&AdaptiveLimit>)> = Vec::new();
    for (at, op) in steps {
        let now = Moment::from_nanos(*at);
        match op {
            Op::Acquire => {
                let got = limit.try_acquire(now);
                prop_assert_eq!(got.as_ref().err().copied(), model.acquire().err());
                if let Ok(token) = got {
                    tokens.push((*at, token));
                }
            }
            Op::Done { i, latency, ok } if !tokens.is_empty() => {
                let (_, token) = tokens.swap_remove(i % tokens.len());
                let change = token.done(now, *latency, *ok);
                prop_assert_eq!(change, model.done(*at, *latency, *ok));
            }
            Op::Drop { i } if !tokens.is_empty() => {
                let (start, token) = tokens.swap_remove(i % tokens.len());
                drop(token);
                let _ = model.done(start, Duration::ZERO, false);
            }
            Op::Done { .. } | Op::Drop { .. } => {}
        }
        prop_assert_eq!(limit.estimate().to_bits(), model.l.to_bits());
        prop_assert_eq!(limit.in_flight(), model.in_flight);
        prop_assert!((config.min..=config.max).contains(&limit.limit()));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn adaptive_limit_matches_the_reference_model(
        (config, steps) in config().prop_flat_map(|c| (Just(c), steps(c)))
    ) {
        check(config, &steps)?;
    }
}
