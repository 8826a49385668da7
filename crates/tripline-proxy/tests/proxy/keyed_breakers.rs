//! Route breakers per tenant: one tenant's failures open only its breaker.

use tripline::State;
use tripline_proxy::config::ProxyConfig;

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

#[tokio::test]
async fn a_reload_keeps_tenant_breakers_unless_their_family_changes() {
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
    for _ in 0..2 {
        assert_eq!(send(addr, "GET", "/", &a).await.status, 500);
    }
    let open_a = proxy
        .route_breakers("api")
        .unwrap()
        .peek(&Some("a".into()))
        .unwrap();
    assert_eq!(open_a.state(), State::Open);

    // An unrelated change: a route added. Tenant a's breaker is the same
    // one, still open, and still refuses a.
    let added = format!(
        "{text}\n[[routes]]\nname = \"other\"\ncluster = \"backend\"\nmatch = {{ path_prefix = \"/other\" }}\n"
    );
    let report = running
        .reload(ProxyConfig::from_toml(&added).unwrap())
        .unwrap();
    assert_eq!(report.routes_added, ["other"]);
    assert_eq!(report.keyed_breakers_kept, ["api"]);
    let kept = proxy
        .route_breakers("api")
        .unwrap()
        .peek(&Some("a".into()))
        .expect("a's breaker carried over");
    assert!(kept.ptr_eq(&open_a), "the same breaker");
    let refused = send(addr, "GET", "/", &a).await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("x-tripline-rejected"), Some("circuit_open"));
    assert_eq!(refused.header("x-tripline-breaker"), Some("api:a"));
    assert_eq!(upstream.hits(), 2, "a was not let through");
    let answer = send(addr, "GET", "/", &[("x-tenant", "b")]).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "fine"));
    // The family stayed exported, once, its open breaker counted.
    let text_now = scrape(&running).await;
    let open = r#"tripline_registry_breakers{family="api",state="open"}"#;
    assert_eq!(value(&text_now, open), Some(1.0), "{text_now}");
    assert_eq!(text_now.matches(open).count(), 1, "{text_now}");

    // The family's template changed (a longer open duration): a new
    // family, every tenant starting closed, so a reaches the upstream.
    let changed = added.replace("open_duration = \"30s\"", "open_duration = \"40s\"");
    assert_ne!(changed, added);
    let report = running
        .reload(ProxyConfig::from_toml(&changed).unwrap())
        .unwrap();
    assert!(report.keyed_breakers_kept.is_empty(), "{report:?}");
    let fresh = proxy.route_breakers("api").unwrap();
    assert!(
        fresh.peek(&Some("a".into())).is_none(),
        "no breaker for a yet"
    );
    let answer = send(addr, "GET", "/", &a).await;
    assert_eq!((answer.status, answer.body.as_str()), (500, "a is broken"));
    assert_eq!(upstream.hits(), 4, "a let through by its fresh breaker");
    let text_now = scrape(&running).await;
    assert_eq!(value(&text_now, open), Some(0.0), "{text_now}");
    running.shutdown().await;
}

/// `POST /api/breakers/{route}/force-open` on a keyed route holds every
/// tenant's breaker, and those of tenants first seen while it lasts;
/// `reset` gives them all back. Audited, as an action on one breaker is.
#[tokio::test]
async fn an_admin_action_on_a_keyed_route_holds_every_tenant() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let route = ROUTE.replace("max_breakers = 2", "max_breakers = 8");
    let text = format!(
        "{}{ADMIN}",
        config(&[upstream.addr], &route, PATIENT_ENDPOINTS)
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    let tenant = |t: &'static str| async move { send(addr, "GET", "/", &[("x-tenant", t)]).await };
    assert_eq!(tenant("a").await.status, 200);

    let held = send(admin, "POST", "/api/breakers/api/force-open", &[]).await;
    assert_eq!(held.status, 200, "{}", held.body);
    let body: serde_json::Value = serde_json::from_str(&held.body).unwrap();
    assert_eq!(body["family"], "api");
    assert_eq!(body["held"], "forced_open");
    assert_eq!(body["breakers"], 1);
    for t in ["a", "newcomer"] {
        let refused = tenant(t).await;
        assert_eq!(refused.status, 503, "{t}");
        assert_eq!(refused.header("x-tripline-rejected"), Some("circuit_open"));
    }
    assert_eq!(upstream.hits(), 1);

    let shown = send(admin, "GET", "/api/breakers/api", &[]).await;
    assert_eq!(shown.status, 200, "{}", shown.body);
    assert!(
        shown.body.contains(r#""held":"forced_open""#),
        "{}",
        shown.body
    );
    assert!(
        shown.body.contains(r#""breakers":2"#),
        "a and the newcomer: {}",
        shown.body
    );

    let reset = send(admin, "POST", "/api/breakers/api/reset", &[]).await;
    assert_eq!(reset.status, 200, "{}", reset.body);
    assert!(reset.body.contains(r#""held":null"#), "{}", reset.body);
    for t in ["a", "newcomer", "third"] {
        assert_eq!(tenant(t).await.status, 200, "{t}");
    }
    let audit = send(admin, "GET", "/api/audit", &[]).await.body;
    assert!(
        audit.contains("api (every breaker of the family): automatic → forced_open"),
        "{audit}"
    );
    let unknown = send(admin, "POST", "/api/breakers/nope/force-open", &[]).await;
    assert_eq!(unknown.status, 404);
    running.shutdown().await;
}
