//! A rollout's shadow period judged by real proxy traffic: the twin of
//! the route breaker sees every outcome the live breaker records, and a
//! changed family (the cluster's endpoint breakers, a route's keyed
//! breakers) is judged key by key — endpoint by endpoint, tenant by
//! tenant.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::support::{self, Upstream, respond, start_proxy};
use crate::{WATCH_BOUND, audit, breaker, proxy_config, until};

/// A watched file in `dir` as the `[config_source]` of instance
/// `instance`: the file's path and the section's body.
fn file_source(dir: &tempfile::TempDir, instance: &str) -> (PathBuf, String) {
    let path = dir.path().join("breakers.toml");
    let source = format!(
        "kind = \"file\"\npath = \"{}\"\ndebounce = \"50ms\"\ninstance_id = \"{instance}\"\nstatus_interval = \"50ms\"\n",
        path.display()
    );
    (path, source)
}

/// Writes `document` (with a rollout) to the watched file and waits for
/// its shadow to start.
async fn push_shadowed(path: &Path, admin: SocketAddr, document: &str) {
    std::fs::write(path, document).unwrap();
    until(WATCH_BOUND, "the shadow start", || async {
        audit(admin)
            .await
            .iter()
            .any(|r| r["action"] == "breakers_shadow_started")
            .then_some(())
    })
    .await;
}

