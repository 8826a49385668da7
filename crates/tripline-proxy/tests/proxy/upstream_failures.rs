//! Upstreams that hang, close mid-answer or refuse connections: the client
//! always gets a clear answer, never a hung connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::*;

/// Reads the request head, then runs `then`.
async fn read_head(stream: &mut tokio::net::TcpStream) {
    let mut buf = vec![0u8; 4096];
    let mut seen = Vec::new();
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test]
async fn a_hanging_upstream_gets_504_within_the_per_try_timeout() {
    let upstream = raw_upstream(|mut s| async move {
        read_head(&mut s).await;
        // Never answer; hold the socket until the test's bound.
        tokio::time::sleep(BOUND).await;
    })
    .await;
    let route = r#"timeout = { per_try = "200ms" }"#;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream], route, "")).await;
    let start = Instant::now();
    let answer = get(addr, "/").await;
    let took = start.elapsed();
    assert_eq!(answer.status, 504);
    assert_eq!(answer.header("x-tripline-flag"), Some("UT"));
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_secs(5),
        "{took:?}"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn an_upstream_closing_before_its_answer_is_whole_gives_502() {
    let upstream = raw_upstream(|mut s| async move {
        read_head(&mut s).await;
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-").await;
        // Dropped: the connection closes mid-head.
    })
    .await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream], "", "")).await;
    let answer = get(addr, "/").await;
    assert_eq!(answer.status, 502);
    assert_eq!(
        answer.header("x-tripline-rejected"),
        None,
        "a failure, not a refusal"
    );
    assert_eq!(answer.header("x-tripline-flag"), Some("UC"));
    running.shutdown().await;
}

#[tokio::test]
async fn an_upstream_resetting_the_connection_gives_502_and_is_retried() {
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    let upstream = raw_upstream(move |mut s| {
        counted.fetch_add(1, Ordering::SeqCst);
        async move {
            read_head(&mut s).await;
            // SO_LINGER 0: the close sends RST, not FIN.
            s.set_zero_linger().unwrap();
        }
    })
    .await;
    let route = "retry = { attempts = 2 }";
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream], route, "")).await;
    let answer = get(addr, "/").await;
    assert_eq!(answer.status, 502);
    assert_eq!(answer.header("x-tripline-flag"), Some("UC"));
    assert_eq!(
        connections.load(Ordering::SeqCst),
        2,
        "a reset is a failure the route retries"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn an_upstream_closing_mid_body_breaks_the_client_body_and_counts_as_a_failure() {
    let upstream = raw_upstream(|mut s| async move {
        read_head(&mut s).await;
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
            .await;
    })
    .await;
    let (proxy, running, addr, _clock) = start_proxy(&config(&[upstream], "", "")).await;
    let req = http::Request::get(format!("http://{addr}/"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    // The proxy may have the answer's head out before it meets the close
    // (then the client's body breaks) or not (then its connection does):
    // either way the client sees an error, never a short body as whole.
    let answer = tokio::time::timeout(BOUND, client().request(req))
        .await
        .expect("the answer ends, never hangs");
    if let Ok(response) = answer {
        assert_eq!(response.status(), 200);
        use http_body_util::BodyExt;
        let body = tokio::time::timeout(BOUND, response.into_body().collect())
            .await
            .expect("the body ends, never hangs");
        assert!(body.is_err(), "a truncated body is an error for the client");
    }
    let endpoint = proxy
        .cluster("backend")
        .unwrap()
        .endpoint(&upstream.to_string())
        .unwrap();
    tokio::time::timeout(BOUND, async {
        while endpoint.breaker().window().failures == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the endpoint's breaker counts the broken body");
    running.shutdown().await;
}

#[tokio::test]
async fn a_refused_connection_is_a_connect_failure() {
    // Bind and drop: nothing listens on the port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[port], "", "")).await;
    let answer = get(addr, "/").await;
    assert_eq!(answer.status, 503);
    assert_eq!(answer.header("x-tripline-flag"), Some("UF"));
    running.shutdown().await;
}

#[tokio::test]
async fn an_endpoint_that_stops_reading_is_given_up_after_the_stall_timeout() {
    // No timeout on the route: only the stall timeout ends the try.
    let stalled = unreading_upstream().await;
    assert_given_up_after_the_stall_timeout(&config(&[stalled], "", "")).await;
}
