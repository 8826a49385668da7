//! The proxy explains what its breakers do: a `no_healthy_endpoint`
//! refusal names the cluster and what keeps each endpoint out, the admin
//! API shows an endpoint behind an open breaker as not routable, the
//! route breaker books the proxy's own refusals as ignored (not
//! cancelled), and a breaker's `open_until` is a fixed instant.

use std::time::Duration;

use serde_json::Value;

use crate::support::*;

/// Endpoint breakers that open after two calls, one a failure.
const ENDPOINT_BREAKERS: &str = r#"breaker = { window = { kind = "count", size = 2 }, minimum_calls = 2, failure_rate_threshold = 0.5, open_duration = "10s" }"#;

fn json(answer: &Answer) -> Value {
    serde_json::from_str(&answer.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", answer.body))
}

/// Two endpoints answering 500 behind endpoint breakers and a route
/// breaker that never trips (its minimum is out of reach); requests sent
/// until both endpoint breakers are open.
async fn every_endpoint_open() -> (
    tripline_proxy::Running,
    std::net::SocketAddr,
    std::net::SocketAddr,
    Answer,
) {
    let a = Upstream::start(|_| respond(500, "boom")).await;
    let b = Upstream::start(|_| respond(500, "boom")).await;
    let route = r#"breaker = { minimum_calls = 1000 }"#;
    let text = format!(
        "{}{ADMIN_SECTION}",
        config(&[a.addr, b.addr], route, ENDPOINT_BREAKERS)
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    for _ in 0..8 {
        let answer = get(addr, "/").await;
        if answer.header("x-tripline-flag") == Some("NH") {
            return (running, addr, admin, answer);
        }
        assert_eq!(answer.status, 500, "{}", answer.body);
    }
    panic!("the endpoint breakers never opened");
}

#[tokio::test]
async fn a_no_healthy_endpoint_refusal_names_the_cluster_and_every_open_breaker() {
    let (running, _addr, admin, refused) = every_endpoint_open().await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("x-tripline-cluster"), Some("backend"));
    let body = json(&refused);
    assert_eq!(body["rejected"], "no_healthy_endpoint");
    assert_eq!(body["cluster"], "backend");
    assert_eq!(
        body["detail"],
        "cluster backend: 2 endpoints, 2 with breaker open"
    );

    // The admin view agrees: no endpoint can take a request.
    let outliers = json(&get(admin, "/api/outliers").await);
    let cluster = &outliers["clusters"][0];
    assert_eq!(cluster["routable"], 0, "{cluster}");
    assert_eq!(cluster["outlier_routable"], 2, "{cluster}");
    for endpoint in cluster["endpoints"].as_array().unwrap() {
        assert_eq!(endpoint["breaker_state"], "open");
        assert_eq!(endpoint["routable"], false, "{endpoint}");
    }
    assert!(running.shutdown().await.complete);
}

#[tokio::test]
async fn the_route_breaker_books_the_proxys_own_refusals_as_ignored_not_cancelled() {
    let (running, addr, admin, _refused) = every_endpoint_open().await;
    for _ in 0..3 {
        assert_eq!(get(addr, "/").await.header("x-tripline-flag"), Some("NH"));
    }
    let api = json(&get(admin, "/api/breakers/api").await);
    let calls = &api["calls"];
    assert_eq!(calls["cancelled"], 0, "{calls}");
    assert_eq!(calls["ignored"], 4, "{calls}");
    // Only the endpoints' four answers count, not the refusals.
    assert_eq!(api["window"]["calls"], 4);
    assert_eq!(api["window"]["failures"], 4);
    let cancelled = metric(
        admin,
        "tripline_breaker_calls_total{name=\"api\",outcome=\"cancelled\"}",
    )
    .await;
    assert_eq!(cancelled, Some(0.0));
    assert!(running.shutdown().await.complete);
}

#[tokio::test]
async fn open_until_is_the_deadline_even_after_it_passed() {
    let upstream = Upstream::start(|_| respond(500, "boom")).await;
    let route = r#"breaker = { window = { kind = "count", size = 4 }, minimum_calls = 4, failure_rate_threshold = 0.5, open_duration = "10s" }"#;
    let text = format!("{}{ADMIN_SECTION}", config(&[upstream.addr], route, ""));
    let (_proxy, running, addr, clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    for _ in 0..4 {
        assert_eq!(get(addr, "/").await.status, 500);
    }
    let open_until =
        |api: &Value| humantime::parse_rfc3339(api["open_until"].as_str().unwrap()).unwrap();
    let first = json(&get(admin, "/api/breakers/api").await);
    assert_eq!(first["state"], "open");
    let tripped =
        humantime::parse_rfc3339(first["transitions"][0]["at"].as_str().unwrap()).unwrap();
    assert_eq!(
        open_until(&first).duration_since(tripped).unwrap(),
        Duration::from_secs(10)
    );
    // The wait is over and no call has probed yet: still the same instant.
    clock.advance(Duration::from_secs(15));
    let later = json(&get(admin, "/api/breakers/api").await);
    assert_eq!(later["state"], "open");
    assert_eq!(later["probe_due"], true);
    assert_eq!(open_until(&later), open_until(&first));
    assert!(running.shutdown().await.complete);
}
