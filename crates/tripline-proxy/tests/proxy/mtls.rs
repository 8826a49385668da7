//! Mutual TLS both ways: a listener that verifies client certificates
//! (required or optional) and tells the upstream who the client is, and a
//! cluster whose endpoints require the proxy's own certificate.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tripline_proxy::config::ProxyConfig;
use tripline_proxy::{Proxy, Running};

use crate::support::*;
use crate::tls::toml_path;

/// A CA, a server certificate for 127.0.0.1 and localhost, a client
/// certificate it signed (`CN=orders-client`, a SPIFFE URI and a DNS
/// name), and a client certificate from another CA, as PEM files.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: String| std::fs::write(dir.path().join(name), text).unwrap();
        let ca = |name: &str| {
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.distinguished_name.push(DnType::CommonName, name);
            CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
        };
        let ca_good = ca("tripline test CA");
        let ca_rogue = ca("rogue CA");
        write("ca.pem", ca_good.pem());
        let server_key = KeyPair::generate().unwrap();
        let server = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
            .unwrap()
            .signed_by(&server_key, &ca_good)
            .unwrap();
        write("server.pem", server.pem());
        write("server-key.pem", server_key.serialize_pem());
        let client = |issuer: &CertifiedIssuer<'_, KeyPair>, prefix: &str| {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(vec!["orders.internal".into()]).unwrap();
            params
                .distinguished_name
                .push(DnType::CommonName, "orders-client");
            params.subject_alt_names.push(SanType::URI(
                "spiffe://example.org/orders".try_into().unwrap(),
            ));
            let cert = params.signed_by(&key, issuer).unwrap();
            write(&format!("{prefix}.pem"), cert.pem());
            write(&format!("{prefix}-key.pem"), key.serialize_pem());
        };
        client(&ca_good, "client");
        client(&ca_rogue, "rogue");
        Pki { dir }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    fn certs(&self, file: &str) -> Vec<CertificateDer<'static>> {
        CertificateDer::pem_file_iter(self.path(file))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
    }

    fn key(&self, file: &str) -> PrivateKeyDer<'static> {
        PrivateKeyDer::from_pem_file(self.path(file)).unwrap()
    }

    /// A client trusting the CA, presenting `identity` (`client`,
    /// `rogue`) when given.
    fn client(
        &self,
        identity: Option<&str>,
    ) -> Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.certs("ca.pem").remove(0)).unwrap();
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
        let mut config = match identity {
            Some(who) => builder
                .with_client_auth_cert(
                    self.certs(&format!("{who}.pem")),
                    self.key(&format!("{who}-key.pem")),
                )
                .unwrap(),
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        let https = hyper_rustls::HttpsConnector::new(
            http,
            config,
            true,
            Arc::new(hyper_rustls::DefaultServerNameResolver::default()),
        );
        Client::builder(TokioExecutor::new()).build(https)
    }
}

/// A GET through `client` to `url` carrying a forged client-cert header:
/// the status and body, or `None` when the connection was refused
/// (a failed handshake).
async fn get(
    client: &Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    url: String,
) -> Option<(u16, String)> {
    let req = http::Request::get(url)
        .header(
            "x-forwarded-client-cert",
            "Hash=forged;Subject=\"CN=admin\"",
        )
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = tokio::time::timeout(BOUND, client.request(req))
        .await
        .expect("the proxy answers or refuses")
        .ok()?;
    let status = response.status().as_u16();
    let body = tokio::time::timeout(BOUND, response.into_body().collect())
        .await
        .expect("the body ends")
        .ok()?
        .to_bytes();
    Some((status, String::from_utf8_lossy(&body).into_owned()))
}

/// An upstream answering with the client-cert header it was sent.
async fn echo_xfcc() -> Upstream {
    Upstream::start(|req| {
        let seen = req
            .headers()
            .get("x-forwarded-client-cert")
            .map_or("(none)".to_owned(), |v| {
                v.to_str().unwrap_or("?").to_owned()
            });
        http::Response::new(Full::new(Bytes::from(seen)))
    })
    .await
}

fn listener_config(pki: &Pki, upstream: SocketAddr, mtls: &str, log: &Path) -> String {
    format!(
        "[[listeners]]\naddress = \"127.0.0.1:0\"\ntls = {{ cert = {}, key = {}, client_ca = {}, {mtls} }}\n\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n\n[clusters.backend]\nendpoints = [\"{upstream}\"]\n\n[access_log]\nmode = \"full\"\npath = {}\n",
        toml_path(&pki.path("server.pem")),
        toml_path(&pki.path("server-key.pem")),
        toml_path(&pki.path("ca.pem")),
        toml_path(log),
    )
}

async fn start(text: &str) -> (Proxy, Running, SocketAddr) {
    let (proxy, running, addr, _clock) = start_proxy(text).await;
    (proxy, running, addr)
}

