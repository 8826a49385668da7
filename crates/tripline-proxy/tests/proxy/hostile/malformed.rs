//! Request smuggling and malformed heads: refused before any parser
//! serves them, labelled, counted and logged, on the bodiless fast path
//! (a fresh connection's first head) and on hyper's (a head after a
//! request with a body on the same connection).

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

#[tokio::test]
async fn conflicting_length_and_chunked_framing_is_refused_with_400() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], "", "")).await;
    let smuggle = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 44\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
    let answer = raw(addr, smuggle).await;
    assert_protocol_error(smuggle, &answer);
    assert!(
        !answer.contains("fine"),
        "nothing reached the upstream: {answer}"
    );
    // The same order reversed.
    let reversed = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n";
    assert!(raw(addr, reversed).await.starts_with("HTTP/1.1 400"));
    assert_eq!(upstream.hits(), 0);
    // Others are still served.
    assert_eq!(get(addr, "/").await.status, 200);
    running.shutdown().await;
}

#[tokio::test]
async fn a_conflicting_head_after_bodiless_requests_on_one_connection_is_refused() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], "", "")).await;
    // Two bodiless requests (served without hyper, their heads parsed by
    // the proxy itself), then the smuggling head, all in one write.
    let pipelined = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\nPOST / HTTP/1.1\r\nHost: x\r\nContent-Length: 44\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
    let answer = raw(addr, pipelined).await;
    assert_eq!(answer.matches("HTTP/1.1 200").count(), 2, "{answer}");
    assert!(answer.contains("HTTP/1.1 400"), "{answer}");
    assert!(
        answer.contains("x-tripline-rejected: protocol_error"),
        "{answer}"
    );
    assert_eq!(
        upstream.hits(),
        2,
        "the smuggled request never reached the upstream"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn other_malformed_framing_is_refused_with_400() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], "", "")).await;
    let cases: [&[u8]; 3] = [
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nabcde",
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nabc",
        b"GET / HTTP/1.1\r\nHost: x\r\nBad\x01Header: 1\r\n\r\n",
    ];
    for case in cases {
        assert_protocol_error(case, &raw(addr, case).await);
    }
    assert_eq!(upstream.hits(), 0);
    assert_eq!(get(addr, "/").await.status, 200);
    running.shutdown().await;
}

#[tokio::test]
async fn a_request_with_two_hosts_or_an_http11_request_without_one_is_refused_with_400() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], "", "")).await;
    let refused: [&[u8]; 3] = [
        // Bodiless: parsed by the proxy's own HTTP/1.1 loop.
        b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n",
        // With a body: parsed by hyper.
        b"POST / HTTP/1.1\r\nHost: a\r\nhost: b\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi",
        b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n",
    ];
    for case in refused {
        assert_protocol_error(case, &raw(addr, case).await);
    }
    assert_eq!(upstream.hits(), 0, "none of them reached the upstream");
    // HTTP/1.0 predates Host: served without one.
    let answer = raw(addr, b"GET / HTTP/1.0\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
    assert_eq!(upstream.hits(), 1);
    running.shutdown().await;
}

/// Sends `request`, closes the sending side (the client is done or
/// gone), and reads what comes back until the proxy closes.
async fn raw_then_hang_up(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    stream.shutdown().await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(BOUND, stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the proxy closes the connection");
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn a_client_whose_upload_breaks_is_refused_and_the_endpoint_is_not_blamed() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let (proxy, running, addr, _clock) =
        start_proxy(&config(&[upstream.addr], TOUCHY, TOUCHY)).await;
    for _ in 0..5 {
        // A malformed chunk size: the body breaks after its head was sent.
        let malformed =
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nZZ\r\n";
        assert_protocol_error(malformed, &raw(addr, malformed).await);
        // The client hangs up with its body cut short.
        let cut = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly ten b";
        let answer = raw_then_hang_up(addr, cut).await;
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 400"),
            "{answer}"
        );
    }
    // Ten broken uploads, and neither breaker counted one as a failure.
    let route = proxy.route_breaker("api").unwrap().metrics().calls;
    assert_eq!((route.failed, route.ignored), (0, 10), "{route:?}");
    let cluster = proxy.cluster("backend").unwrap();
    let endpoint = cluster.endpoints()[0].breaker().metrics().calls;
    assert_eq!(endpoint.failed, 0, "{endpoint:?}");
    assert_eq!(get(addr, "/").await.status, 200);
    running.shutdown().await;
}

