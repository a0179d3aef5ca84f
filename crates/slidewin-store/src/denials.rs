//! Denials Redis gave, answered again without asking it until they end: a key that Redis
//! denied one unit with nothing left and a `retry_after` is denied until then on every
//! process, since counts only grow within a window and a denied check counts nothing. So a
//! flood on one hot key costs Redis one call per `retry_after`, not one per request.
//!
//! Only one-unit checks are kept and answered, and a denial is kept until the first of the
//! rules that denied it would admit: till then each still denies with nothing left, and a rule
//! that admitted still would, so the answer is Redis's with each wait and reset less the time
//! gone by, where no other process admits meanwhile. (An admitting rule's remaining may grow
//! meanwhile; no answer to a denied request shows it.) Where others admit, Redis could deny
//! longer, or by more rules: the cache never admits, and never denies what Redis would admit.
//!
//! Rules that give units back when released (leases, a sliding log that refunds) are never
//! kept. A settle that gives units back (a reservation that cost less than its estimate) is the
//! other way counts go down: it forgets the key's denial here. One made on another process is not
//! seen here, so this process may deny a key that Redis would admit again until the kept
//! wait ends, at most that wait.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use slidewin::Moment;
use slidewin::limit::{Decision, Decisions, Rule};
use slidewin_redis::Rules;

use crate::Checked;

/// Shards, so that checks on different keys seldom wait for one another.
const SHARDS: usize = 16;

/// The longest key kept: the service's keys are 64 bytes (a digest), and a layer's key (an
/// address, a header's value) is the client's to choose; a longer one is asked of Redis
/// every time, so that the cache's memory is bounded by its capacity, not by the clients.
const MAX_KEY: usize = 256;

/// A denial as Redis gave it, and until when it holds.
struct Denial {
    /// The rules it was given under: kept, so that their identity is not reused meanwhile.
    rules: Rules,
    key: Box<str>,
    /// When it was asked (at or before Redis decided), and when its wait ends.
    since: Moment,
    until: Moment,
    checked: Checked,
}

/// The denials, at most `capacity` held.
pub(crate) struct Denials {
    shards: Box<[Mutex<HashMap<u64, Denial>>]>,
    per_shard: usize,
    hasher: RandomState,
    answered: AtomicU64,
}

impl Denials {
    /// Room for `capacity` denials; 0 caches none.
    pub(crate) fn new(capacity: usize) -> Denials {
        Denials {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            per_shard: capacity.div_ceil(SHARDS),
            hasher: RandomState::new(),
            answered: AtomicU64::new(0),
        }
    }

    /// How many checks were answered here, not by Redis.
    pub(crate) fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    fn slot(&self, rules: &Rules, key: &str) -> (u64, &Mutex<HashMap<u64, Denial>>) {
        let hash = self.hasher.hash_one((rules.identity(), key));
        // The low bits pick the shard; the map hashes the whole value again.
        let shard = usize::try_from(hash % SHARDS as u64).unwrap_or(0);
        (hash, &self.shards[shard])
    }

    /// The answer to a check of `cost` units of `key` under `rules` at `now`, if a denial
    /// still holds it.
    pub(crate) fn answer(
        &self,
        rules: &Rules,
        key: &str,
        now: Moment,
        cost: u64,
    ) -> Option<Checked> {
        if cost != 1 || self.per_shard == 0 {
            return None;
        }
        let (hash, shard) = self.slot(rules, key);
        let mut map = shard.lock().unwrap_or_else(PoisonError::into_inner);
        let denial = map.get(&hash)?;
        if denial.rules.identity() != rules.identity() || *denial.key != *key {
            return None;
        }
        let now = on_redis_grid(now);
        if now >= denial.until {
            map.remove(&hash);
            return None;
        }
        // A clock gone back: Redis decides.
        let gone = now.checked_duration_since(denial.since)?;
        let answer = later(&denial.checked, gone)?;
        self.answered.fetch_add(1, Ordering::Relaxed);
        Some(answer)
    }

