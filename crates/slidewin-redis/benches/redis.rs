//! Checks per second on Redis, single node and cluster, with 1, 16 and 64 concurrent tasks,
//! against the raw ceiling measured in the same run: as many round trips of a trivial
//! `EVALSHA` script. Also the bytes each algorithm keeps per key (`MEMORY USAGE`), a sliding
//! log's bytes per admission from 10 to 10,000 admissions, and Redis's time for a check of a
//! log holding 100 to 50,000 (`INFO commandstats`).
//! `cargo bench -p slidewin-redis --bench redis` (starts its own servers; needs redis-server).
//! With Redis on a vCPU of its own, as a server of its own would be:
//! `SLIDEWIN_REDIS_CPUS=0 taskset -c 1 cargo bench -p slidewin-redis --bench redis`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, Criterion, Throughput, measurement::WallTime};
use redis::aio::ConnectionLike;
use slidewin::Moment;
use slidewin::limit::{Kind, Rule};
use slidewin_redis::{RedisLimiter, Rules};
use slidewin_test_support::redis::{RedisCluster, RedisServer};
use tokio::runtime::Runtime;

const TASKS: [u64; 3] = [1, 16, 64];

/// One operation a task repeats: given the task and its count of operations so far.
type Op = Arc<dyn Fn(u64, u64) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// The key of a task's `n`th operation: each task cycles over 64 keys of its own, so that no
/// key is asked more than about a thousand times a second, whatever the rate.
fn key(task: u64, n: u64) -> String {
    format!("task-{task}-{}", n % 64)
}

/// Runs `iters` operations spread over `tasks` tasks; the wall time.
fn spread(runtime: &Runtime, tasks: u64, iters: u64, op: &Op) -> Duration {
    runtime.block_on(async {
        let start = Instant::now();
        let mut running = Vec::new();
        for task in 0..tasks {
            let op = Arc::clone(op);
            let share = iters / tasks + u64::from(task < iters % tasks);
            running.push(tokio::spawn(async move {
                for n in 0..share {
                    op(task, n).await;
                }
            }));
        }
        for task in running {
            task.await.unwrap();
        }
        start.elapsed()
    })
}

fn group(
    c: &mut Criterion,
    runtime: &Runtime,
    name: &str,
    limiter: &RedisLimiter,
    raw: Op,
    floor: Op,
) {
    let mut group = c.benchmark_group(format!("redis/{name}"));
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        // One check per iteration: criterion prints checks per second as `thrpt`.
        .throughput(Throughput::Elements(1));
    for tasks in TASKS {
        bench(
            &mut group,
            runtime,
            &format!("raw_evalsha/{tasks}_tasks"),
            tasks,
            &raw,
        );
        bench(
            &mut group,
            runtime,
            &format!("gcra_commands_only/{tasks}_tasks"),
            tasks,
            &floor,
        );
        // Also each check alone (no batching): what batching buys.
        // And GCRA with at most two calls on their way (full batches wait for one to come
        // back), the group commit before full batches went at once.
        let variants = [
            (limiter.clone(), ""),
            (limiter.clone().with_batch_limit(1).unwrap(), "_alone"),
            (
                limiter.clone().with_calls_in_flight(2).unwrap(),
                "_2_in_flight",
            ),
        ];
        for ((limiter, suffix), algorithm) in variants
            .iter()
            .flat_map(|v| [(v.clone(), Kind::SlidingLog), (v.clone(), Kind::Gcra)])
        {
            let extra = suffix == "_2_in_flight";
            if extra && algorithm != Kind::Gcra {
                continue;
            }
            // Every check admitted (the full path, with its writes); at these rates a key
            // comes round every 10 to 40 ms, so its log holds a few entries of its window.
            let rule = rules(algorithm, "1000 per 100ms");
            let each = limiter.clone();
            let op: Op = Arc::new(move |task, n| {
                let (limiter, rule) = (each.clone(), rule.clone());
                Box::pin(async move {
                    assert!(
                        limiter
                            .check_now(&rule, &key(task, n), 1)
                            .await
                            .unwrap()
                            .allowed()
                    );
                })
            });
            bench(
                &mut group,
                runtime,
                &format!("{algorithm:?}{suffix}/{tasks}_tasks"),
                tasks,
                &op,
            );
            if tasks == 1 || extra {
                continue;
            }
            // Every task on one key (a global limit): a batch then holds that key many times.
            // The quota is never spent at these rates (under a million checks a second):
            // every check admitted, as above. A sliding log keeps every admission in its window
            // (7 bytes each), so its window is ten times shorter: 70 KB a key, not 700.
            let quota = match algorithm {
                Kind::SlidingLog => "10000 per 10ms",
                _ => "100000 per 100ms",
            };
            let rule = rules(algorithm, quota);
            let op: Op = Arc::new(move |_, _| {
                let (limiter, rule) = (limiter.clone(), rule.clone());
                Box::pin(async move {
                    assert!(limiter.check_now(&rule, "hot", 1).await.unwrap().allowed());
                })
            });
            bench(
                &mut group,
                runtime,
                &format!("{algorithm:?}{suffix}_one_key/{tasks}_tasks"),
                tasks,
                &op,
            );
        }
    }
    group.finish();
}

