//! Slow and stalled clients: a head sent too slowly (slowloris) is cut
//! at the header read timeout with a `408`; an upload that stalls is
//! given up after `[proxy] client_body_timeout` (`408`, `client_timeout`)
//! even on a route without a timeout, its upstream request cancelled and
//! nobody charged; one that crawls is cut at its deadline; an endpoint
//! that stops reading an upload is charged.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::*;

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

/// An endpoint that reads whatever comes and never answers: it reports
/// each connection's first bytes, then its close (the proxy let go).
async fn silent_upstream() -> (SocketAddr, mpsc::Receiver<()>, mpsc::Receiver<()>) {
    let (arrived, arrivals) = mpsc::channel(64);
    let (closed, closes) = mpsc::channel(64);
    let addr = raw_upstream(move |mut s| {
        let (arrived, closed) = (arrived.clone(), closed.clone());
        async move {
            let mut buf = [0u8; 4096];
            let mut first = true;
            loop {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) if first => {
                        first = false;
                        let _ = arrived.send(()).await;
                    }
                    Ok(_) => {}
                }
            }
            let _ = closed.send(()).await;
        }
    })
    .await;
    (addr, arrivals, closes)
}

/// Sends a `method` request promising 10 bytes of body, sends 3, and
/// reads the answer.
async fn stall_upload(addr: SocketAddr, method: &str) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!("{method} /doc HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 1024];
    let n = tokio::time::timeout(BOUND, stream.read(&mut answer))
        .await
        .expect("answered")
        .unwrap();
    (stream, String::from_utf8_lossy(&answer[..n]).into_owned())
}

#[tokio::test]
async fn a_stalled_upload_is_given_up_after_the_client_body_timeout() {
    let (logs, _guard) = capture_logs();
    let (upstream, mut arrivals, mut closes) = silent_upstream().await;
    // No route timeout, no deadline: only the client body timeout ends it.
    let text = config_with_admin(upstream, TOUCHY, "client_body_timeout = \"300ms\"");
    let (proxy, running, addr, _clock) = start_proxy(&text).await;
    let (stream, answer) = stall_upload(addr, "POST").await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.contains("x-tripline-rejected: client_timeout"),
        "{answer}"
    );
    assert!(answer.contains("x-tripline-flag: CT"), "{answer}");
    // The upstream had the start of the request, and its socket was let go.
    tokio::time::timeout(BOUND, arrivals.recv())
        .await
        .expect("sent upstream");
    tokio::time::timeout(BOUND, closes.recv())
        .await
        .expect("upstream socket closed");
    let route = proxy.route_breaker("api").unwrap().metrics().calls;
    assert_eq!(route.failed, 0, "{route:?}");
    let endpoint = endpoint_breaker(&proxy, upstream).metrics().calls;
    assert_eq!(endpoint.failed, 0, "{endpoint:?}");
    let admin = running.admin_addr().unwrap();
    let counted = metric(
        admin,
        "tripline_proxy_refusals_total{route=\"api\",flag=\"CT\"}",
    )
    .await;
    assert_eq!(counted, Some(1.0));
    assert!(
        logged(&logs).contains("request body sent nothing for 300ms"),
        "{}",
        logged(&logs)
    );
    drop(stream); // else the drain waits out the proxy's lingering close
    running.shutdown().await;
}

#[tokio::test]
async fn a_stalled_upload_kept_for_retries_is_given_up_after_the_client_body_timeout() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let route = "retry = { attempts = 2 }";
    let text = with_proxy_section(
        &config(&[upstream.addr], route, ""),
        "client_body_timeout = \"300ms\"",
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    // An idempotent method: the body is kept to be replayed, read whole
    // before the first try.
    let (stream, answer) = stall_upload(addr, "PUT").await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.contains("x-tripline-rejected: client_timeout"),
        "{answer}"
    );
    assert_eq!(upstream.hits(), 0, "nothing was sent upstream");
    assert_eq!(get(addr, "/").await.status, 200);
    drop(stream);
    running.shutdown().await;
}

#[tokio::test]
async fn a_stalled_http2_upload_is_given_up_after_the_client_body_timeout() {
    let (upstream, mut arrivals, mut closes) = silent_upstream().await;
    let text = with_proxy_section(
        &config(&[upstream], "", ""),
        "client_body_timeout = \"300ms\"",
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    let connection = tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let post = http::Request::post("http://x/doc").body(()).unwrap();
    let (answer, mut body) = client.send_request(post, false).unwrap();
    body.send_data(bytes::Bytes::from_static(b"abc"), false)
        .unwrap();
    let answer = tokio::time::timeout(BOUND, answer)
        .await
        .expect("answered")
        .unwrap();
    assert_eq!(answer.status(), 408);
    assert_eq!(answer.headers()["x-tripline-rejected"], "client_timeout");
    tokio::time::timeout(BOUND, arrivals.recv())
        .await
        .expect("sent upstream");
    tokio::time::timeout(BOUND, closes.recv())
        .await
        .expect("upstream socket closed");
    drop(client);
    connection.abort();
    running.shutdown().await;
}
