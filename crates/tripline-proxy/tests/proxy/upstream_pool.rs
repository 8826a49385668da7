//! The keep-alive pool for HTTP/1.1 endpoints, seen from the endpoint:
//! connections are reused, a connection the endpoint closes is not used
//! again, and idle connections past the pool's limits are closed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::AsyncWriteExt;
use tokio::sync::{Semaphore, mpsc};

use crate::support::*;

/// What the endpoint saw: connections accepted, requests arrived (before
/// they are answered) and connections the proxy closed.
struct Seen {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    arrivals: mpsc::UnboundedReceiver<()>,
    closed: mpsc::UnboundedReceiver<()>,
}

/// A keep-alive endpoint answering `ok` to every request once `gate`
/// gives a permit; with `close_each`, it answers `connection: close` and
/// closes the connection after each answer.
async fn endpoint(gate: Arc<Semaphore>, close_each: bool) -> Seen {
    let accepted = Arc::new(AtomicUsize::new(0));
    let (arrived, arrivals) = mpsc::unbounded_channel();
    let (closed_tx, closed) = mpsc::unbounded_channel();
    let counted = accepted.clone();
    let addr = raw_upstream(move |mut s| {
        counted.fetch_add(1, Ordering::SeqCst);
        let (gate, arrived, closed_tx) = (gate.clone(), arrived.clone(), closed_tx.clone());
        async move {
            let mut seen = Vec::new();
            loop {
                if !read_request_head(&mut s, &mut seen).await {
                    let _ = closed_tx.send(());
                    return;
                }
                let _ = arrived.send(());
                gate.acquire().await.unwrap().forget();
                let answer: &[u8] = if close_each {
                    b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok"
                } else {
                    b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
                };
                if s.write_all(answer).await.is_err() || close_each {
                    return;
                }
            }
        }
    })
    .await;
    Seen {
        addr,
        accepted,
        arrivals,
        closed,
    }
}

fn open_gate() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(Semaphore::MAX_PERMITS))
}

fn with_proxy_section(config: String, section: &str) -> String {
    format!("[proxy]\n{section}\n\n{config}")
}

#[tokio::test]
async fn one_keep_alive_connection_carries_sequential_requests() {
    let seen = endpoint(open_gate(), false).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[seen.addr], "", "")).await;
    for _ in 0..20 {
        let answer = get(addr, "/").await;
        assert_eq!((answer.status, answer.body.as_str()), (200, "ok"));
    }
    assert_eq!(seen.accepted.load(Ordering::SeqCst), 1);
    running.shutdown().await;
}

#[tokio::test]
async fn a_connection_the_endpoint_closes_is_not_used_again() {
    let seen = endpoint(open_gate(), true).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[seen.addr], "", "")).await;
    for i in 0..10 {
        // POST: a request sent on a dead connection could not be retried.
        let answer = send(addr, "POST", "/orders", &[]).await;
        assert_eq!(answer.status, 200, "request {i}: {answer:?}");
    }
    assert_eq!(seen.accepted.load(Ordering::SeqCst), 10);
    running.shutdown().await;
}

#[tokio::test]
async fn idle_connections_are_closed_after_the_pool_idle_timeout() {
    let mut seen = endpoint(open_gate(), false).await;
    let config = with_proxy_section(
        config(&[seen.addr], "", ""),
        "pool_idle_timeout = \"200ms\"",
    );
    let (_proxy, running, addr, _clock) = start_proxy(&config).await;
    assert_eq!(get(addr, "/").await.status, 200);
    tokio::time::timeout(BOUND, seen.closed.recv())
        .await
        .expect("the idle connection is closed by the proxy");
    assert_eq!(get(addr, "/").await.status, 200);
    assert_eq!(seen.accepted.load(Ordering::SeqCst), 2, "a new connection");
    running.shutdown().await;
}

#[tokio::test]
async fn idle_connections_beyond_the_per_endpoint_limit_are_closed() {
    let gate = Arc::new(Semaphore::new(0));
    let mut seen = endpoint(gate.clone(), false).await;
    let config = with_proxy_section(
        config(&[seen.addr], "", ""),
        "pool_max_idle_per_endpoint = 1",
    );
    let (_proxy, running, addr, _clock) = start_proxy(&config).await;
    // Three requests at once need three connections.
    let requests: Vec<_> = (0..3).map(|_| tokio::spawn(get(addr, "/"))).collect();
    for _ in 0..3 {
        tokio::time::timeout(BOUND, seen.arrivals.recv())
            .await
            .unwrap();
    }
    gate.add_permits(3);
    for request in requests {
        assert_eq!(request.await.unwrap().status, 200);
    }
    // Only one may stay idle: the two others are closed.
    for _ in 0..2 {
        tokio::time::timeout(BOUND, seen.closed.recv())
            .await
            .expect("an idle connection over the limit is closed");
    }
    gate.add_permits(1);
    assert_eq!(get(addr, "/").await.status, 200);
    assert_eq!(
        seen.accepted.load(Ordering::SeqCst),
        3,
        "the idle one reused"
    );
    assert!(seen.closed.try_recv().is_err());
    running.shutdown().await;
}
