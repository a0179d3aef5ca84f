//! Issue 31: the check spans over OTLP, received by a collector's trace service in the test
//! (generated from OpenTelemetry's proto), from the built binary; and a collector that is
//! down, which neither stops the checks nor the stop.

#![cfg(unix)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry as RlsEntry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;

use slidewin_test_support::redis::RedisServer;

use crate::envoy::{self, CONFIG, addresses, fresh_dir, ratelimit_binary, rls};
use crate::serve::{self, Serving};

/// What a collector keeps of an export: the resource's attributes, and its spans.
type Export = (HashMap<String, Value>, Vec<Span>);

/// A collector's trace service that passes each export on.
struct Receiver(mpsc::Sender<Export>);

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        for resource_spans in request.into_inner().resource_spans {
            let resource = resource_spans
                .resource
                .map(|r| attributes(&r.attributes))
                .unwrap_or_default();
            let spans = resource_spans
                .scope_spans
                .into_iter()
                .flat_map(|scope| scope.spans)
                .collect();
            let _ = self.0.send((resource, spans));
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

fn attributes(list: &[KeyValue]) -> HashMap<String, Value> {
    list.iter()
        .filter_map(|kv| Some((kv.key.clone(), kv.value.clone()?.value?)))
        .collect()
}

fn text(value: &str) -> Option<Value> {
    Some(Value::StringValue(value.to_owned()))
}

/// `slidewin serve` on free ports with the test config, its OTLP variables cleared, then
/// `vars` set, and `args`.
fn serve_command(test: &str, vars: &[(&str, &str)], args: &[&str]) -> Command {
    let dir = fresh_dir(test);
    let config = dir.join("config.yaml");
    std::fs::write(&config, CONFIG).unwrap();
    let mut command = serve::serve_command();
    for (name, _) in std::env::vars() {
        if name.starts_with("OTEL_") || name.starts_with("SLIDEWIN_") {
            command.env_remove(name);
        }
    }
    command
        .envs(vars.iter().copied())
        .arg("--config")
        .arg(&config)
        .args(args);
    command
}

/// As [`serve_command`], started: its logs kept for [`stop`].
fn serve(test: &str, vars: &[(&str, &str)], args: &[&str]) -> Serving {
    serve::started(serve_command(test, vars, args), Stdio::piped())
}

/// Three checks of one user against a limit of 2 a minute: OK, OK, over.
fn three_checks(grpc: &str) -> Vec<Code> {
    // The client's runtime, and its connections, are gone before the stop.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    (0..3)
        .map(|_| runtime.block_on(rls(grpc, "ann")).0)
        .collect()
}

/// A check of `user` over gRPC, sent in the trace that `traceparent` names, as Envoy sends it
/// when it traces.
async fn traced_rls(grpc: &str, user: &str, traceparent: &str) -> Code {
    let mut client = RateLimitServiceClient::connect(format!("http://{grpc}"))
        .await
        .unwrap();
    let mut request = tonic::Request::new(RateLimitRequest {
        domain: "edge".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![RlsEntry {
                key: "user".into(),
                value: user.into(),
            }],
            ..Default::default()
        }],
        hits_addend: 1,
    });
    request
        .metadata_mut()
        .insert("traceparent", traceparent.parse().unwrap());
    let answer = client.should_rate_limit(request).await.unwrap();
    answer.into_inner().overall_code()
}

