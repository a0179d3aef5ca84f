//! [`TrustedProxies`]: the client's address behind proxies you trust, from the right of
//! `X-Forwarded-For` or `Forwarded`, so that a client cannot name its own.

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use http::HeaderMap;
use http::header::FORWARDED;
use ipnet::IpNet;

use crate::error::HttpConfigError;

/// Which header your proxies append the address they received a request from to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` (nginx, `HAProxy`, AWS and most load balancers).
    XForwardedFor,
    /// `Forwarded: for=client, for=proxy1` (RFC 7239; Envoy and Caddy can write it).
    Forwarded,
}

/// The networks of the proxies in front of a service, and the header they append to: the
/// client's address is the right-most one in that header that is not one of them.
///
/// Each proxy appends the address it received the request from. Everything left of what your
/// own proxies wrote came from the client and can say anything, so the address is read from
/// the right, skipping your proxies, and the first other one is the client (the address the
/// outermost proxy of yours saw). Reading the left-most, as `tower_governor`'s
/// `SmartIpKeyExtractor` does, lets a client send `X-Forwarded-For: <anything>` and be limited
/// as someone else, or as a new key every request. A request from an address that is not a
/// trusted proxy is its peer's, whatever its headers say; the header that is not configured is
/// never read (a proxy that appends to one passes the other through, the client's to write).
///
/// # Example
///
/// ```
/// use std::net::{IpAddr, SocketAddr};
/// use http::HeaderMap;
/// use slidewin_http::{ForwardedHeader, TrustedProxies};
///
/// let proxies = TrustedProxies::new(["10.0.0.0/8"], ForwardedHeader::XForwardedFor)?;
/// let peer: SocketAddr = "10.0.0.2:41000".parse()?;
///
/// // The client put a made-up address first; the load balancer appended the real one.
/// let mut headers = HeaderMap::new();
/// headers.insert("x-forwarded-for", "1.2.3.4, 203.0.113.7, 10.0.0.9".parse()?);
/// assert_eq!(proxies.client_ip(peer, &headers), "203.0.113.7".parse::<IpAddr>()?);
///
/// // Straight from the internet: the peer, whatever the header says.
/// let direct: SocketAddr = "198.51.100.23:5000".parse()?;
/// assert_eq!(proxies.client_ip(direct, &headers), "198.51.100.23".parse::<IpAddr>()?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustedProxies {
    networks: Box<[IpNet]>,
    header: ForwardedHeader,
}

impl TrustedProxies {
    /// The most networks a list holds: each request's address is compared with every one.
    ///
    /// ```
    /// assert_eq!(slidewin_http::TrustedProxies::MAX_NETWORKS, 256);
    /// ```
    pub const MAX_NETWORKS: usize = 256;

    /// The addresses read from one request's header at most: a header longer than that is
    /// read from its right end only (the client's address is within that many proxies).
    pub const MAX_HOPS: usize = 32;

