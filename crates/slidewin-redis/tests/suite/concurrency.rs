//! Many clients on one key: the script never over-admits; three separate commands do.

use crate::support;

use std::sync::Arc;

use slidewin::Moment;
use slidewin::limit::{Kind, Rule, RuleSet};
use slidewin_redis::{RedisLimiter, Rules};
use support::RedisServer;
use tokio::sync::Barrier;

const TASKS: usize = 64;
const CONNECTIONS: usize = 4;
const LIMIT: u64 = 100;

/// `CONNECTIONS` limiters on `server`, each its own connection.
async fn connect(server: &RedisServer) -> Vec<RedisLimiter> {
    let mut clients = Vec::new();
    for _ in 0..CONNECTIONS {
        clients.push(RedisLimiter::connect(&server.url()).await.unwrap());
    }
    clients
}

/// 64 tasks on 4 connections, 10 checks each at the server's time, on `100/hour`: exactly 100
/// admitted, and the log holds exactly those 100, each its own member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_clients_never_over_admit() {
    let server = RedisServer::start();
    let clients = connect(&server).await;
    let rule = Rule::new(
        "hot",
        Kind::SlidingLog,
        format!("{LIMIT}/hour").parse().unwrap(),
    )
    .unwrap();
    let rules = Rules::try_from(rule.clone()).unwrap();
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let (redis, rules) = (clients[task % CONNECTIONS].clone(), rules.clone());
        tasks.push(tokio::spawn(async move {
            let mut admitted = 0;
            for _ in 0..10 {
                if redis.check_now(&rules, "hot", 1).await.unwrap().allowed() {
                    admitted += 1;
                }
            }
            admitted
        }));
    }
    let mut admitted = 0;
    for task in tasks {
        admitted += task.await.unwrap();
    }
    assert_eq!(admitted, LIMIT);
    let held = clients[0]
        .inspect(&rule, "hot", Moment::ZERO, Moment::MAX)
        .await
        .unwrap();
    assert_eq!(held.len() as u64, LIMIT);
    // And no window of an hour ending at an admission holds more (they all fit in one).
    let span = std::time::Duration::from_secs(3_600);
    assert!(held.last().unwrap().saturating_duration_since(held[0]) < span);
}

/// All or nothing holds under contention too: 64 tasks on 4 connections on one key under two
/// rules, a sliding log of 100 an hour and a fixed window of 150: exactly 100 admitted, and
/// the window counted exactly those (the 540 denials, by the log, consumed nothing from it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_clients_under_two_rules_consume_all_or_nothing() {
    let server = RedisServer::start();
    let clients = connect(&server).await;
    let log = Rule::new(
        "log",
        Kind::SlidingLog,
        format!("{LIMIT}/hour").parse().unwrap(),
    )
    .unwrap();
    let window = Rule::new("window", Kind::FixedWindow, "150/hour".parse().unwrap()).unwrap();
    let rules = Rules::new(RuleSet::new([log.clone(), window]).unwrap()).unwrap();
    // One instant of an hour of its own: the window's count is the test's.
    let now = Moment::from_secs(3_600 * 1_000 + 1);
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let (redis, rules) = (clients[task % CONNECTIONS].clone(), rules.clone());
        tasks.push(tokio::spawn(async move {
            let mut admitted = 0;
            for _ in 0..10 {
                let decision = redis.check(&rules, "hot", now, 1).await.unwrap();
                if decision.allowed() {
                    admitted += 1;
                } else {
                    assert_eq!(decision.decisions().binding(), 0, "{decision:?}");
                }
            }
            admitted
        }));
    }
    let mut admitted = 0;
    for task in tasks {
        admitted += task.await.unwrap();
    }
    assert_eq!(admitted, LIMIT);
    let held = clients[0]
        .inspect(&log, "hot", Moment::ZERO, Moment::MAX)
        .await
        .unwrap();
    assert_eq!(held.len() as u64, LIMIT);
    let counted = server.cli(&["hget", "{slidewin:hot}:window:fixed", "c"]);
    assert_eq!(counted.trim(), LIMIT.to_string());
}

/// Seed 001's flow sent as three separate commands (remove old entries, count, add when under
/// the limit), by the same 64 clients: between one client's count and its add, the others
/// count too. The barrier makes that interleaving happen every time; any real load makes it
/// happen sometimes. Every client sees room, and all of them get in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed001_three_separate_commands_over_admit() {
    let server = RedisServer::start();
    let limit = 10;
    let barrier = Arc::new(Barrier::new(TASKS));
    let client = redis::Client::open(server.url()).unwrap();
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let (client, barrier) = (client.clone(), Arc::clone(&barrier));
        tasks.push(tokio::spawn(async move {
            let mut conn = client.get_multiplexed_async_connection().await.unwrap();
            let now_ms = 1_000_000u64;
            let _: () = redis::cmd("ZREMRANGEBYSCORE")
                .arg("naive")
                .arg("-inf")
                .arg(now_ms - 60_000)
                .query_async(&mut conn)
                .await
                .unwrap();
            let count: u64 = redis::cmd("ZCARD")
                .arg("naive")
                .query_async(&mut conn)
                .await
                .unwrap();
            barrier.wait().await; // everyone has counted; now everyone adds
            if count < limit {
                let _: () = redis::cmd("ZADD")
                    .arg("naive")
                    .arg(now_ms)
                    .arg(format!("request-{task}"))
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                return 1;
            }
            0
        }));
    }
    let mut admitted = 0;
    for task in tasks {
        admitted += task.await.unwrap();
    }
    assert_eq!(
        admitted, TASKS as u64,
        "all {TASKS} admitted against a limit of {limit}"
    );

    // The script, under the same interleaving (it cannot be interleaved): exactly the limit.
    let redis = RedisLimiter::connect(&server.url()).await.unwrap();
    let quota = format!("{limit}/minute").parse().unwrap();
    let rules = Rules::try_from(Rule::new("scripted", Kind::SlidingLog, quota).unwrap()).unwrap();
    let barrier = Arc::new(Barrier::new(TASKS));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (redis, rules, barrier) = (redis.clone(), rules.clone(), Arc::clone(&barrier));
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            u64::from(
                redis
                    .check(&rules, "scripted", Moment::from_secs(1_000), 1)
                    .await
                    .unwrap()
                    .allowed(),
            )
        }));
    }
    let mut admitted = 0;
    for task in tasks {
        admitted += task.await.unwrap();
    }
    assert_eq!(admitted, limit);
}
