//! Dubbo provider URLs, as Dubbo registers them in ZooKeeper.
//!
//! A provider is a child of `/dubbo/<interface>/providers` whose *name* is
//! the provider's full URL, percent-encoded once the way Java's
//! `URLEncoder` writes it (so `:` `/` `?` `&` `=` are `%3A` `%2F` `%3F`
//! `%26` `%3D`, and a space is `+`):
//!
//! ```text
//! tri%3A%2F%2F10.0.0.5%3A50051%2Fcom.example.OrderService%3Fweight%3D200%26enabled%3Dtrue
//! = tri://10.0.0.5:50051/com.example.OrderService?weight=200&enabled=true
//! ```
//!
//! Only what routing needs is read: the protocol, `host:port`, whether the
//! operator disabled it (`enabled=false` or `disabled=true`, as Dubbo's
//! console writes either) and its `weight` (Dubbo's default, 100, when
//! absent). Everything else is kept as parameters and otherwise ignored.
//! Parsing never panics: anything unreadable is a [`ParseError`] naming
//! what was wrong, and the caller skips that one child.

use std::collections::BTreeMap;
use std::fmt;

mod encoding;

pub use encoding::{decode, encode};

/// Dubbo's weight for a provider that does not say (`weight` absent).
pub const DEFAULT_WEIGHT: u32 = 100;

/// One provider URL, read from a child's name.
///
/// ```
/// use tripline_discovery::ProviderUrl;
///
/// let child = "tri%3A%2F%2F10.0.0.5%3A50051%2Fcom.example.OrderService%3Fweight%3D200";
/// let url = ProviderUrl::parse(child).unwrap();
/// assert_eq!(url.protocol, "tri");
/// assert_eq!(url.address(), "10.0.0.5:50051");
/// assert_eq!(url.weight(), Ok(200));
/// assert!(url.is_enabled());
/// assert_eq!(ProviderUrl::parse(&url.to_child()).unwrap(), url);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderUrl {
    /// The scheme: `tri`, `dubbo`, `grpc`, `rest`, …
    pub protocol: String,
    /// A name or an address; an IPv6 address without its brackets.
    pub host: String,
    /// Never 0: a provider without a port cannot be called.
    pub port: u16,
    /// The service path after the authority (`com.example.OrderService`).
    pub interface: String,
    /// The query parameters, decoded (later duplicates win, as in Dubbo).
    pub params: BTreeMap<String, String>,
}

/// Why a child is not a provider URL; the child is skipped and counted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

fn invalid(what: impl Into<String>) -> ParseError {
    ParseError(what.into())
}

impl ProviderUrl {
    /// Reads a child's name (percent-encoded) as a provider URL.
    pub fn parse(child: &str) -> Result<ProviderUrl, ParseError> {
        ProviderUrl::parse_decoded(&decode(child)?)
    }

    /// Reads a URL already decoded (`tri://host:port/iface?k=v`).
    pub fn parse_decoded(url: &str) -> Result<ProviderUrl, ParseError> {
        let (protocol, rest) = url
            .split_once("://")
            .ok_or_else(|| invalid("no protocol (expected protocol://host:port/interface)"))?;
        let scheme_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.');
        if protocol.is_empty() || !protocol.chars().all(scheme_char) {
            return Err(invalid(format!("{protocol:?} is not a protocol name")));
        }
        let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, interface) = before_query.split_once('/').unwrap_or((before_query, ""));
        // `user:password@host:port`: the credentials are not routing's business.
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
        let (host, port) = split_host_port(host_port)?;
        let mut params = BTreeMap::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            params.insert(key.to_owned(), value.to_owned());
        }
        Ok(ProviderUrl {
            protocol: protocol.to_ascii_lowercase(),
            host: host.to_owned(),
            port,
            interface: interface.to_owned(),
            params,
        })
    }

    /// `host:port` as a connection takes it (`[::1]:50051` for IPv6).
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// Whether the operator left the provider on: Dubbo's console disables
    /// with `enabled=false` or with `disabled=true`.
    pub fn is_enabled(&self) -> bool {
        let says = |key: &str, value: &str| {
            self.params
                .get(key)
                .is_some_and(|v| v.eq_ignore_ascii_case(value))
        };
        !says("enabled", "false") && !says("disabled", "true")
    }

    /// The provider's `weight` ([`DEFAULT_WEIGHT`] when absent); a value
    /// that is not a whole number 0..=2^31-1 (Java's `int`) is an error.
    pub fn weight(&self) -> Result<u32, ParseError> {
        let Some(text) = self.params.get("weight") else {
            return Ok(DEFAULT_WEIGHT);
        };
        text.trim()
            .parse::<u32>()
            .ok()
            .filter(|w| i32::try_from(*w).is_ok())
            .ok_or_else(|| {
                invalid(format!(
                    "weight {text:?} is not a whole number 0..=2147483647"
                ))
            })
    }

    /// The URL as Dubbo writes it, before encoding.
    pub fn to_decoded(&self) -> String {
        let mut url = format!("{}://{}/{}", self.protocol, self.address(), self.interface);
        for (i, (key, value)) in self.params.iter().enumerate() {
            url.push(if i == 0 { '?' } else { '&' });
            url.push_str(key);
            url.push('=');
            url.push_str(value);
        }
        url
    }

    /// The child's name Dubbo would register for this provider (the URL
    /// percent-encoded once): what a test registers to act as a provider.
    pub fn to_child(&self) -> String {
        encode(&self.to_decoded())
    }
}

impl fmt::Display for ProviderUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_decoded())
    }
}

/// `host:port` or `[v6]:port`, with a port of 1..=65535.
fn split_host_port(text: &str) -> Result<(&str, u16), ParseError> {
    let (host, port) = if let Some(v6) = text.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| invalid(format!("{text:?}: an IPv6 address without its closing ]")))?;
        let port = after
            .strip_prefix(':')
            .ok_or_else(|| invalid(format!("{text:?}: no port")))?;
        (host, port)
    } else {
        text.rsplit_once(':')
            .ok_or_else(|| invalid(format!("{text:?}: expected host:port")))?
    };
    if host.is_empty() {
        return Err(invalid(format!("{text:?}: no host")));
    }
    if host.contains(['/', '?', '@', ' ', '[', ']'])
        || (host.contains(':') && !text.starts_with('['))
    {
        return Err(invalid(format!("{host:?} is not a host name or address")));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok((host, p)),
        _ => Err(invalid(format!("{text:?}: port {port:?} is not 1..=65535"))),
    }
}
