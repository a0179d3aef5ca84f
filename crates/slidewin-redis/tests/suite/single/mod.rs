//! One Redis server of the test's own: the script, its keys, the rules of one key, and the
//! faults.

use crate::support;

use std::time::Duration;

use slidewin::limit::{Kind, LimitError, Rule, RuleSet, SlidingLog};
use slidewin::{Keyed, Limiter, Moment};
use slidewin_redis::{Check, FailurePolicy, RedisDecision, RedisError, RedisLimiter, Rules};
use support::{RedisServer, until_available};
use tokio::time::Instant;

fn secs(s: u64) -> Moment {
    Moment::from_secs(s)
}

/// The rule `name`: `quota` under `kind`.
fn rule(name: &str, kind: Kind, quota: &str) -> Rule {
    Rule::new(name, kind, quota.parse().unwrap()).unwrap()
}

/// `rule` alone, as a check names it.
fn one(rule: &Rule) -> Rules {
    Rules::try_from(rule.clone()).unwrap()
}

/// A sliding log named `log` (its key `{slidewin:key}:log:log`): the rule, which
/// `inspect` takes, and the rules a check takes.
fn log(quota: &str) -> (Rule, Rules) {
    let rule = rule("log", Kind::SlidingLog, quota);
    let rules = one(&rule);
    (rule, rules)
}

async fn limiter(server: &RedisServer) -> RedisLimiter {
    RedisLimiter::connect(&server.url())
        .await
        .expect("our own server")
}

mod clock;
mod faults;
mod keys;
mod log;
mod rules;
