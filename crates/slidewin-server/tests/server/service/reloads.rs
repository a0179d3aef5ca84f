//! Reloads through the service: a raised limit keeps its counts, an invalid config keeps the
//! one in force, a removed rule frees its state, a changed file and a `ConfigMap`'s link swap
//! are read again.

use super::*;

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

fn config_with_limit(limit: u32) -> String {
    format!(
        "domain: api\ndescriptors:\n  - key: client\n    rate_limit: {{unit: minute, requests_per_unit: {limit}}}\n  - key: other\n    rate_limit: {{unit: minute, requests_per_unit: 1}}\n"
    )
}

async fn reload_raising_a_limit_keeps_counts_limitador_522<B: Backend>(backend: B) {
    let dir = tempdir();
    let file = dir.join("ratelimit.yaml");
    write(&file, &config_with_limit(3));
    let running = start_on(backend, &file).await;
    for _ in 0..3 {
        assert_eq!(running.code("client", "ann").await, PbCode::Ok as i32);
    }
    assert_eq!(
        running.code("client", "ann").await,
        PbCode::OverLimit as i32
    );
    write(&file, &config_with_limit(5));
    assert_eq!(running.service.reload().await.unwrap(), 2);
    // The three admitted still count: two more, and remaining is against the new limit.
    let answer = running.grpc_check("api", "client", "ann").await.unwrap();
    assert_eq!(
        (answer.overall_code, answer.statuses[0].limit_remaining),
        (PbCode::Ok as i32, 1)
    );
    assert_eq!(
        answer.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        5
    );
    let answer = running.grpc_check("api", "client", "ann").await.unwrap();
    assert_eq!(
        (answer.overall_code, answer.statuses[0].limit_remaining),
        (PbCode::Ok as i32, 0)
    );
    assert_eq!(
        running.code("client", "ann").await,
        PbCode::OverLimit as i32
    );
    let (_, _, stats) = running.http("GET", "/api/stats", "").await;
    assert!(stats.contains(r#""version":2"#), "{stats}");
    running.stop().await;
}

on_both_backends!(
    raising_a_limit_keeps_counts_memory_limitador_522,
    raising_a_limit_keeps_counts_redis_limitador_522,
    |backend| reload_raising_a_limit_keeps_counts_limitador_522(backend)
);

#[tokio::test]
async fn an_invalid_reload_keeps_the_config_in_force_and_says_why() {
    let dir = tempdir();
    let file = dir.join("ratelimit.yaml");
    write(&file, &config_with_limit(1));
    let running = start_on(Memory::new(), &file).await;
    assert_eq!(running.code("client", "ann").await, PbCode::Ok as i32);
    write(
        &file,
        "domain: api\ndescriptors:\n  - key: client\n    rate_limit: {unit: fortnight, requests_per_unit: 9}\n",
    );
    let err = running.service.reload().await.unwrap_err().to_string();
    assert!(
        err.contains("ratelimit.yaml:4:") && err.contains("fortnight"),
        "{err}"
    );
    // The old limit still holds.
    assert_eq!(
        running.code("client", "ann").await,
        PbCode::OverLimit as i32
    );
    let (_, _, stats) = running.http("GET", "/api/stats", "").await;
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["config"]["version"], 1);
    assert_eq!(stats["config"]["errors_total"], 1);
    assert!(
        stats["config"]["last_error"]["message"]
            .as_str()
            .unwrap()
            .contains("fortnight")
    );
    let (_, _, metrics) = running.http("GET", "/metrics", "").await;
    assert!(
        metrics.contains(r#"slidewin_config_loads_total{result="error"} 1"#),
        "{metrics}"
    );
    // A good file again: the error is history (counted), no longer the files' state.
    write(&file, &config_with_limit(2));
    assert_eq!(running.service.reload().await.unwrap(), 2);
    let (_, _, stats) = running.http("GET", "/api/stats", "").await;
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert!(stats["config"]["last_error"].is_null(), "{stats}");
    assert_eq!(stats["config"]["errors_total"], 1);
    running.stop().await;
}

#[tokio::test]
async fn a_rule_removed_frees_its_state_and_comes_back_fresh() {
    let dir = tempdir();
    let file = dir.join("ratelimit.yaml");
    write(&file, &config_with_limit(1));
    let running = start_on(Memory::new(), &file).await;
    running.grpc_check("api", "other", "x").await.unwrap();
    assert_eq!(running.code("other", "x").await, PbCode::OverLimit as i32);
    write(
        &file,
        "domain: api\ndescriptors:\n  - key: client\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
    );
    running.service.reload().await.unwrap();
    let stats = running.service.engine().rule_stats();
    assert_eq!(stats.len(), 1, "the removed rule is gone: {stats:?}");
    let (_, _, metrics) = running.http("GET", "/metrics", "").await;
    assert!(
        !metrics.contains("api.other"),
        "its series went with it: {metrics}"
    );
    // No limit now: OK with no current limit.
    let answer = running.grpc_check("api", "other", "x").await.unwrap();
    assert!(answer.statuses[0].current_limit.is_none());
    write(&file, &config_with_limit(1));
    running.service.reload().await.unwrap();
    assert_eq!(running.code("other", "x").await, PbCode::Ok as i32);
    running.stop().await;
}

/// Waits for the watcher's next load (a bound of 20 s against a hang, not a timing claim).
async fn next_load<B: Backend>(
    service: &Endpoints<B>,
    rx: &mut tokio::sync::watch::Receiver<slidewin_server::LoadTally>,
) -> slidewin_server::LoadTally {
    let _ = service;
    tokio::time::timeout(Duration::from_secs(20), rx.changed())
        .await
        .expect("the watcher reloads")
        .expect("the service lives");
    *rx.borrow_and_update()
}

#[tokio::test]
async fn a_changed_file_is_reloaded() {
    let dir = tempdir();
    let file = dir.join("ratelimit.yaml");
    write(&file, &config_with_limit(1));
    let running = start_on(Memory::new(), &dir).await;
    let mut loads = running.service.load_tally();
    let _watch = slidewin_server::watch_config(&running.service).unwrap();
    // A file beside the config that is not one (a log, say) reloads nothing; the config's
    // change after it does, and is the first load seen.
    write(&dir.join("serve.log"), "a log line\n");
    write(&file, &config_with_limit(7));
    let tally = next_load(&running.service, &mut loads).await;
    assert_eq!(tally.version, 2);
    assert_eq!(running.limit_of("client", "ann").await, 7);
    write(&file, "domain: [");
    let tally = next_load(&running.service, &mut loads).await;
    assert_eq!((tally.version, tally.errors), (2, 1));
    running.stop().await;
}

#[cfg(unix)]
#[tokio::test]
async fn a_configmap_symlink_swap_is_reloaded() {
    use std::os::unix::fs::symlink;
    // Kubernetes mounts a ConfigMap as `..<timestamp>/` directories, a `..data` link to the
    // current one, and a link per key through `..data`; an update swaps `..data` atomically.
    let dir = tempdir();
    std::fs::create_dir(dir.join("..v1")).unwrap();
    write(&dir.join("..v1/ratelimit.yaml"), &config_with_limit(1));
    symlink("..v1", dir.join("..data")).unwrap();
    symlink("..data/ratelimit.yaml", dir.join("ratelimit.yaml")).unwrap();
    let running = start_on(Memory::new(), &dir).await;
    let mut loads = running.service.load_tally();
    let _watch = slidewin_server::watch_config(&running.service).unwrap();
    std::fs::create_dir(dir.join("..v2")).unwrap();
    write(&dir.join("..v2/ratelimit.yaml"), &config_with_limit(9));
    symlink("..v2", dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    let tally = next_load(&running.service, &mut loads).await;
    assert_eq!(tally.version, 2);
    assert_eq!(running.limit_of("client", "ann").await, 9);
    running.stop().await;
}

/// A fresh directory under the target directory, removed by nobody (the target is scratch).
fn tempdir() -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("slidewin-server-test-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
