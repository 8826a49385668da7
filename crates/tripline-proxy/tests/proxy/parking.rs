//! Idle HTTP/1 keep-alive connections are parked on their bare socket and
//! served again when the client sends; the keep-alive and header read
//! timeouts and the drain still close them. Every wait here runs on
//! tokio's paused clock: the runtime jumps to the next timer when idle,
//! paced by [`pace`].

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http_body_util::Full;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, sleep, timeout};

use crate::support::*;

const PARKED: &str = "tripline_proxy_parked_connections";

/// More than two graces (100 ms each): long enough for an idle connection
/// to be parked.
const IDLE: Duration = Duration::from_secs(1);

/// Keeps paused time from outrunning the kernel: with the clock paused,
/// a runtime with nothing to do jumps to its next timer, and a loopback
/// byte that the kernel has not delivered yet (on a loaded machine it may
/// wait for `ksoftirqd`) leaves it with nothing to do. A timer 1 ms ahead,
/// each step yielding the thread to the kernel's scheduler a few times,
/// keeps the clock's jumps small while the kernel catches up.
fn pace() -> tokio::task::JoinHandle<()> {
    tokio::spawn(async {
        loop {
            sleep(Duration::from_millis(1)).await;
            for _ in 0..20 {
                std::thread::yield_now();
            }
        }
    })
}

/// An upstream answering each request with its path.
async fn echo_path() -> Upstream {
    Upstream::start(|req| Response::new(Full::new(Bytes::from(req.uri().path().to_owned())))).await
}

/// A config with `[proxy]` lines, lines of the listener, and an admin listener.
fn text(upstream: SocketAddr, proxy: &str, listener: &str) -> String {
    let listen = "[[listeners]]\naddress = \"127.0.0.1:0\"\n";
    let base = config(&[upstream], "", "");
    let text = base.replacen(
        listen,
        &format!("[proxy]\n{proxy}\n\n{listen}{listener}\n"),
        1,
    );
    format!("{text}{ADMIN_SECTION}")
}

/// A client on one raw keep-alive connection.
struct Raw {
    stream: TcpStream,
    unread: Vec<u8>,
}

impl Raw {
    async fn connect(addr: SocketAddr) -> Raw {
        Raw {
            stream: TcpStream::connect(addr).await.unwrap(),
            unread: Vec::new(),
        }
    }

    async fn get(&mut self, paths: &[&str]) {
        let mut requests = String::new();
        for path in paths {
            requests.push_str(&format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n"));
        }
        self.stream.write_all(requests.as_bytes()).await.unwrap();
    }

    /// One answer: its status line and body (by its content-length).
    async fn answer(&mut self) -> (String, String) {
        timeout(BOUND, async {
            loop {
                if let Some(end) = self.unread.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&self.unread[..end]).into_owned();
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            let (name, value) = l.split_once(':')?;
                            name.eq_ignore_ascii_case("content-length")
                                .then(|| value.trim().parse().unwrap())
                        })
                        .expect("a content-length");
                    if self.unread.len() >= end + 4 + length {
                        let body = self.unread[end + 4..end + 4 + length].to_vec();
                        self.unread.drain(..end + 4 + length);
                        let status = head.lines().next().unwrap().to_owned();
                        return (status, String::from_utf8(body).unwrap());
                    }
                }
                let n = self.stream.read_buf(&mut self.unread).await.unwrap();
                assert!(
                    n > 0,
                    "closed before answering: {:?}",
                    String::from_utf8_lossy(&self.unread)
                );
            }
        })
        .await
        .expect("answered")
    }

    /// Waits for the proxy to close the connection; what it sent before.
    async fn closed(&mut self) -> String {
        timeout(BOUND, self.stream.read_to_end(&mut self.unread))
            .await
            .expect("the proxy closes the connection")
            .ok();
        String::from_utf8_lossy(&self.unread).into_owned()
    }
}

#[tokio::test(start_paused = true)]
async fn an_idle_connection_is_parked_and_served_again_when_the_client_sends() {
    let _pace = pace();
    let upstream = echo_path().await;
    let (_proxy, running, addr, _clock) = start_proxy(&text(upstream.addr, "", "")).await;
    let admin = running.admin_addr().unwrap();
    let mut client = Raw::connect(addr).await;
    client.get(&["/first"]).await;
    assert_eq!(
        client.answer().await,
        ("HTTP/1.1 200 OK".into(), "/first".into())
    );

    sleep(IDLE).await;
    assert_eq!(metric(admin, PARKED).await, Some(1.0), "parked");
    client.get(&["/second"]).await;
    assert_eq!(
        client.answer().await,
        ("HTTP/1.1 200 OK".into(), "/second".into())
    );
    sleep(IDLE).await;
    assert_eq!(metric(admin, PARKED).await, Some(1.0), "parked again");
    client.get(&["/third"]).await;
    assert_eq!(client.answer().await.1, "/third");
    assert_eq!(upstream.hits(), 3);

    // A client that goes away leaves nothing parked.
    sleep(IDLE).await;
    drop(client);
    sleep(IDLE).await;
    assert_eq!(metric(admin, PARKED).await, Some(0.0));
    assert!(running.shutdown().await.complete);
}

