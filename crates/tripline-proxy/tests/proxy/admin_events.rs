//! `GET /api/events`: a transition caused by traffic arrives in the
//! documented shape; a client that does not read loses events, counted,
//! and never slows a breaker down.

use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use serde_json::Value;

use crate::admin_api::failing_proxy;
use crate::support::*;

#[tokio::test]
async fn the_event_stream_carries_a_transition_caused_by_traffic() {
    let (_proxy, running, addr, admin, _upstream) = failing_proxy("").await;
    let req = Request::get(format!("http://{admin}/api/events"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = tokio::time::timeout(BOUND, client().request(req))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    // The stream opens with a comment: the subscription is live.
    let first = tokio::time::timeout(BOUND, body.frame())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(first.data_ref().unwrap().starts_with(b": "));

    for _ in 0..4 {
        assert_eq!(get(addr, "/").await.status, 500);
    }
    let mut text = String::new();
    let event = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let frame = body.frame().await.unwrap().unwrap();
            text.push_str(&String::from_utf8_lossy(frame.data_ref().unwrap()));
            if let Some(at) = text.find("event: transition\ndata: ") {
                let rest = &text[at + "event: transition\ndata: ".len()..];
                if let Some(end) = rest.find("\n\n") {
                    let data: Value = serde_json::from_str(&rest[..end]).unwrap();
                    if data["breaker"] == "api" {
                        return data;
                    }
                    text = rest[end..].to_owned();
                }
            }
        }
    })
    .await
    .expect("a transition event within 5 s");
    assert_eq!(event["from"], "closed");
    assert_eq!(event["to"], "open");
    assert_eq!(event["reason"], "failure_rate");
    assert_eq!(event["window"]["calls"], 4);
    assert_eq!(event["window"]["failures"], 4);
    assert_eq!(event["window"]["slow"], 0);
    assert!(humantime::parse_rfc3339(event["at"].as_str().unwrap()).is_ok());
    assert!(
        event["message"]
            .as_str()
            .unwrap()
            .starts_with("api: closed → open")
    );
    drop(body);
    assert!(running.shutdown().await.complete);
}

#[tokio::test]
async fn a_client_that_does_not_read_loses_events_counted_and_never_slows_the_breakers() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let (proxy, running, _addr, admin, _upstream) = failing_proxy("").await;
    // A client that reads nothing for a while.
    let mut stream = tokio::net::TcpStream::connect(admin).await.unwrap();
    stream
        .write_all(b"GET /api/events HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut head = [0u8; 256];
    let n = tokio::time::timeout(BOUND, stream.read(&mut head))
        .await
        .unwrap()
        .unwrap();
    assert!(head[..n].starts_with(b"HTTP/1.1 200"));

    // 3 000 transitions in a row on the test's one runtime thread, so the
    // stream's task cannot run meanwhile: three times what the feed holds.
    // Had a breaker waited for the stream, this would never finish.
    let breaker = proxy.route_breaker("api").unwrap();
    for _ in 0..1_500 {
        breaker.force_open();
        breaker.reset();
    }

    let mut text = String::new();
    let dropped = tokio::time::timeout(BOUND, async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "the stream stays open");
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
            if let Some(at) = text.find("event: dropped\ndata: ") {
                let rest = &text[at + "event: dropped\ndata: ".len()..];
                if let Some(end) = rest.find("\n") {
                    return serde_json::from_str::<Value>(&rest[..end]).unwrap();
                }
            }
            // Keep only the tail: a marker may straddle two reads.
            if text.len() > 8192 {
                let cut = (text.len() - 512..text.len())
                    .find(|i| text.is_char_boundary(*i))
                    .unwrap();
                text = text[cut..].to_owned();
            }
        }
    })
    .await
    .expect("the stream reports the events this client missed");
    assert!(dropped["dropped"].as_u64().unwrap() > 0, "{dropped}");
    assert_eq!(dropped["dropped"], dropped["total"], "the first report");
    drop(stream);
    assert!(running.shutdown().await.complete);
}

#[tokio::test(start_paused = true)]
async fn an_idle_stream_gets_a_keep_alive_comment_every_15_seconds() {
    let (_proxy, running, _addr, admin, _upstream) = failing_proxy("").await;
    let req = Request::get(format!("http://{admin}/api/events"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = client().request(req).await.unwrap();
    let mut body = response.into_body();
    let opened = body.frame().await.unwrap().unwrap();
    assert_eq!(opened.data_ref().unwrap(), ": tripline events\n\n");
    // Paused time: the runtime jumps to the next timer when idle.
    let start = tokio::time::Instant::now();
    let next = tokio::time::timeout(Duration::from_secs(20), body.frame())
        .await
        .expect("a keep-alive within 20 s")
        .unwrap()
        .unwrap();
    assert_eq!(next.data_ref().unwrap(), ": keep-alive\n\n");
    assert_eq!(start.elapsed().as_secs(), 15);
    drop(body);
    assert!(running.shutdown().await.complete);
}
