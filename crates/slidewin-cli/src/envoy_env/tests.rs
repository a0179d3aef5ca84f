use std::collections::HashMap;

use super::{Translation, go_duration, translate};

fn with(vars: &[(&str, &str)]) -> Result<Translation, String> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    translate(&|name| vars.get(name).cloned())
}

/// The value the flags give `flag`, the last one.
fn value<'a>(out: &'a Translation, flag: &str) -> Option<&'a str> {
    let at = out.flags.iter().rposition(|f| f == flag)?;
    out.flags.get(at + 1).map(String::as_str)
}

#[test]
fn an_empty_environment_is_envoy_ratelimits_defaults() {
    let out = with(&[]).unwrap();
    assert_eq!(value(&out, "--http-addr"), Some("0.0.0.0:8080"));
    assert_eq!(value(&out, "--grpc-addr"), Some("0.0.0.0:8081"));
    assert_eq!(value(&out, "--admin-addr"), Some("0.0.0.0:6070"));
    assert_eq!(
        value(&out, "--config"),
        Some("/srv/runtime_data/current/config")
    );
    assert_eq!(
        value(&out, "--redis"),
        Some("redis+unix:///var/run/nutcracker/ratelimit.sock")
    );
    assert_eq!(value(&out, "--log"), Some("warn"));
    assert_eq!(value(&out, "--log-format"), Some("text"));
    assert_eq!(value(&out, "--grpc-max-connection-age"), Some("86400"));
    assert_eq!(value(&out, "--near-limit-ratio"), Some("0.8"));
    assert_eq!(value(&out, "--response-headers"), Some("none"));
    assert!(out.flags.iter().any(|f| f == "--ready-when-degraded"));
    assert!(
        !out.flags
            .iter()
            .any(|f| f == "--metrics-addr" || f == "--shadow-mode")
    );
    // statsd is envoy ratelimit's default: its absence is said.
    assert!(
        out.warnings.iter().any(|w| w.contains("USE_STATSD")),
        "{out:?}"
    );
}

