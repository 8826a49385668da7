//! Fallbacks: a fixed answer or a secondary cluster instead of a refusal
//! or a failure, always marked degraded, counted, and never hiding the
//! failure from the breakers.

use tripline::State;

use crate::scrape::*;
use crate::support::*;

const BREAKER: &str = r#"breaker = { window = { kind = "count", size = 2 }, minimum_calls = 2, failure_rate_threshold = 0.5, open_duration = "30s" }"#;

#[tokio::test]
async fn a_fixed_fallback_replaces_failures_and_the_open_breaker_and_says_so() {
    let upstream = Upstream::start(|_| respond(500, "boom")).await;
    let route = format!(
        "{BREAKER}\nfallback = {{ status = 200, body = \"[]\", content_type = \"application/json\", on = [\"circuit_open\", \"upstream_failure\"] }}"
    );
    let text = format!("{}{ADMIN}", config(&[upstream.addr], &route, ""));
    let (proxy, running, addr, _clock) = start_proxy(&text).await;
    for _ in 0..2 {
        let answer = get(addr, "/").await;
        assert_eq!((answer.status, answer.body.as_str()), (200, "[]"));
        assert_eq!(
            answer.header("x-tripline-degraded"),
            Some("upstream_failure")
        );
        assert_eq!(answer.header("content-type"), Some("application/json"));
    }
    // The replaced 500s still reached the breaker (read to their end in
    // the background): wait for it to open, bounded.
    let breaker = proxy.route_breaker("api").unwrap();
    tokio::time::timeout(BOUND, async {
        while breaker.state() != State::Open {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the fallback does not hide failures from the breaker");
    let answer = get(addr, "/").await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "[]"));
    assert_eq!(answer.header("x-tripline-degraded"), Some("circuit_open"));
    assert_eq!(
        answer.header("x-tripline-rejected"),
        None,
        "a degraded answer, not a refusal"
    );
    assert_eq!(upstream.hits(), 2);

    let metrics = scrape(&running).await;
    let series = |reason: &str| {
        value(
            &metrics,
            &format!(r#"tripline_proxy_fallbacks_total{{route="api",reason="{reason}"}}"#),
        )
    };
    assert_eq!(series("upstream_failure"), Some(2.0), "{metrics}");
    assert_eq!(series("circuit_open"), Some(1.0));
    assert_eq!(
        series("no_healthy_endpoint"),
        Some(0.0),
        "every series exists up front"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn a_cause_not_listed_is_not_replaced() {
    let upstream = Upstream::start(|_| respond(500, "boom")).await;
    let route = r#"fallback = { status = 200, body = "cached", on = ["circuit_open"] }"#;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], route, "")).await;
    let answer = get(addr, "/").await;
    assert_eq!((answer.status, answer.body.as_str()), (500, "boom"));
    assert_eq!(answer.header("x-tripline-degraded"), None);
    running.shutdown().await;
}

/// A config whose route `api` falls back to cluster `secondary`.
fn with_secondary(primary: std::net::SocketAddr, secondary: std::net::SocketAddr) -> String {
    format!(
        r#"[[listeners]]
address = "127.0.0.1:0"

[[routes]]
name = "api"
cluster = "primary"
retry = {{ attempts = 1 }}
fallback = {{ cluster = "secondary", on = ["upstream_connect_failure", "no_healthy_endpoint", "upstream_failure"] }}

[clusters.primary]
endpoints = ["{primary}"]
breaker = {{ window = {{ kind = "count", size = 1 }}, minimum_calls = 1, open_duration = "30s" }}

[clusters.secondary]
endpoints = ["{secondary}"]

[admin]
address = "127.0.0.1:0"
"#
    )
}

#[tokio::test]
async fn a_secondary_cluster_answers_when_the_primary_fails_or_refuses() {
    // A port nobody listens on: connections are refused.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let secondary = Upstream::start(|req| {
        let body = if req.method() == "POST" {
            "secondary took the post"
        } else {
            "secondary"
        };
        respond(200, body)
    })
    .await;
    let (proxy, running, addr, _clock) = start_proxy(&with_secondary(closed, secondary.addr)).await;
    let answer = send_body(
        addr,
        "POST",
        "/orders",
        &[],
        bytes::Bytes::from_static(b"{}"),
    )
    .await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (200, "secondary took the post")
    );
    assert_eq!(
        answer.header("x-tripline-degraded"),
        Some("upstream_connect_failure")
    );
    assert_eq!(
        secondary.bodies.lock().unwrap().as_slice(),
        [bytes::Bytes::from_static(b"{}")],
        "a body never sent to the primary goes whole to the secondary"
    );
    // The primary endpoint's breaker opened on that failure: now the
    // primary refuses, and the secondary answers that too.
    let primary = proxy.cluster("primary").unwrap();
    assert_eq!(
        primary
            .endpoint(&closed.to_string())
            .unwrap()
            .breaker()
            .state(),
        State::Open
    );
    let answer = get(addr, "/").await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "secondary"));
    assert_eq!(
        answer.header("x-tripline-degraded"),
        Some("no_healthy_endpoint")
    );
    let metrics = scrape(&running).await;
    assert_eq!(
        value(
            &metrics,
            r#"tripline_proxy_fallbacks_total{route="api",reason="no_healthy_endpoint"}"#
        ),
        Some(1.0)
    );
    running.shutdown().await;
}
