//! Requests whose client goes away while the endpoint is silent, on a
//! route without a timeout: on every path (an HTTP/1.1 GET served by the
//! bodiless fast path, a POST served by hyper, an HTTP/2 stream) the
//! request is cancelled at once — its try dropped, the endpoint's socket
//! closed, neither breaker charged (a cancelled call is neutral) — and
//! the proxy holds none of the sockets. A request pipelined behind one
//! that waits is not taken for a close.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Notify, mpsc};

use super::*;

/// An endpoint that never answers: it reports each request's arrival,
/// then its socket's close (the proxy let go).
async fn silent_upstream() -> (SocketAddr, mpsc::Receiver<()>, mpsc::Receiver<()>) {
    let (arrived, arrivals) = mpsc::channel(256);
    let (closed, closes) = mpsc::channel(256);
    let addr = raw_upstream(move |mut s| {
        let (arrived, closed) = (arrived.clone(), closed.clone());
        async move {
            if read_request_head(&mut s, &mut Vec::new()).await {
                let _ = arrived.send(()).await;
                let mut buf = [0u8; 1024];
                while !matches!(s.read(&mut buf).await, Ok(0) | Err(_)) {}
            }
            let _ = closed.send(()).await;
        }
    })
    .await;
    (addr, arrivals, closes)
}

/// A proxy over `upstream` (its route without a timeout), with a
/// healthy second route to `healthy` under `/healthy`.
async fn proxy_over(
    upstream: SocketAddr,
    healthy: SocketAddr,
) -> (tripline_proxy::Proxy, tripline_proxy::Running, SocketAddr) {
    let text = format!(
        "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[[routes]]\nname = \"healthy\"\ncluster = \"healthy\"\nmatch = {{ path_prefix = \"/healthy\" }}\n\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n{TOUCHY}\n\n[clusters.backend]\nendpoints = [\"{upstream}\"]\n\n[clusters.healthy]\nendpoints = [\"{healthy}\"]\n"
    );
    let (proxy, running, addr, _clock) = start_proxy(&text).await;
    (proxy, running, addr)
}

/// Asserts that the abandoned requests were cancelled: `n` upstream
/// sockets closed, no socket held on either side, no failure charged.
async fn assert_cancelled(
    proxy: &tripline_proxy::Proxy,
    addr: SocketAddr,
    upstream: SocketAddr,
    closes: &mut mpsc::Receiver<()>,
    n: usize,
) {
    for i in 0..n {
        let closed = tokio::time::timeout(BOUND, closes.recv()).await;
        assert!(closed.is_ok(), "upstream socket {i} of {n} still open");
    }
    let held = sockets_settle(addr.port(), Some(upstream.port()), 0).await;
    assert_eq!(held, 0, "sockets the proxy still holds");
    let route = proxy.route_breaker("api").unwrap().metrics().calls;
    assert_eq!(route.failed, 0, "{route:?}");
    assert_eq!(route.cancelled, n as u64, "{route:?}");
    let endpoint = endpoint_breaker(proxy, upstream).metrics().calls;
    assert_eq!(endpoint.failed, 0, "{endpoint:?}");
}

async fn healthy() -> Upstream {
    Upstream::start(|_| respond(200, "fine")).await
}

/// Sends `request` on a connection of its own, waits until the endpoint
/// has it, and closes the connection.
async fn abandon(addr: SocketAddr, request: &[u8], arrivals: &mut mpsc::Receiver<()>) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    tokio::time::timeout(BOUND, arrivals.recv())
        .await
        .expect("sent upstream");
    drop(stream);
}

#[tokio::test]
async fn an_abandoned_get_is_cancelled_and_both_sockets_closed() {
    let (upstream, mut arrivals, mut closes) = silent_upstream().await;
    let fine = healthy().await;
    let (proxy, running, addr) = proxy_over(upstream, fine.addr).await;
    let get = b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n";
    abandon(addr, get, &mut arrivals).await;
    assert_cancelled(&proxy, addr, upstream, &mut closes, 1).await;
    assert_eq!(get_path(addr, "/healthy").await, 200);
    running.shutdown().await;
}

#[tokio::test]
async fn fifty_abandoned_gets_leave_no_socket_held() {
    let (upstream, mut arrivals, mut closes) = silent_upstream().await;
    let fine = healthy().await;
    let (proxy, running, addr) = proxy_over(upstream, fine.addr).await;
    let fds = open_fds();
    for _ in 0..50 {
        abandon(
            addr,
            b"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n",
            &mut arrivals,
        )
        .await;
    }
    assert_cancelled(&proxy, addr, upstream, &mut closes, 50).await;
    // Other tests run beside this one: a loose bound, the exact count
    // being the socket table's above.
    assert!(
        open_fds() < fds + 50,
        "{} descriptors, {fds} before",
        open_fds()
    );
    assert_eq!(get_path(addr, "/healthy").await, 200);
    running.shutdown().await;
}

#[tokio::test]
async fn an_abandoned_post_is_cancelled_and_both_sockets_closed() {
    let (upstream, mut arrivals, mut closes) = silent_upstream().await;
    let fine = healthy().await;
    let (proxy, running, addr) = proxy_over(upstream, fine.addr).await;
    let post = b"POST /wait HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi";
    abandon(addr, post, &mut arrivals).await;
    assert_cancelled(&proxy, addr, upstream, &mut closes, 1).await;
    assert_eq!(get_path(addr, "/healthy").await, 200);
    running.shutdown().await;
}

#[tokio::test]
async fn an_abandoned_http2_request_is_cancelled_and_both_sockets_closed() {
    let (upstream, mut arrivals, mut closes) = silent_upstream().await;
    let fine = healthy().await;
    let (proxy, running, addr) = proxy_over(upstream, fine.addr).await;
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    let connection = tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let get = http::Request::get("http://x/wait").body(()).unwrap();
    let (answer, _) = client.send_request(get, true).unwrap();
    tokio::time::timeout(BOUND, arrivals.recv())
        .await
        .expect("sent upstream");
    // The client goes away: its whole connection, not only the stream.
    drop((client, answer));
    connection.abort();
    let _ = connection.await;
    assert_cancelled(&proxy, addr, upstream, &mut closes, 1).await;
    assert_eq!(get_path(addr, "/healthy").await, 200);
    running.shutdown().await;
}

async fn get_path(addr: SocketAddr, path: &str) -> u16 {
    get(addr, path).await.status
}

#[tokio::test]
async fn a_request_pipelined_while_one_waits_is_not_taken_for_a_close() {
    let release = Arc::new(Notify::new());
    let (upstream, mut arrivals) = held_upstream(release.clone()).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream], "", "")).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::time::timeout(BOUND, arrivals.recv())
        .await
        .expect("sent upstream");
    // The next request arrives while the first waits: readable, not closed.
    stream
        .write_all(b"GET /second HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    release.notify_one();
    tokio::time::timeout(BOUND, arrivals.recv())
        .await
        .expect("second sent upstream");
    release.notify_one();
    let mut answers = String::new();
    let mut buf = [0u8; 4096];
    while answers.matches("done").count() < 2 {
        let n = tokio::time::timeout(BOUND, stream.read(&mut buf))
            .await
            .expect("answered")
            .unwrap();
        assert!(n > 0, "closed after {answers:?}");
        answers.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert_eq!(answers.matches("HTTP/1.1 200").count(), 2, "{answers}");
    drop(stream);
    running.shutdown().await;
}
