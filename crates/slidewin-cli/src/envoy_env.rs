//! `slidewin serve --envoy-env`: envoy ratelimit's environment variables, read with their
//! meanings and defaults and turned into `slidewin serve`'s flags, so that a manifest written
//! for envoy ratelimit runs slidewin with only its image changed. The server README's table
//! maps each variable to its flag.
//!
//! A variable slidewin has no use for is named in a warning; one whose meaning it cannot keep
//! (another backend, a config from xDS, a check it would skip) stops the start, so that
//! nothing is silently done otherwise.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use self::unused::{REFUSED, TUNING};

mod unused;

/// The flags the environment stands for, and what it holds that slidewin does not use.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Translation {
    pub(crate) flags: Vec<String>,
    pub(crate) warnings: Vec<String>,
}

/// The flags envoy ratelimit's variables stand for, as `lookup` gives them; or every
/// variable that cannot be honoured, with why.
pub(crate) fn translate(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Translation, String> {
    let mut env = Env {
        lookup,
        out: Translation::default(),
        errors: Vec::new(),
    };
    env.listeners();
    env.logs();
    env.config();
    env.redis();
    env.answers();
    env.metrics();
    env.tls();
    env.tracing();
    env.unused();
    if env.errors.is_empty() {
        Ok(env.out)
    } else {
        Err(env.errors.join("; "))
    }
}

struct Env<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
    out: Translation,
    errors: Vec<String>,
}

