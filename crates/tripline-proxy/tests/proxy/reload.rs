//! Reloading the config while serving: breaker state survives where the
//! breaker's identity did not change, an invalid config changes nothing,
//! and the metrics follow the new routes.

use std::net::SocketAddr;

use tripline_proxy::config::ProxyConfig;

use crate::support::*;

fn routes(api: SocketAddr, open_duration: &str, extra: &str) -> String {
    format!(
        r#"
[[listeners]]
address = "127.0.0.1:0"
{extra}
[[routes]]
name = "api"
cluster = "backend"
breaker = {{ window = {{ kind = "count", size = 4 }}, minimum_calls = 4, failure_rate_threshold = 0.5, open_duration = "{open_duration}" }}

[clusters.backend]
endpoints = ["{api}"]

[admin]
address = "127.0.0.1:0"
"#
    )
}

fn new_route(addr: SocketAddr) -> String {
    format!(
        "\n[[routes]]\nname = \"fresh\"\ncluster = \"other\"\nmatch = {{ path_prefix = \"/fresh\" }}\n\n[clusters.other]\nendpoints = [\"{addr}\"]\n"
    )
}

#[tokio::test]
async fn a_reload_keeps_an_open_route_breaker_open_and_serves_an_added_route() {
    let failing = Upstream::start(|_| respond(500, "boom")).await;
    let fresh = Upstream::start(|_| respond(200, "fresh")).await;
    let (proxy, running, addr, _clock) = start_proxy(&routes(failing.addr, "10s", "")).await;
    for _ in 0..4 {
        assert_eq!(get(addr, "/").await.status, 500);
    }
    let before = proxy.route_breaker("api").unwrap();
    assert_eq!(before.state(), tripline::State::Open);

    let config =
        ProxyConfig::from_toml(&routes(failing.addr, "60s", &new_route(fresh.addr))).unwrap();
    let api = config.routes.iter().find(|r| r.name == "api").unwrap();
    let wanted = api.breaker.as_ref().unwrap().open_duration.clone();
    let report = running.reload(config).unwrap();
    assert_eq!(report.routes_added, ["fresh"]);
    assert_eq!(report.breakers_kept, ["api"]);
    assert_eq!(report.clusters_kept, ["backend"]);
    assert_eq!(report.clusters_built, ["other"]);
    assert!(report.restart_required.is_empty(), "{report:?}");

    let after = proxy.route_breaker("api").unwrap();
    assert_eq!(
        after.state(),
        tripline::State::Open,
        "still open after the reload"
    );
    assert_eq!(after.config().open_duration, wanted, "reconfigured live");
    assert!(after.ptr_eq(&before), "the same breaker");
    assert_eq!(get(addr, "/").await.header("x-tripline-flag"), Some("CO"));
    assert_eq!(failing.hits(), 4);
    let served = get(addr, "/fresh/x").await;
    assert_eq!((served.status, served.body.as_str()), (200, "fresh"));

    let admin = running.admin_addr().unwrap();
    let open = r#"tripline_breaker_state{name="api",state="open"}"#;
    assert_eq!(metric(admin, open).await, Some(1.0));
    let fresh_requests = r#"tripline_proxy_requests_total{route="fresh",code_class="2xx"}"#;
    assert_eq!(metric(admin, fresh_requests).await, Some(1.0));
    let scrape = send(admin, "GET", "/metrics", &[("accept", "text/plain")])
        .await
        .body;
    assert_eq!(scrape.matches(open).count(), 1, "exported once: {scrape}");

    // Removing the route again removes its series.
    let config = ProxyConfig::from_toml(&routes(failing.addr, "60s", "")).unwrap();
    let report = running.reload(config).unwrap();
    assert_eq!(report.routes_removed, ["fresh"]);
    let scrape = send(admin, "GET", "/metrics", &[("accept", "text/plain")])
        .await
        .body;
    assert!(!scrape.contains(r#"route="fresh""#), "{scrape}");
    assert!(!scrape.contains(r#"name="other""#), "{scrape}");
    assert_eq!(
        get(addr, "/fresh/x").await.header("x-tripline-flag"),
        Some("CO"),
        "now the api route's"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn an_invalid_config_changes_nothing_and_names_the_field() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let (proxy, running, addr, _clock) = start_proxy(&routes(upstream.addr, "10s", "")).await;
    let mut config = ProxyConfig::from_toml(&routes(upstream.addr, "10s", "")).unwrap();
    config.routes[0].cluster = "missing".into();
    let e = running.reload(config).unwrap_err();
    assert_eq!(e.field, "routes[0].cluster");
    assert_eq!(proxy.config().routes[0].cluster, "backend");
    assert_eq!(get(addr, "/").await.body, "fine");
    running.shutdown().await;
}

#[tokio::test]
async fn a_changed_listener_is_reported_as_needing_a_restart() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let (_proxy, running, addr, _clock) = start_proxy(&routes(upstream.addr, "10s", "")).await;
    let text = routes(upstream.addr, "10s", "")
        .replace("127.0.0.1:0\"\n\n[[routes]]", "127.0.0.1:1\"\n\n[[routes]]");
    let report = running
        .reload(ProxyConfig::from_toml(&text).unwrap())
        .unwrap();
    assert_eq!(report.restart_required, ["listeners"]);
    assert_eq!(
        get(addr, "/").await.body,
        "fine",
        "the listener was not rebound"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn an_unchanged_cluster_keeps_its_ejections_and_a_changed_one_starts_afresh() {
    let bad = Upstream::start(|_| respond(500, "boom")).await;
    let good = Upstream::start(|_| respond(200, "fine")).await;
    let cluster = r#"
panic_threshold_percent = 0
breaker = { window = { kind = "count", size = 1000 }, minimum_calls = 1000 }
outlier = { interval = "1s", base_ejection_time = "30s", max_ejection_percent = 50, consecutive_failures = { threshold = 3 } }
"#;
    let text = config(&[bad.addr, good.addr], "retry = { attempts = 1 }", cluster);
    let (proxy, running, addr, _clock) = start_proxy(&text).await;
    for _ in 0..6 {
        get(addr, "/").await;
    }
    let ejected = |proxy: &tripline_proxy::Proxy| {
        let cluster = proxy.cluster("backend").unwrap();
        cluster
            .endpoint(&bad.addr.to_string())
            .unwrap()
            .is_ejected()
    };
    assert!(ejected(&proxy));
    let budget = proxy.route_budget("api").unwrap();

    // A route-only change (the route's timeout) keeps the cluster and the budget.
    let changed_route = config(
        &[bad.addr, good.addr],
        "retry = { attempts = 1 }\ntimeout = { overall = \"5s\" }",
        cluster,
    );
    let report = running
        .reload(ProxyConfig::from_toml(&changed_route).unwrap())
        .unwrap();
    assert_eq!(report.clusters_kept, ["backend"]);
    assert_eq!(report.budgets_kept, ["api"]);
    assert!(ejected(&proxy), "the ejection carried over");
    assert!(proxy.route_budget("api").unwrap().ptr_eq(&budget));
    for _ in 0..4 {
        assert_eq!(get(addr, "/").await.status, 200);
    }
    assert_eq!(bad.hits(), 3);

    // A changed cluster is built anew: its endpoints start routable.
    let changed_cluster = changed_route.replace("threshold = 3", "threshold = 4");
    let report = running
        .reload(ProxyConfig::from_toml(&changed_cluster).unwrap())
        .unwrap();
    assert_eq!(report.clusters_built, ["backend"]);
    assert!(!ejected(&proxy));
    running.shutdown().await;
}

#[tokio::test]
async fn a_reload_applies_a_changed_upstream_setting_to_an_unchanged_cluster() {
    let stalled = unreading_upstream().await;
    let (_proxy, running, addr, _clock) = start_proxy(&routes(stalled, "10s", "")).await;
    // The cluster is the same; only `[proxy]`'s stall timeout changes
    // (from its 30 s default), which its kept client would not know.
    let text = format!(
        "[proxy]\nupstream_stall_timeout = \"300ms\"\n{}",
        routes(stalled, "10s", "")
    );
    running
        .reload(ProxyConfig::from_toml(&text).unwrap())
        .unwrap();
    let answer = upload_and_read_answer(addr, 64 << 20).await;
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    running.shutdown().await;
}

#[tokio::test]
async fn an_added_endpoint_leaves_the_open_breakers_of_the_others_open() {
    let busy = Upstream::start(|_| {
        let mut r = respond(503, "busy");
        r.headers_mut().insert("retry-after", "30".parse().unwrap());
        r
    })
    .await;
    let fine = Upstream::start(|_| respond(200, "fine")).await;
    let (proxy, running, addr, _clock) = start_proxy(&config(&[busy.addr], "", "")).await;
    assert_eq!(get(addr, "/").await.body, "busy");
    let before = proxy
        .cluster("backend")
        .unwrap()
        .endpoint(&busy.addr.to_string())
        .unwrap();
    assert_eq!(before.breaker().state(), tripline::State::Open);

    // Only the endpoint list changes: the cluster is kept and the new
    // list applied in place.
    let text = config(&[busy.addr, fine.addr], "", "");
    let report = running
        .reload(ProxyConfig::from_toml(&text).unwrap())
        .unwrap();
    assert_eq!(report.clusters_kept, ["backend"]);
    assert_eq!(report.clusters_endpoints_changed, ["backend"]);
    assert!(report.clusters_built.is_empty(), "{report:?}");
    let cluster = proxy.cluster("backend").unwrap();
    assert_eq!(cluster.len(), 2);
    let after = cluster.endpoint(&busy.addr.to_string()).unwrap();
    assert!(after.ptr_eq(&before), "the same endpoint");
    assert_eq!(
        after.breaker().state(),
        tripline::State::Open,
        "still open until its Retry-After"
    );
    for _ in 0..4 {
        let answer = get(addr, "/").await;
        assert_eq!((answer.status, answer.body.as_str()), (200, "fine"));
    }
    assert_eq!(fine.hits(), 4, "the added endpoint takes the traffic");
    assert_eq!(busy.hits(), 1, "the open one is still skipped");

    // Removing it again drops it; the endpoint that stays keeps its state.
    let fine_endpoint = cluster.endpoint(&fine.addr.to_string()).unwrap();
    let text = config(&[fine.addr], "", "");
    let report = running
        .reload(ProxyConfig::from_toml(&text).unwrap())
        .unwrap();
    assert_eq!(report.clusters_endpoints_changed, ["backend"]);
    let cluster = proxy.cluster("backend").unwrap();
    assert!(cluster.endpoint(&busy.addr.to_string()).is_none());
    assert!(
        cluster
            .endpoint(&fine.addr.to_string())
            .unwrap()
            .ptr_eq(&fine_endpoint)
    );
    assert_eq!(get(addr, "/").await.body, "fine");
    running.shutdown().await;
}

#[tokio::test]
async fn an_ejection_outlives_a_reload_that_adds_an_endpoint() {
    let bad = Upstream::start(|_| respond(500, "boom")).await;
    let good = Upstream::start(|_| respond(200, "fine")).await;
    let added = Upstream::start(|_| respond(200, "added")).await;
    let cluster = r#"
panic_threshold_percent = 0
breaker = { window = { kind = "count", size = 1000 }, minimum_calls = 1000 }
outlier = { interval = "1s", base_ejection_time = "30s", max_ejection_percent = 50, consecutive_failures = { threshold = 3 } }
"#;
    let route = "retry = { attempts = 1 }";
    let (proxy, running, addr, _clock) =
        start_proxy(&config(&[bad.addr, good.addr], route, cluster)).await;
    for _ in 0..6 {
        get(addr, "/").await;
    }
    let ejected = |proxy: &tripline_proxy::Proxy| {
        let cluster = proxy.cluster("backend").unwrap();
        cluster
            .endpoint(&bad.addr.to_string())
            .unwrap()
            .is_ejected()
    };
    assert!(ejected(&proxy));
    assert_eq!(bad.hits(), 3);

    let text = config(&[bad.addr, good.addr, added.addr], route, cluster);
    let report = running
        .reload(ProxyConfig::from_toml(&text).unwrap())
        .unwrap();
    assert_eq!(report.clusters_endpoints_changed, ["backend"]);
    assert!(ejected(&proxy), "the ejection carried over");
    let mut bodies = Vec::new();
    for _ in 0..6 {
        let answer = get(addr, "/").await;
        assert_eq!(answer.status, 200);
        bodies.push(answer.body);
    }
    assert!(bodies.iter().any(|b| b == "added"), "{bodies:?}");
    assert_eq!(bad.hits(), 3, "the ejected endpoint is still skipped");
    running.shutdown().await;
}
