//! What a browser's same-origin rules leave open to any web page a developer visits.
//!
//! - **DNS rebinding.** A page at `http://rebind.attacker.example:8080/` whose name the
//!   attacker points at 127.0.0.1 once the page has loaded is, for the browser, of one origin
//!   with whatever answers there then: our admin routes, which it may read. Its requests still
//!   carry its own name in `Host`. So while no admin token is set, the admin routes answer only
//!   a loopback host (`localhost`, `*.localhost`, 127.0.0.0/8, `[::1]`) and the names the
//!   operator lists ([`AdminHost`]); any other host, or none, gets `403` naming it. With a
//!   token the check is not needed: the rebinding page has neither the token nor the cookie (a
//!   browser sends a cookie only to the name it was set by, never to the attacker's).
//! - **Cross-site requests.** A page may `POST` a form, or `fetch` a `text/plain` or Blob body,
//!   to any address without asking first (no CORS preflight): its answer is hidden from the
//!   page, but the check would be counted. A JSON content type makes the browser ask first (a
//!   preflight, which this service does not answer), so `POST /json` takes only
//!   `application/json`: anything else, or nothing, gets `415`.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};

use super::AdminToken;

/// The most bytes of a presented Host or Content-Type that a refusal shows.
const MAX_SHOWN: usize = 100;

/// The longest DNS name (RFC 1035), without its final dot.
const MAX_NAME: usize = 253;

/// A host the open admin surfaces answer besides the loopback ones (`slidewin serve
/// --admin-host NAME`): a DNS name, an IPv4 address, or an IPv6 address with or without its
/// brackets. It is compared with a request's host without the port, case or a final dot.
///
/// ```
/// use slidewin_server::AdminHost;
/// let host: AdminHost = "Slidewin.Internal.".parse()?;
/// assert_eq!(host.to_string(), "slidewin.internal");
/// assert_eq!("[fd00::1]".parse::<AdminHost>()?, "fd00::1".parse()?);
/// assert_eq!("10.0.0.5".parse::<AdminHost>()?.to_string(), "10.0.0.5");
/// let port = "slidewin.internal:8080".parse::<AdminHost>().unwrap_err();
/// assert!(port.to_string().contains("without the port"), "{port}");
/// # Ok::<(), slidewin_server::AdminHostError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminHost(Host);

/// A host, as compared: a name in lower case without a final dot, or an address.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Host {
    Name(Box<str>),
    V4(Ipv4Addr),
    V6(Ipv6Addr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::V4(address) => write!(f, "{address}"),
            Host::V6(address) => write!(f, "[{address}]"),
        }
    }
}

impl fmt::Display for AdminHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Why a name was not taken as an [`AdminHost`]: the name, and the reason.
///
/// ```
/// use slidewin_server::AdminHost;
/// let error = "bad name!".parse::<AdminHost>().unwrap_err();
/// assert_eq!(error.to_string(), "admin host `bad name!`: ' ' at byte 3 is not in a host name (letters, digits, '-', '_', '.')");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminHostError {
    name: String,
    reason: String,
}

impl fmt::Display for AdminHostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "admin host `{}`: {}", self.name, self.reason)
    }
}

impl std::error::Error for AdminHostError {}

impl FromStr for AdminHost {
    type Err = AdminHostError;

    fn from_str(name: &str) -> Result<AdminHost, AdminHostError> {
        let failed = |reason: String| AdminHostError {
            name: name.to_owned(),
            reason,
        };
        if let Ok(address) = name.parse::<Ipv6Addr>() {
            return Ok(AdminHost(Host::V6(address)));
        }
        if !name.starts_with('[') && name.contains(':') {
            return Err(failed(
                "give the name without the port (the port is not compared)".to_owned(),
            ));
        }
        parse_host(name).map(AdminHost).map_err(failed)
    }
}

/// `text` as a host without a port: `[IPv6]`, an IPv4 address, or a name (lower-cased, its
/// final dot dropped); or why not.
fn parse_host(text: &str) -> Result<Host, String> {
    if let Some(inner) = text.strip_prefix('[') {
        return inner
            .strip_suffix(']')
            .and_then(|inner| inner.parse().ok())
            .map(Host::V6)
            .ok_or_else(|| "not an IPv6 address in brackets".to_owned());
    }
    if let Ok(address) = text.parse() {
        return Ok(Host::V4(address));
    }
    let name = text.strip_suffix('.').unwrap_or(text);
    if name.len() > MAX_NAME {
        return Err(format!(
            "{} bytes: a host name has at most {MAX_NAME}",
            name.len()
        ));
    }
    if let Some((at, bad)) = name
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "{bad:?} at byte {at} is not in a host name (letters, digits, '-', '_', '.')"
        ));
    }
    if name.split('.').any(str::is_empty) {
        return Err("an empty label: a host name is labels joined by single dots".to_owned());
    }
    Ok(Host::Name(name.to_ascii_lowercase().into()))
}

