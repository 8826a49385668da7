//! Fault injection: made-up answers and delays, per try, that the
//! route's breakers, outlier detection and retries react to as if an
//! endpoint had produced them.

use std::time::Duration;

use crate::support::*;

const TRIPPING_BREAKER: &str = r#"breaker = { window = { kind = "count", size = 4 }, minimum_calls = 4, failure_rate_threshold = 0.5, open_duration = "10s" }"#;

#[tokio::test]
async fn a_configured_abort_trips_the_route_breaker_without_touching_the_upstream() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let route =
        format!("{TRIPPING_BREAKER}\nfault = {{ abort = {{ status = 503, percent = 100.0 }} }}");
    let text = format!("{}{ADMIN_SECTION}", config(&[upstream.addr], &route, ""));
    let (proxy, running, addr, _clock) = start_proxy(&text).await;
    for _ in 0..4 {
        let answer = get(addr, "/").await;
        assert_eq!(answer.status, 503);
        assert_eq!(answer.header("x-tripline-fault"), Some("abort"));
    }
    let refused = get(addr, "/").await;
    assert_eq!(
        refused.header("x-tripline-flag"),
        Some("CO"),
        "the breaker saw the aborts"
    );
    assert_eq!(
        proxy.route_breaker("api").unwrap().state(),
        tripline::State::Open
    );
    assert_eq!(upstream.hits(), 0, "an abort never reaches the endpoint");
    let admin = running.admin_addr().unwrap();
    assert_eq!(
        metric(
            admin,
            r#"tripline_proxy_faults_injected_total{route="api",kind="abort"}"#
        )
        .await,
        Some(4.0)
    );
    running.shutdown().await;
}

