//! Access to the admin surfaces: the dashboard (`/`, `/assets/*`), `/api/*` and `/metrics` may
//! require a bearer token. `POST /json`, `/healthcheck`, `/healthz` and gRPC never do: they are the data plane.
//! Without a token, the admin surfaces answer only requests for a loopback host or a listed
//! one ([`AdminHost`]), against DNS rebinding; see the `browsers` module.
//!
//! A request gets in with the token in one of three places:
//!
//! - `Authorization: Bearer TOKEN`, for programs (curl, Prometheus's `authorization`);
//! - the `slidewin_admin` cookie, which a browser gets by opening any admin page once with
//!   `?token=TOKEN`: the answer is `303 See Other` to the same page without the token, setting
//!   the cookie `HttpOnly; SameSite=Strict`, so the token leaves the address bar at once and
//!   the page's own requests (its assets, `api/events`) carry the cookie. The cookie holds
//!   not the token but its HMAC-SHA256 under a key drawn at random once per process: a cookie
//!   read off a browser does not give the token away (nor work after a restart);
//! - nowhere else: any other request gets `401 Unauthorized` with `WWW-Authenticate: Bearer
//!   realm="slidewin"` and the same short body whatever was presented.
//!
//! Tokens are compared in constant time with [`subtle`]'s `ConstantTimeEq`. A presented value
//! of another length is refused before any byte is compared: its timing tells the token's
//! length, and nothing else. Tokens are at least [`AdminToken::MIN_LEN`] bytes, so knowing the
//! length does not help to guess one.

mod browsers;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use ring::hmac;
use subtle::ConstantTimeEq;

pub use browsers::{AdminHost, AdminHostError};
pub(crate) use browsers::{AdminHosts, json_content_type, startup_lines};

/// The query parameter a browser hands the token in, once.
const TOKEN_PARAM: &str = "token";

/// The body of every refusal: the same whatever was presented.
const REFUSED: &str = "401 Unauthorized: this needs slidewin's admin token.\n";

/// The most bytes a token file may hold.
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// The secret the admin surfaces require. Cloning shares it; `Debug` does not show it.
///
/// A token is at least [`AdminToken::MIN_LEN`] bytes of printable ASCII without space, `"`,
/// `,`, `;` or `\`: it must fit in a header and in a cookie unchanged. `openssl rand -hex 32`
/// makes a good one.
///
/// ```
/// use slidewin_server::AdminToken;
/// let token = AdminToken::new("3f5e0c4d9a1b7e2f60a8c3d5")?;
/// assert!(token.matches(b"3f5e0c4d9a1b7e2f60a8c3d5"));
/// assert!(!token.matches(b"3f5e0c4d9a1b7e2f60a8c3d6"));
/// assert!(!token.matches(b"3f5e"));
/// assert!(AdminToken::new("short").is_err());
/// assert_eq!(format!("{token:?}"), "AdminToken(<redacted>)");
/// # Ok::<(), slidewin_server::AdminTokenError>(())
/// ```
#[derive(Clone)]
pub struct AdminToken {
    secret: Arc<[u8]>,
    /// The sign-in cookie's value: the token's HMAC under [`cookie_key`], in hex. Computed
    /// once: a presented cookie is compared with it in constant time.
    cookie: Arc<[u8]>,
    /// The sign-in cookie is `Secure`: the HTTP listener speaks TLS.
    secure: bool,
}

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

/// Why a token was not accepted as the admin token.
///
/// ```
/// use slidewin_server::{AdminToken, AdminTokenError};
/// assert!(matches!(AdminToken::new("with space 0123456789"), Err(AdminTokenError::Character { position: 4 })));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdminTokenError {
    /// Fewer than [`AdminToken::MIN_LEN`] bytes.
    TooShort {
        /// Its length.
        len: usize,
    },
    /// A byte that a header or a cookie cannot carry unchanged (a space, a control character,
    /// `"`, `,`, `;`, `\` or a non-ASCII byte), at this byte offset.
    Character {
        /// Its byte offset.
        position: usize,
    },
    /// The token file could not be read.
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The system's random source failed to give the key of the sign-in cookie.
    Random,
}