    /// Forgets the denial kept for `key` under `rules`, if any: its counts went down.
    pub(crate) fn forget(&self, rules: &Rules, key: &str) {
        let (hash, shard) = self.slot(rules, key);
        let mut map = shard.lock().unwrap_or_else(PoisonError::into_inner);
        if map
            .get(&hash)
            .is_some_and(|d| d.rules.identity() == rules.identity() && *d.key == *key)
        {
            map.remove(&hash);
        }
    }

    /// Keeps `checked`, Redis's answer to a check of `cost` units of `key` under `rules`
    /// asked at `now`, if it is a denial that holds for a while.
    pub(crate) fn keep(&self, rules: &Rules, key: &str, now: Moment, cost: u64, checked: &Checked) {
        // Leases end early when released, and a log that refunds gives units back, on any
        // instance: their denials are not kept.
        if cost != 1
            || self.per_shard == 0
            || key.len() > MAX_KEY
            || checked.degraded().is_some()
            || checked.allowed()
            || rules.rule_set().rules().iter().any(Rule::gives_back)
        {
            return;
        }
        // Until the first of its rules that denied would admit: till then each still denies
        // with nothing left, and a rule that admitted still would (a denied check counts
        // nothing), so every decision is Redis's less the time gone by.
        let denials = checked.decisions().iter().filter(|d| !d.allowed());
        if denials.clone().any(|d| d.remaining() > 0) {
            return;
        }
        let Some(wait) = denials.filter_map(Decision::retry_after).min() else {
            return;
        };
        if wait.is_zero() {
            return;
        }
        let (hash, shard) = self.slot(rules, key);
        let mut map = shard.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= self.per_shard && !map.contains_key(&hash) {
            map.retain(|_, denial| denial.until > now);
            if map.len() >= self.per_shard {
                return; // Full of denials that hold: this one is asked of Redis again.
            }
        }
        let since = on_redis_grid(now);
        let denial = Denial {
            rules: rules.clone(),
            key: key.into(),
            since,
            until: since
                .checked_add(wait)
                .unwrap_or(Moment::from_nanos(u64::MAX)),
            checked: checked.clone(),
        };
        map.insert(hash, denial);
    }
}

/// `now` as Redis's script takes it: whole microseconds, the rest dropped. Waits are measured
/// from there, so that a wait ends where Redis's does (1 ns past 9.999999999 s is 10 s to
/// Redis, where a wait of 1 µs from 9.999999 s ends), never later.
fn on_redis_grid(now: Moment) -> Moment {
    Moment::from_nanos(now.as_nanos() / 1_000 * 1_000)
}

