//! `slidewin serve`'s logs and traces: log lines on stderr, and, when asked for, the check
//! spans (slidewin-server's [`SPAN_TARGET`]) exported over OTLP/gRPC by the OpenTelemetry SDK.
//!
//! Traces are on with `--otlp-endpoint`, or with the standard variables that name a collector
//! (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_ENDPOINT`,
//! `OTEL_TRACES_EXPORTER=otlp`); `OTEL_SDK_DISABLED=true` turns them off. The SDK reads the
//! rest itself: headers, timeout, compression, sampler, batch sizes, resource attributes.

use std::time::Duration;

use opentelemetry::propagation::{Extractor, TextMapPropagator as _};
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry::{Key, KeyValue};
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use slidewin_server::SPAN_TARGET;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// How long the spans still queued at exit may take to reach the collector: the stop waits
/// this much at most after the drain, whatever the collector does.
pub(crate) const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// The service name a collector shows, unless `OTEL_SERVICE_NAME` or
/// `OTEL_RESOURCE_ATTRIBUTES` names one.
const SERVICE_NAME: &str = "slidewin";

/// `slidewin serve`'s trace flags.
// The doc comments are the --help text, read in a terminal, not rendered as Markdown.
#[allow(clippy::doc_markdown)]
#[derive(Debug, clap::Args)]
pub(crate) struct OtlpArgs {
    /// Export a span per check over OTLP/gRPC to this collector, as http://collector:4317
    /// (https:// for TLS, trusted by the system's roots): the domain, and each descriptor's
    /// rule, limit, decision and the backend's time. Also on when OTEL_EXPORTER_OTLP_ENDPOINT
    /// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT names one, or OTEL_TRACES_EXPORTER=otlp; off with
    /// OTEL_SDK_DISABLED=true. OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION,
    /// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and OTEL_BSP_* apply.
    #[arg(long, env = "SLIDEWIN_OTLP_ENDPOINT", value_name = "URL")]
    otlp_endpoint: Option<String>,
    /// The service name the spans carry, instead of OTEL_SERVICE_NAME's (default slidewin).
    #[arg(long, env = "SLIDEWIN_OTLP_SERVICE_NAME", value_name = "NAME")]
    otlp_service_name: Option<String>,
    /// A resource attribute the spans carry, as service.namespace=edge, beside
    /// OTEL_RESOURCE_ATTRIBUTES's. Repeat, or separate with commas.
    #[arg(
        long = "otlp-resource",
        env = "SLIDEWIN_OTLP_RESOURCE",
        value_name = "KEY=VALUE",
        value_delimiter = ',',
        value_parser = key_value
    )]
    otlp_resource: Vec<(String, String)>,
    /// The share of checks traced, from 0 to 1, instead of OTEL_TRACES_SAMPLER's (default:
    /// every check); a check in a caller's trace is traced as the caller decided.
    #[arg(long, env = "SLIDEWIN_OTLP_SAMPLE_RATIO", value_name = "RATIO", value_parser = sample_ratio)]
    otlp_sample_ratio: Option<f64>,
}

/// Whether traces are exported, as the flags and the environment say.
#[derive(Debug, PartialEq)]
pub(crate) enum Otlp {
    /// Not exported.
    Off,
    /// Exported as the flags say.
    On(Exporter),
}

/// Where and how the spans are exported; what a flag does not say, the `OTEL_*` variables do.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Exporter {
    /// The collector, or else the one the variables name (the SDK's default,
    /// `http://localhost:4317`, where none does).
    endpoint: Option<String>,
    service_name: Option<String>,
    resource: Vec<(String, String)>,
    sample_ratio: Option<f64>,
}