impl fmt::Display for AdminTokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdminTokenError::TooShort { len } => write!(
                f,
                "the admin token has {len} bytes: it needs at least {} (`openssl rand -hex 32` \
                 makes one)",
                AdminToken::MIN_LEN
            ),
            AdminTokenError::Character { position } => write!(
                f,
                "the admin token has a character at byte {position} that a header or cookie \
                 cannot carry: use printable ASCII without space, '\"', ',', ';' or '\\'"
            ),
            AdminTokenError::File { path, reason } => {
                write!(f, "admin token file {}: {reason}", path.display())
            }
            AdminTokenError::Random => {
                f.write_str("the system's random source gave no key for the admin sign-in cookie")
            }
        }
    }
}

impl std::error::Error for AdminTokenError {}

/// The key of the sign-in cookie's HMAC: drawn once per process, so a cookie is good until
/// the process ends and never after.
fn cookie_key() -> Result<&'static hmac::Key, AdminTokenError> {
    static KEY: OnceLock<hmac::Key> = OnceLock::new();
    if let Some(key) = KEY.get() {
        return Ok(key);
    }
    let rng = ring::rand::SystemRandom::new();
    let key = hmac::Key::generate(hmac::HMAC_SHA256, &rng).map_err(|_| AdminTokenError::Random)?;
    Ok(KEY.get_or_init(|| key))
}

/// The sign-in cookie's value for `token`: its HMAC-SHA256 under `key`, in lower-case hex.
fn cookie_value(key: &hmac::Key, token: &[u8]) -> Arc<[u8]> {
    let tag = hmac::sign(key, token);
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    Arc::from(hex.as_bytes())
}

/// Whether a header and a cookie carry `byte` unchanged: RFC 6265's cookie-octet.
fn cookie_octet(byte: u8) -> bool {
    matches!(byte, 0x21 | 0x23..=0x2B | 0x2D..=0x3A | 0x3C..=0x5B | 0x5D..=0x7E)
}

impl AdminToken {
    /// The cookie a browser keeps the token in.
    pub const COOKIE: &str = "slidewin_admin";

    /// The same token, its sign-in cookie marked `Secure` when `secure` (the HTTP listener
    /// speaks TLS: `serve` sets it).
    ///
    /// ```
    /// use slidewin_server::AdminToken;
    /// let token = AdminToken::new("0123456789abcdef0123")?.with_secure_cookie(true);
    /// assert!(token.matches(b"0123456789abcdef0123"));
    /// # Ok::<(), slidewin_server::AdminTokenError>(())
    /// ```
    #[must_use]
    pub fn with_secure_cookie(mut self, secure: bool) -> AdminToken {
        self.secure = secure;
        self
    }

    /// The fewest bytes a token may have.
    pub const MIN_LEN: usize = 16;

    /// The token `token`.
    ///
    /// ```
    /// use slidewin_server::AdminToken;
    /// assert!(AdminToken::new("0123456789abcdef").is_ok());
    /// assert!(AdminToken::new("0123456789abcdé").is_err());
    /// ```
    ///
    /// # Errors
    ///
    /// A token shorter than [`AdminToken::MIN_LEN`] bytes or with a byte a header or a cookie
    /// cannot carry; or a system whose random source fails to give the cookie's key.
    pub fn new(token: &str) -> Result<AdminToken, AdminTokenError> {
        if let Some(position) = token.bytes().position(|b| !cookie_octet(b)) {
            return Err(AdminTokenError::Character { position });
        }
        if token.len() < AdminToken::MIN_LEN {
            return Err(AdminTokenError::TooShort { len: token.len() });
        }
        Ok(AdminToken {
            secret: Arc::from(token.as_bytes()),
            cookie: cookie_value(cookie_key()?, token.as_bytes()),
            secure: false,
        })
    }

    /// The token in the file at `path`, without the whitespace around it (a file ending in a
    /// newline is fine). A file that others than its owner may read is used, with a warning.
    ///
    /// ```
    /// use slidewin_server::AdminToken;
    /// let path = std::env::temp_dir().join(format!("slidewin-doc-token-{}", std::process::id()));
    /// std::fs::write(&path, "0123456789abcdef0123\n")?;
    /// let token = AdminToken::from_file(&path)?;
    /// assert!(token.matches(b"0123456789abcdef0123"));
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A file that cannot be read, holds more than 64 KiB or is not UTF-8, or a token
    /// [`AdminToken::new`] refuses.
    pub fn from_file(path: &Path) -> Result<AdminToken, AdminTokenError> {
        let text = read_secret(path).map_err(|reason| AdminTokenError::File {
            path: path.to_owned(),
            reason,
        })?;
        AdminToken::new(&text)
    }

