//! Serving HTTP/1.1 clients, seen byte for byte from a raw socket:
//! pipelined requests answered in order, bodiless requests and requests
//! with a body mixed on one connection, answers framed and dated.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

/// Reads from `stream` until `count` whole answers have arrived (each with
/// a `content-length` body, except the answers to HEAD: `heads`); returns
/// them as text.
async fn answers(stream: &mut TcpStream, count: usize, heads: &[usize]) -> Vec<String> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let mut found = Vec::new();
    tokio::time::timeout(BOUND, async {
        loop {
            let text = String::from_utf8_lossy(&seen).into_owned();
            found = split_answers(&text, heads);
            if found.len() >= count {
                return;
            }
            let n = stream.read(&mut buf).await.unwrap();
            assert!(
                n > 0,
                "the proxy closed after {} answers: {text:?}",
                found.len()
            );
            seen.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("the answers arrive");
    found
}

/// The whole answers at the front of `text`.
fn split_answers(text: &str, heads: &[usize]) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(end) = rest.find("\r\n\r\n") {
        if heads.contains(&out.len()) {
            out.push(rest[..end + 4].to_owned());
            rest = &rest[end + 4..];
            continue;
        }
        let head = &rest[..end];
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })
            .unwrap_or(0);
        let total = end + 4 + length;
        if rest.len() < total {
            break;
        }
        out.push(rest[..total].to_owned());
        rest = &rest[total..];
    }
    out
}

/// A connection to the proxy that has sent `bytes`.
async fn connect_sending(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    stream
}

async fn proxy_to_echo() -> (tripline_proxy::Running, SocketAddr) {
    // Answers `<path>:<the request's content-length>`.
    let upstream = Upstream::start(|req| {
        let length = req
            .headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("0");
        let text = format!("{}:{length}", req.uri().path());
        respond(200, Box::leak(text.into_boxed_str()))
    })
    .await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], "", "")).await;
    (running, addr)
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order_on_one_connection() {
    let (running, addr) = proxy_to_echo().await;
    let mut stream = connect_sending(addr, b"GET /a HTTP/1.1\r\nhost: x\r\n\r\nGET /b HTTP/1.1\r\nhost: x\r\nconnection: keep-alive\r\n\r\nHEAD /c HTTP/1.1\r\nhost: x\r\n\r\n").await;
    let got = answers(&mut stream, 3, &[2]).await;
    assert!(
        got[0].starts_with("HTTP/1.1 200 OK\r\n") && got[0].ends_with("/a:0"),
        "{got:?}"
    );
    assert!(got[1].ends_with("/b:0"), "{got:?}");
    // HEAD: the length of the body a GET would get, and no body.
    assert!(
        got[2].to_ascii_lowercase().contains("content-length: 4"),
        "{got:?}"
    );
    assert!(got[2].ends_with("\r\n\r\n"), "{got:?}");
    for answer in &got {
        assert!(
            answer.to_ascii_lowercase().contains("\r\ndate: "),
            "dated: {answer:?}"
        );
    }
    running.shutdown().await;
}

#[tokio::test]
async fn requests_with_and_without_a_body_share_a_connection() {
    let (running, addr) = proxy_to_echo().await;
    let mut stream = connect_sending(addr, b"GET /first HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert!(answers(&mut stream, 1, &[]).await[0].ends_with("/first:0"));
    stream
        .write_all(b"POST /body HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n\r\nhello")
        .await
        .unwrap();
    assert!(answers(&mut stream, 1, &[]).await[0].ends_with("/body:5"));
    // Past the grace, the connection parks and comes back to the
    // bodiless path on its next request.
    tokio::time::sleep(Duration::from_millis(300)).await;
    stream
        .write_all(b"GET /again HTTP/1.1\r\nhost: x\r\n\r\nDELETE /gone HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
        .await
        .unwrap();
    let got = answers(&mut stream, 2, &[]).await;
    assert!(
        got[0].ends_with("/again:0") && got[1].ends_with("/gone:0"),
        "{got:?}"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn an_answer_of_unknown_length_reaches_the_client_chunked() {
    let upstream = raw_upstream(|mut s| async move {
        let mut buf = vec![0u8; 4096];
        let _ = s.read(&mut buf).await;
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
            .await;
    })
    .await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream], "", "")).await;
    let mut stream = connect_sending(addr, b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await;
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(BOUND, async {
        while !seen.ends_with(b"0\r\n\r\n") {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0);
            seen.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("the chunked answer ends");
    let text = String::from_utf8_lossy(&seen).to_ascii_lowercase();
    assert!(text.contains("transfer-encoding: chunked\r\n"), "{text}");
    assert!(
        text.ends_with("\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"),
        "{text}"
    );
    running.shutdown().await;
}