#[tokio::test(start_paused = true)]
async fn pipelined_requests_are_answered_in_order_before_and_after_a_park() {
    let _pace = pace();
    let upstream = echo_path().await;
    let (_proxy, running, addr, _clock) = start_proxy(&text(upstream.addr, "", "")).await;
    let admin = running.admin_addr().unwrap();
    let mut client = Raw::connect(addr).await;
    client.get(&["/a", "/b", "/c"]).await;
    for path in ["/a", "/b", "/c"] {
        assert_eq!(client.answer().await.1, path);
    }
    sleep(IDLE).await;
    assert_eq!(metric(admin, PARKED).await, Some(1.0));
    // Woken by a burst: the new hyper connection reads all of it.
    client.get(&["/d", "/e"]).await;
    for path in ["/d", "/e"] {
        assert_eq!(client.answer().await.1, path);
    }
    assert_eq!(upstream.hits(), 5);
    assert!(running.shutdown().await.complete);
}

#[tokio::test(start_paused = true)]
async fn a_connection_idle_past_the_keep_alive_timeout_is_closed() {
    let _pace = pace();
    let upstream = echo_path().await;
    // The listener's own timeout wins over [proxy]'s.
    for (proxy, listener, limit) in [
        ("keep_alive_timeout = \"5s\"", "", 5),
        (
            "keep_alive_timeout = \"30s\"",
            "keep_alive_timeout = \"2s\"",
            2,
        ),
    ] {
        let config = text(upstream.addr, proxy, listener);
        let (_proxy, running, addr, _clock) = start_proxy(&config).await;
        let admin = running.admin_addr().unwrap();
        let mut client = Raw::connect(addr).await;
        client.get(&["/"]).await;
        client.answer().await;
        let answered = Instant::now();
        assert_eq!(client.closed().await, "", "closed without a word");
        let idle = answered.elapsed();
        let limit = Duration::from_secs(limit);
        // Idleness is sampled every grace (and the close is delivered).
        assert!(
            idle >= limit && idle < limit + Duration::from_secs(1),
            "{idle:?}"
        );
        assert_eq!(metric(admin, PARKED).await, Some(0.0));
        assert!(running.shutdown().await.complete);
    }
}

#[tokio::test(start_paused = true)]
async fn a_slow_head_is_cut_at_the_header_read_timeout_parked_or_not() {
    let _pace = pace();
    let upstream = echo_path().await;
    let config = text(upstream.addr, "header_read_timeout = \"2s\"", "");
    let (_proxy, running, addr, _clock) = start_proxy(&config).await;

    // A new connection whose head never ends.
    let mut fresh = Raw::connect(addr).await;
    let start = Instant::now();
    fresh
        .stream
        .write_all(b"GET / HTTP/1.1\r\nHo")
        .await
        .unwrap();
    let said = fresh.closed().await;
    assert!(said.starts_with("HTTP/1.1 408 Request Timeout"), "{said}");
    assert!(
        start.elapsed() < Duration::from_millis(2500),
        "{:?}",
        start.elapsed()
    );

    // After an answer, the next head dripped a byte every 400 ms, slower
    // than the park's grace: parks find it half read, and it is still cut
    // within twice the timeout.
    let mut slow = Raw::connect(addr).await;
    slow.get(&["/"]).await;
    slow.answer().await;
    let start = Instant::now();
    let head =
        b"GET /slow HTTP/1.1\r\nhost: x\r\nx-padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    for byte in head {
        if slow.stream.write_all(&[*byte]).await.is_err() {
            break;
        }
        let read = timeout(
            Duration::from_millis(400),
            slow.stream.read_buf(&mut slow.unread),
        );
        if let Ok(Ok(0) | Err(_)) = read.await {
            break;
        }
    }
    let said = slow.closed().await;
    assert!(said.starts_with("HTTP/1.1 408 Request Timeout"), "{said}");
    assert!(
        start.elapsed() < Duration::from_millis(4500),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(
        upstream.hits(),
        1,
        "the slow head never reached the upstream"
    );
    assert!(running.shutdown().await.complete);
}

#[tokio::test(start_paused = true)]
async fn the_drain_closes_parked_connections_at_once() {
    let _pace = pace();
    let upstream = echo_path().await;
    let (_proxy, running, addr, _clock) = start_proxy(&text(upstream.addr, "", "")).await;
    let admin = running.admin_addr().unwrap();
    let mut clients = Vec::new();
    for _ in 0..3 {
        let mut client = Raw::connect(addr).await;
        client.get(&["/"]).await;
        client.answer().await;
        clients.push(client);
    }
    sleep(IDLE).await;
    assert_eq!(metric(admin, PARKED).await, Some(3.0));
    let start = Instant::now();
    let drained = running.shutdown().await;
    assert!(drained.complete);
    assert!(
        start.elapsed() < Duration::from_millis(500),
        "{:?}",
        start.elapsed()
    );
    for client in &mut clients {
        assert_eq!(client.closed().await, "");
    }
}