impl Env<'_> {
    /// A variable's value, its default when it is not set.
    fn get(&self, name: &str, default: &str) -> String {
        (self.lookup)(name).unwrap_or_else(|| default.to_owned())
    }

    fn set(&self, name: &str) -> bool {
        (self.lookup)(name).is_some()
    }

    fn flag(&mut self, flag: &str, value: impl Into<String>) {
        self.out.flags.push(flag.to_owned());
        self.out.flags.push(value.into());
    }

    fn switch(&mut self, flag: &str) {
        self.out.flags.push(flag.to_owned());
    }

    fn error(&mut self, name: &str, value: &str, why: &str) {
        self.errors
            .push(format!("{name}={value:?} is not supported: {why}"));
    }

    /// A boolean as Go's `strconv.ParseBool` reads it.
    fn bool(&mut self, name: &str, default: bool) -> bool {
        let Some(value) = (self.lookup)(name) else {
            return default;
        };
        match value.as_str() {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => true,
            "0" | "f" | "F" | "FALSE" | "false" | "False" => false,
            _ => {
                self.error(name, &value, "a boolean is true or false");
                default
            }
        }
    }

    /// The address of `host` and `port`, each named in the error when it is no address.
    fn addr(&mut self, (host, port): (&str, &str), default_port: &str) -> Option<SocketAddr> {
        let (host_value, port_value) = (self.get(host, "0.0.0.0"), self.get(port, default_port));
        let ip = ip_of(&host_value);
        if ip.is_none() {
            self.error(
                host,
                &host_value,
                "give an IP address (0.0.0.0, ::, 127.0.0.1)",
            );
        }
        let port_number = port_value.parse::<u16>().ok();
        if port_number.is_none() {
            self.error(port, &port_value, "a port is a number up to 65535");
        }
        Some(SocketAddr::new(ip?, port_number?))
    }

    /// `HOST`, `PORT`, `GRPC_*` and `DEBUG_*`: envoy ratelimit listens on every address.
    fn listeners(&mut self) {
        for (flag, host, port, default_port) in [
            ("--http-addr", "HOST", "PORT", "8080"),
            ("--grpc-addr", "GRPC_HOST", "GRPC_PORT", "8081"),
            ("--admin-addr", "DEBUG_HOST", "DEBUG_PORT", "6070"),
        ] {
            if let Some(addr) = self.addr((host, port), default_port) {
                self.flag(flag, addr.to_string());
            }
        }
        let age = self.get("GRPC_MAX_CONNECTION_AGE", "24h");
        match go_duration(&age) {
            Some(seconds) if seconds > 0.0 => {
                self.flag("--grpc-max-connection-age", format!("{seconds}"))
            }
            _ => self.error(
                "GRPC_MAX_CONNECTION_AGE",
                &age,
                "give a positive duration, as 24h or 90m",
            ),
        }
    }

    /// `LOG_LEVEL` and `LOG_FORMAT`.
    fn logs(&mut self) {
        let level = self.get("LOG_LEVEL", "WARN");
        let filter = match level.to_ascii_lowercase().as_str() {
            "trace" => "trace",
            "debug" => "debug",
            "info" => "info",
            "warn" | "warning" => "warn",
            "error" | "fatal" | "panic" => "error",
            _ => {
                self.error("LOG_LEVEL", &level, "give debug, info, warn or error");
                return;
            }
        };
        self.flag("--log", filter);
        let format = self.get("LOG_FORMAT", "text");
        match format.to_ascii_lowercase().as_str() {
            "text" => self.flag("--log-format", "text"),
            "json" => self.flag("--log-format", "json"),
            _ => self.error("LOG_FORMAT", &format, "give text or json"),
        }
    }

    /// `RUNTIME_*` and `MERGE_DOMAIN_CONFIG`: the config files are
    /// `$RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/$RUNTIME_APPDIRECTORY/*.yaml`.
    fn config(&mut self) {
        let mut dir =
            std::path::PathBuf::from(self.get("RUNTIME_ROOT", "/srv/runtime_data/current"));
        dir.push(self.get("RUNTIME_SUBDIRECTORY", ""));
        dir.push(self.get("RUNTIME_APPDIRECTORY", "config"));
        self.flag("--config", dir.display().to_string());
        // Both are slidewin's way already: hidden files are skipped, and the directory and the
        // one above it are watched.
        self.bool("RUNTIME_IGNOREDOTFILES", false);
        self.bool("RUNTIME_WATCH_ROOT", true);
        if self.bool("MERGE_DOMAIN_CONFIG", false) {
            self.switch("--merge-domains");
        }
    }

    /// `REDIS_*` and `CACHE_KEY_PREFIX`.
    fn redis(&mut self) {
        let url = self.get("REDIS_URL", "/var/run/nutcracker/ratelimit.sock");
        let tls = self.bool("REDIS_TLS", false);
        let auth = self.get("REDIS_AUTH", "");
        let socket = self.get("REDIS_SOCKET_TYPE", "unix").to_ascii_lowercase();
        let kind = self.get("REDIS_TYPE", "SINGLE").to_ascii_uppercase();
        let userinfo = userinfo(&auth);
        let scheme = if tls { "rediss" } else { "redis" };
        match (kind.as_str(), socket.as_str()) {
            ("SINGLE", "unix") if tls => {
                self.error("REDIS_TLS", "true", "TLS is for a tcp REDIS_SOCKET_TYPE");
            }
            ("SINGLE", "unix") => {
                let query = unix_auth(&auth);
                self.flag("--redis", format!("redis+unix://{url}{query}"));
            }
            ("SINGLE", "tcp") => self.flag("--redis", format!("{scheme}://{userinfo}{url}")),
            ("CLUSTER", "tcp") => {
                let seeds: Vec<String> = url
                    .split(',')
                    .map(|node| format!("{scheme}://{userinfo}{}", node.trim()))
                    .collect();
                self.flag("--redis-cluster", seeds.join(","));
            }
            ("CLUSTER", _) => self.error(
                "REDIS_SOCKET_TYPE",
                &socket,
                "a cluster is reached over tcp",
            ),
            ("SENTINEL", "tcp") => self.sentinel(&url, &auth, scheme),
            ("SENTINEL", _) => {
                self.error(
                    "REDIS_SOCKET_TYPE",
                    &socket,
                    "sentinels are reached over tcp",
                );
            }
            ("SINGLE", _) => self.error("REDIS_SOCKET_TYPE", &socket, "give unix or tcp"),
            _ => self.error("REDIS_TYPE", &kind, "give SINGLE, CLUSTER or SENTINEL"),
        }
        for (name, flag) in [
            ("REDIS_TLS_CACERT", "--redis-ca"),
            ("REDIS_TLS_CLIENT_CERT", "--redis-cert"),
            ("REDIS_TLS_CLIENT_KEY", "--redis-key"),
        ] {
            let path = self.get(name, "");
            if !path.is_empty() {
                self.flag(flag, path);
            }
        }
        // envoy ratelimit's cache of keys over their limit, in bytes; slidewin's holds
        // denials of about 300 bytes each. Unset, slidewin's default (on: it is exact).
        if let Some(bytes) = (self.lookup)("LOCAL_CACHE_SIZE_IN_BYTES") {
            match bytes.trim().parse::<usize>() {
                Ok(bytes) => self.flag("--redis-denial-cache", (bytes / 300).to_string()),
                Err(_) => self.error(
                    "LOCAL_CACHE_SIZE_IN_BYTES",
                    &bytes,
                    "give a number of bytes",
                ),
            }
        }
        let prefix = self.get("CACHE_KEY_PREFIX", "");
        if !prefix.is_empty() {
            self.flag("--redis-key-prefix", format!("{prefix}slidewin"));
        }
        // envoy ratelimit stays healthy while Redis is away unless told otherwise.
        if !self.bool("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", false) {
            self.switch("--ready-when-degraded");
        }
    }

    /// `REDIS_TYPE=SENTINEL`: `REDIS_URL` is `master,host:port,...`, `REDIS_SENTINEL_AUTH` the
    /// sentinels' password and `REDIS_AUTH` the primary's; with `REDIS_TLS`, TLS to the
    /// sentinels and to the primary (`scheme` `rediss`).
    fn sentinel(&mut self, url: &str, auth: &str, scheme: &str) {
        let sentinel_auth = userinfo(&self.get("REDIS_SENTINEL_AUTH", ""));
        let mut parts = url.split(',').map(str::trim);
        let master = parts.next().unwrap_or_default().to_owned();
        let sentinels: Vec<String> = parts
            .map(|node| format!("{scheme}://{sentinel_auth}{node}"))
            .collect();
        if master.is_empty() || sentinels.is_empty() {
            self.error("REDIS_URL", url, "for SENTINEL give master,host:port,...");
            return;
        }
        self.flag(
            "--redis-sentinel",
            format!("{master},{}", sentinels.join(",")),
        );
        if !auth.is_empty() {
            self.flag("--redis-primary-auth", auth);
        }
    }

    /// `SHADOW_MODE`, `NEAR_LIMIT_RATIO` and `LIMIT_RESPONSE_HEADERS_ENABLED` with its names.
    fn answers(&mut self) {
        if self.bool("SHADOW_MODE", false) {
            self.switch("--shadow-mode");
        }
        let ratio = self.get("NEAR_LIMIT_RATIO", "0.8");
        self.flag("--near-limit-ratio", ratio);
        if self.bool("LIMIT_RESPONSE_HEADERS_ENABLED", false) {
            self.flag("--response-headers", "envoy");
            let names = [
                self.get("LIMIT_LIMIT_HEADER", "RateLimit-Limit"),
                self.get("LIMIT_REMAINING_HEADER", "RateLimit-Remaining"),
                self.get("LIMIT_RESET_HEADER", "RateLimit-Reset"),
            ];
            self.flag("--envoy-header-names", names.join(","));
        } else {
            self.flag("--response-headers", "none");
        }
    }

    /// `USE_PROMETHEUS`, `PROMETHEUS_ADDR`, `PROMETHEUS_PATH`; statsd, which is not served.
    fn metrics(&mut self) {
        if self.bool("USE_STATSD", true) {
            self.out.warnings.push(
                "USE_STATSD is not false: slidewin sends no statsd; its metrics are Prometheus's \
                 (USE_PROMETHEUS=true serves them at PROMETHEUS_ADDR)"
                    .to_owned(),
            );
        }
        if !self.bool("USE_PROMETHEUS", false) {
            return;
        }
        let addr = self.get("PROMETHEUS_ADDR", ":9090");
        match addr
            .rsplit_once(':')
            .map(|(host, port)| socket_addr(host, port))
        {
            Some(Some(listen)) => self.flag("--metrics-addr", listen.to_string()),
            _ => self.error("PROMETHEUS_ADDR", &addr, "give host:port, as :9090"),
        }
        let path = self.get("PROMETHEUS_PATH", "/metrics");
        self.flag("--metrics-path", path);
        self.switch("--envoy-metric-names");
    }

    /// `TRACING_*`: envoy ratelimit's OTLP traces, which slidewin sends over gRPC only. The
    /// collector is the one `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// names, read by the exporter as the OTLP spec says; without one, the spec's default.
    fn tracing(&mut self) {
        if !self.bool("TRACING_ENABLED", false) {
            return;
        }
        let protocol = self.get("TRACING_EXPORTER_PROTOCOL", "http");
        if !protocol.eq_ignore_ascii_case("grpc") {
            self.error(
                "TRACING_EXPORTER_PROTOCOL",
                &protocol,
                "slidewin exports OTLP over gRPC only: set grpc, and point \
                 OTEL_EXPORTER_OTLP_ENDPOINT at the collector's gRPC port (4317)",
            );
            return;
        }
        let named = [
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ]
        .iter()
        .any(|name| (self.lookup)(name).is_some_and(|v| !v.trim().is_empty()));
        if !named {
            self.flag("--otlp-endpoint", "http://localhost:4317");
        }
        let service = self.get("TRACING_SERVICE_NAME", "RateLimit");
        self.flag("--otlp-service-name", service);
        for (name, key) in [
            ("TRACING_SERVICE_NAMESPACE", "service.namespace"),
            ("TRACING_SERVICE_INSTANCE_ID", "service.instance.id"),
        ] {
            if let Some(value) = (self.lookup)(name).filter(|v| !v.is_empty()) {
                self.flag("--otlp-resource", format!("{key}={value}"));
            }
        }
        if let Some(rate) = (self.lookup)("TRACING_SAMPLING_RATE") {
            self.flag("--otlp-sample-ratio", rate);
        }
    }

    /// `GRPC_SERVER_USE_TLS` with its certificate, and `GRPC_CLIENT_TLS_CACERT`: on gRPC only,
    /// as in envoy ratelimit.
    fn tls(&mut self) {
        if !self.bool("GRPC_SERVER_USE_TLS", false) {
            return;
        }
        let (cert, key) = (
            self.get("GRPC_SERVER_TLS_CERT", ""),
            self.get("GRPC_SERVER_TLS_KEY", ""),
        );
        if cert.is_empty() || key.is_empty() {
            self.error(
                "GRPC_SERVER_USE_TLS",
                "true",
                "it needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY",
            );
            return;
        }
        self.flag("--tls-cert", cert);
        self.flag("--tls-key", key);
        self.switch("--tls-only-grpc");
        let ca = self.get("GRPC_CLIENT_TLS_CACERT", "");
        if !ca.is_empty() {
            self.flag("--tls-client-ca", ca);
        }
    }

    /// The variables slidewin has no use for, named; those it cannot honour, refused.
    fn unused(&mut self) {
        for (name, why) in TUNING {
            if self.set(name) {
                self.out
                    .warnings
                    .push(format!("{name} is set and not used: {why}"));
            }
        }
        for (name, accepted, why) in REFUSED {
            if let Some(value) = (self.lookup)(name)
                && !accepted.iter().any(|ok| value.eq_ignore_ascii_case(ok))
            {
                self.error(name, &value, why);
            }
        }
    }
}