/// `checked` as it stands `gone` later: each wait and reset shorter by that much.
fn later(checked: &Checked, gone: Duration) -> Option<Checked> {
    let each = checked
        .decisions()
        .iter()
        .map(|d| {
            let reset = d.reset_after().saturating_sub(gone);
            match d.retry_after() {
                None => Decision::allow(d.limit(), d.remaining(), reset),
                Some(wait) => {
                    Decision::deny(d.limit(), d.remaining(), reset, wait.saturating_sub(gone))
                }
            }
        })
        .collect();
    Decisions::new(each).map(Checked::new)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use slidewin::Moment;
    use slidewin::limit::{Decision, Decisions, Kind, Rule};
    use slidewin_redis::Rules;

    use super::Denials;
    use crate::Checked;

    fn rules() -> Rules {
        Rules::try_from(Rule::new("api", Kind::SlidingLog, "2/s".parse().unwrap()).unwrap())
            .unwrap()
    }

    fn secs(s: f64) -> Moment {
        Moment::ZERO
            .checked_add(Duration::from_secs_f64(s))
            .unwrap()
    }

    /// Denied, nothing left, `wait` to go, full again in `reset`.
    fn denied(wait: f64, reset: f64) -> Checked {
        let d = Decision::deny(
            2,
            0,
            Duration::from_secs_f64(reset),
            Duration::from_secs_f64(wait),
        );
        Checked::new(Decisions::new(vec![d]).unwrap())
    }

    #[test]
    fn a_denial_is_answered_until_its_wait_ends_shorter_by_the_time_gone() {
        let (cache, rules) = (Denials::new(64), rules());
        cache.keep(&rules, "ann", secs(10.0), 1, &denied(2.0, 3.0));
        let later = cache.answer(&rules, "ann", secs(10.5), 1).expect("held");
        assert_eq!(later, denied(1.5, 2.5));
        // The boundary: the wait's end is Redis's again, and the denial is gone.
        assert!(
            cache
                .answer(&rules, "ann", secs(11.999_999_999), 1)
                .is_some()
        );
        assert!(cache.answer(&rules, "ann", secs(12.0), 1).is_none());
        assert!(
            cache.answer(&rules, "ann", secs(11.0), 1).is_none(),
            "removed at its end"
        );
        assert_eq!(cache.answered(), 2);
    }

    #[test]
    fn only_the_same_key_rules_and_one_unit_at_or_after_the_denial() {
        let (cache, rules) = (Denials::new(64), rules());
        cache.keep(&rules, "ann", secs(10.0), 1, &denied(2.0, 3.0));
        assert!(cache.answer(&rules, "bob", secs(10.5), 1).is_none());
        assert!(
            cache.answer(&self::rules(), "ann", secs(10.5), 1).is_none(),
            "other rules"
        );
        assert!(
            cache.answer(&rules, "ann", secs(10.5), 2).is_none(),
            "two units: Redis"
        );
        assert!(
            cache.answer(&rules, "ann", secs(9.0), 1).is_none(),
            "a clock gone back"
        );
        assert!(
            cache.answer(&rules.clone(), "ann", secs(10.0), 1).is_some(),
            "a clone"
        );
        // The longest key kept, at its bound.
        let long = "k".repeat(256);
        cache.keep(&rules, &long, secs(10.0), 1, &denied(2.0, 3.0));
        assert!(cache.answer(&rules, &long, secs(10.0), 1).is_some());
    }

    #[test]
    fn what_may_change_before_the_wait_ends_or_is_too_long_is_not_kept() {
        let (cache, rules) = (Denials::new(64), rules());
        let left_one = Checked::new(
            Decisions::new(vec![Decision::deny(
                2,
                1,
                Duration::from_secs(3),
                Duration::from_secs(2),
            )])
            .unwrap(),
        );
        let admitted = Checked::new(
            Decisions::new(vec![Decision::allow(2, 0, Duration::from_secs(1))]).unwrap(),
        );
        let degraded = Checked::degraded_by(
            Decisions::new(vec![Decision::deny(
                2,
                0,
                Duration::ZERO,
                Duration::from_secs(1),
            )])
            .unwrap(),
            "redis is down".to_owned(),
        );
        for (key, cost, checked) in [
            ("left", 1, &left_one),
            ("admitted", 1, &admitted),
            ("degraded", 1, &degraded),
            ("two", 2, &denied(2.0, 3.0)),
            ("no-wait", 1, &denied(0.0, 3.0)),
            (&"k".repeat(257), 1, &denied(2.0, 3.0)),
        ] {
            cache.keep(&rules, key, secs(10.0), cost, checked);
            assert!(cache.answer(&rules, key, secs(10.0), 1).is_none(), "{key}");
        }
    }

    #[test]
    fn it_holds_at_most_its_capacity_and_makes_room_from_the_ended() {
        let rules = rules();
        assert!({
            let none = Denials::new(0);
            none.keep(&rules, "ann", secs(10.0), 1, &denied(2.0, 3.0));
            none.answer(&rules, "ann", secs(10.0), 1).is_none()
        });
        // 16 a shard: 2,000 keys fill every shard, and the rest are asked of Redis.
        let cache = Denials::new(256);
        for i in 0..2_000 {
            cache.keep(&rules, &format!("k{i}"), secs(10.0), 1, &denied(2.0, 3.0));
        }
        let held = (0..2_000)
            .filter(|i| {
                cache
                    .answer(&rules, &format!("k{i}"), secs(10.0), 1)
                    .is_some()
            })
            .count();
        assert_eq!(held, 256);
        // Once they have ended, new ones take their places.
        for i in 0..2_000 {
            cache.keep(&rules, &format!("n{i}"), secs(20.0), 1, &denied(2.0, 3.0));
        }
        let held = (0..2_000)
            .filter(|i| {
                cache
                    .answer(&rules, &format!("n{i}"), secs(20.0), 1)
                    .is_some()
            })
            .count();
        assert_eq!(held, 256);
    }
}
