//! Group commit against models: the script calls made, counted by hand from the rules, and
//! random batches whose answers are those of the same checks sent one by one.

use super::*;

/// The script calls `count` checks make when they all reach the limiter while Redis is paused,
/// by the rules of `batch.rs` run by hand: a check goes alone while fewer than two calls are
/// on their way; a queue of sixteen (or the batch limit) goes while fewer than `most` are;
/// a call coming back sends the queue when it is full or no more than two are on their way.
fn calls_by_hand(count: usize, most: usize, limit: usize) -> u64 {
    if limit == 1 {
        return count as u64;
    }
    let (alone, full) = (ALONE.min(most), FULL.min(limit));
    let (mut on_their_way, mut queued, mut calls) = (0, 0, 0);
    for _ in 0..count {
        if on_their_way < alone {
            on_their_way += 1;
            calls += 1;
        } else {
            queued += 1;
            if queued >= full && on_their_way < most {
                on_their_way += 1;
                calls += 1;
                queued -= queued.min(limit);
            }
        }
    }
    // Redis goes on: the calls come back one by one.
    while on_their_way > 0 {
        if queued == 0 || (queued < full && on_their_way > alone) {
            on_their_way -= 1;
        } else {
            calls += 1;
            queued -= queued.min(limit);
        }
    }
    calls
}

#[test]
fn the_calls_made_are_those_of_the_rules_run_by_hand() {
    let (server, runtime) = (
        RedisServer::start(),
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
    );
    let redis = runtime.block_on(ready(&server));
    let rule = rules("log", Kind::SlidingLog, "1000/hour");
    let case = std::sync::atomic::AtomicU64::new(0);
    let config = ProptestConfig::with_cases(48);
    proptest!(config, |(count in 1usize..=160, most in 1usize..=10, limit in 1usize..=70)| {
        let key = format!("case-{}", case.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let redis = redis
            .clone()
            .with_batch_limit(limit)
            .unwrap()
            .with_calls_in_flight(most)
            .unwrap();
        server.cli(&["config", "resetstat"]);
        let answers = runtime.block_on(while_paused(&server, &redis, std::slice::from_ref(&rule), &key, count));
        prop_assert_eq!(server.script_calls(), calls_by_hand(count, most, limit));
        // However the checks went, one key's answers are those of one check after another.
            prop_assert_eq!(remaining(&answers), (1000 - count as u64..=999).collect());
    });
}

/// A step of a batch: which of three rule sets and four keys, the cost, and how far the time
/// moves (back too), in microseconds.
fn steps() -> impl Strategy<Value = Vec<(usize, usize, u64, i64)>> {
    let delta = prop_oneof![
        4 => 0..30_000_000i64,
        2 => Just(0),
        1 => -30_000_000..0i64,
        1 => Just(100_000_000),
    ];
    prop::collection::vec((0..3usize, 0..4usize, 0..=3u64, delta), 1..64)
}

#[test]
fn a_batch_naming_keys_many_times_answers_as_one_call_per_check_does() {
    // In one call, a key's later checks take the state its earlier ones left instead of
    // reading it, and its last writes it (check.lua); the answers must be those of the same
    // checks each sent alone, which read and write everything. The two quotas are one rule's
    // name (a quota changed, with the old one still running), so they share a key's state
    // (the Redis key is the same), and a kept count must be of the quota's own window. The
    // third checks that rule and one of another algorithm together, all-or-nothing: its
    // checks of a key peek under both before either consumes.
    let (runtime, _server, redis) = support::blocking_limiter();
    let case = std::sync::atomic::AtomicU64::new(0);
    let config = ProptestConfig::with_cases(40);
    proptest!(config, |(steps in steps(), limits in (3u64..=8, 3u64..=8), uniform: bool)| {
        let case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let quotas = [
            // Spans of seconds: a key's expiry runs on the server's clock, whatever time the
            // checks give, and must not pass while a busy machine runs the case.
            Quota::new(limits.0, Duration::from_secs(50)).unwrap(),
            Quota::new(limits.1, Duration::from_secs(20)).unwrap(),
        ];
        for algorithm in Kind::RATES {
            let [older, newer] = quotas.map(|quota| Rule::new("shared", algorithm, quota).unwrap());
            let next = Kind::RATES[(Kind::RATES.iter().position(|&k| k == algorithm).unwrap() + 1) % 4];
            let other = Rule::new("other", next, quotas[1]).unwrap();
            let rules = [
                Rules::try_from(older.clone()).unwrap(),
                Rules::try_from(newer).unwrap(),
                Rules::new(RuleSet::new([older, other]).unwrap()).unwrap(),
            ];
            let mut now: i64 = 1 << 40;
            let plan: Vec<(&Rules, &str, u64, Moment)> = steps
                .iter()
                .map(|&(rule, key, cost, delta)| {
                    // All of one rule and cost: a call then sends those once, not per check.
                    let (rule, cost) = if uniform { (steps[0].0, steps[0].2) } else { (rule, cost) };
                    now += delta;
                    let at = Moment::from_nanos(u64::try_from(now).unwrap() * 1_000);
                    (&rules[rule], ["a", "b", "c", "d"][key], cost, at)
                })
                .collect();
            let checks: Vec<Check<'_>> = plan
                .iter()
                .map(|&(rule, key, cost, at)| Check::new(rule, key, cost).at(at))
                .collect();
            let batched = redis.clone().with_prefix(&format!("batched{case}"));
            let alone = redis.clone().with_prefix(&format!("alone{case}"));
            let (together, one_by_one) = runtime.block_on(async {
                // In two calls, so that the second reads what the first wrote.
                let (early, late) = checks.split_at(checks.len() / 2);
                let mut together = batched.check_many(early).await;
                together.extend(batched.check_many(late).await);
                let mut one_by_one = Vec::new();
                for &(rule, key, cost, at) in &plan {
                    one_by_one.push(alone.check(rule, key, at, cost).await);
                }
                (together, one_by_one)
            });
            for (i, (t, o)) in together.into_iter().zip(one_by_one).enumerate() {
                prop_assert_eq!(
                    t.unwrap().decisions().clone(),
                    o.unwrap().decisions().clone(),
                    "{:?} check {} of {:?}",
                    algorithm,
                    i,
                    plan.iter().map(|p| (p.1, p.2, p.3)).collect::<Vec<_>>()
                );
            }
        }
    });
}