/// `POST /json` for `user`, in the trace that `traceparent` names; the answer's text.
fn traced_json(http: &str, user: &str, traceparent: &str) -> String {
    let body = format!(
        r#"{{"domain":"edge","descriptors":[{{"entries":[{{"key":"user","value":"{user}"}}]}}]}}"#
    );
    let mut stream = TcpStream::connect(http).unwrap();
    write!(
        stream,
        "POST /json HTTP/1.1\r\nhost: {http}\r\ncontent-type: application/json\r\n\
         traceparent: {traceparent}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// The bytes of a hexadecimal id, as OTLP carries them.
fn id(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn stop(child: Child) -> String {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let logs = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{logs}");
    logs
}

/// A collector on a free port: its runtime (kept for as long as it should listen), its URL,
/// and the exports it receives.
fn collector() -> (tokio::runtime::Runtime, String, mpsc::Receiver<Export>) {
    let (sender, exports) = mpsc::channel();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let incoming = runtime
        .block_on(async { tonic::transport::server::TcpIncoming::bind(([127, 0, 0, 1], 0).into()) })
        .unwrap();
    let endpoint = format!("http://{}", incoming.local_addr().unwrap());
    runtime.spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(Receiver(sender)))
            .serve_with_incoming(incoming),
    );
    (runtime, endpoint, exports)
}

/// The resource's attributes and the spans of exports until `count` spans have come.
fn received(exports: &mpsc::Receiver<Export>, count: usize) -> Export {
    let mut resource = HashMap::new();
    let mut spans = Vec::new();
    while spans.len() < count {
        let (attrs, more) = exports
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{count} spans exported, got {}: {spans:#?}", spans.len()));
        resource.extend(attrs);
        spans.extend(more);
    }
    (resource, spans)
}

#[test]
fn issue_31_a_span_per_check_reaches_an_otlp_collector() {
    let (_collector, endpoint, exports) = collector();
    let resource_var = ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test");
    let Serving {
        child, grpc, http, ..
    } = serve("otlp", &[resource_var], &["--otlp-endpoint", &endpoint]);
    assert_eq!(three_checks(&grpc), [Code::Ok, Code::Ok, Code::OverLimit]);
    // Two more, each in a caller's trace (W3C traceparent): over gRPC, and over POST /json.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let envoys = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assert_eq!(runtime.block_on(traced_rls(&grpc, "bob", envoys)), Code::Ok);
    drop(runtime);
    let posts = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let json = traced_json(&http, "bob", posts);
    assert!(json.contains(r#""overallCode":"OK""#), "{json}");
    // One that does not parse, and one past the bound, leave their checks roots.
    let long = format!("{posts}-{}", "a".repeat(300));
    for traceparent in ["00-not-a-trace-01", long.as_str()] {
        let json = traced_json(&http, "cy", traceparent);
        assert!(json.contains(r#""overallCode":"OK""#), "{json}");
    }
    // The spans still queued are sent before the exit.
    let logs = stop(child);
    assert!(
        logs.contains("exporting a span per check over OTLP"),
        "{logs}"
    );

    let (resource, spans) = received(&exports, 14);
    assert_eq!(resource.get("service.name").cloned(), text("slidewin"));
    assert_eq!(
        resource.get("deployment.environment").cloned(),
        text("test")
    );

    let (checks, descriptors): (Vec<&Span>, Vec<&Span>) =
        spans.iter().partition(|s| s.name == "slidewin.check");
    assert_eq!((checks.len(), descriptors.len()), (7, 7), "{spans:#?}");
    // The traced calls' spans are in their callers' traces, children of their spans; the
    // others are roots.
    for (trace, parent) in [
        ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"),
        ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"),
    ] {
        let joined: Vec<&&Span> = checks.iter().filter(|c| c.trace_id == id(trace)).collect();
        assert_eq!(joined.len(), 1, "one check in trace {trace}");
        assert_eq!(joined[0].parent_span_id, id(parent));
    }
    let roots = checks
        .iter()
        .filter(|c| c.parent_span_id.is_empty())
        .count();
    assert_eq!(roots, 5);
    let mut decisions = Vec::new();
    for check in &checks {
        let attrs = attributes(&check.attributes);
        assert_eq!(attrs.get("domain").cloned(), text("edge"), "{attrs:?}");
        assert_eq!(attrs.get("descriptors").cloned(), Some(Value::IntValue(1)));
        let children: Vec<&&Span> = descriptors
            .iter()
            .filter(|d| d.parent_span_id == check.span_id && d.trace_id == check.trace_id)
            .collect();
        assert_eq!(children.len(), 1, "one descriptor span under each check");
        let child = attributes(&children[0].attributes);
        assert_eq!(child.get("rule").cloned(), text("user"), "{child:?}");
        assert_eq!(child.get("limit").cloned(), text("user"), "{child:?}");
        assert_eq!(child.get("hits").cloned(), Some(Value::IntValue(1)));
        assert!(
            matches!(child.get("store_us"), Some(Value::IntValue(us)) if *us >= 0),
            "{child:?}"
        );
        assert_eq!(child.get("decision"), attrs.get("decision"));
        assert!(check.start_time_unix_nano <= children[0].start_time_unix_nano);
        assert!(children[0].end_time_unix_nano <= check.end_time_unix_nano);
        decisions.push((check.start_time_unix_nano, attrs.get("decision").cloned()));
    }
    decisions.sort_by_key(|(start, _)| *start);
    let decisions: Vec<Option<Value>> = decisions.into_iter().map(|(_, d)| d).collect();
    let within = text("within_limit");
    let over = text("over_limit");
    let expected = [&within, &within, &over, &within, &within, &within, &within];
    assert_eq!(decisions.iter().collect::<Vec<_>>(), expected);
}

/// `--otlp-sample-ratio 0` traces no check of its own, and still every check in a caller's
/// sampled trace: the caller decided.
#[test]
fn issue_31_the_sample_ratio_leaves_a_callers_sampled_trace_whole() {
    let (_collector, endpoint, exports) = collector();
    let args = ["--otlp-endpoint", &endpoint, "--otlp-sample-ratio", "0"];
    let Serving {
        child, grpc, http, ..
    } = serve("otlp-ratio", &[], &args);
    assert_eq!(three_checks(&grpc)[0], Code::Ok);
    let sampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let json = traced_json(&http, "bob", sampled);
    assert!(json.contains(r#""overallCode":"OK""#), "{json}");
    stop(child);
    // The spans were sent before the exit: what came is all that will.
    let (_, spans) = received(&exports, 2);
    assert!(
        exports.try_recv().is_err(),
        "only the caller's trace was exported"
    );
    assert_eq!(spans.len(), 2, "{spans:#?}");
    assert!(
        spans
            .iter()
            .all(|s| s.trace_id == id("4bf92f3577b34da6a3ce929d0e0e4736"))
    );
}

#[test]
fn issue_31_a_collector_down_stops_neither_the_checks_nor_the_stop() {
    // A port nothing listens on: bound, then closed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let vars = [("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint.as_str())];
    let Serving { child, grpc, .. } = serve("otlp-down", &vars, &[]);
    assert_eq!(three_checks(&grpc), [Code::Ok, Code::Ok, Code::OverLimit]);
    let logs = stop(child);
    assert!(
        logs.contains("exporting a span per check over OTLP"),
        "{logs}"
    );
    // The spans lost are said, not dropped in silence.
    assert!(logs.contains("ExportError"), "{logs}");
}

#[test]
fn issue_31_an_otlp_protocol_it_cannot_speak_stops_the_start() {
    let vars = [("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")];
    let out = serve_command(
        "otlp-http",
        &vars,
        &["--otlp-endpoint", "http://127.0.0.1:4318"],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"),
        "{said}"
    );
}

/// envoy ratelimit's `TRACING_*` variables, with a collector that `OTEL_EXPORTER_OTLP_ENDPOINT`
/// names, through the binary under its name: the spans carry envoy ratelimit's service name
/// and namespace, and the time of a check in Redis.
#[test]
fn issue_31_envoy_ratelimits_tracing_variables_through_the_binary() {
    let (_collector, endpoint, exports) = collector();
    let redis = RedisServer::start();
    let dir = fresh_dir("otlp-envoy");
    std::fs::create_dir_all(dir.join("config")).unwrap();
    std::fs::write(dir.join("config").join("config.yaml"), CONFIG).unwrap();
    let redis_addr = redis
        .url()
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_owned();
    let mut child = Command::new(ratelimit_binary(&dir))
        .env_clear()
        .envs([
            ("RUNTIME_ROOT", dir.to_str().unwrap()),
            ("RUNTIME_APPDIRECTORY", "config"),
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", redis_addr.as_str()),
            ("USE_STATSD", "false"),
            ("TRACING_ENABLED", "true"),
            ("TRACING_EXPORTER_PROTOCOL", "grpc"),
            ("TRACING_SERVICE_NAME", "edge-rls"),
            ("TRACING_SERVICE_NAMESPACE", "edge"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ])
        .envs(envoy::LOCAL)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let at = addresses(&mut child);
    assert_eq!(
        three_checks(&at.grpc),
        [Code::Ok, Code::Ok, Code::OverLimit]
    );
    stop(child);
    let (resource, spans) = received(&exports, 6);
    assert_eq!(resource.get("service.name").cloned(), text("edge-rls"));
    assert_eq!(resource.get("service.namespace").cloned(), text("edge"));
    let timed = spans
        .iter()
        .filter(|s| s.name == "slidewin.descriptor")
        .filter(|s| {
            matches!(
                attributes(&s.attributes).get("store_us"),
                Some(Value::IntValue(_))
            )
        })
        .count();
    assert_eq!(timed, 3, "each check's time in Redis: {spans:#?}");
}
