//! [`Limit`]: named policies, the requests they apply to, whose requests they count, and what
//! each request costs.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::request::Parts;
use http::{HeaderName, Method};
use slidewin::limit::RuleSet;
use slidewin_store::RequestKey;

use crate::client_ip::TrustedProxies;
use crate::error::HttpConfigError;
use crate::fields::QuotaUnit;
use crate::partition::PartitionKeys;

type KeyFn = dyn Fn(&Parts) -> Option<String> + Send + Sync;
type CostFn = dyn Fn(&Parts) -> u64 + Send + Sync;
type When = dyn Fn(&Parts) -> bool + Send + Sync;

/// Whose requests a [`Limit`] counts: the key its quota is kept under.
///
/// When a request has no key (no such header, no peer address), the layer's
/// [`MissingKey`](crate::MissingKey) choice applies.
///
/// ```
/// use http::Request;
/// use slidewin_http::Key;
///
/// let (parts, ()) = Request::get("/").header("x-api-key", "k-42").body(())?.into_parts();
/// assert_eq!(Key::header("x-api-key".parse()?).extract(&parts).as_deref(), Some("k-42"));
/// assert_eq!(Key::global().extract(&parts).as_deref(), Some(""));
/// assert_eq!(Key::peer_ip().extract(&parts), None); // no peer address was recorded
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Key(KeyKind);

#[derive(Clone)]
enum KeyKind {
    Global,
    PeerIp,
    ClientIp(Arc<TrustedProxies>),
    Header(HeaderName),
    Fn(Arc<KeyFn>),
}

impl Key {
    /// One key for every request: the limit holds for the whole service.
    #[must_use]
    pub fn global() -> Key {
        Key(KeyKind::Global)
    }

    /// The address of the connection's peer: axum's `ConnectInfo<SocketAddr>` (with the
    /// `axum` feature, served with `into_make_service_with_connect_info::<SocketAddr>()`), or a
    /// [`SocketAddr`] in the request's extensions (as a hyper service can put there).
    ///
    /// ```
    /// use http::Request;
    /// use slidewin_http::Key;
    ///
    /// let mut request = Request::new(());
    /// request.extensions_mut().insert("192.0.2.9:4000".parse::<std::net::SocketAddr>()?);
    /// let (parts, ()) = request.into_parts();
    /// assert_eq!(Key::peer_ip().extract(&parts).as_deref(), Some("192.0.2.9"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn peer_ip() -> Key {
        Key(KeyKind::PeerIp)
    }

    /// The client's address behind trusted proxies: the right-most address of
    /// `X-Forwarded-For` or `Forwarded` that is not one of `proxies` (see
    /// [`TrustedProxies::client_ip`]), from the peer's address as [`peer_ip`](Key::peer_ip)
    /// finds it. A client cannot pick its own key by writing the header.
    ///
    /// ```
    /// use http::Request;
    /// use slidewin_http::{ForwardedHeader, Key, TrustedProxies};
    ///
    /// let proxies = TrustedProxies::new(["10.0.0.0/8"], ForwardedHeader::XForwardedFor)?;
    /// let mut request = Request::get("/")
    ///     .header("x-forwarded-for", "1.2.3.4, 203.0.113.7") // the first is the client's lie
    ///     .body(())?;
    /// request.extensions_mut().insert("10.0.0.2:50000".parse::<std::net::SocketAddr>()?);
    /// let (parts, ()) = request.into_parts();
    /// assert_eq!(Key::client_ip(proxies).extract(&parts).as_deref(), Some("203.0.113.7"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn client_ip(proxies: TrustedProxies) -> Key {
        Key(KeyKind::ClientIp(Arc::new(proxies)))
    }

    /// A header's value, such as an API key. A request without it, or with a value that is
    /// not visible ASCII, has no key.
    #[must_use]
    pub fn header(name: HeaderName) -> Key {
        Key(KeyKind::Header(name))
    }

    /// What `f` finds in the request; `None` when it has no key.
    ///
    /// ```
    /// use http::Request;
    /// use slidewin_http::Key;
    ///
    /// let tenant = Key::from_fn(|parts| {
    ///     let path = parts.uri.path().strip_prefix("/tenants/")?;
    ///     Some(path.split('/').next()?.to_string())
    /// });
    /// let (parts, ()) = Request::get("/tenants/acme/orders").body(())?.into_parts();
    /// assert_eq!(tenant.extract(&parts).as_deref(), Some("acme"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_fn(f: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static) -> Key {
        Key(KeyKind::Fn(Arc::new(f)))
    }

    /// The key of a request, or `None` when it has none.
    #[must_use]
    pub fn extract(&self, parts: &Parts) -> Option<String> {
        self.of(parts).map(|key| key.key().to_string())
    }

    /// Why the key of a request it found none for is the server's setup and not the client's:
    /// an address key on a server that records no peer address.
    pub(crate) fn server_fix(&self, parts: &Parts) -> Option<&'static str> {
        match &self.0 {
            KeyKind::PeerIp | KeyKind::ClientIp(_) if peer(parts).is_none() => Some(NO_PEER_FIX),
            _ => None,
        }
    }

    /// The key of a request, without allocating for an address or a header's value.
    pub(crate) fn of<'p>(&self, parts: &'p Parts) -> Option<Extracted<'p>> {
        match &self.0 {
            KeyKind::Global => Some(Extracted::Borrowed("")),
            KeyKind::PeerIp => peer(parts).map(|peer| Extracted::Address(peer.ip())),
            KeyKind::ClientIp(proxies) => {
                peer(parts).map(|peer| Extracted::Address(proxies.client_ip(peer, &parts.headers)))
            }
            KeyKind::Header(name) => parts
                .headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(Extracted::Borrowed),
            KeyKind::Fn(f) => f(parts).map(Extracted::Owned),
        }
    }
}

