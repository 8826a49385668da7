//! Connections switched to another protocol (`Upgrade`, `101`): a
//! WebSocket handshake through the proxy, then bytes relayed both ways;
//! upgrades a route does not allow are served as plain requests.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::*;

/// Serves one connection of [`EchoEndpoint`]: an upgrade request is
/// answered `101` and its bytes echoed back; any other gets `plain`.
async fn serve_echo<S>(stream: S, kept: Arc<Mutex<Vec<HeaderMap>>>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |mut req: Request<Incoming>| {
        kept.lock().unwrap().push(req.headers().clone());
        let upgrade = req.headers().get(header::UPGRADE).cloned();
        let on_upgrade = hyper::upgrade::on(&mut req);
        async move {
            let Some(protocol) = upgrade else {
                return Ok::<_, hyper::Error>(Response::new(Full::new(Bytes::from_static(
                    b"plain",
                ))));
            };
            tokio::spawn(async move {
                let mut io = TokioIo::new(on_upgrade.await.unwrap());
                let mut buf = [0u8; 1024];
                while let Ok(n @ 1..) = io.read(&mut buf).await {
                    if io.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
            let mut switched = Response::new(Full::new(Bytes::new()));
            *switched.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
            let headers = switched.headers_mut();
            headers.insert(header::UPGRADE, protocol);
            headers.insert(header::CONNECTION, "upgrade".parse().unwrap());
            Ok(switched)
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await;
}

/// An endpoint that switches to an echo protocol when asked to upgrade
/// (and answers `plain` otherwise), keeping every request's headers.
struct EchoEndpoint {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<HeaderMap>>>,
}

impl EchoEndpoint {
    async fn start() -> EchoEndpoint {
        Self::start_with(None).await
    }

    /// [`EchoEndpoint::start`], over TLS when `tls` is given.
    async fn start_with(tls: Option<tokio_rustls::TlsAcceptor>) -> EchoEndpoint {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (kept, tls) = (kept.clone(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        Some(tls) => {
                            if let Ok(stream) = tls.accept(stream).await {
                                serve_echo(stream, kept).await;
                            }
                        }
                        None => serve_echo(stream, kept).await,
                    }
                });
            }
        });
        EchoEndpoint { addr, seen }
    }

    fn last_request(&self) -> HeaderMap {
        self.seen.lock().unwrap().last().cloned().unwrap()
    }
}

const HANDSHAKE: &str = "GET /chat HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

/// Reads what `stream` sends next (within [`BOUND`]) onto `seen`; the
/// stream must not close first.
async fn read_more(stream: &mut TcpStream, seen: &mut Vec<u8>) {
    let mut buf = [0u8; 1024];
    let n = tokio::time::timeout(BOUND, stream.read(&mut buf))
        .await
        .expect("the bytes arrive")
        .unwrap();
    assert!(n > 0, "closed after {seen:?}");
    seen.extend_from_slice(&buf[..n]);
}

/// Reads up to the end of an answer's head; returns it and what followed.
async fn read_head(stream: &mut TcpStream) -> (String, Vec<u8>) {
    let mut seen = Vec::new();
    loop {
        if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = seen.split_off(end + 4);
            return (String::from_utf8_lossy(&seen).into_owned(), rest);
        }
        read_more(stream, &mut seen).await;
    }
}

/// Reads exactly `len` bytes (after `already`).
async fn read_exactly(stream: &mut TcpStream, mut already: Vec<u8>, len: usize) -> Vec<u8> {
    while already.len() < len {
        read_more(stream, &mut already).await;
    }
    already
}

/// Sends `request` on a connection of its own and reads the answer (its
/// head, then a body of its `content-length`).
async fn raw(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let (head, rest) = read_head(&mut stream).await;
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length: ")?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    let body = read_exactly(&mut stream, rest, length).await;
    format!("{head}{}", String::from_utf8_lossy(&body))
}

/// Opens a connection to `addr`, switches it to the echo protocol and
/// checks that bytes are relayed both ways (the client's first frame
/// sent right behind its handshake, in one write); returns the client.
async fn switch_and_echo(addr: SocketAddr) -> TcpStream {
    let mut client = TcpStream::connect(addr).await.unwrap();
    client
        .write_all(format!("{HANDSHAKE}early").as_bytes())
        .await
        .unwrap();
    let (head, rest) = read_head(&mut client).await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let head = head.to_ascii_lowercase();
    assert!(head.contains("upgrade: websocket\r\n"), "{head}");
    assert!(head.contains("connection: upgrade\r\n"), "{head}");
    let echoed = read_exactly(&mut client, rest, 5).await;
    assert_eq!(echoed, b"early");
    for message in ["ping", "a longer message, relayed as it is"] {
        client.write_all(message.as_bytes()).await.unwrap();
        let echoed = read_exactly(&mut client, Vec::new(), message.len()).await;
        assert_eq!(echoed, message.as_bytes());
    }
    client
}