#[tokio::test(start_paused = true)]
async fn an_idle_tls_connection_is_parked_and_served_again() {
    let _pace = pace();
    let pki = crate::tls::Pki::new();
    let upstream = echo_path().await;
    let tls = format!(
        "tls = {{ cert = {}, key = {} }}",
        crate::tls::toml_path(&pki.path("cert.pem")),
        crate::tls::toml_path(&pki.path("key.pem"))
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text(upstream.addr, "", &tls)).await;
    let admin = running.admin_addr().unwrap();
    let client = pki.client(b"http/1.1");
    let url = |path: &str| format!("https://localhost:{}{path}", addr.port());
    let (_, status, body) = crate::tls::get_over_tls(&client, url("/first")).await;
    assert_eq!((status, body.as_str()), (200, "/first"));
    sleep(IDLE).await;
    assert_eq!(metric(admin, PARKED).await, Some(1.0));
    let (_, status, body) = crate::tls::get_over_tls(&client, url("/second")).await;
    assert_eq!((status, body.as_str()), (200, "/second"));
    sleep(IDLE).await;
    // One parked: the client's pooled connection was woken, not replaced.
    assert_eq!(metric(admin, PARKED).await, Some(1.0));
    assert!(running.shutdown().await.complete);
}

#[tokio::test(start_paused = true)]
async fn http2_connections_are_served_and_never_parked() {
    let _pace = pace();
    let upstream = echo_path().await;
    let (_proxy, running, addr, _clock) = start_proxy(&text(upstream.addr, "", "")).await;
    let admin = running.admin_addr().unwrap();
    let h2: hyper_util::client::legacy::Client<_, Full<Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .http2_only(true)
            .build_http();
    for path in ["/one", "/two"] {
        let req = http::Request::get(format!("http://{addr}{path}"))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let response = timeout(BOUND, h2.request(req)).await.unwrap().unwrap();
        assert_eq!(response.version(), http::Version::HTTP_2);
        sleep(IDLE).await;
        // Streams multiplex: there is no "between requests" to park in.
        assert_eq!(metric(admin, PARKED).await, Some(0.0));
    }
    assert_eq!(upstream.hits(), 2);
    drop(h2);
    assert!(running.shutdown().await.complete);
}

/// An HTTP/2 client connection straight on hyper's `conn::http2`, so the
/// test sees when the proxy closes it.
async fn h2_connection(
    addr: SocketAddr,
) -> (
    hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    tokio::task::JoinHandle<hyper::Result<()>>,
) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    (send, tokio::spawn(conn))
}

async fn h2_get(
    send: &mut hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    addr: SocketAddr,
    path: &str,
) -> (u16, String) {
    use http_body_util::BodyExt;
    let req = http::Request::get(format!("http://{addr}{path}"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = timeout(BOUND, send.send_request(req))
        .await
        .unwrap()
        .unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test(start_paused = true)]
async fn an_http2_connection_without_streams_is_closed_after_the_keep_alive_timeout() {
    let _pace = pace();
    let upstream = echo_path().await;
    let config = text(upstream.addr, "keep_alive_timeout = \"4s\"", "");
    let (_proxy, running, addr, _clock) = start_proxy(&config).await;
    let (mut send, conn) = h2_connection(addr).await;
    assert_eq!(h2_get(&mut send, addr, "/one").await, (200, "/one".into()));
    // Used again before the timeout: the count starts over.
    sleep(Duration::from_secs(3)).await;
    assert_eq!(h2_get(&mut send, addr, "/two").await, (200, "/two".into()));
    let answered = Instant::now();
    timeout(BOUND, conn)
        .await
        .expect("the proxy closes the idle HTTP/2 connection")
        .unwrap()
        .unwrap();
    let idle = answered.elapsed();
    // Sampled every quarter timeout: between 4 and 5 s after the last stream.
    assert!(
        idle >= Duration::from_secs(4) && idle <= Duration::from_secs(6),
        "{idle:?}"
    );
    assert_eq!(upstream.hits(), 2);
    assert!(running.shutdown().await.complete);
}

#[tokio::test(start_paused = true)]
async fn an_http2_stream_open_past_the_keep_alive_timeout_keeps_its_connection() {
    let _pace = pace();
    // The endpoint answers after 6 s, past the 2 s keep-alive timeout.
    let slow = raw_upstream(|mut s| async move {
        let mut buf = [0u8; 4096];
        let _ = s.read(&mut buf).await;
        sleep(Duration::from_secs(6)).await;
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nslow")
            .await;
    })
    .await;
    let config = text(slow, "keep_alive_timeout = \"2s\"", "");
    let (_proxy, running, addr, _clock) = start_proxy(&config).await;
    let (mut send, conn) = h2_connection(addr).await;
    assert_eq!(h2_get(&mut send, addr, "/").await, (200, "slow".into()));
    // No GOAWAY came while the stream was open: the connection takes
    // another request (a GOAWAY'd one would refuse it).
    assert_eq!(h2_get(&mut send, addr, "/").await, (200, "slow".into()));
    assert!(!conn.is_finished());
    drop(send);
    drop(conn);
    assert!(running.shutdown().await.complete);
}