impl Otlp {
    /// What the flags `args` and the variables `env` reads ask for.
    ///
    /// # Errors
    ///
    /// As [`Otlp::choose`].
    pub(crate) fn from_args(
        args: &OtlpArgs,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Otlp, String> {
        Ok(match Otlp::choose(args.otlp_endpoint.as_deref(), env)? {
            Otlp::Off => Otlp::Off,
            Otlp::On(exporter) => Otlp::On(Exporter {
                service_name: args.otlp_service_name.clone(),
                resource: args.otlp_resource.clone(),
                sample_ratio: args.otlp_sample_ratio,
                ..exporter
            }),
        })
    }

    /// What `--otlp-endpoint` (`flag`) and the variables `env` reads ask for. A flag turns
    /// traces on even where `OTEL_TRACES_EXPORTER=none`: it is the more specific of the two.
    ///
    /// # Errors
    ///
    /// What slidewin cannot honour, named: an exporter other than `otlp`, a protocol other
    /// than `grpc`, a flag that is not an `http://` or `https://` URL.
    pub(crate) fn choose(
        flag: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Otlp, String> {
        let set = |name: &str| {
            env(name)
                .map(|value| value.trim().to_owned())
                .filter(|value| !value.is_empty())
        };
        if set("OTEL_SDK_DISABLED").is_some_and(|value| value.eq_ignore_ascii_case("true")) {
            return Ok(Otlp::Off);
        }
        let exporter = set("OTEL_TRACES_EXPORTER");
        if let Some(other) = exporter
            .as_deref()
            .filter(|e| !matches!(*e, "otlp" | "none"))
        {
            return Err(format!(
                "OTEL_TRACES_EXPORTER={other}: slidewin exports traces over OTLP only \
                 (otlp, or none)"
            ));
        }
        let collector_named = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
            || set("OTEL_EXPORTER_OTLP_ENDPOINT").is_some();
        let on = match (flag, exporter.as_deref()) {
            (Some(_), _) | (None, Some("otlp")) => true,
            (None, Some(_)) => false,
            (None, None) => collector_named,
        };
        if !on {
            return Ok(Otlp::Off);
        }
        // The signal's own variable wins over the general one, as the SDK reads them.
        let protocol = [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ]
        .into_iter()
        .find_map(|name| set(name).map(|value| (name, value)));
        if let Some((name, value)) = protocol.filter(|(_, value)| value != "grpc") {
            return Err(format!(
                "{name}={value}: slidewin exports OTLP over gRPC only (grpc)"
            ));
        }
        if let Some(url) = flag
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(format!(
                "--otlp-endpoint {url}: a collector's URL with its scheme, as \
                 http://collector:4317 (or https:// for TLS)"
            ));
        }
        Ok(Otlp::On(Exporter {
            endpoint: flag.map(str::to_owned),
            ..Exporter::default()
        }))
    }
}

/// The log lines' settings.
pub(crate) struct Logs<'a> {
    /// A tracing filter, as `info`.
    pub(crate) filter: &'a str,
    pub(crate) json: bool,
}

