//! The proxy fed by a `[config_source]`: a real etcd (Debian package
//! `etcd-server`) or a watched file, a real proxy and upstream on
//! 127.0.0.1, observed through the admin API. Every wait polls with a
//! deadline.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[allow(dead_code)] // shared with the proxy tests; not every helper is used here
#[path = "../proxy/support.rs"]
mod support;

#[path = "../../../tripline-config/tests/support/etcd_server.rs"]
mod etcd_server;

mod bad_input;
mod etcd;
mod file;
mod fleet;
mod patch;
mod shadow;

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;

use serde_json::Value;

/// How long a watched change may take to reach a running proxy in a test.
/// A watch round-trip on loopback takes milliseconds (the tests print it);
/// the bound is generous because a real etcd beside a CI build on two
/// busy cores has taken over a second to deliver an event. It still fails
/// a change that waits for a periodic re-read instead of the watch.
pub const WATCH_BOUND: Duration = Duration::from_secs(5);

/// Polls `check` every 20 ms until it gives `Some`, or panics naming
/// `what` after `within`. A passing run returns as soon as the condition
/// holds, so `within` only bounds a failing one: it is generous (a real
/// etcd beside a CI build on two cores has taken over a second to deliver
/// a watch event), except where the test states a latency goal.
pub async fn until<T, F, Fut>(within: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not seen within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `GET /api/breakers/{name}` as JSON.
pub async fn breaker(admin: SocketAddr, name: &str) -> Value {
    let answer = support::send(admin, "GET", &format!("/api/breakers/{name}"), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    serde_json::from_str(&answer.body).unwrap()
}

/// `GET /api/audit`'s records.
pub async fn audit(admin: SocketAddr) -> Vec<Value> {
    let answer = support::send(admin, "GET", "/api/audit", &[]).await;
    let body: Value = serde_json::from_str(&answer.body).unwrap();
    body["records"].as_array().cloned().unwrap_or_default()
}

/// A proxy config: route `api` (breaker `api`: 0.5 over 10 calls) over
/// cluster `backend` at `upstream`, an admin listener, and `source` as
/// the `[config_source]` body.
pub fn proxy_config(upstream: SocketAddr, source: &str) -> String {
    format!(
        r#"
[[listeners]]
address = "127.0.0.1:0"

[[routes]]
name = "api"
cluster = "backend"
breaker = {{ minimum_calls = 10, failure_rate_threshold = 0.5 }}

[clusters.backend]
endpoints = ["{upstream}"]
breaker = {{ minimum_calls = 1000 }}

[admin]
address = "127.0.0.1:0"

[config_source]
{source}
"#
    )
}
