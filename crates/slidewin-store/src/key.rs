//! [`RequestKey`]: what a check is counted under.

use std::fmt;
use std::net::IpAddr;

/// The key a check is counted under: a client's address, or text (a header's value, a user
/// id, the empty text of a global limit). What a [`Backend`](crate::Backend) checks.
///
/// Its text ([`Display`](fmt::Display)) is the address's standard text or the text itself:
/// what Redis names the key by. In memory an address is kept as its bits, without its text,
/// and so is another key than the text that spells it (a caller keys one limit by one kind).
///
/// ```
/// use std::net::{IpAddr, Ipv4Addr};
/// use slidewin_store::RequestKey;
///
/// let address = RequestKey::from(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 7)));
/// assert_eq!(address.to_string(), "203.0.113.7");
/// assert_eq!(RequestKey::from("k-42").to_string(), "k-42");
/// assert_ne!(address, RequestKey::from("203.0.113.7"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestKey<'a> {
    /// A client's address.
    Address(IpAddr),
    /// Text.
    Text(&'a str),
}

impl fmt::Display for RequestKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestKey::Address(address) => address.fmt(f),
            RequestKey::Text(text) => f.write_str(text),
        }
    }
}

impl<'a> From<&'a str> for RequestKey<'a> {
    fn from(text: &'a str) -> RequestKey<'a> {
        RequestKey::Text(text)
    }
}

impl From<IpAddr> for RequestKey<'_> {
    fn from(address: IpAddr) -> RequestKey<'static> {
        RequestKey::Address(address)
    }
}
