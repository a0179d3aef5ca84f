//! Issue 31: `deploy/`, checked against the binary, since no container engine runs here. The
//! Kubernetes example's environment starts the binary under the Containerfile's entry point
//! and its probes answer; every variable and flag the files use exists; the ports agree.

#![cfg(unix)]

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};

use slidewin_test_support::redis::RedisServer;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use yaml_serde::Value;

use crate::envoy::{addresses, fresh_dir, get, ratelimit_binary};

const MANIFEST: &str = include_str!("../../../../deploy/kubernetes.yaml");
const CONTAINERFILE: &str = include_str!("../../../../deploy/Containerfile");
const SERVER_README: &str = include_str!("../../../slidewin-server/README.md");

/// The manifest's documents, by kind.
fn documents() -> BTreeMap<String, Value> {
    yaml_serde::Deserializer::from_str(MANIFEST)
        .map(|document| {
            let value = <Value as serde::Deserialize>::deserialize(document).unwrap();
            (value["kind"].as_str().unwrap().to_owned(), value)
        })
        .collect()
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => panic!("not text: {other:?}"),
    }
}

/// The port of an address as Go writes it (`:9090`, `0.0.0.0:9090`).
fn port_of(addr: &str) -> u64 {
    addr.rsplit(':').next().unwrap().parse().unwrap()
}