#[tokio::test]
async fn a_runtime_fault_applies_until_its_ttl_ends_and_bad_requests_name_the_field() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let text = format!("{}{ADMIN_SECTION}", config(&[upstream.addr], "", ""));
    let (_proxy, running, addr, clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();

    let created = admin_json(
        admin,
        "POST",
        "/api/faults",
        r#"{"route": "api", "abort": {"status": 500}, "ttl": "30s"}"#,
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = serde_json::from_str::<serde_json::Value>(&created.body).unwrap()["id"]
        .as_u64()
        .unwrap();
    let aborted = get(addr, "/").await;
    assert_eq!(
        (aborted.status, aborted.header("x-tripline-fault")),
        (500, Some("abort"))
    );

    clock.advance(Duration::from_secs(10));
    let listed: serde_json::Value =
        serde_json::from_str(&send(admin, "GET", "/api/faults", &[]).await.body).unwrap();
    assert_eq!(listed["faults"][0]["id"].as_u64(), Some(id));
    assert_eq!(listed["faults"][0]["route"], "api");
    assert_eq!(listed["faults"][0]["abort"]["status"], 500);
    assert_eq!(listed["faults"][0]["remaining_ms"], 20_000);

    clock.advance(Duration::from_secs(20));
    assert_eq!(get(addr, "/").await.status, 200, "expired with its TTL");
    let listed = send(admin, "GET", "/api/faults", &[]).await.body;
    assert_eq!(listed.trim(), r#"{"faults":[]}"#);
    assert_eq!(upstream.hits(), 1);

    // Switched off by id before its TTL.
    let created = admin_json(
        admin,
        "POST",
        "/api/faults",
        r#"{"route": "api", "abort": {"status": 502}, "ttl": "1h"}"#,
    )
    .await;
    let id = serde_json::from_str::<serde_json::Value>(&created.body).unwrap()["id"].clone();
    assert_eq!(get(addr, "/").await.status, 502);
    let deleted = send(admin, "DELETE", &format!("/api/faults/{id}"), &[]).await;
    assert_eq!(deleted.status, 204);
    assert_eq!(get(addr, "/").await.status, 200);
    assert_eq!(
        send(admin, "DELETE", &format!("/api/faults/{id}"), &[])
            .await
            .status,
        404
    );

    // All switched off at once.
    for status in [500, 502] {
        let body = format!(r#"{{"route": "api", "abort": {{"status": {status}}}, "ttl": "1m"}}"#);
        assert_eq!(
            admin_json(admin, "POST", "/api/faults", &body).await.status,
            201
        );
    }
    let cleared = send(admin, "DELETE", "/api/faults", &[]).await;
    assert_eq!(cleared.body.trim(), r#"{"cleared":2}"#);
    assert_eq!(get(addr, "/").await.status, 200);

    for (body, field) in [
        (r#"{"route": "api", "abort": {"status": 500}}"#, "ttl"),
        (
            r#"{"route": "api", "abort": {"status": 500}, "ttl": "2h"}"#,
            "ttl",
        ),
        (
            r#"{"route": "nope", "abort": {"status": 500}, "ttl": "1s"}"#,
            "route",
        ),
        (
            r#"{"route": "api", "abort": {"status": 700}, "ttl": "1s"}"#,
            "abort.status",
        ),
        (r#"{"route": "api", "ttl": "1s"}"#, "abort"),
        (
            r#"{"route": "api", "abort": {"status": 500}, "endpoint": "10.9.9.9:1", "ttl": "1s"}"#,
            "endpoint",
        ),
    ] {
        let refused = admin_json(admin, "POST", "/api/faults", body).await;
        assert_eq!(refused.status, 400, "{body}");
        let json: serde_json::Value = serde_json::from_str(&refused.body).unwrap();
        assert_eq!(json["field"], field, "{body}: {}", refused.body);
    }
    let not_json = admin_json(admin, "POST", "/api/faults", "{route: api").await;
    assert_eq!(not_json.status, 400);
    let huge = format!(r#"{{"route": "{}"}}"#, "x".repeat(70 * 1024));
    assert_eq!(
        admin_json(admin, "POST", "/api/faults", &huge).await.status,
        413
    );
    running.shutdown().await;
}

#[tokio::test]
async fn a_header_scoped_fault_hits_only_marked_requests() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let route = r#"fault = { abort = { status = 503 }, header = "x-drill" }"#;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], route, "")).await;
    for _ in 0..3 {
        assert_eq!(get(addr, "/").await.status, 200);
        let marked = send(addr, "GET", "/", &[("x-drill", "1")]).await;
        assert_eq!(
            (marked.status, marked.header("x-tripline-fault")),
            (503, Some("abort"))
        );
    }
    assert_eq!(upstream.hits(), 3);
    running.shutdown().await;
}

#[tokio::test]
async fn an_endpoint_scoped_abort_hits_only_that_endpoint_and_outlier_detection_ejects_it() {
    let drilled = Upstream::start(|_| respond(200, "drilled")).await;
    let other = Upstream::start(|_| respond(200, "other")).await;
    let route = format!(
        "fault = {{ abort = {{ status = 500 }}, endpoint = \"{}\" }}",
        drilled.addr
    );
    let cluster = r#"
panic_threshold_percent = 0
breaker = { window = { kind = "count", size = 1000 }, minimum_calls = 1000 }
outlier = { interval = "1s", base_ejection_time = "30s", max_ejection_percent = 50, consecutive_failures = { threshold = 3 } }
"#;
    let (proxy, running, addr, _clock) =
        start_proxy(&config(&[drilled.addr, other.addr], &route, cluster)).await;
    let mut aborted = 0;
    for _ in 0..6 {
        let answer = get(addr, "/").await;
        match answer.status {
            500 => {
                assert_eq!(answer.header("x-tripline-fault"), Some("abort"));
                aborted += 1;
            }
            _ => assert_eq!(answer.body, "other"),
        }
    }
    assert_eq!(aborted, 3);
    let cluster = proxy.cluster("backend").unwrap();
    assert!(
        cluster
            .endpoint(&drilled.addr.to_string())
            .unwrap()
            .is_ejected()
    );
    for _ in 0..10 {
        assert_eq!(get(addr, "/").await.body, "other");
    }
    assert_eq!((drilled.hits(), other.hits()), (0, 13));
    running.shutdown().await;
}

#[tokio::test]
async fn a_delay_counts_against_the_per_try_timeout_and_marks_the_answer() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let route = r#"timeout = { per_try = "50ms" }
fault = { delay = { duration = "10s" } }"#;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], route, "")).await;
    let answer = get(addr, "/").await;
    assert_eq!(answer.header("x-tripline-flag"), Some("UT"), "{answer:?}");
    assert_eq!(upstream.hits(), 0);
    running.shutdown().await;

    let route = r#"fault = { delay = { duration = "1ms", percent = 100.0 } }"#;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], route, "")).await;
    let answer = get(addr, "/").await;
    assert_eq!(
        (answer.status, answer.header("x-tripline-fault")),
        (200, Some("delay"))
    );
    running.shutdown().await;
}

#[tokio::test]
async fn a_seeded_percent_replays_the_same_decisions() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let route = r#"fault = { abort = { status = 503, percent = 50.0 } }"#;
    let text = config(&[upstream.addr], route, "");
    let mut runs = Vec::new();
    for _ in 0..2 {
        let config = tripline_proxy::config::ProxyConfig::from_toml(&text).unwrap();
        let proxy = tripline_proxy::Proxy::builder(config)
            .fault_seed(42)
            .build()
            .unwrap();
        let running = proxy.start().await.unwrap();
        let addr = running.local_addrs()[0];
        let mut statuses = Vec::new();
        for _ in 0..40 {
            statuses.push(get(addr, "/").await.status);
        }
        running.shutdown().await;
        runs.push(statuses);
    }
    assert_eq!(runs[0], runs[1], "the same seed, the same drill");
    let aborted = runs[0].iter().filter(|s| **s == 503).count();
    assert!((8..=32).contains(&aborted), "about half: {aborted} of 40");
}
