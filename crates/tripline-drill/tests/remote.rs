//! A drill against a proxy it did not build, reached over HTTP only: a
//! real `tripline-proxy` on 127.0.0.1, faults switched and transitions
//! read (`/api/events`) through its own admin listener.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[path = "support/front.rs"]
mod front;

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tripline_drill::{Drill, parse_sse_transition, subscribe_sse};
use tripline_proxy::Proxy;
use tripline_proxy::config::ProxyConfig;

use front::{full, serve, sse_event};

#[test]
fn sse_blocks_other_than_transitions_are_skipped() {
    let block = sse_event("api", "closed", "open", "failure_rate");
    assert_eq!(
        parse_sse_transition(&block),
        Some((
            "api".into(),
            "closed".into(),
            "open".into(),
            "failure_rate".into()
        ))
    );
    assert_eq!(parse_sse_transition(": keep-alive\n\n"), None);
    assert_eq!(parse_sse_transition("event: ping\ndata: {}\n\n"), None);
    assert_eq!(
        parse_sse_transition("event: transition\ndata: not json\n\n"),
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drill_against_a_running_proxy_trips_recovers_and_clears_its_faults() {
    let upstream = serve(|_req| async { Response::new(full("ok")) }).await;
    let config = ProxyConfig::from_toml(&format!(
        r#"
[[listeners]]
address = "127.0.0.1:0"
[admin]
address = "127.0.0.1:0"
[[routes]]
name = "api"
cluster = "backend"
breaker = {{ window = {{ kind = "count", size = 10 }}, minimum_calls = 5, failure_rate_threshold = 0.5, open_duration = "500ms" }}
[clusters.backend]
endpoints = ["{upstream}"]
"#
    ))
    .unwrap();
    let proxy = Proxy::try_new(config).unwrap();
    let running = proxy.start().await.unwrap();
    let admin = running.admin_addr().unwrap();
    let drill = Drill::from_toml(
        "remote.toml",
        &format!(
            r#"
[target]
admin = "http://{admin}"
url = "http://{}"
[load]
rate = 40.0
duration = "6s"
[[phase]]
from = "1s"
to = "2.5s"
route = "api"
abort = {{ status = 503 }}
[expect]
trip_within = "1s"
false_trips = 0
recover_within = "2s"
max_retry_amplification = 1.0
"#,
            running.local_addrs()[0]
        ),
        Path::new("."),
    )
    .unwrap();

    let outcome = tokio::time::timeout(Duration::from_secs(20), tripline_drill::run(&drill))
        .await
        .expect("a drill stops by itself")
        .unwrap();
    assert_eq!(outcome.exit_code(), 0, "{outcome:#?}");
    assert!(
        outcome
            .transitions
            .iter()
            .any(|t| t.breaker == "api" && t.from == "closed" && t.to == "open"),
        "the trip arrived over SSE: {:?}",
        outcome.transitions
    );
    let amplification = outcome.measured.retry_amplification.unwrap();
    assert!(
        amplification > 0.0 && amplification <= 1.0,
        "{amplification}"
    );

    // The drill switched its fault off: none is left on the proxy.
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let res = client
        .get(format!("http://{admin}/api/faults").parse().unwrap())
        .await
        .unwrap();
    let listed: serde_json::Value =
        serde_json::from_slice(&res.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(listed["faults"], serde_json::json!([]), "{listed}");
    running.shutdown().await;
}

#[tokio::test]
async fn a_proxy_without_an_event_stream_is_refused_at_once() {
    let not_found = serve(|_req| async {
        let mut r = Response::new(full("no such page"));
        *r.status_mut() = http::StatusCode::NOT_FOUND;
        r
    })
    .await;
    let err = subscribe_sse(&format!("http://{not_found}"), tokio::time::Instant::now())
        .await
        .err()
        .expect("refused");
    let message = err.to_string();
    assert!(message.contains("/api/events answered 404"), "{message}");
}

#[tokio::test]
async fn an_event_stream_that_ends_is_reported_as_lost() {
    // Two events split across CRLF lines, then the server closes the stream.
    let stream = serve(|_req| async {
        let body = format!(
            "{}{}",
            sse_event("api", "closed", "open", "failure_rate").replace('\n', "\r\n"),
            sse_event("api", "open", "half_open", "open_duration_elapsed")
        );
        Response::new(full(body))
    })
    .await;
    let log = subscribe_sse(&format!("http://{stream}"), tokio::time::Instant::now())
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        while !log.stream_lost() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the end of the stream is noticed");
    let seen: Vec<_> = log
        .snapshot()
        .into_iter()
        .map(|t| (t.from, t.to, t.reason))
        .collect();
    assert_eq!(
        seen,
        [
            ("closed".into(), "open".into(), "failure_rate".into()),
            (
                "open".into(),
                "half_open".into(),
                "open_duration_elapsed".into()
            ),
        ]
    );
}
