//! Readiness, liveness and the operator's drain on the admin listener:
//! what an orchestrator reads during a rolling restart.

use std::net::SocketAddr;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::admin_api::{TOKEN, authorized};
use crate::support::*;
use tripline_proxy::Running;

fn json(answer: &Answer) -> Value {
    serde_json::from_str(&answer.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", answer.body))
}

/// A proxy in front of an answering upstream, its admin listener guarded
/// by the token.
async fn proxy() -> (Running, SocketAddr, SocketAddr, Upstream) {
    let upstream = Upstream::start(|_| respond(200, "ok")).await;
    let text = format!(
        "{}\n[admin]\naddress = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n",
        config(&[upstream.addr], "", "")
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    (running, addr, admin, upstream)
}

/// Two keep-alive requests on one connection: the first answer's head,
/// and whether the connection took the second.
async fn two_on_one_connection(addr: SocketAddr) -> (String, bool) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = b"GET / HTTP/1.1\r\nhost: test\r\n\r\n";
    stream.write_all(request).await.unwrap();
    let mut first = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&first).contains("\r\n\r\nok") {
        let n = tokio::time::timeout(BOUND, stream.read(&mut buf))
            .await
            .expect("answered")
            .unwrap();
        assert!(n > 0, "closed before the first answer");
        first.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&first).to_lowercase();
    let _ = stream.write_all(request).await;
    let second = tokio::time::timeout(BOUND, stream.read(&mut buf))
        .await
        .expect("the second request is answered or the connection closed");
    (head, matches!(second, Ok(n) if n > 0))
}

#[tokio::test]
async fn ready_and_live_once_started_and_the_drain_turns_ready_off_and_closes_connections() {
    let (running, addr, admin, _upstream) = proxy().await;
    let ready = send(admin, "GET", "/ready", &[]).await;
    assert_eq!(
        (ready.status, json(&ready)["ready"].clone()),
        (200, true.into())
    );
    let live = send(admin, "GET", "/healthz", &[]).await;
    assert_eq!(live.status, 200);
    let (head, kept) = two_on_one_connection(addr).await;
    assert!(!head.contains("connection: close") && kept, "{head}");

    // The drain is a mutating call: the token is needed.
    assert_eq!(send(admin, "POST", "/api/drain", &[]).await.status, 401);
    let drained = authorized(admin, "POST", "/api/drain", "").await;
    assert_eq!(drained.status, 200, "{}", drained.body);
    assert_eq!(json(&drained)["draining"], true);

    let ready = send(admin, "GET", "/ready", &[]).await;
    assert_eq!(ready.status, 503);
    assert_eq!(json(&ready)["reason"], "drain_requested");
    // Still live, still serving, but each HTTP/1 connection closes after
    // its answer (the fast path's and hyper's alike: a POST goes to hyper).
    assert_eq!(send(admin, "GET", "/healthz", &[]).await.status, 200);
    let (head, kept) = two_on_one_connection(addr).await;
    assert!(head.contains("connection: close"), "{head}");
    assert!(!kept, "the connection closed after its answer");
    let posted = send_body(addr, "POST", "/", &[], bytes::Bytes::from_static(b"x")).await;
    assert_eq!(posted.header("connection"), Some("close"));

    // Audited, and undone by DELETE.
    let audit = send(admin, "GET", "/api/audit", &[]).await;
    assert!(
        audit.body.contains("\"action\":\"drain\""),
        "{}",
        audit.body
    );
    assert_eq!(
        authorized(admin, "DELETE", "/api/drain", "").await.status,
        200
    );
    assert_eq!(send(admin, "GET", "/ready", &[]).await.status, 200);
    let (head, kept) = two_on_one_connection(addr).await;
    assert!(!head.contains("connection: close") && kept, "{head}");
    running.shutdown().await;
}

#[tokio::test]
async fn readiness_paths_take_only_get() {
    let (running, _addr, admin, _upstream) = proxy().await;
    for path in ["/ready", "/healthz"] {
        let answer = authorized(admin, "POST", path, "").await;
        assert_eq!(answer.status, 405, "{path}");
        assert_eq!(answer.header("allow"), Some("GET"));
    }
    running.shutdown().await;
}
