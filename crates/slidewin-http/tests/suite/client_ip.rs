//! The client's address behind trusted proxies: a client can write anything left of what
//! the proxies append, and never chooses its own key.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use http::{HeaderMap, HeaderValue};
use proptest::prelude::*;
use slidewin::limit::SlidingLog;
use slidewin::{Keyed, Moment};
use slidewin_http::{ForwardedHeader, HttpConfigError, TrustedProxies};

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn peer(text: &str) -> SocketAddr {
    SocketAddr::new(ip(text), 40_000)
}

fn xff(values: &[&str]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for value in values {
        headers.append("x-forwarded-for", HeaderValue::from_str(value).unwrap());
    }
    headers
}

fn lb() -> TrustedProxies {
    TrustedProxies::new(["10.0.0.0/8", "fd00::/8"], ForwardedHeader::XForwardedFor).unwrap()
}

/// `tower_governor`'s `SmartIpKeyExtractor` takes the left-most `X-Forwarded-For` address, so a
/// client that writes a new one on every request gets a fresh quota every time. Here the
/// key is what the load balancer appended, whatever the client wrote: the sixth request is
/// denied however it is dressed.
#[test]
fn tower_governor_spoofed_forwarded_for_gets_no_fresh_quota() {
    let limiter = Keyed::<IpAddr, _>::new(SlidingLog::new("5/minute".parse().unwrap()).unwrap());
    let proxies = lb();
    let mut admitted = 0;
    for i in 0..20 {
        // The client's own header, then the load balancer's append of the real address.
        let spoof = format!("198.51.100.{i}, 203.0.113.7");
        let headers = xff(&[&spoof]);
        let client = proxies.client_ip(peer("10.0.0.2"), &headers);
        assert_eq!(client, ip("203.0.113.7"));
        if limiter
            .check(&client, Moment::from_secs(1), 1)
            .unwrap()
            .allowed()
        {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 5);
}

#[test]
fn a_peer_that_is_not_a_proxy_is_the_client_whatever_its_headers_say() {
    let headers = xff(&["10.0.0.3"]);
    assert_eq!(
        lb().client_ip(peer("203.0.113.9"), &headers),
        ip("203.0.113.9")
    );
}

#[test]
fn no_header_from_a_proxy_is_the_proxy() {
    assert_eq!(
        lb().client_ip(peer("10.0.0.2"), &HeaderMap::new()),
        ip("10.0.0.2")
    );
}

#[test]
fn every_hop_trusted_is_the_left_most() {
    let headers = xff(&["10.9.9.9, 10.0.0.5"]);
    assert_eq!(lb().client_ip(peer("10.0.0.2"), &headers), ip("10.9.9.9"));
}

#[test]
fn several_lines_are_one_list_read_from_the_last() {
    let headers = xff(&["1.1.1.1, 203.0.113.5", "10.0.0.4"]);
    assert_eq!(
        lb().client_ip(peer("10.0.0.2"), &headers),
        ip("203.0.113.5")
    );
}

#[test]
fn an_unreadable_hop_stops_at_the_last_trusted_one() {
    // `unknown`, an obfuscated node, garbage: nothing left of it can be believed.
    for bad in ["unknown", "_hidden", "not an address", ""] {
        let value = format!("203.0.113.5, {bad}, 10.0.0.7");
        let headers = xff(&[&value]);
        assert_eq!(
            lb().client_ip(peer("10.0.0.2"), &headers),
            ip("10.0.0.7"),
            "{bad:?}"
        );
    }
}

#[test]
fn ports_brackets_and_ipv4_in_ipv6() {
    let headers = xff(&["[2001:db8::1]:443, 203.0.113.5:8080"]);
    assert_eq!(
        lb().client_ip(peer("10.0.0.2"), &headers),
        ip("203.0.113.5")
    );
    let headers = xff(&["2001:db8::1, fd00::1"]);
    assert_eq!(lb().client_ip(peer("fd00::2"), &headers), ip("2001:db8::1"));
    // A dual-stack socket reports an IPv4 peer as ::ffff:a.b.c.d: still the proxy.
    let headers = xff(&["203.0.113.5"]);
    assert_eq!(
        lb().client_ip(peer("::ffff:10.0.0.2"), &headers),
        ip("203.0.113.5")
    );
    assert_eq!(
        lb().client_ip(peer("::ffff:203.0.113.1"), &headers),
        ip("203.0.113.1")
    );
}

#[test]
fn forwarded_is_read_when_configured_and_only_then() {
    let forwarded = TrustedProxies::new(["10.0.0.0/8"], ForwardedHeader::Forwarded).unwrap();
    let mut headers = HeaderMap::new();
    headers.insert(
        "forwarded",
        HeaderValue::from_static(
            r#"for=198.51.100.1, for="203.0.113.5:4711";proto=https;by=10.0.0.9, For=10.0.0.8"#,
        ),
    );
    headers.insert("x-forwarded-for", HeaderValue::from_static("192.0.2.200"));
    assert_eq!(
        forwarded.client_ip(peer("10.0.0.2"), &headers),
        ip("203.0.113.5")
    );
    // A proxy that appends X-Forwarded-For passes the client's own Forwarded through: it is
    // not read.
    assert_eq!(
        lb().client_ip(peer("10.0.0.2"), &headers),
        ip("192.0.2.200")
    );
    // An element without `for=` is unreadable.
    headers.insert(
        "forwarded",
        HeaderValue::from_static("for=203.0.113.5, proto=https"),
    );
    assert_eq!(
        forwarded.client_ip(peer("10.0.0.2"), &headers),
        ip("10.0.0.2")
    );
}

#[test]
fn a_header_that_is_not_text_stops_at_the_proxy() {
    let mut headers = HeaderMap::new();
    headers.insert(
        "x-forwarded-for",
        HeaderValue::from_bytes(b"203.0.113.5, \xff").unwrap(),
    );
    assert_eq!(lb().client_ip(peer("10.0.0.2"), &headers), ip("10.0.0.2"));
}

#[test]
fn a_long_chain_is_read_only_as_far_as_max_hops() {
    // A client sends 100,000 trusted-looking hops: the work is bounded, and the answer is the
    // last trusted address within reach, never one the client placed further left.
    let mut chain = vec!["203.0.113.5".to_string()];
    chain.extend((0..100_000).map(|i| format!("10.{}.{}.{}", i / 65_536, i / 256 % 256, i % 256)));
    let headers = xff(&[&chain.join(", ")]);
    let client = lb().client_ip(peer("10.0.0.2"), &headers);
    assert!(lb().is_trusted(client), "{client}");
    assert_ne!(client, ip("203.0.113.5"));
}

#[test]
fn bad_networks_are_errors_naming_them() {
    let long = "x".repeat(1_000);
    for text in ["10.0.0.0/33", "300.0.0.1", "", long.as_str()] {
        let err = TrustedProxies::new([text], ForwardedHeader::XForwardedFor).unwrap_err();
        let shown: String = text.chars().take(64).collect();
        assert_eq!(err, HttpConfigError::BadNetwork { text: shown }, "{text}");
    }
    let many: Vec<String> = (0..=TrustedProxies::MAX_NETWORKS)
        .map(|i| format!("10.0.{}.0/24", i % 256))
        .collect();
    let err = TrustedProxies::new(
        many.iter().map(String::as_str),
        ForwardedHeader::XForwardedFor,
    )
    .unwrap_err();
    assert_eq!(
        err,
        HttpConfigError::TooManyNetworks {
            max: TrustedProxies::MAX_NETWORKS
        }
    );
}

/// The reference: the right-most untrusted address of the chain the proxies saw, peer last.
fn reference(trusted: &[bool], chain: &[Ipv4Addr], peer_trusted: bool, peer: Ipv4Addr) -> Ipv4Addr {
    if !peer_trusted {
        return peer;
    }
    let mut client = peer;
    for (address, is_trusted) in chain.iter().zip(trusted).rev() {
        client = *address;
        if !is_trusted {
            break;
        }
    }
    client
}

proptest! {
    #[test]
    fn the_client_is_the_right_most_address_not_a_proxy(
        hops in prop::collection::vec((any::<bool>(), any::<u8>(), any::<u8>()), 0..12),
        peer_trusted in any::<bool>(),
    ) {
        let proxies = TrustedProxies::new(["10.0.0.0/8"], ForwardedHeader::XForwardedFor).unwrap();
        let address = |trusted: bool, a: u8, b: u8| {
            if trusted { Ipv4Addr::new(10, 1, a, b) } else { Ipv4Addr::new(203, 0, a, b) }
        };
        let chain: Vec<Ipv4Addr> = hops.iter().map(|&(t, a, b)| address(t, a, b)).collect();
        let trusted: Vec<bool> = hops.iter().map(|h| h.0).collect();
        let peer_address = address(peer_trusted, 0, 2);
        let mut headers = HeaderMap::new();
        if !chain.is_empty() {
            let text: Vec<String> = chain.iter().map(ToString::to_string).collect();
            headers.insert("x-forwarded-for", HeaderValue::from_str(&text.join(", ")).unwrap());
        }
        let found = proxies.client_ip(SocketAddr::new(IpAddr::V4(peer_address), 1), &headers);
        prop_assert_eq!(found, IpAddr::V4(reference(&trusted, &chain, peer_trusted, peer_address)));
    }
}