#[tokio::test]
async fn the_400_for_a_malformed_head_reaches_a_client_that_sent_more_after_it() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], "", "")).await;
    for head in [
        &b"G@T / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        &b"GET / HTTP/1.2\r\nHost: x\r\n\r\n"[..],
    ] {
        // Bytes the proxy will never read as a request: closed with them
        // unread, the socket would be reset and the 400 lost.
        let mut request = head.to_vec();
        request.extend(std::iter::repeat_n(b'x', 64 * 1024));
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(&request).await.unwrap();
        let mut answer = Vec::new();
        let read = tokio::time::timeout(BOUND, stream.read_to_end(&mut answer))
            .await
            .expect("the proxy closes the connection");
        let answer = String::from_utf8_lossy(&answer);
        assert!(read.is_ok(), "closed, not reset: {read:?} after {answer:?}");
        assert_protocol_error(head, &answer);
    }
    assert_eq!(upstream.hits(), 0);
    running.shutdown().await;
}

/// The malformed heads of the hostile run, and the framing HAProxy
/// refuses: each its own connection's first head.
const MALFORMED: [&[u8]; 9] = [
    b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nabcde",
    b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nX-Nul: a\0b\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nabc",
    b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n",
];

#[tokio::test]
async fn every_malformed_head_is_refused_labelled_counted_and_logged() {
    let (logs, _guard) = capture_logs();
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let (_proxy, running, addr, _clock) =
        start_proxy(&config_with_admin(upstream.addr, "", "")).await;
    let admin = running.admin_addr().unwrap();
    let before = unrouted_refusals(admin).await;
    for case in MALFORMED {
        assert_protocol_error(case, &raw(addr, case).await);
    }
    let after = unrouted_refusals(admin).await;
    let n = MALFORMED.len() as f64;
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (n, n),
        "4xx and DPE counted"
    );
    assert_eq!(upstream.hits(), 0, "none reached the upstream");
    // Lines are rate-limited process-wide, and other tests refuse
    // requests too: this second's may be spent. One more refusal at a
    // time until a line is written (the next second's, at the latest).
    let deadline = tokio::time::Instant::now() + BOUND;
    while !logged(&logs).contains("(400 protocol_error)") {
        assert!(tokio::time::Instant::now() < deadline, "nothing logged");
        raw(addr, MALFORMED[0]).await;
    }
    let logged = logged(&logs);
    assert!(
        logged.contains("refused a request from 127.0.0.1:"),
        "{logged}"
    );
    assert_eq!(get(addr, "/").await.status, 200);
    running.shutdown().await;
}

/// Sends `request` on `stream` and reads one answer whose body is
/// `content-length` long.
async fn exchange(stream: &mut TcpStream, request: &[u8]) -> String {
    stream.write_all(request).await.unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&seen).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_owned)
                })
                .map_or(0, |v| v.trim().parse::<usize>().unwrap());
            if seen.len() >= end + 4 + length {
                return text;
            }
        }
        let n = tokio::time::timeout(BOUND, stream.read(&mut buf))
            .await
            .expect("answered")
            .unwrap();
        assert!(
            n > 0,
            "closed before the answer: {text:?}",
            text = String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
}

#[tokio::test]
async fn a_malformed_head_after_a_request_with_a_body_is_refused_on_hypers_path_too() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let (_proxy, running, addr, _clock) =
        start_proxy(&config_with_admin(upstream.addr, "", "")).await;
    let admin = running.admin_addr().unwrap();
    let before = unrouted_refusals(admin).await;
    let post = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi";
    for case in MALFORMED {
        // A request with a body puts the connection in hyper's hands;
        // the next head, on the same connection, is hyper's to read.
        let mut stream = TcpStream::connect(addr).await.unwrap();
        assert!(
            exchange(&mut stream, post)
                .await
                .starts_with("HTTP/1.1 200")
        );
        stream.write_all(case).await.unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(BOUND, stream.read_to_end(&mut answer))
            .await
            .expect("the proxy closes the connection")
            .unwrap();
        assert_protocol_error(case, &String::from_utf8_lossy(&answer));
        // Pipelined behind it in one write: the request before the
        // malformed head is answered, then the refusal.
        let mut both = post.to_vec();
        both.extend_from_slice(case);
        let answer = raw(addr, &both).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let refusal = &answer[answer.find("HTTP/1.1 400").expect("refused after")..];
        assert_protocol_error(case, refusal);
    }
    let after = unrouted_refusals(admin).await;
    let n = 2.0 * MALFORMED.len() as f64;
    assert_eq!((after.0 - before.0, after.1 - before.1), (n, n));
    assert_eq!(upstream.hits(), 2 * MALFORMED.len());
    assert_eq!(get(addr, "/").await.status, 200);
    running.shutdown().await;
}
