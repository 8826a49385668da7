//! TLS settings: a listener's certificate, and how a cluster's endpoints
//! are reached over TLS.
//!
//! Paths are read when the proxy is built (not by `validate`, which only
//! checks the file's text): relative paths are relative to the proxy's
//! working directory.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// A listener's TLS: its certificate chain and private key, PEM, and
/// optionally the clients' certificates (mutual TLS).
///
/// The listener then speaks TLS only, and offers HTTP/2 and HTTP/1.1 by
/// ALPN: both protocols on one port, chosen by the client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerTls {
    /// The certificate chain, leaf first (PEM).
    pub cert: PathBuf,
    /// The private key of the leaf certificate (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The CA certificates (PEM) client certificates must chain to. With
    /// it, a client that presents a certificate is verified (and refused
    /// at the handshake when it does not chain); see
    /// `require_client_cert` for clients that present none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ca: Option<PathBuf>,
    /// Refuse, at the handshake, a client that presents no certificate
    /// (needs `client_ca`). Off: such a client is served, unidentified.
    #[serde(default)]
    pub require_client_cert: bool,
    /// Tell the upstream who the verified client is, in
    /// `x-forwarded-client-cert` as Envoy writes it (`Hash=…;Subject="…";
    /// URI=…;DNS=…`). The client's own header of that name is always
    /// removed on such a listener: only the proxy vouches for a client.
    #[serde(default)]
    pub forward_client_cert: bool,
    /// Write the verified client's subject in the access log
    /// (`client_cert` in JSON, `%DOWNSTREAM_PEER_SUBJECT%` in text).
    #[serde(default)]
    pub log_client_cert: bool,
}

impl ListenerTls {
    /// Checks what can be checked without reading files; `at` is the
    /// listener's place in the file (`listeners[0]`).
    pub(crate) fn validate(&self, at: &str) -> Result<(), ConfigError> {
        let needs_ca = [
            ("require_client_cert", self.require_client_cert),
            ("forward_client_cert", self.forward_client_cert),
            ("log_client_cert", self.log_client_cert),
        ];
        if self.client_ca.is_none()
            && let Some((field, _)) = needs_ca.iter().find(|(_, on)| *on)
        {
            return Err(ConfigError::invalid(
                format!("{at}.tls.{field}"),
                "needs tls.client_ca: client certificates are verified against it",
            ));
        }
        Ok(())
    }
}

/// How the proxy reaches a cluster's endpoints over TLS.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterTls {
    /// The CA certificates (PEM) the endpoints' certificates must chain
    /// to, for a private CA. Absent: the Mozilla root programme's CAs
    /// (`webpki-roots`), built in so the proxy verifies the same way in a
    /// minimal container without a system trust store as on a full host.
    pub ca: Option<PathBuf>,
    /// The name the endpoints' certificates must carry (and the SNI sent).
    /// Absent: each endpoint's host, as written in `endpoints` (also when
    /// `dns_refresh` has turned the name into addresses).
    pub server_name: Option<String>,
    /// The protocols offered by ALPN, in order of preference. An endpoint
    /// that picks `h2` is spoken to over HTTP/2 (one multiplexed
    /// connection), else over HTTP/1.1 (a keep-alive pool).
    pub alpn: Vec<AlpnProtocol>,
    /// The proxy's client certificate chain (PEM), for endpoints that
    /// require mutual TLS; with `key`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert: Option<PathBuf>,
    /// The private key of `cert` (PEM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
}

impl Default for ClusterTls {
    /// Built-in roots, the endpoint's host as server name, `h2` then `http/1.1`.
    fn default() -> Self {
        ClusterTls {
            ca: None,
            server_name: None,
            alpn: vec![AlpnProtocol::H2, AlpnProtocol::Http1],
            cert: None,
            key: None,
        }
    }
}

/// A protocol offered by ALPN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AlpnProtocol {
    /// HTTP/2 over TLS.
    #[serde(rename = "h2")]
    H2,
    /// HTTP/1.1.
    #[serde(rename = "http/1.1")]
    Http1,
}

impl AlpnProtocol {
    /// The protocol's ALPN identifier.
    pub fn id(self) -> &'static [u8] {
        match self {
            AlpnProtocol::H2 => b"h2",
            AlpnProtocol::Http1 => b"http/1.1",
        }
    }
}

impl ClusterTls {
    /// Checks what can be checked without reading files; `at` is the
    /// cluster's place in the file (`clusters.backend`).
    pub(crate) fn validate(&self, at: &str) -> Result<(), ConfigError> {
        if self.alpn.is_empty() {
            return Err(ConfigError::invalid(
                format!("{at}.tls.alpn"),
                "must offer at least one protocol (\"h2\", \"http/1.1\")",
            ));
        }
        for (i, p) in self.alpn.iter().enumerate() {
            if self.alpn[..i].contains(p) {
                return Err(ConfigError::invalid(
                    format!("{at}.tls.alpn"),
                    format!("offers {:?} twice", String::from_utf8_lossy(p.id())),
                ));
            }
        }
        match (&self.cert, &self.key) {
            (Some(_), None) => {
                return Err(ConfigError::invalid(
                    format!("{at}.tls.key"),
                    "required with tls.cert: the client certificate's private key",
                ));
            }
            (None, Some(_)) => {
                return Err(ConfigError::invalid(
                    format!("{at}.tls.cert"),
                    "required with tls.key: the client certificate it belongs to",
                ));
            }
            _ => {}
        }
        if let Some(name) = &self.server_name {
            rustls_pki_types::ServerName::try_from(name.as_str()).map_err(|_| {
                ConfigError::invalid(
                    format!("{at}.tls.server_name"),
                    format!("{name:?} is not a DNS name or IP address"),
                )
            })?;
        }
        Ok(())
    }
}

/// The cluster's TLS and DNS settings against the rest of its section.
pub(crate) fn validate_cluster(
    at: &str,
    cluster: &super::ClusterSection,
) -> Result<(), ConfigError> {
    if cluster.dns_refresh.is_some_and(|d| d.is_zero()) {
        return Err(ConfigError::invalid(
            format!("{at}.dns_refresh"),
            "must be more than zero",
        ));
    }
    let Some(tls) = &cluster.tls else {
        return Ok(());
    };
    if cluster.protocol == super::UpstreamProtocol::H2c {
        return Err(ConfigError::invalid(
            format!("{at}.protocol"),
            "\"h2c\" is cleartext HTTP/2 and contradicts `tls`: for HTTP/2 over TLS offer it with tls.alpn = [\"h2\"]",
        ));
    }
    tls.validate(at)
}