/// The installed exporter, if any: flushed by [`Telemetry::shutdown`].
pub(crate) struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Installs the log lines, and the span exporter `otlp` asks for. With traces on, it must
    /// run inside the Tokio runtime the exporter will send from.
    ///
    /// # Errors
    ///
    /// A filter that does not parse, or an exporter that cannot be built (an endpoint that is
    /// not a URL), said in a line for the operator.
    pub(crate) fn init(logs: &Logs<'_>, otlp: Otlp) -> Result<Telemetry, String> {
        let filter = tracing_subscriber::EnvFilter::try_new(logs.filter)
            .map_err(|e| format!("--log {}: {e}", logs.filter))?;
        // Colours only for a person at a terminal: a file, a pipe or a log collector gets
        // plain text (and `NO_COLOR`, https://no-color.org, turns them off anywhere).
        let colours = std::io::IsTerminal::is_terminal(&std::io::stderr())
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        let lines = tracing_subscriber::fmt::layer()
            .with_ansi(colours)
            .with_writer(std::io::stderr);
        let lines = if logs.json {
            lines.json().boxed()
        } else {
            lines.boxed()
        };
        let (provider, endpoint) = match otlp {
            Otlp::Off => (None, None),
            Otlp::On(exporter) => (Some(provider(&exporter)?), exporter.endpoint),
        };
        // The exporter sees the check spans only: not tonic's, h2's or its own.
        let spans = provider.as_ref().map(|provider| {
            tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("slidewin"))
                .with_location(false)
                .with_target(false)
                .with_threads(false)
                .with_tracked_inactivity(false)
                .with_filter(Targets::new().with_target(SPAN_TARGET, LevelFilter::TRACE))
        });
        tracing_subscriber::registry()
            .with(lines.with_filter(filter))
            .with(spans)
            .try_init()
            .map_err(|e| format!("cannot install the logs: {e}"))?;
        if provider.is_some() {
            slidewin_server::join_callers_traces(join);
            let to = endpoint.as_deref().unwrap_or("the collector OTEL_* names");
            tracing::info!("exporting a span per check over OTLP to {to}");
        }
        Ok(Telemetry { provider })
    }

    /// Sends the spans still queued, waiting [`FLUSH_TIMEOUT`] at most. Call it while the
    /// runtime still runs.
    pub(crate) fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown_with_timeout(FLUSH_TIMEOUT)
        {
            tracing::warn!("the last spans were not all exported: {e}");
        }
    }
}

/// Makes `span` a child of the call's span that `traceparent` (W3C Trace Context) names, so a
/// check shows inside the trace of the request Envoy was limiting. One that does not parse
/// leaves the span a root.
fn join(span: &tracing::Span, traceparent: &str) {
    let context = TraceContextPropagator::new().extract(&TraceParent(traceparent));
    if context.span().span_context().is_valid() {
        // Fails only once the span has started, which a check's span has not here.
        let _ = span.set_parent(context);
    }
}

/// A carrier of the `traceparent` field alone.
struct TraceParent<'a>(&'a str);

impl Extractor for TraceParent<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        (key == "traceparent").then_some(self.0)
    }

    fn keys(&self) -> Vec<&str> {
        vec!["traceparent"]
    }
}

/// The SDK's tracer provider: a batch of spans exported over OTLP/gRPC as `exporter` says.
fn provider(exporter: &Exporter) -> Result<SdkTracerProvider, String> {
    let mut spans = opentelemetry_otlp::SpanExporter::builder().with_tonic();
    if let Some(endpoint) = &exporter.endpoint {
        spans = spans.with_endpoint(endpoint);
    }
    let spans = spans
        .build()
        .map_err(|e| format!("the OTLP exporter: {e}"))?;
    // The variables' resource, to see whether they name the service.
    let named = Resource::builder()
        .build()
        .get(&Key::new("service.name"))
        .is_some_and(|name| !name.as_str().starts_with("unknown_service"));
    let mut resource = Resource::builder();
    match &exporter.service_name {
        Some(name) => resource = resource.with_service_name(name.clone()),
        None if !named => resource = resource.with_service_name(SERVICE_NAME),
        None => {}
    }
    let attributes = exporter.resource.iter();
    let resource = resource
        .with_attributes(attributes.map(|(k, v)| KeyValue::new(k.clone(), v.clone())))
        .build();
    let mut provider = SdkTracerProvider::builder()
        .with_resource(resource)
        .with_batch_exporter(spans);
    if let Some(ratio) = exporter.sample_ratio {
        // A check in a caller's trace follows the caller's decision; the ratio is for the rest.
        let ratio = Box::new(Sampler::TraceIdRatioBased(ratio));
        provider = provider.with_sampler(Sampler::ParentBased(ratio));
    }
    Ok(provider.build())
}

/// A resource attribute as `--otlp-resource` takes it.
fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_owned(), value.trim().to_owned()))
        }
        _ => Err(format!(
            "`{text}` is not KEY=VALUE, as service.namespace=edge"
        )),
    }
}