/// The host of a `Host` header or a URI's authority: without its port, if the port is
/// digits; `None` for anything else.
fn host_of(authority: &[u8]) -> Option<Host> {
    let text = std::str::from_utf8(authority).ok()?;
    let (host, port) = match text.strip_prefix('[') {
        Some(rest) => {
            let end = rest.find(']')? + 2;
            (
                &text[..end],
                text[end..].strip_prefix(':').unwrap_or(&text[end..]),
            )
        }
        None => text.split_once(':').unwrap_or((text, "")),
    };
    port.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| parse_host(host).ok())
        .flatten()
}

impl Host {
    /// Whether only this machine answers to it: `localhost` and its subdomains (RFC 6761),
    /// 127.0.0.0/8 and `::1`.
    fn is_loopback(&self) -> bool {
        match self {
            Host::Name(name) => &**name == "localhost" || name.ends_with(".localhost"),
            Host::V4(address) => address.is_loopback(),
            Host::V6(address) => address.is_loopback(),
        }
    }
}

/// The hosts the open admin routes answer: the loopback ones and these. Cloning shares them.
#[derive(Clone, Debug, Default)]
pub(crate) struct AdminHosts(Arc<[AdminHost]>);

impl AdminHosts {
    pub(crate) fn new(hosts: impl IntoIterator<Item = AdminHost>) -> AdminHosts {
        AdminHosts(hosts.into_iter().collect())
    }

    pub(crate) fn as_slice(&self) -> &[AdminHost] {
        &self.0
    }

    fn admits(&self, host: &Host) -> bool {
        host.is_loopback() || self.0.iter().any(|listed| listed.0 == *host)
    }

    /// `router` with each of its routes answering only these hosts; a request for another,
    /// or for none, gets `403` naming the host and the two ways to open it.
    pub(crate) fn protect(&self, router: Router) -> Router {
        router.route_layer(middleware::from_fn_with_state(self.clone(), host_guard))
    }
}

/// What a request says it is for: its URI's authority (absolute-form or HTTP/2), else its one
/// `Host` header; the raw bytes, to show, or why there are none.
fn requested(request: &Request) -> Result<&[u8], String> {
    if let Some(authority) = request.uri().authority() {
        return Ok(authority.as_str().as_bytes());
    }
    let mut hosts = request.headers().get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (Some(host), None) => Ok(host.as_bytes()),
        (None, _) => Err("named no host (no Host header)".to_owned()),
        (Some(_), Some(_)) => Err("had several Host headers".to_owned()),
    }
}

async fn host_guard(State(hosts): State<AdminHosts>, request: Request, next: Next) -> Response {
    let requested = requested(&request);
    let host = requested.as_ref().ok().and_then(|raw| host_of(raw));
    if host.as_ref().is_some_and(|host| hosts.admits(host)) {
        return next.run(request).await;
    }
    let (what, name) = match (&requested, &host) {
        (Ok(raw), Some(host)) => (format!("was for host {}", shown(raw)), host.to_string()),
        (Ok(raw), None) => (format!("was for host {}", shown(raw)), "NAME".to_owned()),
        (Err(why), _) => (why.clone(), "NAME".to_owned()),
    };
    let body = format!(
        "403 Forbidden: while no admin token is set, the dashboard, /api/* and /metrics answer \
         only requests for a loopback host (localhost, 127.0.0.1, [::1]) or a name given with \
         --admin-host, and this request {what}.\nTo open them to a name: --admin-host {name} \
         (or SLIDEWIN_ADMIN_HOSTS={name}); or set an admin token (--admin-token-file PATH), \
         which they then require from every host.\n"
    );
    (
        StatusCode::FORBIDDEN,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        body,
    )
        .into_response()
}

/// Presented bytes as a refusal shows them: quoted, escaped, at most [`MAX_SHOWN`] of them.
fn shown(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(MAX_SHOWN)];
    let more = if cut.len() < bytes.len() { "..." } else { "" };
    format!("\"{}\"{more}", cut.escape_ascii())
}

/// Whether `POST /json` may count a request with these headers: one `Content-Type` whose
/// type is `application/json` (in any case, with any parameters); else why not, in words.
pub(crate) fn json_content_type(headers: &HeaderMap) -> Result<(), String> {
    const NEEDS: &str = "POST /json takes `content-type: application/json` only, so that no web \
                         page can send it one without the browser asking first (CORS)";
    let mut types = headers.get_all(header::CONTENT_TYPE).iter();
    let value = match (types.next(), types.next()) {
        (Some(value), None) => value.as_bytes(),
        (None, _) => return Err(format!("the request has no content type: {NEEDS}")),
        (Some(_), Some(_)) => {
            return Err(format!("the request has several content types: {NEEDS}"));
        }
    };
    let essence = value.split(|&b| b == b';').next().unwrap_or_default();
    if essence
        .trim_ascii()
        .eq_ignore_ascii_case(b"application/json")
    {
        Ok(())
    } else {
        Err(format!(
            "the request's content type is {}: {NEEDS}",
            shown(value)
        ))
    }
}

