//! Hostile clients: request smuggling, malformed framing, slow headers.
//! Each is refused or cut, and the proxy keeps serving others.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

/// Sends raw bytes and reads what comes back until the proxy closes.
async fn raw(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(BOUND, stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the proxy closes the connection");
    String::from_utf8_lossy(&answer).into_owned()
}

/// Asserts that `answer` (to `request`) is the proxy's own 400 for a
/// malformed request.
fn assert_protocol_error(request: &[u8], answer: &str) {
    let request = String::from_utf8_lossy(request);
    assert!(answer.starts_with("HTTP/1.1 400"), "{request:?}: {answer}");
    assert!(
        answer.contains("x-tripline-rejected: protocol_error"),
        "{request:?}: {answer}"
    );
}

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
        let answer = raw(addr, case).await;
        assert!(
            answer.starts_with("HTTP/1.1 400"),
            "{:?}: {answer}",
            String::from_utf8_lossy(case)
        );
    }
    assert_eq!(upstream.hits(), 0);
    assert_eq!(get(addr, "/").await.status, 200);
    running.shutdown().await;
}

#[tokio::test]
async fn oversized_heads_are_refused_with_431() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], "", "")).await;
    let huge_value = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nx-huge: {}\r\n\r\n",
        "a".repeat(512 * 1024)
    );
    let many_names = format!(
        "GET / HTTP/1.1\r\nHost: x\r\n{}\r\n",
        (0..200)
            .map(|i| format!("x-h{i}: v\r\n"))
            .collect::<String>()
    );
    for (what, head) in [
        ("one huge value", huge_value),
        ("200 header lines", many_names),
    ] {
        let answer = raw(addr, head.as_bytes()).await;
        assert!(
            answer.starts_with("HTTP/1.1 431"),
            "{what}: {}",
            &answer[..answer.len().min(200)]
        );
    }
    assert_eq!(upstream.hits(), 0, "no oversized head reached the upstream");
    assert_eq!(get(addr, "/").await.status, 200);
    running.shutdown().await;
}

#[tokio::test]
async fn a_client_too_slow_to_send_its_headers_is_cut_off() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let text = with_proxy_section(
        &config(&[upstream.addr], "", ""),
        "header_read_timeout = \"300ms\"",
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nHo").await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(BOUND, slow.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the slow client's connection is closed");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert_eq!(get(addr, "/").await.status, 200);
    drop(slow); // else the drain waits out the proxy's lingering close
    running.shutdown().await;
}

#[tokio::test]
async fn a_body_sent_too_slowly_to_keep_for_retries_is_cut_at_the_deadline() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let route = r#"retry = { attempts = 2 }"#;
    let (proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], route, "")).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = b"PUT /doc HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\ntripline-timeout-ms: 200\r\n\r\nabc";
    stream.write_all(head).await.unwrap();
    let mut answer = vec![0u8; 1024];
    let n = tokio::time::timeout(BOUND, stream.read(&mut answer))
        .await
        .expect("answered")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.contains("x-tripline-rejected: deadline_exceeded"),
        "{answer}"
    );
    assert_eq!(upstream.hits(), 0);
    assert_eq!(proxy.route_budget("api").unwrap().stats().deposits, 1);
    drop(stream); // else the drain waits out the proxy's lingering close
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

/// Breakers that open after two failures in four calls.
const TOUCHY: &str = r#"breaker = { window = { kind = "count", size = 4 }, minimum_calls = 2, failure_rate_threshold = 0.5, open_duration = "10s" }"#;

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
async fn a_client_uploading_too_slowly_times_out_without_blaming_the_endpoint() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let route = format!("{TOUCHY}\ntimeout = {{ per_try = \"200ms\" }}");
    let (proxy, running, addr, _clock) =
        start_proxy(&config(&[upstream.addr], &route, TOUCHY)).await;
    let mut crawling = Vec::new();
    for _ in 0..3 {
        // Ten bytes promised, three sent, and the client goes quiet.
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let head = b"POST /doc HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc";
        stream.write_all(head).await.unwrap();
        let mut answer = vec![0u8; 1024];
        let n = tokio::time::timeout(BOUND, stream.read(&mut answer))
            .await
            .expect("answered")
            .unwrap();
        let answer = String::from_utf8_lossy(&answer[..n]).into_owned();
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(
            answer.contains("x-tripline-rejected: deadline_exceeded"),
            "{answer}"
        );
        crawling.push(stream);
    }
    let route = proxy.route_breaker("api").unwrap().metrics().calls;
    assert_eq!((route.failed, route.ignored), (0, 3), "{route:?}");
    let cluster = proxy.cluster("backend").unwrap();
    let endpoint = cluster.endpoints()[0].breaker().metrics().calls;
    assert_eq!(endpoint.failed, 0, "{endpoint:?}");
    assert_eq!(get(addr, "/").await.status, 200);
    drop(crawling); // else the drain waits out the proxy's lingering close
    running.shutdown().await;
}

#[tokio::test]
async fn an_endpoint_that_stops_reading_an_upload_is_charged_and_its_connection_closed() {
    let stalled = unreading_upstream().await;
    let route = format!("{TOUCHY}\ntimeout = {{ per_try = \"300ms\" }}");
    // A drain long past the test's bound: only connections that end on
    // their own let the proxy stop within it.
    let text = with_proxy_section(
        &config(&[stalled], &route, TOUCHY),
        "drain_timeout = \"60s\"",
    );
    let (proxy, running, addr, _clock) = start_proxy(&text).await;
    let answer = upload_and_read_answer(addr, 64 << 20).await;
    assert!(answer.starts_with("HTTP/1.1 504"), "{answer}");
    assert!(answer.contains("x-tripline-flag: UT"), "{answer}");
    let cluster = proxy.cluster("backend").unwrap();
    let calls = cluster.endpoints()[0].breaker().metrics().calls;
    assert_eq!(calls.failed, 1, "{calls:?}");
    // The abandoned try's connection was closed, not left flushing into
    // the stalled endpoint (which would hold the drain to its timeout).
    let drained = tokio::time::timeout(BOUND, running.shutdown()).await;
    assert!(
        drained.is_ok(),
        "the drain waited on the stalled connection"
    );
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
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    }
    assert_eq!(upstream.hits(), 0);
    running.shutdown().await;
}
