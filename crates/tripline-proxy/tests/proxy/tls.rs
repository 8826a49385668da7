//! TLS on both sides, with certificates made here: HTTP/1.1 and HTTP/2
//! picked by ALPN on one listener, TLS upstreams over both protocols, and
//! an upstream whose certificate the proxy must not trust.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tripline_proxy::Proxy;
use tripline_proxy::config::ProxyConfig;

use crate::support::*;

/// A CA and a leaf certificate for `localhost` and 127.0.0.1 it signed,
/// as PEM files in a temporary directory.
pub struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    pub fn new() -> Pki {
        Pki::for_names(&["localhost", "127.0.0.1"])
    }

    /// A leaf certificate for `names` only (DNS names or IP addresses).
    pub fn for_names(names: &[&str]) -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let leaf_key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let leaf = CertificateParams::new(names)
            .unwrap()
            .signed_by(&leaf_key, &ca)
            .unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        std::fs::write(dir.path().join("cert.pem"), leaf.pem()).unwrap();
        std::fs::write(dir.path().join("key.pem"), leaf_key.serialize_pem()).unwrap();
        Pki { dir }
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    /// A rustls server config of the leaf, offering `alpn`.
    pub fn server_config(&self, alpn: &[&[u8]]) -> Arc<rustls::ServerConfig> {
        let certs = CertificateDer::pem_file_iter(self.path("cert.pem"))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(self.path("key.pem")).unwrap();
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }

    /// A client trusting this CA, offering only `alpn`.
    pub fn client(
        &self,
        alpn: &[u8],
    ) -> Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        Full<Bytes>,
    > {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(self.path("ca.pem")).unwrap())
            .unwrap();
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = vec![alpn.to_vec()];
        let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
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

pub fn toml_path(path: &Path) -> String {
    format!("{:?}", path.display().to_string())
}

/// A TLS upstream offering `alpn`, answering with the HTTP version it saw.
async fn tls_upstream(pki: &Pki, alpn: &[&[u8]]) -> SocketAddr {
    tls_upstream_on(pki, alpn, TcpListener::bind("127.0.0.1:0").await.unwrap())
}

/// [`tls_upstream`] on `listener`.
pub fn tls_upstream_on(pki: &Pki, alpn: &[&[u8]], listener: TcpListener) -> SocketAddr {
    let acceptor = tokio_rustls::TlsAcceptor::from(pki.server_config(alpn));
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(stream).await else {
                    return;
                };
                let service = service_fn(|req: http::Request<hyper::body::Incoming>| async move {
                    let seen = format!("{:?}", req.version());
                    Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(Bytes::from(
                        seen,
                    ))))
                });
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

pub async fn get_over_tls(
    client: &Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        Full<Bytes>,
    >,
    url: String,
) -> (http::Version, u16, String) {
    let req = http::Request::get(url)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = tokio::time::timeout(BOUND, client.request(req))
        .await
        .expect("the proxy answers")
        .unwrap();
    let (version, status) = (response.version(), response.status().as_u16());
    let body = tokio::time::timeout(BOUND, response.into_body().collect())
        .await
        .expect("the body ends")
        .unwrap()
        .to_bytes();
    (version, status, String::from_utf8_lossy(&body).into_owned())
}

/// A TLS listener with `pki`'s certificate in front of a plain `upstream`.
fn tls_listener_config(pki: &Pki, upstream: SocketAddr) -> String {
    format!(
        "[[listeners]]\naddress = \"127.0.0.1:0\"\ntls = {{ cert = {}, key = {} }}\n\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n\n[clusters.backend]\nendpoints = [\"{upstream}\"]\n",
        toml_path(&pki.path("cert.pem")),
        toml_path(&pki.path("key.pem")),
    )
}