/// A request's key as extracted: an address, borrowed from the request, or a closure's
/// `String`.
#[derive(Clone)]
pub(crate) enum Extracted<'p> {
    Address(IpAddr),
    Borrowed(&'p str),
    Owned(String),
}

impl Extracted<'_> {
    pub(crate) fn key(&self) -> RequestKey<'_> {
        match self {
            Extracted::Address(address) => RequestKey::Address(*address),
            Extracted::Borrowed(text) => RequestKey::Text(text),
            Extracted::Owned(text) => RequestKey::Text(text),
        }
    }

    /// The same, owning its text, for a check that waits.
    pub(crate) fn into_owned(self) -> Extracted<'static> {
        match self {
            Extracted::Address(address) => Extracted::Address(address),
            Extracted::Borrowed(text) => Extracted::Owned(text.to_string()),
            Extracted::Owned(text) => Extracted::Owned(text),
        }
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            KeyKind::Global => f.write_str("Key::global()"),
            KeyKind::PeerIp => f.write_str("Key::peer_ip()"),
            KeyKind::ClientIp(proxies) => write!(f, "Key::client_ip({proxies:?})"),
            KeyKind::Header(name) => write!(f, "Key::header({name:?})"),
            KeyKind::Fn(_) => f.write_str("Key::from_fn(..)"),
        }
    }
}

/// What to do when an address key finds no peer address: the server's setup, never the
/// client's fault, so the log and the answer both say it.
const NO_PEER_FIX: &str = "the server records no peer address: serve the app with \
    `into_make_service_with_connect_info::<SocketAddr>()` (axum), or put the peer's \
    `SocketAddr` in each request's extensions";

/// The peer's address the server recorded in the request.
fn peer(parts: &Parts) -> Option<SocketAddr> {
    #[cfg(feature = "axum")]
    if let Some(axum::extract::ConnectInfo(peer)) = parts
        .extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
    {
        return Some(*peer);
    }
    parts.extensions.get::<SocketAddr>().copied()
}

/// A condition on the requests a [`Limit`] applies to.
#[derive(Clone)]
enum Condition {
    Route(Box<str>),
    PathPrefix(Box<str>),
    Method(Method),
    When(Arc<When>),
}