/// One rule of `kind`, named after it: its key is `{slidewin:key}:<kind>:<kind>`.
fn rules(kind: Kind, quota: &str) -> Rules {
    // A short name, as most are: the name is part of every Redis key of the rule.
    Rules::try_from(Rule::new("api", kind, quota.parse().unwrap()).unwrap()).unwrap()
}

fn bench(
    group: &mut BenchmarkGroup<'_, WallTime>,
    runtime: &Runtime,
    name: &str,
    tasks: u64,
    op: &Op,
) {
    group.bench_function(name, |b| {
        b.iter_custom(|iters| spread(runtime, tasks, iters, op))
    });
}

/// A trivial script's round trip on the same kind of connection: the ceiling.
fn raw<C: ConnectionLike + Clone + Send + Sync + 'static>(connection: C) -> Op {
    script_op(connection, "return 1")
}

/// The Redis commands a GCRA check cannot do without (the server's time, a read, a write with
/// expiry) and nothing else: the floor under the GCRA script.
fn commands_only<C: ConnectionLike + Clone + Send + Sync + 'static>(connection: C) -> Op {
    script_op(
        connection,
        "local t = redis.call('TIME') redis.call('GET', KEYS[1]) \
         redis.call('SET', KEYS[1], t[2], 'PX', 1000) return 1",
    )
}

fn script_op<C: ConnectionLike + Clone + Send + Sync + 'static>(connection: C, body: &str) -> Op {
    let script = Arc::new(redis::Script::new(body));
    Arc::new(move |task, n| {
        let (mut connection, script) = (connection.clone(), Arc::clone(&script));
        Box::pin(async move {
            let redis_key = format!("{{slidewin:{}}}:raw", key(task, n));
            let one: i64 = script
                .key(redis_key)
                .invoke_async(&mut connection)
                .await
                .unwrap();
            assert_eq!(one, 1);
        })
    })
}

/// `MEMORY USAGE` of each algorithm's keys for one client of a `100/minute` rule that has
/// spent its whole quota (the log then holds 100 entries).
fn memory_table(runtime: &Runtime, server: &RedisServer, limiter: &RedisLimiter) {
    println!("| algorithm (`100/minute`, quota spent) | bytes in Redis per key |");
    println!("|---|---:|");
    for algorithm in Kind::RATES {
        let rule = rules(algorithm, "100/minute");
        let key = format!("memory-{algorithm:?}");
        runtime.block_on(async {
            for _ in 0..100 {
                limiter
                    .check(&rule, &key, Moment::from_secs(30), 1)
                    .await
                    .unwrap();
            }
        });
        let prefix = format!("{{slidewin:{key}}}");
        let bytes: u64 = server
            .cli(&["keys", &format!("{prefix}*")])
            .lines()
            .map(|k| {
                server
                    .cli(&["memory", "usage", k])
                    .trim()
                    .parse::<u64>()
                    .unwrap_or(0)
            })
            .sum();
        println!("| {algorithm:?} | {bytes} |");
    }
    println!();
}