#[test]
fn a_helm_charts_environment_becomes_slidewins_flags() {
    let out = with(&[
        ("RUNTIME_ROOT", "/data"),
        ("RUNTIME_SUBDIRECTORY", "ratelimit"),
        ("RUNTIME_APPDIRECTORY", "config"),
        ("RUNTIME_WATCH_ROOT", "false"),
        ("RUNTIME_IGNOREDOTFILES", "true"),
        ("LOG_LEVEL", "debug"),
        ("LOG_FORMAT", "json"),
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("REDIS_URL", "redis.ns.svc:6379"),
        ("REDIS_AUTH", "default:p@ss/word"),
        ("REDIS_TLS", "true"),
        ("REDIS_TLS_CACERT", "/tls/ca.pem"),
        ("USE_STATSD", "false"),
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", ":9091"),
        ("PROMETHEUS_PATH", "/stats"),
        ("CACHE_KEY_PREFIX", "team_"),
        ("SHADOW_MODE", "true"),
        ("MERGE_DOMAIN_CONFIG", "true"),
        ("NEAR_LIMIT_RATIO", "0.9"),
        ("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "true"),
        ("GRPC_MAX_CONNECTION_AGE", "1h30m"),
        ("PORT", "8090"),
        ("GRPC_HOST", "::"),
    ])
    .unwrap();
    assert_eq!(value(&out, "--config"), Some("/data/ratelimit/config"));
    assert_eq!(value(&out, "--log"), Some("debug"));
    assert_eq!(value(&out, "--log-format"), Some("json"));
    assert_eq!(
        value(&out, "--redis"),
        Some("rediss://default:p%40ss%2Fword@redis.ns.svc:6379")
    );
    assert_eq!(value(&out, "--redis-ca"), Some("/tls/ca.pem"));
    assert_eq!(value(&out, "--metrics-addr"), Some("0.0.0.0:9091"));
    assert_eq!(value(&out, "--metrics-path"), Some("/stats"));
    assert!(out.flags.iter().any(|f| f == "--envoy-metric-names"));
    assert_eq!(value(&out, "--redis-key-prefix"), Some("team_slidewin"));
    assert_eq!(value(&out, "--near-limit-ratio"), Some("0.9"));
    assert_eq!(value(&out, "--grpc-max-connection-age"), Some("5400"));
    assert_eq!(value(&out, "--http-addr"), Some("0.0.0.0:8090"));
    assert_eq!(value(&out, "--grpc-addr"), Some("[::]:8081"));
    for switch in ["--shadow-mode", "--merge-domains"] {
        assert!(out.flags.iter().any(|f| f == switch), "{switch}");
    }
    assert!(!out.flags.iter().any(|f| f == "--ready-when-degraded"));
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
}

#[test]
fn a_cluster_a_password_alone_and_a_unix_socket_with_a_password() {
    let out = with(&[
        ("REDIS_TYPE", "cluster"),
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("REDIS_URL", "a:7000, b:7001"),
        ("REDIS_AUTH", "secret"),
    ])
    .unwrap();
    assert_eq!(
        value(&out, "--redis-cluster"),
        Some("redis://:secret@a:7000,redis://:secret@b:7001")
    );
    let out = with(&[("REDIS_URL", "/run/redis.sock"), ("REDIS_AUTH", "u:p w")]).unwrap();
    assert_eq!(
        value(&out, "--redis"),
        Some("redis+unix:///run/redis.sock?user=u&pass=p%20w")
    );
}

#[test]
fn sentinel_takes_its_master_its_sentinels_password_and_the_primarys() {
    let out = with(&[
        ("REDIS_TYPE", "SENTINEL"),
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("REDIS_URL", "mymaster, s1:26379,s2:26379"),
        ("REDIS_AUTH", "app:pw"),
        ("REDIS_SENTINEL_AUTH", "sentinel-pw"),
    ])
    .unwrap();
    assert_eq!(
        value(&out, "--redis-sentinel"),
        Some("mymaster,redis://:sentinel-pw@s1:26379,redis://:sentinel-pw@s2:26379")
    );
    assert_eq!(value(&out, "--redis-primary-auth"), Some("app:pw"));
    assert!(!out.flags.iter().any(|f| f == "--redis"));
    let error = with(&[
        ("REDIS_TYPE", "SENTINEL"),
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("REDIS_URL", "mymaster"),
    ])
    .unwrap_err();
    assert!(error.contains("REDIS_URL"), "{error}");
}

/// With `REDIS_TLS`, TLS to the sentinels and to the primary they name (it was refused).
#[test]
fn sentinel_over_tls_takes_rediss_sentinels_and_the_certificates() {
    let out = with(&[
        ("REDIS_TYPE", "SENTINEL"),
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("REDIS_URL", "mymaster,s1:26379"),
        ("REDIS_TLS", "true"),
        ("REDIS_TLS_CACERT", "/ca.pem"),
    ])
    .unwrap();
    assert_eq!(
        value(&out, "--redis-sentinel"),
        Some("mymaster,rediss://s1:26379")
    );
    assert_eq!(value(&out, "--redis-ca"), Some("/ca.pem"));
}

#[test]
fn response_headers_take_their_names() {
    let out = with(&[
        ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
        ("LIMIT_REMAINING_HEADER", "X-Left"),
    ])
    .unwrap();
    assert_eq!(value(&out, "--response-headers"), Some("envoy"));
    assert_eq!(
        value(&out, "--envoy-header-names"),
        Some("RateLimit-Limit,X-Left,RateLimit-Reset")
    );
}

#[test]
fn grpc_tls_is_on_grpc_only_with_its_client_ca() {
    let out = with(&[
        ("GRPC_SERVER_USE_TLS", "true"),
        ("GRPC_SERVER_TLS_CERT", "/c.pem"),
        ("GRPC_SERVER_TLS_KEY", "/k.pem"),
        ("GRPC_CLIENT_TLS_CACERT", "/ca.pem"),
    ])
    .unwrap();
    assert_eq!(value(&out, "--tls-cert"), Some("/c.pem"));
    assert_eq!(value(&out, "--tls-key"), Some("/k.pem"));
    assert_eq!(value(&out, "--tls-client-ca"), Some("/ca.pem"));
    assert!(out.flags.iter().any(|f| f == "--tls-only-grpc"));
    let error = with(&[("GRPC_SERVER_USE_TLS", "true")]).unwrap_err();
    assert!(error.contains("GRPC_SERVER_TLS_CERT"), "{error}");
}

#[test]
fn what_cannot_be_honoured_stops_the_start_naming_each_variable() {
    let error = with(&[
        ("BACKEND_TYPE", "memcache"),
        ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
        ("REDIS_TYPE", "SENTINEL"),
        ("REDIS_SOCKET_TYPE", "unix"),
        ("QUOTA_MODE", "true"),
        ("GRPC_CLIENT_TLS_SAN", "envoy"),
        ("PORT", "http"),
        ("HOST", "example.com"),
        ("LOG_LEVEL", "loud"),
        ("SHADOW_MODE", "yes"),
        ("GRPC_MAX_CONNECTION_AGE", "forever"),
    ])
    .unwrap_err();
    for name in [
        "BACKEND_TYPE=\"memcache\"",
        "CONFIG_TYPE=\"GRPC_XDS_SOTW\"",
        "REDIS_SOCKET_TYPE=\"unix\"",
        "QUOTA_MODE",
        "GRPC_CLIENT_TLS_SAN",
        "PORT=\"http\"",
        "HOST=\"example.com\"",
        "LOG_LEVEL",
        "SHADOW_MODE=\"yes\"",
        "GRPC_MAX_CONNECTION_AGE",
    ] {
        assert!(error.contains(name), "{name} in {error}");
    }
    // Their default values pass.
    assert!(
        with(&[
            ("BACKEND_TYPE", "redis"),
            ("CONFIG_TYPE", "FILE"),
            ("QUOTA_MODE", "false")
        ])
        .is_ok()
    );
}

#[test]
fn what_only_tunes_envoy_ratelimit_is_named_in_a_warning() {
    let out = with(&[
        ("USE_STATSD", "true"),
        ("REDIS_POOL_SIZE", "20"),
        ("REDIS_PIPELINE_WINDOW", "150us"),
    ])
    .unwrap();
    for name in ["USE_STATSD", "REDIS_POOL_SIZE", "REDIS_PIPELINE_WINDOW"] {
        assert!(
            out.warnings.iter().any(|w| w.starts_with(name)),
            "{name}: {:?}",
            out.warnings
        );
    }
}

#[test]
fn go_durations_are_read_as_go_reads_them() {
    assert_eq!(go_duration("24h"), Some(86_400.0));
    assert_eq!(go_duration("1h30m"), Some(5_400.0));
    assert_eq!(go_duration("1.5s"), Some(1.5));
    assert_eq!(go_duration("300ms"), Some(0.3));
    assert_eq!(go_duration("0"), Some(0.0));
    for bad in ["", "5", "h", "-1h", "1d", "1h30", "ten"] {
        assert_eq!(go_duration(bad), None, "{bad}");
    }
}

#[test]
fn tracing_is_exported_over_grpc_with_envoy_ratelimits_names() {
    let off = with(&[]).unwrap();
    assert_eq!(value(&off, "--otlp-endpoint"), None);
    let on = with(&[
        ("TRACING_ENABLED", "true"),
        ("TRACING_EXPORTER_PROTOCOL", "grpc"),
        ("TRACING_SERVICE_NAMESPACE", "edge"),
        ("TRACING_SERVICE_INSTANCE_ID", "pod-1"),
        ("TRACING_SAMPLING_RATE", "0.25"),
    ])
    .unwrap();
    // No collector named: the OTLP spec's default, and envoy ratelimit's service name.
    assert_eq!(value(&on, "--otlp-endpoint"), Some("http://localhost:4317"));
    assert_eq!(value(&on, "--otlp-service-name"), Some("RateLimit"));
    assert_eq!(value(&on, "--otlp-sample-ratio"), Some("0.25"));
    let resource: Vec<&String> = on
        .flags
        .windows(2)
        .filter(|pair| pair[0] == "--otlp-resource")
        .map(|pair| &pair[1])
        .collect();
    assert_eq!(
        resource,
        ["service.namespace=edge", "service.instance.id=pod-1"]
    );
    // A collector named: the exporter reads it as the OTLP spec says.
    let named = with(&[
        ("TRACING_ENABLED", "true"),
        ("TRACING_EXPORTER_PROTOCOL", "grpc"),
        ("TRACING_SERVICE_NAME", "edge-rls"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317"),
    ])
    .unwrap();
    assert_eq!(value(&named, "--otlp-endpoint"), None);
    assert_eq!(value(&named, "--otlp-service-name"), Some("edge-rls"));
}

#[test]
fn tracing_over_http_is_refused_by_name() {
    // envoy ratelimit's default protocol is http, which slidewin does not speak.
    let refused = with(&[("TRACING_ENABLED", "true")]).unwrap_err();
    assert!(
        refused.contains("TRACING_EXPORTER_PROTOCOL=\"http\""),
        "{refused}"
    );
    assert!(refused.contains("gRPC only"), "{refused}");
}

/// envoy ratelimit's local cache of keys over their limit is slidewin's cache of Redis's
/// denials, in entries of about 300 bytes; 0 keeps none.
#[test]
fn the_local_cache_size_keeps_that_many_denials() {
    let out = with(&[("LOCAL_CACHE_SIZE_IN_BYTES", "3000000")]).unwrap();
    assert_eq!(value(&out, "--redis-denial-cache"), Some("10000"));
    let off = with(&[("LOCAL_CACHE_SIZE_IN_BYTES", "0")]).unwrap();
    assert_eq!(value(&off, "--redis-denial-cache"), Some("0"));
    assert_eq!(value(&with(&[]).unwrap(), "--redis-denial-cache"), None);
    let error = with(&[("LOCAL_CACHE_SIZE_IN_BYTES", "lots")]).unwrap_err();
    assert!(error.contains("LOCAL_CACHE_SIZE_IN_BYTES"), "{error}");
}