/// The shadow's report, once the applier has made it.
async fn shadow_report(admin: SocketAddr) -> Value {
    until(WATCH_BOUND, "the shadow report", || async {
        audit(admin)
            .await
            .into_iter()
            .find(|r| r["action"] == "breakers_shadow_report")
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_twin_reports_the_trips_its_rules_would_have_made_on_proxy_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let (path, source) = file_source(&dir, "edge-s");
    let upstream = Upstream::start(|_| respond(500, "down")).await;
    let text = proxy_config(upstream.addr, &source).replace(
        "breaker = { minimum_calls = 10, failure_rate_threshold = 0.5 }",
        "breaker = { minimum_calls = 100, failure_rate_threshold = 0.5 }",
    );
    let (_proxy, running, addr, clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();

    // Stricter rules, shadowed for 60 s, then applied nowhere (0 %); the
    // endpoint family `backend` changes too.
    let document = "rollout = { percent = 0, shadow = \"60s\", bake = \"1m\" }\n[[breaker]]\nname = \"api\"\nminimum_calls = 5\nfailure_rate_threshold = 0.5\n\n[[breaker]]\nname = \"backend\"\nminimum_calls = 500\n";
    push_shadowed(&path, admin, document).await;

    for _ in 0..10 {
        assert_eq!(support::get(addr, "/").await.status, 500);
    }
    let live = breaker(admin, "api").await;
    assert_eq!(live["state"], "closed", "the live rules (100 calls) hold");

    clock.advance(Duration::from_secs(61));
    let report = shadow_report(admin).await;
    let would_trip = &report["detail"]["would_trip"];
    assert_eq!(would_trip[0][0], "api", "{report}");
    assert!(would_trip[0][1].as_u64().unwrap() >= 1, "{report}");
    assert_eq!(would_trip.as_array().unwrap().len(), 1, "{report}");
    // The endpoint family was judged too: its one endpoint's twin (500
    // calls needed) would not have tripped on 10.
    let backend = &report["detail"]["families"][0];
    assert_eq!(backend["family"], "backend", "{report}");
    assert_eq!(backend["keys_judged"], 1, "{report}");
    assert_eq!(backend["keys_would_trip"], 0, "{report}");
    assert!(report["detail"].get("not_judged").is_none(), "{report}");
    let summary = report["summary"].as_str().unwrap();
    assert!(
        summary.contains("backend: 0 of 1 keys would trip"),
        "{summary}"
    );
    // 0 %: this instance is no canary, its live breaker keeps its rules.
    until(
        Duration::from_secs(10),
        "the not-selected record",
        || async {
            audit(admin)
                .await
                .iter()
                .any(|r| r["action"] == "breakers_not_selected")
                .then_some(())
        },
    )
    .await;
    let live = breaker(admin, "api").await;
    assert_eq!(live["minimum_calls"], 100);
    assert_eq!(live["state"], "closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_applies_after_its_shadow_and_completes_its_bake() {
    let dir = tempfile::tempdir().unwrap();
    let (path, source) = file_source(&dir, "edge-c");
    let upstream = Upstream::start(|_| respond(200, "ok")).await;
    let (_proxy, running, addr, clock) = start_proxy(&proxy_config(upstream.addr, &source)).await;
    let admin = running.admin_addr().unwrap();
    support::get(addr, "/").await;

    // 100 %: every instance is a canary once the shadow ends.
    let document = "rollout = { percent = 100, shadow = \"30s\", bake = \"5m\" }\n[[breaker]]\nname = \"api\"\nminimum_calls = 8\n";
    push_shadowed(&path, admin, document).await;
    assert_eq!(
        breaker(admin, "api").await["minimum_calls"],
        10,
        "nothing applied in shadow"
    );

    clock.advance(Duration::from_secs(31));
    until(WATCH_BOUND, "the canary's apply", || async {
        (breaker(admin, "api").await["minimum_calls"] == 8).then_some(())
    })
    .await;
    assert_eq!(
        breaker(admin, "api").await["window"]["calls"],
        1,
        "state kept"
    );

    clock.advance(Duration::from_secs(301));
    until(WATCH_BOUND, "the bake's end", || async {
        audit(admin)
            .await
            .iter()
            .any(|r| r["action"] == "breakers_bake_completed")
            .then_some(())
    })
    .await;
    assert_eq!(breaker(admin, "api").await["minimum_calls"], 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_route_is_shadowed_tenant_by_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let (path, source) = file_source(&dir, "edge-k");
    // Tenant acme's calls fail, globex's succeed.
    let upstream = Upstream::start(|req| match req.headers().get("x-tenant") {
        Some(t) if t == "acme" => respond(500, "down"),
        _ => respond(200, "ok"),
    })
    .await;
    let text = proxy_config(upstream.addr, &source).replace(
        "breaker = { minimum_calls = 10, failure_rate_threshold = 0.5 }",
        "breaker = { minimum_calls = 100, failure_rate_threshold = 0.5 }\nbreaker_key = { header = \"x-tenant\" }",
    );
    let (_proxy, running, addr, clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();

    let document = "rollout = { percent = 0, shadow = \"60s\", bake = \"1m\" }\n[[breaker]]\nname = \"api\"\nminimum_calls = 4\nfailure_rate_threshold = 0.5\n";
    push_shadowed(&path, admin, document).await;

    // 6 failing of 14: 43 % mixed together, under the new 50 %; but
    // acme's own breaker, judged alone, would trip.
    for _ in 0..6 {
        let answer = support::send(addr, "GET", "/", &[("x-tenant", "acme")]).await;
        assert_eq!(answer.status, 500);
    }
    for _ in 0..8 {
        let answer = support::send(addr, "GET", "/", &[("x-tenant", "globex")]).await;
        assert_eq!(answer.status, 200);
    }

    clock.advance(Duration::from_secs(61));
    let report = shadow_report(admin).await;
    let families = report["detail"]["families"].as_array().unwrap();
    let api = families
        .iter()
        .find(|f| f["family"] == "api")
        .unwrap_or_else(|| panic!("the keyed family is reported: {report}"));
    assert_eq!(api["keys_judged"], 2, "{report}");
    assert_eq!(api["keys_would_trip"], 1, "{report}");
    assert_eq!(api["top_keys"][0][0], "acme", "{report}");
    let summary = report["summary"].as_str().unwrap();
    assert!(
        summary.contains("api: 1 of 2 keys would trip (acme "),
        "{summary}"
    );
}
