//! The verified client of a mutual-TLS listener, as the proxy tells it:
//! to the upstream in `x-forwarded-client-cert` (Envoy's format, so
//! services written against Envoy read it unchanged), and to the access
//! log by its subject. Both are opt-in per listener, and worked out once
//! per connection, when the handshake has verified the certificate.

use std::fmt::Write as _;
use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};
use rustls_pki_types::CertificateDer;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::config::ListenerTls;

/// The header Envoy forwards a client's certificate details in.
pub(crate) const FORWARDED_CLIENT_CERT: HeaderName =
    HeaderName::from_static("x-forwarded-client-cert");

/// What a connection's client is told by, per the listener's switches.
#[derive(Debug)]
pub(crate) struct ClientCert {
    /// The listener forwards client certificates: the client's own header
    /// of that name is removed, and `xfcc` (when the client was verified)
    /// set in its place.
    forward: bool,
    xfcc: Option<HeaderValue>,
    /// The subject, for the access log (when the listener logs it and the
    /// client was verified).
    pub(crate) subject: Option<Arc<str>>,
}

impl ClientCert {
    /// The client of a connection on a listener configured as `tls`,
    /// which presented `peer` (its leaf, verified by the handshake);
    /// `None` when the listener neither forwards nor logs it.
    pub(crate) fn of(tls: &ListenerTls, peer: Option<&CertificateDer<'_>>) -> Option<Arc<Self>> {
        if !tls.forward_client_cert && !tls.log_client_cert {
            return None;
        }
        let details = peer.and_then(|der| Details::of(der.as_ref()));
        Some(Arc::new(ClientCert {
            forward: tls.forward_client_cert,
            xfcc: details
                .as_ref()
                .filter(|_| tls.forward_client_cert)
                .and_then(|d| HeaderValue::from_str(&d.xfcc()).ok()),
            subject: details
                .filter(|_| tls.log_client_cert)
                .map(|d| d.subject.into()),
        }))
    }

    /// Sets the upstream request's `x-forwarded-client-cert`: the
    /// proxy's own word replaces whatever the client sent.
    pub(crate) fn apply(&self, headers: &mut HeaderMap) {
        if !self.forward {
            return;
        }
        headers.remove(FORWARDED_CLIENT_CERT);
        if let Some(xfcc) = &self.xfcc {
            headers.insert(FORWARDED_CLIENT_CERT, xfcc.clone());
        }
    }
}

/// What a certificate says of its holder.
struct Details {
    /// SHA-256 of the DER, lower-case hex.
    hash: String,
    /// The subject's distinguished name (`CN=client,O=Example`).
    subject: String,
    uris: Vec<String>,
    dns: Vec<String>,
}

impl Details {
    fn of(der: &[u8]) -> Option<Details> {
        let (_, cert) = X509Certificate::from_der(der).ok()?;
        let mut hash = String::with_capacity(64);
        for byte in ring::digest::digest(&ring::digest::SHA256, der).as_ref() {
            let _ = write!(hash, "{byte:02x}");
        }
        let mut details = Details {
            hash,
            subject: cert.subject().to_string(),
            uris: Vec::new(),
            dns: Vec::new(),
        };
        if let Ok(Some(names)) = cert.subject_alternative_name() {
            for name in &names.value.general_names {
                match name {
                    GeneralName::URI(uri) => details.uris.push((*uri).to_owned()),
                    GeneralName::DNSName(dns) => details.dns.push((*dns).to_owned()),
                    _ => {}
                }
            }
        }
        Some(details)
    }

    /// Envoy's element: `Hash=…;Subject="…";URI=…;DNS=…` (one `URI` or
    /// `DNS` pair per name), the subject quoted with `"` and `\` escaped.
    fn xfcc(&self) -> String {
        let subject = self.subject.replace('\\', "\\\\").replace('"', "\\\"");
        let mut out = format!("Hash={};Subject=\"{subject}\"", self.hash);
        for uri in &self.uris {
            let _ = write!(out, ";URI={uri}");
        }
        for dns in &self.dns {
            let _ = write!(out, ";DNS={dns}");
        }
        out
    }
}
