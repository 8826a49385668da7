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

/// The one crypto provider of the proxy.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The acceptor of a listener's `tls` section; `at` locates the listener
/// (`listeners[0]`), so a bad file is reported as `listeners[0].tls.cert`.
pub(crate) fn acceptor(at: &str, tls: &ListenerTls) -> Result<TlsAcceptor, ConfigError> {
    let certs = read_certs(&format!("{at}.tls.cert"), &tls.cert)?;
    let key_field = format!("{at}.tls.key");
    let pem = read_file(&key_field, &tls.key)?;
    let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        ConfigError::invalid(
            &key_field,
            format!("{}: no PEM private key ({e})", tls.key.display()),
        )
    })?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::invalid(format!("{at}.tls"), e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
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
    let mut roots = rustls::RootCertStore::empty();
    match &tls.ca {
        Some(path) => {
            let field = format!("{at}.tls.ca");
            for cert in read_certs(&field, path)? {
                roots.add(cert).map_err(|e| {
                    ConfigError::invalid(
                        &field,
                        format!("{}: not a CA certificate ({e})", path.display()),
                    )
                })?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::invalid(format!("{at}.tls"), e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
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