#[tokio::test]
async fn a_websocket_upgrade_is_relayed_both_ways() {
    let endpoint = EchoEndpoint::start().await;
    let breaker = r#"breaker = { window = { kind = "count", size = 4 }, minimum_calls = 4 }"#;
    let text = format!("{}{ADMIN_SECTION}", config(&[endpoint.addr], breaker, ""));
    let (proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    let client = switch_and_echo(addr).await;
    // The endpoint was asked to switch, with the client's own handshake.
    let asked = endpoint.last_request();
    assert_eq!(asked[header::UPGRADE], "websocket");
    assert_eq!(asked[header::CONNECTION], "upgrade");
    assert_eq!(asked["sec-websocket-key"], "dGhlIHNhbXBsZSBub25jZQ==");
    let gauge = "tripline_proxy_upgraded_connections";
    assert_eq!(metric(admin, gauge).await, Some(1.0));
    // The switch was a success for the breakers, settled at the 101.
    let calls = proxy.route_breaker("api").unwrap().metrics().calls;
    assert_eq!((calls.successful, calls.failed), (1, 0), "{calls:?}");
    let switched = r#"tripline_proxy_requests_total{route="api",code_class="1xx"}"#;
    assert_eq!(metric(admin, switched).await, Some(1.0));
    drop(client);
    let deadline = tokio::time::Instant::now() + BOUND;
    while metric(admin, gauge).await != Some(0.0) {
        assert!(tokio::time::Instant::now() < deadline, "the relay ended");
        tokio::task::yield_now().await;
    }
    running.shutdown().await;
}

#[tokio::test]
async fn an_upgrade_the_route_does_not_allow_is_served_as_a_plain_request() {
    let endpoint = EchoEndpoint::start().await;
    let allows_none = config(&[endpoint.addr], "upgrades = []", "");
    let (_proxy, running, addr, _clock) = start_proxy(&allows_none).await;
    let answer = raw(addr, HANDSHAKE.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("plain"), "{answer}");
    let asked = endpoint.last_request();
    assert!(!asked.contains_key(header::UPGRADE), "{asked:?}");
    assert!(!asked.contains_key(header::CONNECTION), "{asked:?}");
    running.shutdown().await;

    // The default allows WebSocket only: h2c, alone or listed beside it
    // (the endpoint would pick), is not passed.
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[endpoint.addr], "", "")).await;
    for protocols in ["h2c", "websocket, h2c", "WebSocket/13, foo"] {
        let handshake = HANDSHAKE.replace("Upgrade: websocket", &format!("Upgrade: {protocols}"));
        let answer = raw(addr, handshake.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{protocols}: {answer}");
        let asked = endpoint.last_request();
        assert!(
            !asked.contains_key(header::UPGRADE),
            "{protocols}: {asked:?}"
        );
    }
    // Without `Connection: upgrade`, `Upgrade` alone asks for nothing.
    let no_connection = HANDSHAKE.replace("Connection: keep-alive, Upgrade\r\n", "");
    let answer = raw(addr, no_connection.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    running.shutdown().await;
}

#[tokio::test]
async fn the_drain_cuts_a_relayed_connection_at_its_timeout() {
    let endpoint = EchoEndpoint::start().await;
    let text = with_proxy_section(
        &config(&[endpoint.addr], "", ""),
        "drain_timeout = \"200ms\"",
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let mut client = TcpStream::connect(addr).await.unwrap();
    client.write_all(HANDSHAKE.as_bytes()).await.unwrap();
    let (head, _) = read_head(&mut client).await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    // The relay lives on while the drain waits, and is cut at its end.
    let drained = tokio::time::timeout(BOUND, running.shutdown()).await;
    assert!(!drained.expect("the drain ends").complete);
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(BOUND, client.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the client's connection was closed");
}

#[tokio::test]
async fn a_tls_endpoint_can_take_a_connection_over() {
    let pki = crate::tls::Pki::new();
    let acceptor = tokio_rustls::TlsAcceptor::from(pki.server_config(&[b"http/1.1"]));
    let endpoint = EchoEndpoint::start_with(Some(acceptor)).await;
    let ca = crate::tls::toml_path(&pki.path("ca.pem"));
    let text = config(&[endpoint.addr], "", &format!("tls = {{ ca = {ca} }}"));
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let client = switch_and_echo(addr).await;
    assert_eq!(endpoint.last_request()[header::UPGRADE], "websocket");
    drop(client);
    running.shutdown().await;
}

#[tokio::test]
async fn a_relayed_connection_idle_for_the_tunnel_timeout_is_closed() {
    let endpoint = EchoEndpoint::start().await;
    let text = format!(
        "{}{ADMIN_SECTION}",
        with_proxy_section(
            &config(&[endpoint.addr], "", ""),
            "tunnel_idle_timeout = \"300ms\""
        )
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    let started = tokio::time::Instant::now();
    let mut client = switch_and_echo(addr).await;
    // Nothing relayed from here on: closed by the proxy, not by the test.
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(BOUND, client.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the idle relay was closed");
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    assert_eq!(
        metric(admin, "tripline_proxy_upgraded_connections").await,
        Some(0.0)
    );
    running.shutdown().await;
}
