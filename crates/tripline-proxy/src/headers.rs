//! Rewriting headers between the client and the upstream.
//!
//! Hop-by-hop headers describe one connection, not the message: a proxy
//! that forwarded `connection: close` or `keep-alive` would make the
//! upstream manage the client's connection (RFC 9110 §7.6.1). They are
//! removed in place, including any header the `connection` header itself
//! names. The client's address is appended to `x-forwarded-for` and, in
//! the standard form, to `forwarded` (RFC 7239): `for=192.0.2.1;proto=http`,
//! an IPv6 address quoted and bracketed (`for="[2001:db8::1]"`), as the
//! RFC's grammar requires (a colon is not a token character).

use std::net::IpAddr;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// The hop-by-hop headers every proxy removes (RFC 9110 §7.6.1, plus the
/// obsolete `keep-alive` and `proxy-connection` that clients still send).
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
];

/// Removes hop-by-hop headers and those listed in `connection`.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
    headers.remove(header::UPGRADE);
}

/// Appends the client's address to `x-forwarded-for`, keeping the chain
/// of earlier proxies.
pub fn append_forwarded_for(headers: &mut HeaderMap, client: IpAddr) {
    const XFF: HeaderName = HeaderName::from_static("x-forwarded-for");
    let value = match headers.get(&XFF).and_then(|v| v.to_str().ok()) {
        Some(chain) if !chain.trim().is_empty() => format!("{chain}, {client}"),
        _ => client.to_string(),
    };
    if let Ok(v) = HeaderValue::from_str(&value) {
        headers.insert(XFF, v);
    }
}

/// Appends one element for this hop to `forwarded` (RFC 7239 §4),
/// keeping the elements earlier proxies added: the client's address and
/// the protocol it spoke to the proxy (`http` or `https`).
pub fn append_forwarded(headers: &mut HeaderMap, client: IpAddr, proto: &str) {
    let node = match client {
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => format!("\"[{ip}]\""),
    };
    let element = format!("for={node};proto={proto}");
    let value = match headers.get(header::FORWARDED).and_then(|v| v.to_str().ok()) {
        Some(chain) if !chain.trim().is_empty() => format!("{chain}, {element}"),
        _ => element,
    };
    if let Ok(v) = HeaderValue::from_str(&value) {
        headers.insert(header::FORWARDED, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_and_those_named_by_connection_go() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-secret"),
        );
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        h.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key(header::ACCEPT));
    }

    #[test]
    fn forwarded_for_appends_to_the_chain() {
        let mut h = HeaderMap::new();
        append_forwarded_for(&mut h, "10.0.0.1".parse().unwrap());
        assert_eq!(h["x-forwarded-for"], "10.0.0.1");
        append_forwarded_for(&mut h, "::1".parse().unwrap());
        assert_eq!(h["x-forwarded-for"], "10.0.0.1, ::1");
    }

    #[test]
    fn forwarded_quotes_and_brackets_ipv6_and_keeps_the_chain() {
        let mut h = HeaderMap::new();
        append_forwarded(&mut h, "192.0.2.60".parse().unwrap(), "http");
        assert_eq!(h["forwarded"], "for=192.0.2.60;proto=http");
        append_forwarded(&mut h, "2001:db8:cafe::17".parse().unwrap(), "https");
        assert_eq!(
            h["forwarded"],
            "for=192.0.2.60;proto=http, for=\"[2001:db8:cafe::17]\";proto=https"
        );
        assert_eq!(
            h.get_all("forwarded").iter().count(),
            1,
            "one header, one list"
        );
    }
}
