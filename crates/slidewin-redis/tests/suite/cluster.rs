//! A Redis Cluster of three masters of the test's own: hash tags keep each check, all its
//! rules' keys, on one slot, batches go to every node at once, one script call per node, a
//! slot that moves under a batch costs a round trip, never a wrong answer, and a lost node is
//! an error that heals.

use crate::support;

use std::time::Duration;

use slidewin::Moment;
use slidewin::limit::{Kind, Rule, RuleSet};
use slidewin_redis::{Check, CircuitState, FailurePolicy, RedisError, RedisLimiter, Rules};
use support::{RedisCluster, at_once, until_available};

/// The rule `name`: `quota` under `kind`.
fn rule(name: &str, kind: Kind, quota: &str) -> Rule {
    Rule::new(name, kind, quota.parse().unwrap()).unwrap()
}

/// The rule `name`: `quota` under `kind`, alone, as a check names it.
fn rules(name: &str, kind: Kind, quota: &str) -> Rules {
    Rules::try_from(rule(name, kind, quota)).unwrap()
}

/// Checks go alone while fewer than this many calls are on their way to their node (the
/// crate's `ALONE`).
const ALONE: u64 = 2;

/// A node's queue this long goes without waiting for a call to come back (the crate's `FULL`).
const FULL: u64 = 16;

fn reset_stats(cluster: &RedisCluster) {
    for node in &cluster.nodes {
        node.cli(&["config", "resetstat"]);
    }
}

async fn connect(cluster: &RedisCluster) -> RedisLimiter {
    let urls = cluster.urls();
    let nodes: Vec<&str> = urls.iter().map(String::as_str).collect();
    RedisLimiter::connect_cluster(&nodes)
        .await
        .expect("our own cluster")
}

/// Limitador PR #514 failed with CROSSSLOT: a script touching two keys in different slots.
/// A check of several rules touches a key per rule in one script, and every key of a user key
/// carries its hash tag, so they share a slot: four rules, one of each algorithm, checked
/// together on thirty keys spread over all three nodes, and each rule alone.
#[tokio::test]
async fn limitador_514_no_crossslot_for_keys_on_every_node() {
    let cluster = RedisCluster::start();
    let redis = connect(&cluster).await;
    let each = Kind::RATES.map(|kind| rule(kind.name(), kind, "2/minute"));
    let all = Rules::new(RuleSet::new(each.clone()).unwrap()).unwrap();
    let mut nodes_used = [false; 3];
    let now = Moment::from_secs(1_000);
    for user in 0..30 {
        let key = format!("user-{user}");
        nodes_used[cluster.node_of(&format!("{{slidewin:{key}}}"))] = true;
        let both = redis.check(&all, &key, now, 2).await.unwrap();
        assert!(both.allowed());
        assert_eq!(both.decisions().as_slice().len(), 4);
        assert!(!redis.check(&all, &key, now, 1).await.unwrap().allowed());
        for rule in &each {
            let alone = Rules::try_from(rule.clone()).unwrap();
            assert!(!redis.check(&alone, &key, now, 1).await.unwrap().allowed());
        }
        assert_eq!(
            redis.inspect(&each[0], &key, now, now).await.unwrap(),
            [now, now]
        );
    }
    assert_eq!(nodes_used, [true; 3], "the keys covered every node");
}

/// envoy ratelimit #1149: a batch sent group after group costs a round trip per node. Ours
/// sends every slot's pipeline at once; the answers come back in the order asked.
#[tokio::test]
async fn envoy_1149_a_batch_over_every_node_answers_in_order() {
    let cluster = RedisCluster::start();
    let redis = connect(&cluster).await;
    let rule = rules("log", Kind::SlidingLog, "1/minute");
    let keys: Vec<String> = (0..40).map(|i| format!("batch-{i}")).collect();
    let now = Moment::from_secs(50);
    // Each key twice: the first admitted, the second denied.
    let checks: Vec<Check<'_>> = keys
        .iter()
        .flat_map(|k| {
            [
                Check::new(&rule, k, 1).at(now),
                Check::new(&rule, k, 1).at(now),
            ]
        })
        .collect();
    let answers = redis.check_many(&checks).await;
    for (i, answer) in answers.iter().enumerate() {
        let decision = answer.as_ref().unwrap();
        assert_eq!(decision.allowed(), i % 2 == 0, "check {i}");
    }
}