#[tokio::test]
async fn http1_and_http2_clients_over_tls_share_one_listener() {
    let pki = Pki::new();
    let upstream = Upstream::start(|_| respond(200, "plain upstream")).await;
    let text = tls_listener_config(&pki, upstream.addr);
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let url = format!("https://localhost:{}/", addr.port());

    let (version, status, body) = get_over_tls(&pki.client(b"http/1.1"), url.clone()).await;
    assert_eq!((version, status), (http::Version::HTTP_11, 200));
    assert_eq!(body, "plain upstream");

    let (version, status, body) = get_over_tls(&pki.client(b"h2"), url).await;
    assert_eq!((version, status), (http::Version::HTTP_2, 200));
    assert_eq!(body, "plain upstream");
    assert_eq!(upstream.hits(), 2);
    assert!(running.shutdown().await.complete);
}

/// Over a TLS listener the upstream is told `proto=https`, over HTTP/1.1
/// and HTTP/2 alike: a service that builds absolute URLs or marks cookies
/// `Secure` from `forwarded` must not be told its clients spoke plain HTTP.
#[tokio::test]
async fn the_forwarded_proto_is_https_over_a_tls_listener() {
    let pki = Pki::new();
    let upstream = Upstream::start(|req| {
        let seen = req
            .headers()
            .get("forwarded")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("(none)")
            .to_owned();
        http::Response::new(Full::new(Bytes::from(seen)))
    })
    .await;
    let text = tls_listener_config(&pki, upstream.addr);
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let url = format!("https://localhost:{}/", addr.port());
    for alpn in [&b"http/1.1"[..], b"h2"] {
        let (_, status, body) = get_over_tls(&pki.client(alpn), url.clone()).await;
        assert_eq!((status, body.as_str()), (200, "for=127.0.0.1;proto=https"));
    }
    assert!(running.shutdown().await.complete);
}

fn tls_cluster_config(upstream: SocketAddr, tls: &str) -> String {
    format!(
        "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n\n[clusters.backend]\nendpoints = [\"{upstream}\"]\ntls = {{ {tls} }}\n"
    )
}

#[tokio::test]
async fn the_proxy_reaches_tls_upstreams_over_http1_and_http2() {
    let pki = Pki::new();
    let ca = toml_path(&pki.path("ca.pem"));
    for (offered, alpn, seen) in [
        (&[b"http/1.1".as_slice()][..], "\"http/1.1\"", "HTTP/1.1"),
        (
            &[b"h2".as_slice(), b"http/1.1".as_slice()][..],
            "\"h2\", \"http/1.1\"",
            "HTTP/2.0",
        ),
    ] {
        let upstream = tls_upstream(&pki, offered).await;
        let config = tls_cluster_config(upstream, &format!("ca = {ca}, alpn = [{alpn}]"));
        let (_proxy, running, addr, _clock) = start_proxy(&config).await;
        // Twice: the second request rides the pooled (or multiplexed) connection.
        for _ in 0..2 {
            let answer = get(addr, "/").await;
            assert_eq!((answer.status, answer.body.as_str()), (200, seen));
        }
        assert!(running.shutdown().await.complete);
    }
}

#[tokio::test]
async fn a_fixed_server_name_is_what_the_certificate_is_checked_against() {
    let pki = Pki::new();
    let upstream = tls_upstream(&pki, &[b"http/1.1"]).await;
    let ca = toml_path(&pki.path("ca.pem"));
    for (name, status) in [("localhost", 200), ("elsewhere.example", 503)] {
        let config = tls_cluster_config(upstream, &format!("ca = {ca}, server_name = \"{name}\""));
        let (_proxy, running, addr, _clock) = start_proxy(&config).await;
        assert_eq!(get(addr, "/").await.status, status, "server_name {name}");
        running.shutdown().await;
    }
}

#[tokio::test]
async fn an_upstream_certificate_from_an_untrusted_ca_is_a_connect_failure() {
    let pki = Pki::new();
    let stranger = Pki::new();
    let upstream = tls_upstream(&pki, &[b"http/1.1"]).await;
    let config = tls_cluster_config(
        upstream,
        &format!("ca = {}", toml_path(&stranger.path("ca.pem"))),
    );
    let (_proxy, running, addr, _clock) = start_proxy(&config).await;
    let answer = get(addr, "/").await;
    assert_eq!(answer.status, 503);
    assert_eq!(answer.header("x-tripline-flag"), Some("UF"));
    running.shutdown().await;
}