impl Condition {
    fn holds(&self, parts: &Parts) -> bool {
        match self {
            Condition::Route(route) => route_of(parts) == &**route,
            Condition::PathPrefix(prefix) => {
                let path = parts.uri.path();
                path.strip_prefix(&**prefix).is_some_and(|rest| {
                    rest.is_empty() || rest.starts_with('/') || prefix.ends_with('/')
                })
            }
            Condition::Method(method) => parts.method == *method,
            Condition::When(f) => f(parts),
        }
    }
}

/// The route a request matched: axum's `MatchedPath` (with the `axum` feature, inside a
/// `Router`), or else its path.
fn route_of(parts: &Parts) -> &str {
    #[cfg(feature = "axum")]
    if let Some(matched) = parts.extensions.get::<axum::extract::MatchedPath>() {
        return matched.as_str();
    }
    parts.uri.path()
}

/// What a request costs: one unit, a fixed number, or a function of the request.
#[derive(Clone)]
enum Cost {
    Units(u64),
    Fn(Arc<CostFn>),
}

/// Named policies for the requests that a set of conditions selects, counted per [`Key`], at
/// a cost per request: a [`RuleSet`] put in front of HTTP.
///
/// Each rule of the set is a **policy**, named by the rule's name in the `RateLimit-Policy`
/// field, in the problem body of a denial and in the statistics. A request is admitted only
/// if every policy of its limit admits it, and then it is counted against all of them; a
/// denied request is counted against none (all-or-nothing, atomically, in memory and on
/// Redis alike).
///
/// A layer holds several limits; the **first** whose conditions all hold decides a request,
/// as a router's first matching route does. Order them from the most specific. A request
/// that no limit selects passes, with no fields.
///
/// # Example
///
/// ```
/// use http::Method;
/// use slidewin::limit::{Kind, Rule, RuleSet};
/// use slidewin_http::{Key, Limit};
///
/// let uploads = Limit::new(RuleSet::from(Rule::new(
///     "upload-kib",
///     Kind::SlidingLog,
///     "10000 per hour".parse()?,
/// )?))
/// .route("/upload")
/// .method(Method::POST)
/// .key(Key::header("x-api-key".parse()?))
/// .cost_fn(|parts| {
///     let bytes = parts.headers.get("content-length").and_then(|v| v.to_str().ok()?.parse().ok());
///     // At least 1 KiB: a chunked upload, with no length, must not go uncounted (a cost of
///     // 0 checks without consuming).
///     bytes.unwrap_or(0u64).div_ceil(1024).max(1)
/// });
/// assert_eq!(uploads.rules().rules()[0].name(), "upload-kib");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Limit {
    rules: RuleSet,
    conditions: Vec<Condition>,
    key: Key,
    cost: Cost,
    /// The policies, by index, that only count.
    shadow: Vec<bool>,
    /// What a request without a key gets here, if not the layer's choice.
    missing_key: Option<crate::MissingKey>,
    /// What the costs count, for `RateLimit-Policy`'s `qu`.
    unit: QuotaUnit,
    /// Whose digest names a request's partition in `RateLimit`'s `pk`, if any.
    partition: Option<PartitionKeys>,
}

impl Limit {
    /// The policies of `rules` for every request, counted per peer IP
    /// ([`Key::peer_ip`]), one unit each.
    #[must_use]
    pub fn new(rules: RuleSet) -> Limit {
        let shadow = vec![false; rules.rules().len()];
        Limit {
            rules,
            conditions: Vec::new(),
            key: Key::peer_ip(),
            cost: Cost::Units(1),
            shadow,
            missing_key: None,
            unit: QuotaUnit::Requests,
            partition: None,
        }
    }

    /// Applies only to requests of `route`: axum's matched route, such as `/users/{id}`,
    /// inside a `Router` with the `axum` feature; otherwise the path, exactly.
    #[must_use]
    pub fn route(mut self, route: &str) -> Limit {
        self.conditions.push(Condition::Route(route.into()));
        self
    }