/// Group commit on a cluster: a batch's checks go to their nodes as one script call per node,
/// keys of many slots and rules of every algorithm in it (which `KEYS` would refuse with
/// CROSSSLOT). (There was a call per node and algorithm when each had a script of its own.)
#[tokio::test]
async fn a_batch_is_one_script_call_per_node() {
    let cluster = RedisCluster::start();
    let redis = connect(&cluster).await;
    let log = rules("log", Kind::SlidingLog, "1/minute");
    let gcra = rules("gcra", Kind::Gcra, "1/minute");
    let keys: Vec<String> = (0..60).map(|i| format!("spread-{i}")).collect();
    let now = Moment::from_secs(70);
    // Loads the script everywhere first, so that every call counted below is a batch.
    let warm = redis
        .check_many(&[Check::new(&gcra, "warm", 1), Check::new(&log, "warm", 1)])
        .await;
    assert!(warm.iter().all(Result::is_ok));
    let mut per_node = [0; 3];
    for key in &keys {
        per_node[cluster.node_of(&format!("{{slidewin:{key}}}"))] += 1;
    }
    assert!(per_node.iter().all(|&n| n > 1), "{per_node:?}");
    for round in 0..2 {
        reset_stats(&cluster);
        let checks: Vec<Check<'_>> = keys
            .iter()
            .flat_map(|k| {
                [
                    Check::new(&log, k, 1).at(now),
                    Check::new(&gcra, k, 1).at(now),
                ]
            })
            .collect();
        let answers = redis.check_many(&checks).await;
        for (i, answer) in answers.iter().enumerate() {
            // Each key's first check of each rule is admitted, the second round's denied.
            assert_eq!(answer.as_ref().unwrap().allowed(), round == 0, "check {i}");
        }
        for node in &cluster.nodes {
            assert_eq!(node.script_calls(), 1, "one call on port {}", node.port);
        }
    }
}

/// The client's map of the slots is a guess: when a slot moves, the node it still names
/// answers the moved key's check as not its own, untouched, and the check goes again alone to
/// the new node: still exact (admitted once, then denied), and later batches find the new node.
#[tokio::test]
async fn a_check_whose_slot_moved_goes_alone_to_its_new_node() {
    let cluster = RedisCluster::start();
    let redis = connect(&cluster).await;
    let rule = rules("api", Kind::Gcra, "1/minute");
    let key = "moving";
    let redis_key = format!("{{slidewin:{key}}}:api:gcra");
    let from = cluster.node_of(&redis_key);
    let to = (from + 1) % 3;
    let slot = cluster.nodes[0].cli(&["cluster", "keyslot", &redis_key]);
    let target = cluster.nodes[to].cli(&["cluster", "myid"]);
    // The slot is empty: each node can be told at once who serves it now.
    for node in [to, from, 3 - from - to] {
        let said =
            cluster.nodes[node].cli(&["cluster", "setslot", slot.trim(), "node", target.trim()]);
        assert_eq!(said.trim(), "OK", "port {}", cluster.nodes[node].port);
    }
    assert_eq!(cluster.node_of(&redis_key), to);
    // A neighbour on the old node keeps the batch going there.
    let stays = (0..100)
        .map(|i| format!("stays-{i}"))
        .find(|k| cluster.node_of(&format!("{{slidewin:{k}}}")) == from)
        .expect("a key on the old node");
    let now = Moment::from_secs(90);
    // The moved key's checks go again in their order: the first admitted, the others not.
    let checks = [
        Check::new(&rule, key, 1).at(now),
        Check::new(&rule, &stays, 1).at(now),
        Check::new(&rule, key, 1).at(now),
        Check::new(&rule, key, 1).at(now),
        Check::new(&rule, key, 1).at(now),
    ];
    let answers = redis.check_many(&checks).await;
    let allowed: Vec<bool> = answers
        .iter()
        .map(|a| a.as_ref().unwrap().allowed())
        .collect();
    assert_eq!(allowed, [true, true, false, false, false]);
    assert_eq!(cluster.nodes[to].cli(&["exists", &redis_key]).trim(), "1");
    assert!(
        cluster.nodes[from]
            .cli(&["exists", &redis_key])
            .starts_with("MOVED")
    );
    // The map is read again in the background; until then a batch still costs the old node
    // a call. Each attempt is a round trip: no clock.
    let mut attempts = 0;
    loop {
        attempts += 1;
        assert!(
            attempts < 10_000,
            "the client never learnt where the slot went"
        );
        reset_stats(&cluster);
        let answer = redis.check(&rule, key, now, 1).await.unwrap();
        assert!(!answer.allowed());
        if cluster.nodes[from].script_calls() == 0 {
            break;
        }
    }
}

