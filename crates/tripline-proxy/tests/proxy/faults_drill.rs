//! The faults that hurt most, for drills: a refused connection, an answer
//! reset mid-way, an endpoint that accepts and never answers — as route
//! faults and through `/api/faults`, each seen by the breakers as the
//! real failure would be.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;

use crate::support::*;

const TRIPPING_BREAKER: &str = r#"breaker = { window = { kind = "count", size = 4 }, minimum_calls = 4, failure_rate_threshold = 0.5, open_duration = "10s" }"#;

#[tokio::test]
async fn a_refuse_fault_fails_tries_as_connect_failures_and_trips_the_breaker() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let route = format!("{TRIPPING_BREAKER}\nfault = {{ refuse = {{ percent = 100.0 }} }}");
    let text = format!("{}{ADMIN_SECTION}", config(&[upstream.addr], &route, ""));
    let (proxy, running, addr, _clock) = start_proxy(&text).await;
    for _ in 0..4 {
        let answer = get(addr, "/").await;
        assert_eq!(answer.status, 503, "{}", answer.body);
        assert_eq!(answer.header("x-tripline-flag"), Some("UF"));
    }
    assert_eq!(get(addr, "/").await.header("x-tripline-flag"), Some("CO"));
    assert_eq!(
        proxy.route_breaker("api").unwrap().state(),
        tripline::State::Open
    );
    assert_eq!(upstream.hits(), 0, "nothing reached the endpoint");
    let admin = running.admin_addr().unwrap();
    let injected = r#"tripline_proxy_faults_injected_total{route="api",kind="refuse"}"#;
    assert_eq!(metric(admin, injected).await, Some(4.0));
    running.shutdown().await;
}

#[tokio::test]
async fn a_reset_fault_cuts_the_answer_after_its_first_bytes_and_counts_as_a_failure() {
    let upstream = Upstream::start(|_| respond(200, "a whole answer")).await;
    let route = format!("{TRIPPING_BREAKER}\nfault = {{ reset = {{}} }}");
    let (proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], &route, "")).await;
    for _ in 0..4 {
        let req = hyper::Request::get(format!("http://{addr}/"))
            .body(http_body_util::Full::new(Bytes::new()))
            .unwrap();
        // A short answer is cut before the proxy has sent its head (it
        // writes the head with the first bytes); a long one after: either
        // way the client sees the answer broken off, never a whole one.
        let broken = match tokio::time::timeout(BOUND, client().request(req))
            .await
            .expect("the proxy answers or closes")
        {
            Err(_) => true,
            Ok(response) => tokio::time::timeout(BOUND, response.into_body().collect())
                .await
                .expect("the body ends")
                .is_err(),
        };
        assert!(broken, "the client sees the answer broken off");
    }
    assert_eq!(upstream.hits(), 4, "the endpoint answered each try");
    assert_eq!(
        proxy.route_breaker("api").unwrap().state(),
        tripline::State::Open,
        "the broken answers count as failures"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn a_hang_fault_through_the_admin_api_holds_tries_until_the_per_try_timeout() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let route = r#"timeout = { per_try = "200ms", overall = "2s" }"#;
    let text = format!("{}{ADMIN_SECTION}", config(&[upstream.addr], route, ""));
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    let created = admin_json(
        admin,
        "POST",
        "/api/faults",
        r#"{"route": "api", "hang": {"percent": 100}, "ttl": "30s"}"#,
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let started = tokio::time::Instant::now();
    let answer = get(addr, "/").await;
    assert_eq!(answer.status, 504, "{}", answer.body);
    assert_eq!(answer.header("x-tripline-flag"), Some("UT"));
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(upstream.hits(), 0, "a hung try sends nothing");
    // Switched off, the route serves again.
    assert_eq!(send(admin, "DELETE", "/api/faults", &[]).await.status, 200);
    assert_eq!(get(addr, "/").await.status, 200);
    running.shutdown().await;
}

#[tokio::test]
async fn a_share_outside_0_to_100_is_refused_naming_the_field() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let text = format!("{}{ADMIN_SECTION}", config(&[upstream.addr], "", ""));
    let (_proxy, running, _addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    let refused = admin_json(
        admin,
        "POST",
        "/api/faults",
        r#"{"route": "api", "reset": {"percent": 150}, "ttl": "30s"}"#,
    )
    .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(refused.body.contains("reset.percent"), "{}", refused.body);
    let config_text = config(
        &[upstream.addr],
        "fault = { hang = { percent = -1.0 } }",
        "",
    );
    let e = tripline_proxy::config::ProxyConfig::from_toml(&config_text).unwrap_err();
    assert!(
        e.to_string().contains("routes[0].fault.hang.percent"),
        "{e}"
    );
    running.shutdown().await;
}