/// A share of checks, from 0 to 1.
fn sample_ratio(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(ratio) if (0.0..=1.0).contains(&ratio) => Ok(ratio),
        _ => Err(format!(
            "`{text}` is not a share: give a number from 0 to 1 (0.1)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::{Exporter, Otlp, key_value, sample_ratio};

    fn choose(flag: Option<&str>, vars: &[(&str, &str)]) -> Result<Otlp, String> {
        Otlp::choose(flag, |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    fn on(endpoint: Option<&str>) -> Result<Otlp, String> {
        Ok(Otlp::On(Exporter {
            endpoint: endpoint.map(str::to_owned),
            ..Exporter::default()
        }))
    }

    #[test]
    fn off_by_default_on_with_the_flag() {
        assert_eq!(choose(None, &[]), Ok(Otlp::Off));
        let url = "http://127.0.0.1:4317";
        assert_eq!(choose(Some(url), &[]), on(Some(url)));
    }

    #[test]
    fn a_named_collector_or_the_otlp_exporter_turns_traces_on() {
        let traces = [("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4317")];
        assert_eq!(choose(None, &traces), on(None));
        assert_eq!(
            choose(None, &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317")]),
            on(None)
        );
        assert_eq!(choose(None, &[("OTEL_TRACES_EXPORTER", "otlp")]), on(None));
        // An empty variable is no variable.
        assert_eq!(
            choose(None, &[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]),
            Ok(Otlp::Off)
        );
    }

    #[test]
    fn none_and_sdk_disabled_turn_traces_off() {
        let named = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317");
        assert_eq!(
            choose(None, &[named, ("OTEL_TRACES_EXPORTER", "none")]),
            Ok(Otlp::Off)
        );
        let disabled = ("OTEL_SDK_DISABLED", "TRUE");
        assert_eq!(choose(Some("http://c:4317"), &[disabled]), Ok(Otlp::Off));
        assert_eq!(
            choose(None, &[named, ("OTEL_SDK_DISABLED", "false")]),
            on(None)
        );
        // The flag is more specific than the exporter's variable.
        let none = ("OTEL_TRACES_EXPORTER", "none");
        assert_eq!(
            choose(Some("http://c:4317"), &[none]),
            on(Some("http://c:4317"))
        );
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_by_name() {
        let zipkin = choose(None, &[("OTEL_TRACES_EXPORTER", "zipkin")]).unwrap_err();
        assert!(zipkin.contains("OTEL_TRACES_EXPORTER=zipkin"), "{zipkin}");
        let http = [("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")];
        let refused = choose(Some("http://c:4318"), &http).unwrap_err();
        assert!(
            refused.contains("OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"),
            "{refused}"
        );
        // The signal's own protocol wins over the general one, both ways.
        let grpc_for_traces = [
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ];
        assert_eq!(
            choose(Some("http://c:4317"), &grpc_for_traces),
            on(Some("http://c:4317"))
        );
        let schemeless = choose(Some("collector:4317"), &[]).unwrap_err();
        assert!(
            schemeless.contains("--otlp-endpoint collector:4317"),
            "{schemeless}"
        );
        // Off, nothing is checked: a protocol for other signals does not stop the start.
        assert_eq!(choose(None, &http), Ok(Otlp::Off));
    }

    #[test]
    fn resource_attributes_and_ratios_are_read_or_refused_by_name() {
        assert_eq!(
            key_value("service.namespace = edge"),
            Ok(("service.namespace".to_owned(), "edge".to_owned()))
        );
        assert!(key_value("=edge").unwrap_err().contains("KEY=VALUE"));
        assert!(key_value("edge").is_err());
        assert_eq!(sample_ratio("0"), Ok(0.0));
        assert_eq!(sample_ratio("1"), Ok(1.0));
        assert!(sample_ratio("1.5").unwrap_err().contains("from 0 to 1"));
        assert!(sample_ratio("NaN").is_err());
    }
}