/// Pauses every node, checks each of `keys` once at `now`, lets the nodes go on, and asserts
/// each answer is `allowed`.
async fn while_nodes_paused(
    cluster: &RedisCluster,
    redis: &RedisLimiter,
    rule: &Rules,
    keys: &[String],
    now: Moment,
    allowed: bool,
) {
    for node in &cluster.nodes {
        node.cli(&["client", "pause", "10000", "WRITE"]);
    }
    let tasks: Vec<_> = keys
        .iter()
        .map(|key| {
            let (redis, rule, key) = (redis.clone(), rule.clone(), key.clone());
            tokio::spawn(async move { redis.check(&rule, &key, now, 1).await })
        })
        .collect();
    tokio::task::yield_now().await;
    for node in &cluster.nodes {
        node.cli(&["client", "unpause"]);
    }
    for task in tasks {
        let decision = task.await.unwrap().unwrap();
        assert_eq!(decision.allowed(), allowed);
    }
}

/// How many of `keys` each node of `cluster` serves.
fn per_node(cluster: &RedisCluster, keys: &[String]) -> [u64; 3] {
    let mut per_node = [0u64; 3];
    for key in keys {
        per_node[cluster.node_of(&format!("{{slidewin:{key}}}"))] += 1;
    }
    per_node
}

/// Group commit on a cluster: while every node is paused, each node's first checks go alone
/// (two per node) and the rest wait in that node's queue; once the nodes go on, each queue
/// is one script call to its node, and every answer is exact.
#[tokio::test]
async fn waiting_checks_go_to_their_node_in_one_call_per_node() {
    let cluster = RedisCluster::start();
    let redis = connect(&cluster).await;
    let rule = rules("api", Kind::Gcra, "1/minute");
    // Loads the script on every node first.
    assert!(redis.check_now(&rule, "warm", 1).await.is_ok());
    let keys: Vec<String> = (0..30).map(|i| format!("queued-{i}")).collect();
    let per_node = per_node(&cluster, &keys);
    // Each node's queue stays short of a full batch.
    assert!(
        per_node.iter().all(|&n| n > ALONE && n < ALONE + FULL),
        "{per_node:?}"
    );
    let now = Moment::from_secs(500);
    for round in 0..2 {
        reset_stats(&cluster);
        while_nodes_paused(&cluster, &redis, &rule, &keys, now, round == 0).await;
        for node in &cluster.nodes {
            assert_eq!(node.script_calls(), ALONE + 1, "port {}", node.port);
        }
    }
}

/// A node's queue that fills a batch goes to that node at once, as on a single node: each
/// node sees two calls alone, one per full batch of its own keys, and one for the rest.
#[tokio::test]
async fn a_nodes_full_batch_goes_without_waiting_for_a_call_to_come_back() {
    let cluster = RedisCluster::start();
    let redis = connect(&cluster).await;
    let rule = rules("api", Kind::Gcra, "1/minute");
    assert!(redis.check_now(&rule, "warm", 1).await.is_ok());
    let keys: Vec<String> = (0..120).map(|i| format!("full-{i}")).collect();
    let per_node = per_node(&cluster, &keys);
    // Each node has at least one full batch, and no more than six (eight calls at most).
    assert!(
        per_node
            .iter()
            .all(|n| (ALONE + FULL..=ALONE + 6 * FULL).contains(n)),
        "{per_node:?}"
    );
    reset_stats(&cluster);
    while_nodes_paused(&cluster, &redis, &rule, &keys, Moment::from_secs(500), true).await;
    for (node, n) in cluster.nodes.iter().zip(per_node) {
        let queued = n - ALONE;
        let expected = ALONE + queued / FULL + u64::from(!queued.is_multiple_of(FULL));
        assert_eq!(
            node.script_calls(),
            expected,
            "port {}, {n} keys",
            node.port
        );
    }
}

/// A limiter that denies a lost node's keys, and probes the node often (every 50 ms at most).
async fn connect_denying_while_lost(cluster: &RedisCluster) -> RedisLimiter {
    connect(cluster)
        .await
        .with_failure_policy(FailurePolicy::Closed)
        .with_circuit_backoff(Duration::from_millis(1), Duration::from_millis(50))
        .unwrap()
}

/// A key of each node, in the nodes' order.
fn a_key_on_each_node(cluster: &RedisCluster) -> Vec<String> {
    let mut keys: Vec<Option<String>> = vec![None; cluster.nodes.len()];
    for i in 0.. {
        let key = format!("user-{i}");
        let node = cluster.node_of(&format!("{{slidewin:{key}}}"));
        keys[node].get_or_insert(key);
        if keys.iter().all(Option::is_some) {
            break;
        }
    }
    keys.into_iter().flatten().collect()
}