/// A host as Go listens on it: empty is every address, `localhost` the loopback one, and an
/// IPv6 address may come in brackets.
fn ip_of(host: &str) -> Option<IpAddr> {
    match host {
        "" => Some(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        "localhost" => Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        text => text
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .unwrap_or(text)
            .parse()
            .ok(),
    }
}

/// `host`:`port`, as [`ip_of`] reads the host.
fn socket_addr(host: &str, port: &str) -> Option<SocketAddr> {
    Some(SocketAddr::new(ip_of(host)?, port.parse().ok()?))
}

/// `REDIS_AUTH` as a URL's user information: `password` or `user:password`, each part
/// percent-encoded, and `@`; nothing when empty.
fn userinfo(auth: &str) -> String {
    if auth.is_empty() {
        return String::new();
    }
    match auth.split_once(':') {
        Some((user, password)) => format!("{}:{}@", encode(user), encode(password)),
        None => format!(":{}@", encode(auth)),
    }
}

/// `REDIS_AUTH` for a Unix socket's URL, which takes it in its query.
fn unix_auth(auth: &str) -> String {
    match auth.split_once(':') {
        _ if auth.is_empty() => String::new(),
        Some((user, password)) => format!("?user={}&pass={}", encode(user), encode(password)),
        None => format!("?pass={}", encode(auth)),
    }
}

/// Percent-encodes all but RFC 3986's unreserved characters.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A Go duration (`24h`, `1h30m`, `1.5s`, `300ms`, `0`), in seconds.
fn go_duration(text: &str) -> Option<f64> {
    if text == "0" {
        return Some(0.0);
    }
    let mut rest = text;
    let mut total = 0.0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit() && c != '.')?;
        let number: f64 = rest[..digits].parse().ok()?;
        let unit_len = rest[digits..]
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len() - digits);
        let scale = match &rest[digits..digits + unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += number * scale;
        rest = &rest[digits + unit_len..];
    }
    (total.is_finite() && !text.is_empty()).then_some(total)
}

#[cfg(test)]
mod tests;
