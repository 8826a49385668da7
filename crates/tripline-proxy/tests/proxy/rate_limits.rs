//! Rate limits: over the limit, 429 with the wait; keys limited apart;
//! buckets refilled by the proxy's clock, never by sleeping.

use std::time::Duration;

use crate::scrape::*;
use crate::support::*;

#[tokio::test]
async fn a_burst_over_the_limit_gets_429_with_the_wait_and_is_counted() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let route = "rate_limit = { per_second = 1, burst = 3 }";
    let text = format!("{}{ADMIN}", config(&[upstream.addr], route, ""));
    let (_proxy, running, addr, clock) = start_proxy(&text).await;
    for _ in 0..3 {
        assert_eq!(get(addr, "/").await.status, 200);
    }
    let limited = get(addr, "/").await;
    assert_eq!(limited.status, 429);
    assert_eq!(limited.header("x-tripline-rejected"), Some("rate_limited"));
    assert_eq!(limited.header("x-tripline-flag"), Some("RL"));
    assert_eq!(limited.header("x-tripline-route"), Some("api"));
    assert_eq!(
        limited.header("retry-after"),
        Some("1"),
        "one token a second"
    );
    let json: serde_json::Value = serde_json::from_str(&limited.body).unwrap();
    assert_eq!(json["retry_after_ms"], 1000);
    assert_eq!(
        upstream.hits(),
        3,
        "a limited request never reaches the upstream"
    );
    assert_eq!(
        value(
            &scrape(&running).await,
            r#"tripline_proxy_refusals_total{route="api",flag="RL"}"#
        ),
        Some(1.0)
    );

    // Half a second refills half a token: still limited, with less to wait.
    clock.advance(Duration::from_millis(500));
    let limited = get(addr, "/").await;
    assert_eq!(limited.status, 429);
    let json: serde_json::Value = serde_json::from_str(&limited.body).unwrap();
    assert_eq!(json["retry_after_ms"], 500);
    clock.advance(Duration::from_millis(500));
    assert_eq!(get(addr, "/").await.status, 200);
    running.shutdown().await;
}

#[tokio::test]
async fn two_tenants_are_limited_independently() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let route = r#"rate_limit = { per_second = 1, burst = 2, key = "header:x-tenant" }"#;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], route, "")).await;
    let tenant = |t| [("x-tenant", t)];
    for _ in 0..2 {
        assert_eq!(send(addr, "GET", "/", &tenant("a")).await.status, 200);
    }
    assert_eq!(send(addr, "GET", "/", &tenant("a")).await.status, 429);
    // Tenant b's bucket is untouched by a's burst.
    for _ in 0..2 {
        assert_eq!(send(addr, "GET", "/", &tenant("b")).await.status, 200);
    }
    assert_eq!(send(addr, "GET", "/", &tenant("b")).await.status, 429);
    // Requests without the header share a bucket of their own.
    assert_eq!(get(addr, "/").await.status, 200);
    assert_eq!(upstream.hits(), 5);
    running.shutdown().await;
}

#[tokio::test]
async fn client_ip_keys_by_the_peer_address() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let route = r#"rate_limit = { per_second = 1, burst = 1, key = "client_ip" }"#;
    let (_proxy, running, addr, clock) = start_proxy(&config(&[upstream.addr], route, "")).await;
    assert_eq!(get(addr, "/").await.status, 200);
    // A spoofed header changes nothing: the key is the TCP peer.
    let spoofed = send(addr, "GET", "/", &[("x-forwarded-for", "10.9.9.9")]).await;
    assert_eq!(spoofed.status, 429);
    clock.advance(Duration::from_secs(1));
    assert_eq!(get(addr, "/").await.status, 200);
    running.shutdown().await;
}
