//! HTTP/1.1 answers of every framing, from an endpoint that writes them
//! byte for byte: the client gets each body whole, the connection is
//! reused exactly when the answer left it in step, and an answer that
//! lies about its length is a failure, never a guess.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::AsyncWriteExt;

use crate::support::*;

/// An endpoint that answers requests, on whichever connection they come,
/// with `answers` in turn; an answer marked `true` closes its connection
/// after it. Counts the connections it accepted.
async fn scripted(answers: Vec<(&'static [u8], bool)>) -> (SocketAddr, Arc<AtomicUsize>) {
    let accepted = Arc::new(AtomicUsize::new(0));
    let answers = Arc::new(Mutex::new(answers.into_iter()));
    let counted = accepted.clone();
    let addr = raw_upstream(move |mut s| {
        counted.fetch_add(1, Ordering::SeqCst);
        let answers = answers.clone();
        async move {
            let mut seen = Vec::new();
            while read_request_head(&mut s, &mut seen).await {
                let next = answers.lock().unwrap().next();
                let Some((answer, close)) = next else { return };
                if s.write_all(answer).await.is_err() || close {
                    return;
                }
            }
        }
    })
    .await;
    (addr, accepted)
}

#[tokio::test]
async fn a_chunked_answer_arrives_whole_and_its_connection_is_reused() {
    let (upstream, accepted) = scripted(vec![
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5;name=value\r\nhello\r\n6\r\n world\r\n0\r\nx-sum: 42\r\n\r\n",
            false,
        ),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", false),
    ])
    .await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream], "", "")).await;
    assert_eq!(get(addr, "/").await.body, "hello world");
    assert_eq!(get(addr, "/").await.body, "ok");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one connection for both"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn grpc_trailers_of_an_http1_endpoint_reach_the_client_and_are_classified() {
    let unavailable: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: application/grpc\r\ntransfer-encoding: chunked\r\n\r\n5\r\n\0\0\0\0\0\r\n0\r\ngrpc-status: 14\r\n\r\n";
    let (upstream, accepted) = scripted(vec![(unavailable, false); 3]).await;
    let cluster = r#"breaker = { window = { kind = "count", size = 3 }, minimum_calls = 3, failure_rate_threshold = 0.5, open_duration = "30s" }"#;
    let (proxy, running, addr, _clock) = start_proxy(&config(&[upstream], "", cluster)).await;
    // A gRPC client speaks HTTP/2: trailers reach it.
    let h2: hyper_util::client::legacy::Client<_, http_body_util::Full<bytes::Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .http2_only(true)
            .build_http();
    for _ in 0..3 {
        let req = http::Request::post(format!("http://{addr}/pkg.Service/Call"))
            .header("content-type", "application/grpc")
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        let response = tokio::time::timeout(BOUND, h2.request(req))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(response.status(), 200);
        use http_body_util::BodyExt;
        let body = tokio::time::timeout(BOUND, response.into_body().collect())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(body.trailers().unwrap()["grpc-status"], "14");
        assert_eq!(&body.to_bytes()[..], b"\0\0\0\0\0");
    }
    let breaker = endpoint_breaker(&proxy, upstream);
    tokio::time::timeout(BOUND, async {
        while breaker.metrics().calls.failed < 3 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("UNAVAILABLE in the trailers is a failure");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "the trailers end the body in step"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn an_answer_until_close_arrives_whole_and_its_connection_is_not_reused() {
    let (upstream, accepted) = scripted(vec![
        (b"HTTP/1.1 200 OK\r\n\r\nuntil the end", true),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", false),
    ])
    .await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream], "", "")).await;
    assert_eq!(get(addr, "/").await.body, "until the end");
    assert_eq!(get(addr, "/").await.body, "ok");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    running.shutdown().await;
}

#[tokio::test]
async fn answers_without_a_body_keep_the_connection_in_step() {
    let (upstream, accepted) = scripted(vec![
        // An answer to HEAD names its length but carries no body.
        (b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n", false),
        (b"HTTP/1.1 204 No Content\r\n\r\n", false),
        (
            b"HTTP/1.1 304 Not Modified\r\ncontent-length: 9\r\n\r\n",
            false,
        ),
        (
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
            false,
        ),
    ])
    .await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream], "", "")).await;
    let head = send(addr, "HEAD", "/", &[]).await;
    assert_eq!(
        (head.status, head.header("content-length")),
        (200, Some("5"))
    );
    assert_eq!(head.body, "");
    assert_eq!(get(addr, "/").await.status, 204);
    assert_eq!(get(addr, "/").await.status, 304);
    let last = get(addr, "/").await;
    assert_eq!((last.status, last.body.as_str()), (200, "ok"));
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one connection for all four"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn bytes_after_an_answer_retire_its_connection() {
    let (upstream, accepted) = scripted(vec![
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokEXTRA",
            false,
        ),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nnew", false),
    ])
    .await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream], "", "")).await;
    assert_eq!(get(addr, "/").await.body, "ok");
    assert_eq!(get(addr, "/").await.body, "new");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "the out-of-step connection was closed"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn an_answer_with_conflicting_framing_is_a_502_and_a_failure() {
    let (upstream, _) = scripted(vec![(
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        false,
    )])
    .await;
    let (proxy, running, addr, _clock) = start_proxy(&config(&[upstream], "", "")).await;
    assert_eq!(get(addr, "/").await.status, 502);
    assert_eq!(endpoint_breaker(&proxy, upstream).window().failures, 1);
    running.shutdown().await;
}

#[tokio::test]
async fn an_endpoints_own_reason_phrase_reaches_the_client() {
    use tokio::io::AsyncReadExt;
    let (upstream, _) = scripted(vec![
        (
            b"HTTP/1.1 503 Busy, come back later\r\ncontent-length: 0\r\n\r\n",
            false,
        ),
        (b"HTTP/1.1 200 Fine\r\ncontent-length: 2\r\n\r\nok", false),
        (
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            false,
        ),
    ])
    .await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream], "", "")).await;
    // A bodiless request (the proxy's own HTTP/1.1 on both sides), then
    // two with a body (hyper's, on both sides).
    let requests = [
        "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\ncontent-length: 1\r\n\r\nx",
        "POST / HTTP/1.1\r\nHost: x\r\ncontent-length: 1\r\n\r\nx",
    ];
    let expected = [
        "HTTP/1.1 503 Busy, come back later\r\n",
        "HTTP/1.1 200 Fine\r\n",
        "HTTP/1.1 404 Not Found\r\n",
    ];
    for (request, status_line) in requests.iter().zip(expected) {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut head = vec![0u8; 256];
        let n = tokio::time::timeout(BOUND, stream.read(&mut head))
            .await
            .expect("answered")
            .unwrap();
        let head = String::from_utf8_lossy(&head[..n]).into_owned();
        assert!(head.starts_with(status_line), "{request:?}: {head}");
    }
    running.shutdown().await;
}
