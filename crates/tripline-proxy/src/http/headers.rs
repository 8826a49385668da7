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

/// Removes hop-by-hop headers and those listed in `connection`.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Most messages carry none of them: one pass comparing the names a
    // message has (cheap for standard names) costs a fraction of the nine
    // hashed removals it saves, on every request and every response.
    // A header `connection` names is only removed when `connection`
    // itself is present, which this pass finds.
    if !has_hop_by_hop(headers) {
        return;
    }
    let named = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok());
    let present = headers.keys().filter(|n| is_hop_by_hop(n)).cloned();
    let doomed: Vec<HeaderName> = named.chain(present).collect();
    for name in &doomed {
        headers.remove(name);
    }
}

/// [`strip_hop_by_hop`] for an endpoint's answer: a `101 Switching
/// Protocols` keeps the `Upgrade` it names and says `Connection: upgrade`,
/// for the client's side of the connection switches too. (The proxy only
/// sends upgrade requests a route allows, and only those can be answered
/// `101`.)
pub(crate) fn strip_answer_hop_by_hop(status: http::StatusCode, headers: &mut HeaderMap) {
    let upgrade = match status {
        http::StatusCode::SWITCHING_PROTOCOLS => headers.get(header::UPGRADE).cloned(),
        _ => None,
    };
    strip_hop_by_hop(headers);
    if let Some(protocol) = upgrade {
        headers.insert(header::UPGRADE, protocol);
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    }
}

/// Whether `headers` has a header [`strip_hop_by_hop`] would remove (one
/// pass comparing names): what a request must have to ask for an upgrade.
pub fn has_hop_by_hop(headers: &HeaderMap) -> bool {
    headers.keys().any(is_hop_by_hop)
}

/// The hop-by-hop headers every proxy removes (RFC 9110 §7.6.1, with
/// `upgrade`, and the obsolete `keep-alive` and `proxy-connection` that
/// clients still send), compared name by name: every header name of every
/// message is checked, and `contains` on a `const` array of them built
/// and dropped a copy of the array for each (~170 instructions a
/// request). Standard names compare by their tag.
fn is_hop_by_hop(name: &HeaderName) -> bool {
    name == header::CONNECTION
        || name == header::TRANSFER_ENCODING
        || name == header::TE
        || name == header::TRAILER
        || name == header::UPGRADE
        || name == header::PROXY_AUTHENTICATE
        || name == header::PROXY_AUTHORIZATION
        || matches!(name.as_str(), "keep-alive" | "proxy-connection")
}

/// This hop's `x-forwarded-for` and `forwarded` elements for one client:
/// built once per connection, so a request whose client sent no chain of
/// its own (the common case) gets them as two reference-counted copies
/// instead of formatting and allocating its address twice.
#[derive(Clone, Debug)]
pub(crate) struct ForwardedValues {
    /// The client's address, as `x-forwarded-for` lists it.
    xff: HeaderValue,
    /// `for=…;proto=…` (RFC 7239 §4).
    forwarded: HeaderValue,
}

impl ForwardedValues {
    /// The elements for `client`, which spoke `proto` (`http` or `https`)
    /// to the proxy.
    pub(crate) fn new(client: IpAddr, proto: &str) -> ForwardedValues {
        let node = match client {
            IpAddr::V4(ip) => ip.to_string(),
            IpAddr::V6(ip) => format!("\"[{ip}]\""),
        };
        ForwardedValues {
            // An address and `for=…;proto=http(s)` are always valid values.
            xff: HeaderValue::from_str(&client.to_string())
                .unwrap_or_else(|_| HeaderValue::from_static("unknown")),
            forwarded: HeaderValue::from_str(&format!("for={node};proto={proto}"))
                .unwrap_or_else(|_| HeaderValue::from_static("for=unknown")),
        }
    }

    /// Appends both elements, keeping the chains earlier proxies wrote.
    pub(crate) fn append_to(&self, headers: &mut HeaderMap) {
        for (name, element) in self.elements() {
            append_element(headers, name, element);
        }
    }

    /// The two headers this hop extends, each with its own element.
    pub(crate) fn elements(&self) -> [(HeaderName, &HeaderValue); 2] {
        [(XFF, &self.xff), (header::FORWARDED, &self.forwarded)]
    }
}

/// `x-forwarded-for`.
const XFF: HeaderName = HeaderName::from_static("x-forwarded-for");

/// The chain an element is appended to: the first value of `name` when it
/// is visible text and not blank; anything else is replaced by the
/// element alone.
pub(crate) fn chain_of<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .filter(|chain| !chain.trim().is_empty())
}

/// Sets `name` to `element`, after the list already there if there is one
/// (one header, one comma-separated list).
fn append_element(headers: &mut HeaderMap, name: HeaderName, element: &HeaderValue) {
    let chained = match chain_of(headers, &name) {
        Some(chain) => {
            let own = String::from_utf8_lossy(element.as_bytes());
            HeaderValue::from_str(&format!("{chain}, {own}")).ok()
        }
        None => Some(element.clone()),
    };
    if let Some(v) = chained {
        headers.insert(name, v);
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

    fn append(h: &mut HeaderMap, client: &str, proto: &str) {
        ForwardedValues::new(client.parse().unwrap(), proto).append_to(h);
    }

    #[test]
    fn a_message_without_hop_by_hop_headers_is_left_alone_and_upgrade_alone_goes() {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        h.insert("x-trace", HeaderValue::from_static("1"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 2);
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 2);
        assert!(!h.contains_key(header::UPGRADE));
    }

    #[test]
    fn forwarded_for_appends_to_the_chain() {
        let mut h = HeaderMap::new();
        append(&mut h, "10.0.0.1", "http");
        assert_eq!(h["x-forwarded-for"], "10.0.0.1");
        append(&mut h, "::1", "http");
        assert_eq!(h["x-forwarded-for"], "10.0.0.1, ::1");
    }

    #[test]
    fn forwarded_quotes_and_brackets_ipv6_and_keeps_the_chain() {
        let mut h = HeaderMap::new();
        append(&mut h, "192.0.2.60", "http");
        assert_eq!(h["forwarded"], "for=192.0.2.60;proto=http");
        append(&mut h, "2001:db8:cafe::17", "https");
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
