//! The access log: one JSON line per request, with every try, written by
//! a task of its own and flushed on drain.

use std::net::SocketAddr;

use crate::support::*;

fn log_config(bad: SocketAddr, good: SocketAddr, path: &std::path::Path) -> String {
    format!(
        r#"
[[listeners]]
address = "127.0.0.1:0"

[[routes]]
name = "api"
cluster = "backend"
match = {{ path_prefix = "/api" }}
retry = {{ attempts = 2 }}

[[routes]]
name = "plain"
cluster = "solo"
match = {{ path_prefix = "/plain" }}

[clusters.backend]
endpoints = ["{bad}", "{good}"]

[clusters.solo]
endpoints = ["{good}"]

[access_log]
mode = "full"
path = {path:?}
"#
    )
}

#[tokio::test]
async fn every_request_gets_a_line_with_its_tries_written_by_the_drain() {
    let bad = Upstream::start(|_| respond(502, "bad gateway")).await;
    let good = Upstream::start(|_| respond(200, "good")).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let (_proxy, running, addr, _clock) =
        start_proxy(&log_config(bad.addr, good.addr, &path)).await;
    assert_eq!(get(addr, "/api/users?id=7").await.status, 200);
    assert_eq!(get(addr, "/plain").await.status, 200);
    assert_eq!(get(addr, "/elsewhere").await.status, 404);
    assert!(running.shutdown().await.complete);

    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{text}");

    let retried = &lines[0];
    assert_eq!(retried["route"], "api");
    assert_eq!(retried["cluster"], "backend");
    assert_eq!(retried["method"], "GET");
    assert_eq!(retried["path"], "/api/users");
    assert_eq!(retried["status"], 200);
    assert_eq!(retried["flag"], serde_json::Value::Null);
    assert_eq!(retried["retries"], 1);
    let attempts = retried["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["endpoint"], bad.addr.to_string());
    assert_eq!(attempts[0]["outcome"], "gateway_failure");
    assert_eq!(attempts[1]["endpoint"], good.addr.to_string());
    assert_eq!(attempts[1]["outcome"], "success");
    assert!(attempts[1]["duration_ms"].as_f64().unwrap() >= 0.0);
    assert!(
        retried["duration_ms"].as_f64().unwrap() >= attempts[1]["duration_ms"].as_f64().unwrap()
    );
    let timestamp = retried["timestamp"].as_str().unwrap();
    assert!(
        humantime::parse_rfc3339(timestamp).is_ok(),
        "RFC 3339: {timestamp}"
    );
    assert!(retried["peer"].as_str().unwrap().starts_with("127.0.0.1:"));

    let plain = &lines[1];
    assert_eq!(
        (plain["route"].as_str(), plain["cluster"].as_str()),
        (Some("plain"), Some("solo"))
    );
    assert_eq!(plain["retries"], 0);
    assert_eq!(plain["attempts"].as_array().unwrap().len(), 1);

    let refused = &lines[2];
    assert_eq!(refused["route"], serde_json::Value::Null);
    assert_eq!(refused["status"], 404);
    assert_eq!(refused["flag"], "NR");
    assert_eq!(refused["attempts"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn an_unwritable_log_path_fails_the_start() {
    let a = Upstream::start(|_| respond(200, "a")).await;
    let b = Upstream::start(|_| respond(200, "b")).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-such-dir").join("access.log");
    let config =
        tripline_proxy::config::ProxyConfig::from_toml(&log_config(a.addr, b.addr, &path)).unwrap();
    let proxy = tripline_proxy::Proxy::try_new(config).unwrap();
    assert!(proxy.start().await.is_err());
}

#[tokio::test]
async fn a_try_spoiled_by_the_clients_own_body_is_logged_as_such() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let other = Upstream::start(|_| respond(200, "other")).await;
    let good = Upstream::start(|_| respond(200, "good")).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let (_proxy, running, addr, _clock) =
        start_proxy(&log_config(other.addr, good.addr, &path)).await;
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let malformed = b"POST /plain HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nZZ\r\n";
    stream.write_all(malformed).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(BOUND, stream.read_to_end(&mut answer))
        .await
        .expect("answered and closed")
        .unwrap();
    assert!(answer.starts_with(b"HTTP/1.1 400"));
    drop(stream);
    assert!(running.shutdown().await.complete);

    let text = std::fs::read_to_string(&path).unwrap();
    let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(line["status"], 400, "{text}");
    assert_eq!(line["flag"], "DPE");
    let attempts = line["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{text}");
    assert_eq!(attempts[0]["endpoint"], good.addr.to_string());
    assert_eq!(attempts[0]["outcome"], "client_body");
}