#[tokio::test]
async fn a_lost_node_answers_at_once_naming_it_while_the_others_stay_exact() {
    let mut cluster = RedisCluster::start();
    let redis = connect_denying_while_lost(&cluster).await;
    let rule = rules("api", Kind::Gcra, "10/hour");
    let keys = a_key_on_each_node(&cluster);
    for key in &keys {
        assert!(redis.check_now(&rule, key, 1).await.unwrap().allowed());
    }

    cluster.nodes[0].kill();
    let lost = format!("127.0.0.1:{}", cluster.nodes[0].port);
    let first = redis.check_now(&rule, &keys[0], 1).await.unwrap();
    let why = first.degraded().expect("decided without Redis");
    assert!(
        matches!(
            why,
            RedisError::Cluster { at, .. }
                | RedisError::Unavailable { at, .. }
                | RedisError::Timeout { at, .. } if *at == lost
        ),
        "{why}"
    );
    assert!(!first.allowed());
    // Its node's circuit is open: the checks of its keys answer at once, naming it.
    for _ in 0..10 {
        let again = at_once(redis.check_now(&rule, &keys[0], 1))
            .expect("an answer without waiting")
            .unwrap();
        let why = again.degraded().expect("decided without Redis");
        let said = format!("Redis at {lost} is unavailable: not asked: the circuit is open since ");
        assert!(why.to_string().starts_with(&said), "{why}");
    }
    assert!(!redis.is_available());
    // The other nodes' keys still go to Redis, exactly.
    for key in &keys[1..] {
        let decision = redis.check_now(&rule, key, 1).await.unwrap();
        assert_eq!(decision.degraded(), None, "{key}");
        assert_eq!(decision.remaining(), 8, "{key}");
    }

    // The node comes back with its slots (its cluster config is on disk), empty.
    cluster.nodes[0].restart();
    until_available(&redis).await;
    let back = redis.check_now(&rule, &keys[0], 1).await.unwrap();
    assert_eq!(back.degraded(), None);
    assert_eq!(back.remaining(), 9);
}

/// A master killed and its replica promoted (`CLUSTER FAILOVER TAKEOVER`: at once, where Redis
/// Cluster by itself waits its node timeout): the checks of the master's keys follow the new
/// master and are exact again, counting what the old one admitted. Before that, each probe of
/// the lost node learns it is down within a few round trips: redis-rs's default wait before it
/// sends again after a refused connection or `CLUSTERDOWN` is 1.28 s, longer than the call's
/// timeout, so each probe took the whole second and said only that, and checks came back to
/// Redis up to 1.5 s after it served again.
#[tokio::test]
async fn after_a_failover_the_checks_follow_the_promoted_replica_exactly() {
    // A node timeout long enough that only the takeover below fails the master over.
    let mut cluster = RedisCluster::start_replicated(Duration::from_secs(60));
    let redis = connect_denying_while_lost(&cluster).await;
    let rule = rules("api", Kind::SlidingLog, "5/hour");
    let key = "user-0";
    let master = cluster.node_of(&format!("{{slidewin:{key}}}"));
    let replica = cluster
        .replica_of(master)
        .expect("a replica of each master");
    for _ in 0..3 {
        assert!(redis.check_now(&rule, key, 1).await.unwrap().allowed());
    }
    cluster.until_replicated(master);

    cluster.nodes[master].kill();
    let lost = format!("127.0.0.1:{}", cluster.nodes[master].port);
    let first = redis.check_now(&rule, key, 1).await.unwrap();
    assert!(first.degraded().is_some() && !first.allowed());
    // A probe goes, and fails: the node is still down.
    assert_eq!(
        redis.circuit_changed(CircuitState::Open).await,
        CircuitState::HalfOpen
    );
    assert_eq!(
        redis.circuit_changed(CircuitState::HalfOpen).await,
        CircuitState::Open
    );
    let again = redis.check_now(&rule, key, 1).await.unwrap();
    let why = again.degraded().expect("decided without Redis");
    let said = format!("Redis at {lost} is unavailable: not asked: the circuit is open since ");
    assert!(why.to_string().starts_with(&said), "{why}");
    assert!(
        !why.to_string().contains("no answer"),
        "the probe waited out its timeout: {why}"
    );

    let promoted = cluster.nodes[replica].cli(&["cluster", "failover", "takeover"]);
    assert_eq!(promoted.trim(), "OK");
    cluster.until_serving(replica);
    // Every node agreeing first: a client sent by one still behind to the node that has just
    // taken over met `MOVED` twice, its retries, about once in six full test runs.
    cluster.until_every_node_sees(&format!("{{slidewin:{key}}}"), replica);
    until_available(&redis).await;
    // Three admitted before the failover, on the old master: two more fit, then none.
    for left in [1, 0] {
        let decision = redis.check_now(&rule, key, 1).await.unwrap();
        assert_eq!(decision.degraded(), None);
        assert!(decision.allowed());
        assert_eq!(decision.remaining(), left);
    }
    assert!(!redis.check_now(&rule, key, 1).await.unwrap().allowed());
    assert_eq!(cluster.node_of(&format!("{{slidewin:{key}}}")), replica);
}
