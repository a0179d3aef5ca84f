//! A Redis Cluster of three masters of the test's own: hash tags keep each script on one slot,
//! batches go to every node at once, and a lost node is an error that heals.

mod support;

use slidewin::Moment;
use slidewin_redis::{Check, RedisError, RedisLimiter, Rule};
use support::RedisCluster;

async fn connect(cluster: &RedisCluster) -> RedisLimiter {
    let urls = cluster.urls();
    let nodes: Vec<&str> = urls.iter().map(String::as_str).collect();
    RedisLimiter::connect_cluster(&nodes)
        .await
        .expect("our own cluster")
}

/// Limitador PR #514 failed with CROSSSLOT: a script touching two keys in different slots.
/// Each of our scripts touches one key, and every key of a user key (one per rule) carries its
/// hash tag, so they share a slot: four rules on thirty keys spread over all three nodes.
#[tokio::test]
async fn limitador_514_no_crossslot_for_keys_on_every_node() {
    let cluster = RedisCluster::start();
    let redis = connect(&cluster).await;
    let rules = [
        Rule::sliding_log("2/minute".parse().unwrap()).unwrap(),
        Rule::sliding_counter("2/minute".parse().unwrap()).unwrap(),
        Rule::fixed_window("2/minute".parse().unwrap()).unwrap(),
        Rule::gcra("2/minute".parse().unwrap()).unwrap(),
    ];
    let mut nodes_used = [false; 3];
    let now = Moment::from_secs(1_000);
    for user in 0..30 {
        let key = format!("user-{user}");
        nodes_used[cluster.node_of(&format!("{{slidewin:{key}}}"))] = true;
        for rule in &rules {
            assert!(redis.check_at(rule, &key, now, 2).await.unwrap().allowed());
            assert!(!redis.check_at(rule, &key, now, 1).await.unwrap().allowed());
        }
        assert_eq!(redis.inspect(&key, now, now).await.unwrap(), [now, now]);
    }
    assert_eq!(nodes_used, [true; 3], "the keys covered every node");
}

/// envoy ratelimit #1149: a batch sent group after group costs a round trip per node. Ours
/// sends every slot's pipeline at once; the answers come back in the order asked.
#[tokio::test]
async fn envoy_1149_a_batch_over_every_node_answers_in_order() {
    let cluster = RedisCluster::start();
    let redis = connect(&cluster).await;
    let rule = Rule::sliding_log("1/minute".parse().unwrap()).unwrap();
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

#[tokio::test]
async fn a_lost_node_is_an_error_and_the_cluster_heals() {
    let mut cluster = RedisCluster::start();
    let redis = connect(&cluster).await;
    let rule = Rule::gcra("10/s".parse().unwrap()).unwrap();
    let key = "on-the-lost-node";
    let node = cluster.node_of(&format!("{{slidewin:{key}}}"));
    assert!(redis.check(&rule, key, 1).await.unwrap().allowed());

    cluster.nodes[node].kill();
    let err = redis.check(&rule, key, 1).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(
        matches!(
            err,
            RedisError::Cluster { .. }
                | RedisError::Unavailable { .. }
                | RedisError::Timeout { .. }
        ),
        "{err}"
    );

    // The node comes back with its slots (its cluster config is on disk), empty.
    cluster.nodes[node].restart();
    let mut attempts = 0;
    loop {
        attempts += 1;
        match redis.check(&rule, key, 1).await {
            Ok(decision) => {
                assert!(decision.allowed());
                break;
            }
            Err(err) => assert!(
                attempts < 500 && err.is_transient(),
                "attempt {attempts}: {err}"
            ),
        }
    }
}