#[test]
fn issue_31_the_deploy_files_agree_with_the_binary_and_each_other() {
    let docs = documents();
    let pod = &docs["Deployment"]["spec"]["template"]["spec"];
    let container = &pod["containers"][0];

    // The Containerfile's entry point is the manifest's command, a link to the binary.
    let command: Vec<String> = container["command"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(text)
        .collect();
    assert_eq!(command, ["/bin/ratelimit"]);
    assert!(
        CONTAINERFILE.contains("ENTRYPOINT [\"/bin/ratelimit\"]"),
        "{CONTAINERFILE}"
    );
    assert!(CONTAINERFILE.contains("ln -s slidewin /out/bin/ratelimit"));

    // Every variable exists: slidewin's own in `serve --help`, envoy ratelimit's in the
    // README's table of them.
    let help = Command::new(env!("CARGO_BIN_EXE_slidewin"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let env: BTreeMap<String, Option<String>> = container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|var| (text(&var["name"]), var.get("value").map(text)))
        .collect();
    for name in env.keys() {
        if name.starts_with("SLIDEWIN_") {
            assert!(
                help.contains(&format!("[env: {name}=")),
                "{name} is no flag's variable"
            );
        } else {
            assert!(
                SERVER_README.contains(&format!("`{name}`")),
                "{name} is not in the README's table"
            );
        }
    }
    let value = |name: &str, default: &str| {
        env.get(name)
            .cloned()
            .flatten()
            .unwrap_or_else(|| default.to_owned())
    };

    // The ports agree: the variables, the container's, the Containerfile's, the probes', the
    // Service's.
    let ports: BTreeMap<String, u64> = container["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| (text(&p["name"]), p["containerPort"].as_u64().unwrap()))
        .collect();
    assert_eq!(ports["http"], value("PORT", "8080").parse::<u64>().unwrap());
    assert_eq!(
        ports["grpc"],
        value("GRPC_PORT", "8081").parse::<u64>().unwrap()
    );
    assert_eq!(
        ports["debug"],
        value("DEBUG_PORT", "6070").parse::<u64>().unwrap()
    );
    assert_eq!(
        ports["metrics"],
        port_of(&value("PROMETHEUS_ADDR", ":9090"))
    );
    let exposed: BTreeSet<u64> = CONTAINERFILE
        .lines()
        .find_map(|l| l.strip_prefix("EXPOSE "))
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(exposed, ports.values().copied().collect());
    assert_eq!(
        container["readinessProbe"]["httpGet"]["port"].as_u64(),
        Some(ports["http"])
    );
    assert_eq!(
        container["livenessProbe"]["grpc"]["port"].as_u64(),
        Some(ports["grpc"])
    );
    for port in docs["Service"]["spec"]["ports"].as_sequence().unwrap() {
        assert!(ports.contains_key(&text(&port["targetPort"])), "{port:?}");
        assert_eq!(
            port["port"].as_u64(),
            Some(ports[&text(&port["targetPort"])])
        );
    }
    // The ConfigMap is mounted where RUNTIME_ROOT looks.
    let runtime = format!(
        "{}/{}/{}",
        value("RUNTIME_ROOT", ""),
        value("RUNTIME_SUBDIRECTORY", ""),
        value("RUNTIME_APPDIRECTORY", "config")
    );
    assert_eq!(text(&container["volumeMounts"][0]["mountPath"]), runtime);
    assert_eq!(
        text(&pod["volumes"][0]["configMap"]["name"]),
        text(&docs["ConfigMap"]["metadata"]["name"])
    );
    assert_eq!(pod["securityContext"]["runAsUser"].as_u64(), Some(65532));
    assert!(CONTAINERFILE.contains("USER 65532:65532"));

    run_the_manifest(&env, &docs["ConfigMap"]["data"], &ports, container);
}

/// Starts the binary as the pod would, with the manifest's environment, but for the Redis (a
/// local one, the Secret's password) and the ports (free ones of 127.0.0.1), and asks what
/// the probes and the scraper ask.
fn run_the_manifest(
    env: &BTreeMap<String, Option<String>>,
    config: &Value,
    ports: &BTreeMap<String, u64>,
    container: &Value,
) {
    let dir = fresh_dir("deploy");
    let root = dir.join("data");
    let mount = root
        .join(env["RUNTIME_SUBDIRECTORY"].clone().unwrap())
        .join("config");
    std::fs::create_dir_all(&mount).unwrap();
    for (name, content) in config.as_mapping().unwrap() {
        std::fs::write(mount.join(text(name)), text(content)).unwrap();
    }
    let redis =
        RedisServer::start_with(&["--requirepass".to_owned(), "from-the-secret".to_owned()]);
    let mut vars: BTreeMap<String, String> = env
        .iter()
        .map(|(name, value)| {
            (
                name.clone(),
                value
                    .clone()
                    .unwrap_or_else(|| "from-the-secret".to_owned()),
            )
        })
        .collect();
    vars.insert("RUNTIME_ROOT".into(), root.display().to_string());
    vars.insert(
        "REDIS_URL".into(),
        redis
            .url()
            .trim_start_matches("redis://")
            .trim_end_matches('/')
            .to_owned(),
    );
    vars.insert("SLIDEWIN_DRAIN_DELAY".into(), "0".into());
    for (host, port) in [
        ("HOST", "PORT"),
        ("GRPC_HOST", "GRPC_PORT"),
        ("DEBUG_HOST", "DEBUG_PORT"),
    ] {
        vars.insert(host.into(), "127.0.0.1".into());
        vars.insert(port.into(), "0".into());
    }
    vars.insert("PROMETHEUS_ADDR".into(), "127.0.0.1:0".into());
    let logs = dir.join("stderr.log");
    let mut child = Command::new(ratelimit_binary(&dir))
        .env_clear()
        .envs(&vars)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&logs).unwrap())
        .spawn()
        .unwrap();
    let at = addresses(&mut child);

    let readiness = text(&container["readinessProbe"]["httpGet"]["path"]);
    let ready = get(&at.http, &readiness);
    assert!(ready.starts_with("HTTP/1.1 200"), "{readiness}: {ready}");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let live = runtime.block_on(async {
        let mut client = HealthClient::new(
            tonic::transport::Endpoint::from_shared(format!("http://{}", at.grpc))
                .unwrap()
                .connect()
                .await
                .unwrap(),
        );
        let request = HealthCheckRequest {
            service: String::new(),
        };
        client.check(request).await.unwrap().into_inner().status()
    });
    drop(runtime);
    assert_eq!(live, ServingStatus::Serving, "the liveness probe");
    let metrics = get(&at.metrics[..at.metrics.find('/').unwrap()], "/metrics");
    assert!(metrics.contains("slidewin_config_loads_total"), "{metrics}");
    assert!(
        get(&at.admin, "/").starts_with("HTTP/1.1 200"),
        "the dashboard on the debug port"
    );
    assert_eq!(ports.len(), 4);

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let logged = std::fs::read_to_string(&logs).unwrap();
    assert!(
        !logged.contains("not used") && !logged.contains("not supported"),
        "{logged}"
    );
    assert!(
        logged.lines().all(|line| line.starts_with('{')),
        "LOG_FORMAT=json: {logged}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