    /// Whether `presented` is the token, compared in constant time: the time taken depends on
    /// the lengths only. A value of another length is refused before any byte is compared.
    ///
    /// ```
    /// use slidewin_server::AdminToken;
    /// let token = AdminToken::new("correct-horse-battery")?;
    /// assert!(token.matches(b"correct-horse-battery"));
    /// assert!(!token.matches(b"correct-horse-batterz"));
    /// assert!(!token.matches(b""));
    /// # Ok::<(), slidewin_server::AdminTokenError>(())
    /// ```
    #[must_use]
    pub fn matches(&self, presented: &[u8]) -> bool {
        // subtle's slice comparison answers "no" at once for another length, and otherwise
        // looks at every byte.
        bool::from(self.secret.as_ref().ct_eq(presented))
    }

    /// `router` with each of its routes requiring this token: in `Authorization: Bearer`, in
    /// the [`AdminToken::COOKIE`] cookie, or once in `?token=` (answered by a redirect that sets
    /// the cookie). Paths that match no route are left as they were (404).
    ///
    /// ```
    /// use axum::body::Body;
    /// use axum::http::{Request, StatusCode, header};
    /// use axum::routing::get;
    /// use slidewin_server::AdminToken;
    /// use tower::Service as _;
    /// # tokio::runtime::Runtime::new()?.block_on(async {
    /// let token = AdminToken::new("0123456789abcdef0123")?;
    /// let mut app = token.protect(axum::Router::new().route("/api/stats", get(|| async { "{}" })));
    ///
    /// let refused = app.call(Request::get("/api/stats").body(Body::empty())?).await?;
    /// assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    ///
    /// let request = Request::get("/api/stats")
    ///     .header(header::AUTHORIZATION, "Bearer 0123456789abcdef0123")
    ///     .body(Body::empty())?;
    /// assert_eq!(app.call(request).await?.status(), StatusCode::OK);
    ///
    /// let browser = app.call(Request::get("/api/stats?token=0123456789abcdef0123").body(Body::empty())?).await?;
    /// assert_eq!(browser.status(), StatusCode::SEE_OTHER);
    /// assert_eq!(browser.headers()[header::LOCATION], "./stats");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn protect(&self, router: Router) -> Router {
        router.route_layer(middleware::from_fn_with_state(self.clone(), guard))
    }

    /// Whether `headers` carry the token in `Authorization: Bearer`, or its sign-in value in
    /// the cookie (never the token itself).
    fn admits(&self, headers: &HeaderMap) -> bool {
        let bearer = headers
            .get_all(header::AUTHORIZATION)
            .iter()
            .filter_map(|value| bearer_token(value.as_bytes()))
            .map(|presented| self.matches(presented));
        let cookies = headers
            .get_all(header::COOKIE)
            .iter()
            .flat_map(|value| cookie_values(value.as_bytes()))
            .map(|presented| bool::from(self.cookie.as_ref().ct_eq(presented)));
        // Every candidate is compared: which one matched is not told by the time taken.
        bearer.chain(cookies).fold(false, |found, one| one | found)
    }
}

#[cfg(unix)]
fn warn_if_others_may_read(path: &Path, file: &std::fs::File) {
    use std::os::unix::fs::PermissionsExt as _;
    if let Ok(meta) = file.metadata()
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            path = %path.display(),
            "the admin token file may be read by others than its owner: chmod 600 it"
        );
    }
}

#[cfg(not(unix))]
fn warn_if_others_may_read(_path: &Path, _file: &std::fs::File) {}

/// The token of `Bearer TOKEN` (the scheme in any case), or `None`.
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let space = value.iter().position(|&b| b == b' ')?;
    let (scheme, rest) = value.split_at(space);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let start = rest.iter().position(|&b| b != b' ')?;
    Some(rest[start..].trim_ascii_end())
}

/// The values of every [`AdminToken::COOKIE`] in a `Cookie` header.
fn cookie_values(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b';').filter_map(|pair| {
        let pair = pair.trim_ascii();
        let eq = pair.iter().position(|&b| b == b'=')?;
        (&pair[..eq] == AdminToken::COOKIE.as_bytes()).then(|| &pair[eq + 1..])
    })
}

/// The decoded `token` parameter of `query`, and the query without it; `None` without one.
fn query_token(query: &str) -> Option<(Vec<u8>, String)> {
    let mut token = None;
    let mut rest = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some((TOKEN_PARAM, value)) => token = Some(percent_decode(value)),
            None if pair == TOKEN_PARAM => token = Some(Vec::new()),
            _ if pair.is_empty() => {}
            _ => rest.push(pair),
        }
    }
    token.map(|token| (token, rest.join("&")))
}