/// The bytes a `SlidingLog` key holds in Redis per admission (`MEMORY USAGE ... SAMPLES 0`,
/// every member counted), for logs of 10 to 10,000 admissions: a rule of `n/hour` spent.
fn log_bytes_table(runtime: &Runtime, server: &RedisServer, limiter: &RedisLimiter) {
    println!("| `SlidingLog` admissions held | bytes in Redis | per admission |");
    println!("|---:|---:|---:|");
    for n in [10_u64, 100, 1_000, 10_000] {
        let rule = rules(Kind::SlidingLog, &format!("{n}/hour"));
        let key = format!("log-bytes-{n}");
        runtime.block_on(async {
            for i in 0..n {
                let at = Moment::from_secs(30) + Duration::from_micros(i);
                let checked = limiter.check(&rule, &key, at, 1).await.unwrap();
                assert!(checked.allowed(), "admission {i} of {n}");
            }
        });
        let prefix = format!("{{slidewin:{key}}}");
        let bytes: u64 = server
            .cli(&["keys", &format!("{prefix}*")])
            .lines()
            .map(|k| {
                let usage = server.cli(&["memory", "usage", k, "samples", "0"]);
                usage.trim().parse::<u64>().unwrap_or(0)
            })
            .sum();
        #[allow(clippy::cast_precision_loss)] // small counts
        let each = bytes as f64 / n as f64;
        println!("| {n} | {bytes} | {each:.1} |");
    }
    println!();
}

/// Redis's time per script call for a one-unit check of a `SlidingLog` key that holds `n`
/// admissions in its window (a rule of `2n/hour`, filled by one check of `n`): the count past
/// one read (128 times) bisects the string in place, so it grows with log2(n). Also the fill's
/// own time (a check of `n` units appends `7n` bytes in one script).
fn log_cost_table(runtime: &Runtime, server: &RedisServer, limiter: &RedisLimiter) {
    println!(
        "| `SlidingLog` admissions in the window | µs a one-unit check (Redis) | µs the fill of n |"
    );
    println!("|---:|---:|---:|");
    for n in [100_u64, 1_000, 10_000, 50_000] {
        let rule = rules(Kind::SlidingLog, &format!("{}/hour", 2 * n));
        let key = format!("log-cost-{n}");
        let start = Moment::from_secs(30);
        server.cli(&["config", "resetstat"]);
        runtime.block_on(async {
            assert!(
                limiter
                    .check(&rule, &key, start, n)
                    .await
                    .unwrap()
                    .allowed()
            );
        });
        let fill = server.usec("evalsha");
        server.cli(&["config", "resetstat"]);
        let checks = n.min(1_000);
        runtime.block_on(async {
            for i in 1..=checks {
                let at = start + Duration::from_micros(i);
                assert!(limiter.check(&rule, &key, at, 1).await.unwrap().allowed());
            }
        });
        #[allow(clippy::cast_precision_loss)] // small counts
        let each = server.usec("evalsha") as f64 / checks as f64;
        println!("| {n} | {each:.1} | {fill} |");
    }
    println!();
}

fn main() {
    let runtime = Runtime::new().unwrap();
    let server = RedisServer::start();
    let single = runtime
        .block_on(RedisLimiter::connect(&server.url()))
        .unwrap();
    memory_table(&runtime, &server, &single);
    log_bytes_table(&runtime, &server, &single);
    log_cost_table(&runtime, &server, &single);

    let mut criterion = Criterion::default().configure_from_args();
    // The same kind of connection the limiter uses: the ceiling is for its round trips.
    let connection = runtime
        .block_on(
            redis::Client::open(server.url())
                .unwrap()
                .get_connection_manager(),
        )
        .unwrap();
    group(
        &mut criterion,
        &runtime,
        "single",
        &single,
        raw(connection.clone()),
        commands_only(connection),
    );

    let cluster = RedisCluster::start();
    let urls = cluster.urls();
    let nodes: Vec<&str> = urls.iter().map(String::as_str).collect();
    let clustered = runtime
        .block_on(RedisLimiter::connect_cluster(&nodes))
        .unwrap();
    let connection = runtime
        .block_on(
            redis::cluster::ClusterClient::new(nodes.clone())
                .unwrap()
                .get_async_connection(),
        )
        .unwrap();
    group(
        &mut criterion,
        &runtime,
        "cluster",
        &clustered,
        raw(connection.clone()),
        commands_only(connection),
    );
    criterion.final_summary();
}