#[test]
fn bad_tls_files_are_refused_naming_the_field_and_the_file() {
    let pki = Pki::new();
    let garbage = pki.path("garbage.pem");
    std::fs::write(&garbage, "not PEM at all").unwrap();
    let missing = pki.path("missing.pem");
    let cert = toml_path(&pki.path("cert.pem"));
    let key = toml_path(&pki.path("key.pem"));
    let listener = |cert: &str, key: &str| {
        format!(
            "[[listeners]]\naddress = \"127.0.0.1:0\"\ntls = {{ cert = {cert}, key = {key} }}\n\n[clusters.backend]\nendpoints = [\"127.0.0.1:1\"]\n"
        )
    };
    let cases = [
        (
            listener(&toml_path(&missing), &key),
            "listeners[0].tls.cert",
            &missing,
        ),
        (
            listener(&toml_path(&garbage), &key),
            "listeners[0].tls.cert",
            &garbage,
        ),
        (
            listener(&cert, &toml_path(&garbage)),
            "listeners[0].tls.key",
            &garbage,
        ),
        (
            format!(
                "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[clusters.backend]\nendpoints = [\"127.0.0.1:1\"]\ntls = {{ ca = {} }}\n",
                toml_path(&garbage)
            ),
            "clusters.backend.tls.ca",
            &garbage,
        ),
    ];
    for (text, field, file) in cases {
        let config = ProxyConfig::from_toml(&text).unwrap();
        let error = Proxy::try_new(config).unwrap_err();
        assert_eq!(error.field, field);
        assert!(
            error.message.contains(&file.display().to_string()),
            "{error} names {}",
            file.display()
        );
    }
}

#[test]
fn contradictory_tls_settings_are_refused_before_any_file_is_read() {
    let base = "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[clusters.backend]\nendpoints = [\"127.0.0.1:1\"]\n";
    let field = |extra: &str| {
        ProxyConfig::from_toml(&format!("{base}{extra}\n"))
            .unwrap_err()
            .field
    };
    assert_eq!(
        field("protocol = \"h2c\"\ntls = {}"),
        "clusters.backend.protocol"
    );
    assert_eq!(field("tls = { alpn = [] }"), "clusters.backend.tls.alpn");
    assert_eq!(
        field("tls = { alpn = [\"h2\", \"h2\"] }"),
        "clusters.backend.tls.alpn"
    );
    assert_eq!(
        field("tls = { server_name = \"not a name\" }"),
        "clusters.backend.tls.server_name"
    );
    assert_eq!(
        field("dns_refresh = \"0s\""),
        "clusters.backend.dns_refresh"
    );
    // An ALPN protocol the proxy does not speak is a parse error.
    assert!(ProxyConfig::from_toml(&format!("{base}tls = {{ alpn = [\"spdy/3\"] }}\n")).is_err());
}

#[tokio::test]
async fn a_tls_endpoint_that_stops_reading_is_given_up_after_the_stall_timeout() {
    let pki = Pki::new();
    let acceptor = tokio_rustls::TlsAcceptor::from(pki.server_config(&[b"http/1.1"]));
    // Completes the handshake, then never reads: the upload fills the
    // sockets' buffers until the endpoint's receive window closes.
    let stalled = raw_upstream(move |stream| {
        let acceptor = acceptor.clone();
        async move {
            let held = acceptor.accept(stream).await;
            std::future::pending::<()>().await;
            drop(held);
        }
    })
    .await;
    let ca = toml_path(&pki.path("ca.pem"));
    assert_given_up_after_the_stall_timeout(&tls_cluster_config(stalled, &format!("ca = {ca}")))
        .await;
}