/// What `slidewin serve` prints about the admin surfaces served at `http`.
pub(crate) fn startup_lines(
    scheme: &str,
    http: SocketAddr,
    token: Option<&AdminToken>,
    hosts: &[AdminHost],
) -> Vec<String> {
    if token.is_some() {
        return vec![
            format!(
                "  dashboard       {scheme}://{http}/?token=<admin token>  (once; then a cookie)"
            ),
            "  admin surfaces  /api/*, /metrics and the dashboard need the admin token \
             (Authorization: Bearer)"
                .to_owned(),
        ];
    }
    if !http.ip().is_loopback() {
        tracing::warn!(
            %http,
            "the admin surfaces are open on a non-loopback address (to loopback host names and \
             --admin-host names only): set --admin-token-file or --no-admin"
        );
    }
    let mut names = "localhost, 127.0.0.1, [::1]".to_owned();
    for host in hosts {
        names.push_str(&format!(", {host}"));
    }
    vec![
        format!("  dashboard       {scheme}://{http}/"),
        format!(
            "  admin surfaces  OPEN: the dashboard, /api/* and /metrics on {http} need no token, \
             for hosts {names} (set --admin-token-file to require one)"
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(text: &str) -> Option<Host> {
        host_of(text.as_bytes())
    }

    #[test]
    fn reads_hosts_with_and_without_ports() {
        let name = |n: &str| Some(Host::Name(n.into()));
        assert_eq!(host("Example.COM:8080"), name("example.com"));
        assert_eq!(host("example.com."), name("example.com"));
        assert_eq!(host("example.com:"), name("example.com"));
        assert_eq!(host("127.0.0.1:80"), Some(Host::V4(Ipv4Addr::LOCALHOST)));
        assert_eq!(host("[::1]:80"), Some(Host::V6(Ipv6Addr::LOCALHOST)));
        assert_eq!(host("[::1]"), Some(Host::V6(Ipv6Addr::LOCALHOST)));
        for bad in [
            "",
            ":80",
            "a:b",
            "a:80:80",
            "::1",
            "[::1",
            "[::1]x",
            "[nope]",
            "a..b",
            "a b",
            "u@h",
            "é.example",
        ] {
            assert_eq!(host(bad), None, "{bad:?}");
        }
        assert_eq!(host_of(b"\xff"), None);
        assert_eq!(host(&"a".repeat(254)), None);
    }

    #[test]
    fn loopback_is_localhost_its_subdomains_and_the_loopback_addresses() {
        for yes in [
            "localhost",
            "LOCALHOST.",
            "x.localhost:9",
            "127.0.0.1",
            "127.1.2.3:8080",
            "[::1]:8080",
        ] {
            assert!(host(yes).unwrap().is_loopback(), "{yes}");
        }
        for no in [
            "localhost.example",
            "notlocalhost",
            "128.0.0.1",
            "0.0.0.0",
            "[::]",
            "[::ffff:127.0.0.1]",
        ] {
            assert!(!host(no).unwrap().is_loopback(), "{no}");
        }
    }

    #[test]
    fn listed_hosts_refuse_ports_and_odd_characters_by_name() {
        let error = "slidewin.internal:8080".parse::<AdminHost>().unwrap_err();
        assert_eq!(error.name, "slidewin.internal:8080");
        for bad in ["", "a/b", "[fd00::1", "a..b", "*.example"] {
            let error = bad.parse::<AdminHost>().unwrap_err();
            assert!(error.to_string().contains(&format!("`{bad}`")), "{error}");
        }
        let hosts = AdminHosts::new(["Dash.Example".parse().unwrap()]);
        assert!(hosts.admits(&host("dash.example:443").unwrap()));
        assert!(!hosts.admits(&host("dash.example.org").unwrap()));
    }

    #[test]
    fn json_content_type_takes_application_json_only() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_str(value).unwrap());
            json_content_type(&headers)
        };
        assert_eq!(with("application/json"), Ok(()));
        assert_eq!(with("Application/JSON ; charset=utf-8"), Ok(()));
        for bad in [
            "text/plain",
            "application/jsonx",
            "application/json, text/plain",
        ] {
            let why = with(bad).unwrap_err();
            assert!(why.contains(&format!("\"{bad}\"")), "{why}");
        }
        assert!(
            json_content_type(&HeaderMap::new())
                .unwrap_err()
                .contains("no content type")
        );
    }

    #[test]
    fn shows_at_most_a_hundred_bytes_escaped() {
        assert_eq!(shown(b"a\"\n"), "\"a\\\"\\n\"");
        let long = shown(&[b'x'; 500]);
        assert!(long.len() < 110 && long.ends_with("..."), "{long}");
    }
}
