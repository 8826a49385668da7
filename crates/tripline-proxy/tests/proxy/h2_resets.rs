//! Hostile HTTP/2 clients. One that opens streams and cancels them before
//! the answer ("rapid reset", CVE-2023-44487): the connection is closed
//! once most of its streams were cancelled early, and the endpoint is
//! spared the rest. One that continues a header block for ever
//! (CONTINUATION flood): the connection is closed at the header limit.

use std::net::SocketAddr;

use http::Request;
use tokio::net::TcpStream;

use crate::support::*;

/// An HTTP/2 client on its own connection to `addr`, and the task driving
/// that connection (it ends when the proxy closes it).
async fn h2_client(
    addr: SocketAddr,
) -> (
    h2::client::SendRequest<bytes::Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    (client, tokio::spawn(connection))
}

/// Sends up to `count` GETs on `client`, cancelling every one whose index
/// `cancel` picks right after sending it (yielding first, so that the
/// proxy has accepted the stream and sent its request upstream, as a
/// client pacing its resets makes it), and waiting for the others'
/// answers. Returns how many streams were opened before the connection
/// refused more.
async fn streams(
    mut client: h2::client::SendRequest<bytes::Bytes>,
    count: usize,
    cancel: impl Fn(usize) -> bool,
) -> usize {
    for i in 0..count {
        let Ok(mut ready) = client.ready().await else {
            return i;
        };
        let get = Request::get("http://x/").body(()).unwrap();
        let Ok((answer, mut stream)) = ready.send_request(get, true) else {
            return i;
        };
        if cancel(i) {
            tokio::task::yield_now().await;
            stream.send_reset(h2::Reason::CANCEL);
        } else {
            let answered = tokio::time::timeout(BOUND, answer).await.expect("answered");
            assert_eq!(answered.unwrap().status(), 200);
        }
        client = ready;
    }
    count
}

#[tokio::test]
async fn a_client_cancelling_its_streams_early_is_disconnected() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let text = format!("{}{ADMIN_SECTION}", config(&[upstream.addr], "", ""));
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let (client, connection) = h2_client(addr).await;
    let opened = streams(client, 5_000, |_| true).await;
    // Closed by the proxy without waiting for the client.
    let ended = tokio::time::timeout(BOUND, connection).await;
    assert!(ended.is_ok(), "the connection was closed");
    // Half of the 500-stream judging window, plus the streams the client
    // had sent when the proxy closed: not the 5 000 it wanted (without
    // the rule all 5 000 were opened and 4 999 reached the endpoint).
    assert!((250..1_000).contains(&opened), "{opened} streams opened");
    assert!(
        upstream.hits() < 500,
        "{} reached the endpoint",
        upstream.hits()
    );
    let admin = running.admin_addr().unwrap();
    let closes = metric(admin, "tripline_proxy_http2_premature_reset_closes_total").await;
    assert_eq!(closes, Some(1.0));
    // Everyone else is served, over HTTP/2 too.
    assert_eq!(get(addr, "/").await.status, 200);
    let (client, _connection) = h2_client(addr).await;
    assert_eq!(streams(client, 3, |_| false).await, 3);
    running.shutdown().await;
}

#[tokio::test]
async fn a_client_cancelling_now_and_then_keeps_its_connection() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], "", "")).await;
    let (client, connection) = h2_client(addr).await;
    // One stream in three cancelled, over twice the judging window.
    assert_eq!(streams(client, 1_200, |i| i % 3 == 0).await, 1_200);
    assert!(!connection.is_finished(), "{:?}", connection.await);
    running.shutdown().await;
}

/// One HTTP/2 frame: its 9-byte header, then `payload`.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut f = vec![len[1], len[2], len[3], kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

#[tokio::test]
async fn a_header_block_continued_without_end_is_refused_not_buffered() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // CVE-2024-27316 and kin: CONTINUATION frames that never end the
    // header block. The proxy must drop the connection once the block is
    // over its header list limit, not keep buffering or decoding it.
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], "", "")).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut opening = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    opening.extend(frame(0x4, 0, 0, &[])); // SETTINGS
    // GET http://x/ without END_HEADERS: :method GET, :path /, :scheme http,
    // :authority x (a literal with an indexed name).
    opening.extend(frame(0x1, 0x1, 1, &[0x82, 0x84, 0x86, 0x41, 0x01, b'x']));
    stream.write_all(&opening).await.unwrap();
    // Literal header fields without indexing, 1 KiB a frame, up to 4 MiB.
    let mut field = vec![0x00, 0x03, b'x', b'-', b'a', 0x7f, 0xe9, 0x06];
    field.extend(std::iter::repeat_n(b'v', 1_000));
    let continuation = frame(0x9, 0, 1, &field);
    let mut sent = 0;
    while sent < 4 << 20 {
        if stream.write_all(&continuation).await.is_err() {
            break; // the proxy closed the connection under the flood
        }
        sent += continuation.len();
    }
    // Closed after ~128 KiB here, most of it still in the sockets' buffers.
    assert!(sent < 4 << 20, "4 MiB of one header block were taken in");
    // Whatever the proxy said last (a GOAWAY), the connection ends.
    let mut rest = Vec::new();
    let ended = tokio::time::timeout(BOUND, stream.read_to_end(&mut rest)).await;
    assert!(ended.is_ok(), "the connection was closed");
    assert_eq!(upstream.hits(), 0);
    assert_eq!(get(addr, "/").await.status, 200);
    running.shutdown().await;
}
