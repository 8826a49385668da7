//! Route breakers per tenant: one tenant's failures open only its breaker.

use tripline::State;

use crate::scrape::*;
use crate::support::*;

const ROUTE: &str = r#"
breaker = { window = { kind = "count", size = 2 }, minimum_calls = 2, failure_rate_threshold = 0.5, open_duration = "30s" }
breaker_key = { header = "x-tenant", max_breakers = 2, overflow = "reject" }
"#;

/// Endpoint breakers that will not trip within a test: only route
/// breakers are under test.
const PATIENT_ENDPOINTS: &str =
    r#"breaker = { window = { kind = "count", size = 1000 }, minimum_calls = 1000 }"#;

#[tokio::test]
async fn tenant_a_failures_open_only_tenant_a_breaker() {
    // The upstream fails every request of tenant a.
    let upstream = Upstream::start(|req| match req.headers().get("x-tenant") {
        Some(t) if t == "a" => respond(500, "a is broken"),
        _ => respond(200, "fine"),
    })
    .await;
    let text = format!(
        "{}{ADMIN}",
        config(&[upstream.addr], ROUTE, PATIENT_ENDPOINTS)
    );
    let (proxy, running, addr, _clock) = start_proxy(&text).await;
    let a = [("x-tenant", "a")];
    let b = [("x-tenant", "b")];
    for _ in 0..2 {
        assert_eq!(send(addr, "GET", "/", &a).await.status, 500);
    }
    let refused = send(addr, "GET", "/", &a).await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("x-tripline-rejected"), Some("circuit_open"));
    assert_eq!(
        refused.header("x-tripline-breaker"),
        Some("api:a"),
        "names a's breaker"
    );
    assert_eq!(refused.header("retry-after"), Some("30"));
    assert_eq!(upstream.hits(), 2);

    for _ in 0..3 {
        let answer = send(addr, "GET", "/", &b).await;
        assert_eq!(
            (answer.status, answer.body.as_str()),
            (200, "fine"),
            "b is still served"
        );
    }
    let breakers = proxy.route_breakers("api").unwrap();
    assert_eq!(
        breakers.peek(&Some("a".into())).unwrap().state(),
        State::Open
    );
    assert_eq!(
        breakers.peek(&Some("b".into())).unwrap().state(),
        State::Closed
    );
    assert_eq!(
        proxy.route_breaker("api").map(|b| b.name().to_owned()),
        None
    );

    // Two breakers exist, the bound: a third key is refused by the
    // registry's `reject` overflow, and says so.
    let c = send(addr, "GET", "/", &[("x-tenant", "c")]).await;
    assert_eq!(c.status, 503);
    assert_eq!(c.header("x-tripline-breaker"), Some("api:overflow"));
    assert_eq!(breakers.len(), 2);

    // Metrics: the family's aggregate, no series per tenant.
    let text = scrape(&running).await;
    assert!(!text.contains("api:a"), "no per-key series:\n{text}");
    assert!(
        text.contains(r#"family="api""#),
        "the family's aggregate:\n{text}"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn an_idle_tenant_breaker_is_evicted_on_the_proxy_clock() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let route = r#"
breaker = { minimum_calls = 10 }
breaker_key = { header = "x-tenant", idle_ttl = "60s" }
"#;
    let (proxy, running, addr, clock) = start_proxy(&config(&[upstream.addr], route, "")).await;
    assert_eq!(
        send(addr, "GET", "/", &[("x-tenant", "a")]).await.status,
        200
    );
    let breakers = proxy.route_breakers("api").unwrap();
    assert!(breakers.peek(&Some("a".into())).is_some());
    // Tenant b keeps calling every 31 s; the eviction pass runs from the
    // request path at most every half TTL, and a goes quiet.
    for _ in 0..5 {
        clock.advance(std::time::Duration::from_secs(31));
        assert_eq!(
            send(addr, "GET", "/", &[("x-tenant", "b")]).await.status,
            200
        );
    }
    assert!(
        breakers.peek(&Some("a".into())).is_none(),
        "a idle for 155 s: evicted"
    );
    assert!(
        breakers.peek(&Some("b".into())).is_some(),
        "b is busy: kept"
    );
    running.shutdown().await;
}
