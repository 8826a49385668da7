//! TLS on both sides, with rustls on the `ring` provider (it builds with
//! a C compiler alone, where `aws-lc-rs` also needs cmake and nasm).
//!
//! Downstream, a listener with `tls` completes the handshake on the
//! connection's own task — bounded by the header read timeout, so a client
//! that never finishes its hello cannot hold a connection — and then serves
//! whichever protocol ALPN picked (hyper's auto server reads the HTTP/2
//! preface either way). Upstream, see [`crate::upstream`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::config::{AlpnProtocol, ClusterTls, ConfigError, ListenerTls};

mod client_cert;

pub(crate) use client_cert::ClientCert;

/// The one crypto provider of the proxy.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The acceptor of a listener's `tls` section; `at` locates the listener
/// (`listeners[0]`), so a bad file is reported as `listeners[0].tls.cert`.
pub(crate) fn acceptor(at: &str, tls: &ListenerTls) -> Result<TlsAcceptor, ConfigError> {
    let certs = read_certs(&format!("{at}.tls.cert"), &tls.cert)?;
    let key_field = format!("{at}.tls.key");
    let key = read_key(&key_field, &tls.key)?;
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::invalid(format!("{at}.tls"), e.to_string()))?;
    let builder = match &tls.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let field = format!("{at}.tls.client_ca");
            let roots = Arc::new(roots_of(&field, path)?);
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider());
            let verifier = match tls.require_client_cert {
                true => verifier,
                false => verifier.allow_unauthenticated(),
            };
            let verifier = verifier
                .build()
                .map_err(|e| ConfigError::invalid(&field, e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        ConfigError::invalid(
            &key_field,
            format!(
                "{} does not fit {}: {e}",
                tls.key.display(),
                tls.cert.display()
            ),
        )
    })?;
    config.alpn_protocols = vec![
        AlpnProtocol::H2.id().to_vec(),
        AlpnProtocol::Http1.id().to_vec(),
    ];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The client config of a cluster's `tls` section (ALPN included); `at`
/// locates the cluster (`clusters.backend`).
pub(crate) fn client_config(
    at: &str,
    tls: &ClusterTls,
) -> Result<rustls::ClientConfig, ConfigError> {
    let roots = match &tls.ca {
        Some(path) => roots_of(&format!("{at}.tls.ca"), path)?,
        None => {
            let mut roots = rustls::RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            roots
        }
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::invalid(format!("{at}.tls"), e.to_string()))?
        .with_root_certificates(roots);
    let mut config = match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => {
            // Mutual TLS: the proxy presents its own certificate.
            let certs = read_certs(&format!("{at}.tls.cert"), cert)?;
            let key_field = format!("{at}.tls.key");
            let key = read_key(&key_field, key)?;
            builder.with_client_auth_cert(certs, key).map_err(|e| {
                ConfigError::invalid(
                    &key_field,
                    format!(
                        "{} does not fit {}: {e}",
                        tls.key.as_deref().unwrap_or(Path::new("")).display(),
                        tls.cert.as_deref().unwrap_or(Path::new("")).display()
                    ),
                )
            })?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = tls.alpn.iter().map(|p| p.id().to_vec()).collect();
    Ok(config)
}

/// Completes the server side of the handshake within `limit`; `None` (and
/// a debug log) when the client fails it or is too slow.
pub(crate) async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    limit: Duration,
) -> Option<TlsStream<TcpStream>> {
    match tokio::time::timeout(limit, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!("TLS handshake timed out");
            None
        }
    }
}

/// The private key of the PEM file at `path`.
fn read_key(field: &str, path: &Path) -> Result<PrivateKeyDer<'static>, ConfigError> {
    let pem = read_file(field, path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        ConfigError::invalid(
            field,
            format!("{}: no PEM private key ({e})", path.display()),
        )
    })
}

/// The CA certificates of the PEM file at `path`, as trust roots.
fn roots_of(field: &str, path: &Path) -> Result<rustls::RootCertStore, ConfigError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in read_certs(field, path)? {
        roots.add(cert).map_err(|e| {
            ConfigError::invalid(
                field,
                format!("{}: not a CA certificate ({e})", path.display()),
            )
        })?;
    }
    Ok(roots)
}

fn read_file(field: &str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path)
        .map_err(|e| ConfigError::invalid(field, format!("cannot read {}: {e}", path.display())))
}

/// Every certificate of the PEM file at `path`; at least one.
fn read_certs(field: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let pem = read_file(field, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ConfigError::invalid(field, format!("{}: bad PEM ({e})", path.display())))?;
    if certs.is_empty() {
        return Err(ConfigError::invalid(
            field,
            format!("{}: no PEM certificate in the file", path.display()),
        ));
    }
    Ok(certs)
}