    /// Proxies in `networks` (`10.0.0.0/8`, `2001:db8::/32`, or a single address such as
    /// `192.0.2.1`), appending to `header`.
    ///
    /// # Errors
    ///
    /// [`HttpConfigError::BadNetwork`] naming a network that is neither a CIDR block nor an
    /// address; [`HttpConfigError::TooManyNetworks`] past
    /// [`MAX_NETWORKS`](TrustedProxies::MAX_NETWORKS).
    ///
    /// # Example
    ///
    /// ```
    /// use slidewin_http::{ForwardedHeader, TrustedProxies};
    /// let err = TrustedProxies::new(["10.0.0.0/33"], ForwardedHeader::Forwarded).unwrap_err();
    /// assert!(err.to_string().contains("`10.0.0.0/33`"), "{err}");
    /// assert!(TrustedProxies::new(["::1", "fd00::/8"], ForwardedHeader::Forwarded).is_ok());
    /// ```
    pub fn new<'a>(
        networks: impl IntoIterator<Item = &'a str>,
        header: ForwardedHeader,
    ) -> Result<TrustedProxies, HttpConfigError> {
        let mut parsed = Vec::new();
        for text in networks {
            if parsed.len() == TrustedProxies::MAX_NETWORKS {
                return Err(HttpConfigError::TooManyNetworks {
                    max: TrustedProxies::MAX_NETWORKS,
                });
            }
            let network = IpNet::from_str(text)
                .or_else(|_| IpAddr::from_str(text).map(IpNet::from))
                .map_err(|_| HttpConfigError::BadNetwork { text: cut(text) })?;
            parsed.push(network);
        }
        Ok(TrustedProxies {
            networks: parsed.into_boxed_slice(),
            header,
        })
    }

    /// Whether `address` is one of the proxies.
    ///
    /// ```
    /// use slidewin_http::{ForwardedHeader, TrustedProxies};
    /// let proxies = TrustedProxies::new(["10.0.0.0/8"], ForwardedHeader::XForwardedFor)?;
    /// assert!(proxies.is_trusted("10.1.2.3".parse()?));
    /// assert!(!proxies.is_trusted("11.1.2.3".parse()?));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn is_trusted(&self, address: IpAddr) -> bool {
        let address = canonical(address);
        self.networks.iter().any(|n| n.contains(&address))
    }

    /// The client's address of a request from `peer` with `headers`: the right-most address
    /// of the configured header that is not a trusted proxy. When the peer is not trusted,
    /// the peer. When every address is trusted, the left-most (a request from inside). When
    /// an address the proxies wrote cannot be read (`unknown`, an obfuscated name, garbage),
    /// the last trusted one before it: what is left of it cannot be trusted either.
    ///
    /// ```
    /// use std::net::IpAddr;
    /// use http::HeaderMap;
    /// use slidewin_http::{ForwardedHeader, TrustedProxies};
    ///
    /// let proxies = TrustedProxies::new(["192.0.2.0/24"], ForwardedHeader::Forwarded)?;
    /// let mut headers = HeaderMap::new();
    /// headers.insert("forwarded", r#"for="[2001:db8:cafe::17]:4711";proto=https, for=192.0.2.43"#.parse()?);
    /// let peer = "192.0.2.60:443".parse()?;
    /// assert_eq!(proxies.client_ip(peer, &headers), "2001:db8:cafe::17".parse::<IpAddr>()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn client_ip(&self, peer: SocketAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = canonical(peer.ip());
        if !self.is_trusted(client) {
            return client;
        }
        let name = match self.header {
            ForwardedHeader::XForwardedFor => X_FORWARDED_FOR,
            ForwardedHeader::Forwarded => FORWARDED.as_str(),
        };
        // Several lines of one header are one list, in order: read them from the last.
        let lines = headers.get_all(name).iter().rev();
        let mut hops = 0;
        for line in lines {
            let Ok(line) = line.to_str() else {
                return client; // not text: nothing left of here can be read
            };
            for element in line.rsplit(',') {
                hops += 1;
                if hops > TrustedProxies::MAX_HOPS {
                    return client;
                }
                let address = match self.header {
                    ForwardedHeader::XForwardedFor => parse_node(element.trim()),
                    ForwardedHeader::Forwarded => forwarded_for(element),
                };
                let Some(address) = address else {
                    return client;
                };
                client = canonical(address);
                if !self.is_trusted(client) {
                    return client;
                }
            }
        }
        client
    }
}

const X_FORWARDED_FOR: &str = "x-forwarded-for";

/// An IPv4 address in IPv6 (`::ffff:a.b.c.d`, as a dual-stack socket reports one) as itself.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// The `for=` node of one `Forwarded` element (`for=192.0.2.60;proto=http;by=203.0.113.43`).
fn forwarded_for(element: &str) -> Option<IpAddr> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("for") {
            return None;
        }
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        parse_node(value)
    })
}

/// An address, with or without a port: `192.0.2.1`, `192.0.2.1:80`, `2001:db8::1`,
/// `[2001:db8::1]`, `[2001:db8::1]:80`. Anything else (`unknown`, `_hidden`) is `None`.
fn parse_node(node: &str) -> Option<IpAddr> {
    if let Ok(address) = IpAddr::from_str(node) {
        return Some(address);
    }
    if let Ok(socket) = SocketAddr::from_str(node) {
        return Some(socket.ip());
    }
    let bracketed = node.strip_prefix('[')?.strip_suffix(']')?;
    IpAddr::from_str(bracketed).ok()
}

/// `text` cut to 64 bytes at a character, for an error message.
fn cut(text: &str) -> String {
    let mut end = text.len().min(64);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}