    /// Applies only to paths under `prefix`: `/api` selects `/api` and `/api/users`, not
    /// `/apis`.
    ///
    /// ```
    /// use http::Request;
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::Limit;
    ///
    /// let rules = RuleSet::from(Rule::new("api", Kind::Gcra, "10/s".parse()?)?);
    /// let api = Limit::new(rules).path_prefix("/api");
    /// let selects = |path: &str| api.selects(&Request::get(path).body(()).unwrap().into_parts().0);
    /// assert!(selects("/api") && selects("/api/users"));
    /// assert!(!selects("/apis") && !selects("/"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn path_prefix(mut self, prefix: &str) -> Limit {
        self.conditions.push(Condition::PathPrefix(prefix.into()));
        self
    }

    /// Applies only to requests of `method`.
    #[must_use]
    pub fn method(mut self, method: Method) -> Limit {
        self.conditions.push(Condition::Method(method));
        self
    }

    /// Applies only to requests for which `f` holds.
    #[must_use]
    pub fn when(mut self, f: impl Fn(&Parts) -> bool + Send + Sync + 'static) -> Limit {
        self.conditions.push(Condition::When(Arc::new(f)));
        self
    }

    /// Counts the requests of each `key` apart ([`Key::peer_ip`] by default).
    #[must_use]
    pub fn key(mut self, key: Key) -> Limit {
        self.key = key;
        self
    }

    /// What a request this limit selects gets when its key cannot be found, instead of the
    /// layer's choice ([`missing_key`](crate::RateLimitLayerBuilder::missing_key)): for a
    /// limit keyed by an optional header, say, that lets requests without it through.
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::{Key, Limit, MissingKey};
    ///
    /// let rules = RuleSet::from(Rule::new("per-key", Kind::Gcra, "10/s".parse()?)?);
    /// let limit = Limit::new(rules)
    ///     .key(Key::header("x-api-key".parse()?))
    ///     .missing_key(MissingKey::Pass);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn missing_key(mut self, missing_key: crate::MissingKey) -> Limit {
        self.missing_key = Some(missing_key);
        self
    }

    /// Each request costs `units` (1 by default; 0 checks without consuming).
    #[must_use]
    pub fn cost(mut self, units: u64) -> Limit {
        self.cost = Cost::Units(units);
        self
    }

    /// Each request costs what `f` says, such as its `Content-Length` in KiB.
    #[must_use]
    pub fn cost_fn(mut self, f: impl Fn(&Parts) -> u64 + Send + Sync + 'static) -> Limit {
        self.cost = Cost::Fn(Arc::new(f));
        self
    }

    /// The costs count `unit`, which `RateLimit-Policy` names (`qu`): say
    /// [`QuotaUnit::ContentBytes`] where [`cost_fn`](Limit::cost_fn) reads a body's length.
    /// The layer refuses to build with a unit its rules cannot count
    /// ([`HttpConfigError::QuotaUnit`]).
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::{Limit, QuotaUnit};
    ///
    /// let bytes = RuleSet::from(Rule::new("upload", Kind::SlidingLog, "10000000/hour".parse()?)?);
    /// let uploads = Limit::new(bytes).quota_unit(QuotaUnit::ContentBytes).cost_fn(|parts| {
    ///     let length = parts.headers.get("content-length").and_then(|v| v.to_str().ok()?.parse().ok());
    ///     length.unwrap_or(1)
    /// });
    /// assert_eq!(uploads.unit(), QuotaUnit::ContentBytes);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn quota_unit(mut self, unit: QuotaUnit) -> Limit {
        self.unit = unit;
        self
    }

    /// What the costs count.
    #[must_use]
    pub fn unit(&self) -> QuotaUnit {
        self.unit
    }

    /// Names the partition of each response's key in its `RateLimit` field (the draft's `pk`),
    /// as a digest under `keys`' secret, which the key cannot be read back from.
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::{Key, Limit, PartitionKeys};
    ///
    /// let rules = RuleSet::from(Rule::new("api", Kind::Gcra, "10/s".parse()?)?);
    /// let limit = Limit::new(rules)
    ///     .key(Key::header("x-api-key".parse()?))
    ///     .partition_keys(PartitionKeys::new(b"the fleet's secret, 16+ bytes")?);
    /// assert!(limit.partitions().is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn partition_keys(mut self, keys: PartitionKeys) -> Limit {
        self.partition = Some(keys);
        self
    }

    /// The partition keys, if responses name their partitions.
    #[must_use]
    pub fn partitions(&self) -> Option<&PartitionKeys> {
        self.partition.as_ref()
    }

    /// Puts the policy `name` in shadow mode: it decides and its fields are sent, but it never
    /// denies; the requests it would have denied are counted
    /// ([`PolicyStats::shadow_denied`](crate::PolicyStats::shadow_denied)). For a new
    /// policy, to see what it would do before it does it.
    ///
    /// # Errors
    ///
    /// [`HttpConfigError::UnknownPolicy`] when no policy of the limit has that name.
    ///
    /// ```
    /// use slidewin::limit::{Kind, Rule, RuleSet};
    /// use slidewin_http::{HttpConfigError, Limit};
    ///
    /// let rules = RuleSet::new([
    ///     Rule::new("burst", Kind::Gcra, "10/s".parse()?)?,
    ///     Rule::new("daily", Kind::SlidingCounter, "5000/day".parse()?)?,
    /// ])?;
    /// let limit = Limit::new(rules).shadow("daily")?;
    /// assert!(limit.is_shadow("daily") && !limit.is_shadow("burst"));
    /// let err = limit.shadow("dialy").unwrap_err();
    /// assert_eq!(err, HttpConfigError::UnknownPolicy { name: "dialy".into() });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shadow(mut self, name: &str) -> Result<Limit, HttpConfigError> {
        let (index, _) = self
            .rules
            .get(name)
            .ok_or_else(|| HttpConfigError::UnknownPolicy { name: name.into() })?;
        self.shadow[index] = true;
        Ok(self)
    }

    /// Whether the policy `name` is in shadow mode (`false` for no such policy).
    #[must_use]
    pub fn is_shadow(&self, name: &str) -> bool {
        self.rules.get(name).is_some_and(|(i, _)| self.shadow[i])
    }

    /// The policies.
    #[must_use]
    pub fn rules(&self) -> &RuleSet {
        &self.rules
    }

    /// Whether the limit applies to a request: all its conditions hold.
    #[must_use]
    pub fn selects(&self, parts: &Parts) -> bool {
        self.conditions.iter().all(|c| c.holds(parts))
    }

    /// The request's key, by the limit's [`Key`].
    pub(crate) fn key_of<'p>(&self, parts: &'p Parts) -> Option<Extracted<'p>> {
        self.key.of(parts)
    }

    /// For a request [`key_of`](Limit::key_of) found no key for, the server's fix, if the
    /// server and not the client is the reason.
    pub(crate) fn missing_key_fix(&self, parts: &Parts) -> Option<&'static str> {
        self.key.server_fix(parts)
    }

    /// The request's cost.
    pub(crate) fn cost_of(&self, parts: &Parts) -> u64 {
        match &self.cost {
            Cost::Units(units) => *units,
            Cost::Fn(f) => f(parts),
        }
    }

    pub(crate) fn missing_key_choice(&self) -> Option<crate::MissingKey> {
        self.missing_key
    }

    pub(crate) fn shadow_flags(&self) -> &[bool] {
        &self.shadow
    }
}

impl fmt::Debug for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limit")
            .field("rules", &self.rules)
            .field("conditions", &self.conditions.len())
            .field("key", &self.key)
            .field("shadow", &self.shadow)
            .field("unit", &self.unit)
            .field("partition", &self.partition.is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    /// An address's key's text is its standard text: every octet value, in every place, and
    /// an IPv6 address with an IPv4 tail.
    #[test]
    fn an_address_keys_text_is_the_addresss_text() {
        for octet in 0..=255u8 {
            for address in [
                Ipv4Addr::new(octet, 0, 9, 255),
                Ipv4Addr::new(1, octet, 10, 99),
                Ipv4Addr::new(100, 200, octet, 7),
                Ipv4Addr::new(255, 255, 255, octet),
            ] {
                let key = RequestKey::from(IpAddr::V4(address));
                assert_eq!(key.to_string(), address.to_string());
            }
        }
        let v6 = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0xffff, 0xc000, 0x0280);
        assert_eq!(RequestKey::from(IpAddr::V6(v6)).to_string(), v6.to_string());
    }
}