#[tokio::test]
async fn a_required_client_certificate_is_verified_and_told_upstream() {
    let pki = Pki::new();
    let upstream = echo_xfcc().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let mtls = "require_client_cert = true, forward_client_cert = true, log_client_cert = true";
    let (_proxy, running, addr) = start(&listener_config(&pki, upstream.addr, mtls, &log)).await;
    let url = format!("https://localhost:{}/", addr.port());

    // No certificate, or one from another CA: refused at the handshake.
    assert_eq!(get(&pki.client(None), url.clone()).await, None);
    assert_eq!(get(&pki.client(Some("rogue")), url.clone()).await, None);
    assert_eq!(upstream.hits(), 0);

    let (status, xfcc) = get(&pki.client(Some("client")), url).await.expect("served");
    assert_eq!(status, 200);
    // The proxy's word replaces the forged one.
    assert!(!xfcc.contains("forged"), "{xfcc}");
    assert!(xfcc.starts_with("Hash="), "{xfcc}");
    let hash = xfcc.split(';').next().unwrap().trim_start_matches("Hash=");
    assert_eq!(hash.len(), 64, "SHA-256 in hex: {xfcc}");
    assert!(xfcc.contains(r#"Subject="CN=orders-client""#), "{xfcc}");
    assert!(xfcc.contains(";URI=spiffe://example.org/orders"), "{xfcc}");
    assert!(xfcc.contains(";DNS=orders.internal"), "{xfcc}");

    running.shutdown().await;
    let text = std::fs::read_to_string(&log).unwrap();
    let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(line["client_cert"], "CN=orders-client", "{text}");
}

#[tokio::test]
async fn an_optional_client_certificate_serves_unidentified_clients_without_their_forgery() {
    let pki = Pki::new();
    let upstream = echo_xfcc().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let (_proxy, running, addr) = start(&listener_config(
        &pki,
        upstream.addr,
        "forward_client_cert = true",
        &log,
    ))
    .await;
    let url = format!("https://localhost:{}/", addr.port());
    let (status, xfcc) = get(&pki.client(None), url.clone()).await.expect("served");
    assert_eq!((status, xfcc.as_str()), (200, "(none)"));
    // A certificate that does not chain is still refused.
    assert_eq!(get(&pki.client(Some("rogue")), url.clone()).await, None);
    let (_, xfcc) = get(&pki.client(Some("client")), url).await.expect("served");
    assert!(xfcc.contains("CN=orders-client"), "{xfcc}");
    running.shutdown().await;
}

/// A TLS upstream that requires a client certificate from the CA.
async fn mtls_upstream(pki: &Pki) -> SocketAddr {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.certs("ca.pem").remove(0)).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(pki.certs("server.pem"), pki.key("server-key.pem"))
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(stream).await else {
                    return;
                };
                let service = service_fn(|_req: http::Request<hyper::body::Incoming>| async {
                    Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(
                        Bytes::from_static(b"mutual"),
                    )))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

fn cluster_config(pki: &Pki, upstream: SocketAddr, identity: &str) -> String {
    format!(
        "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n\n[clusters.backend]\nendpoints = [\"{upstream}\"]\ntls = {{ ca = {}, server_name = \"localhost\", alpn = [\"http/1.1\"]{identity} }}\n",
        toml_path(&pki.path("ca.pem")),
    )
}

#[tokio::test]
async fn a_cluster_presents_the_proxys_certificate_to_endpoints_that_require_one() {
    let pki = Pki::new();
    let upstream = mtls_upstream(&pki).await;
    let identity = format!(
        ", cert = {}, key = {}",
        toml_path(&pki.path("client.pem")),
        toml_path(&pki.path("client-key.pem"))
    );
    let (_proxy, running, addr) = start(&cluster_config(&pki, upstream, &identity)).await;
    let answer = crate::support::get(addr, "/").await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "mutual"));
    running.shutdown().await;

    // Without its certificate the endpoint refuses it: under TLS 1.3 the
    // refusal comes after the client's side of the handshake is done, so
    // the try fails as a reset (UC, upstream_reset) rather than a connect
    // failure (UF).
    let (_proxy, running, addr) = start(&cluster_config(&pki, upstream, "")).await;
    let answer = crate::support::get(addr, "/").await;
    assert!(matches!(answer.status, 502 | 503), "{}", answer.status);
    let flag = answer.header("x-tripline-flag");
    assert!(
        matches!(flag, Some("UF" | "UC")),
        "{flag:?}: {}",
        answer.body
    );
    running.shutdown().await;
}

#[test]
fn bad_mutual_tls_settings_are_refused_naming_the_field() {
    let pki = Pki::new();
    let upstream: SocketAddr = "127.0.0.1:9".parse().unwrap();
    // A key that does not fit its certificate: found when the proxy is built.
    let mismatched = format!(
        ", cert = {}, key = {}",
        toml_path(&pki.path("client.pem")),
        toml_path(&pki.path("rogue-key.pem"))
    );
    let config = ProxyConfig::from_toml(&cluster_config(&pki, upstream, &mismatched)).unwrap();
    let e = Proxy::try_new(config).unwrap_err();
    assert_eq!(e.field, "clusters.backend.tls.key", "{e}");
    assert!(e.message.contains("does not fit"), "{e}");
    // A cert without its key, and client checks without a CA: refused at load.
    let half = format!(", cert = {}", toml_path(&pki.path("client.pem")));
    let e = ProxyConfig::from_toml(&cluster_config(&pki, upstream, &half)).unwrap_err();
    assert_eq!(e.field, "clusters.backend.tls.key", "{e}");
    let text = format!(
        "[[listeners]]\naddress = \"127.0.0.1:0\"\ntls = {{ cert = {}, key = {}, require_client_cert = true }}\n\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n\n[clusters.backend]\nendpoints = [\"{upstream}\"]\n",
        toml_path(&pki.path("server.pem")),
        toml_path(&pki.path("server-key.pem")),
    );
    let e = ProxyConfig::from_toml(&text).unwrap_err();
    assert_eq!(e.field, "listeners[0].tls.require_client_cert", "{e}");
    assert!(e.line.is_some(), "names the line: {e}");
}