/// `%XX` escapes decoded; anything else as it is.
fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            // Two hex digits make at most 0xFF.
            out.push(u8::try_from(hi * 16 + lo).unwrap_or(u8::MAX));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// The refusal: the same for every request that did not bring the token.
fn refused() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [
            (
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"slidewin\""),
            ),
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        REFUSED,
    )
        .into_response()
}

/// The browser's way in: the same page without the token, and the cookie.
fn signed_in(token: &AdminToken, uri: &Uri, rest_query: &str) -> Response {
    // A relative reference to the page's last segment, so that it still points right when
    // the router is nested under a prefix; `./` so that a segment with `:` is not a scheme.
    let last = uri.path().rsplit('/').next().unwrap_or_default();
    let mut location = format!("./{last}");
    if !rest_query.is_empty() {
        location.push('?');
        location.push_str(rest_query);
    }
    // The cookie's value is hex, a valid header value; the path and query came in a valid URI.
    // `Secure` only over TLS: a browser drops a `Secure` cookie sent over plain http.
    let cookie = format!(
        "{}={}; Path=/; HttpOnly; SameSite=Strict{}",
        AdminToken::COOKIE,
        String::from_utf8_lossy(&token.cookie),
        if token.secure { "; Secure" } else { "" }
    );
    match (
        HeaderValue::from_str(&location),
        HeaderValue::from_str(&cookie),
    ) {
        (Ok(location), Ok(cookie)) => (
            StatusCode::SEE_OTHER,
            [
                (header::LOCATION, location),
                (header::SET_COOKIE, cookie),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
                (
                    header::REFERRER_POLICY,
                    HeaderValue::from_static("no-referrer"),
                ),
            ],
        )
            .into_response(),
        _ => refused(),
    }
}

/// The middleware: the token in the query signs a browser in; in a header or the cookie, it
/// lets the request through; anything else is refused.
async fn guard(State(token): State<AdminToken>, request: Request, next: Next) -> Response {
    if let Some((presented, rest)) = request.uri().query().and_then(query_token) {
        // A token in the URL is never let through as it is: the browser is sent on without
        // it, so it stays in as few logs and histories as it can.
        let method = request.method();
        if token.matches(&presented) && (method == Method::GET || method == Method::HEAD) {
            return signed_in(&token, request.uri(), &rest);
        }
        return refused();
    }
    if token.admits(request.headers()) {
        next.run(request).await
    } else {
        refused()
    }
}

#[cfg(test)]
mod tests;

/// The secret in the file at `path`, without the whitespace around it; why not, as a reason
/// to follow the path. A file that others than its owner may read is used, with a warning.
pub(crate) fn read_secret(path: &Path) -> Result<String, String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    warn_if_others_may_read(path, &file);
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!(
            "holds more than {MAX_FILE_BYTES} bytes: not a secret"
        ));
    }
    let text = String::from_utf8(bytes).map_err(|_| "is not UTF-8".to_owned())?;
    Ok(text.trim().to_owned())
}

/// The partition keys under the secret in the file at `path` (whitespace around it ignored),
/// for [`AnswerOptions::partition_keys`](crate::AnswerOptions::partition_keys).
///
/// # Errors
///
/// The file cannot be read, holds more than 64 KiB or is not UTF-8, or its secret is shorter
/// than [`PartitionKeys::MIN_SECRET_BYTES`](slidewin_http::PartitionKeys::MIN_SECRET_BYTES),
/// each naming the path.
///
/// ```
/// let path = std::env::temp_dir().join(format!("slidewin-doc-pk-{}", std::process::id()));
/// std::fs::write(&path, "a secret of sixteen bytes or more\n")?;
/// let keys = slidewin_server::partition_keys_from_file(&path)?;
/// assert_eq!(keys, slidewin_http::PartitionKeys::new(b"a secret of sixteen bytes or more")?);
/// std::fs::write(&path, "too short")?;
/// assert!(slidewin_server::partition_keys_from_file(&path).unwrap_err().contains("at least 16"));
/// std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn partition_keys_from_file(path: &Path) -> Result<slidewin_http::PartitionKeys, String> {
    let named = |reason: String| format!("{}: {reason}", path.display());
    let secret = read_secret(path).map_err(named)?;
    slidewin_http::PartitionKeys::new(secret.as_bytes()).map_err(|e| named(e.to_string()))
}
