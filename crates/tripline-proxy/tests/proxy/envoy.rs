//! Envoy compatibility: `x-envoy-overloaded` on overload refusals only,
//! and only when asked for.

use crate::support::*;

const LIMITED: &str = "rate_limit = { per_second = 1, burst = 1 }";

async fn second_answer(envoy_compat: bool) -> Answer {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let text = format!(
        "[proxy]\nenvoy_compat = {envoy_compat}\n\n{}",
        config(&[upstream.addr], LIMITED, "")
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let first = get(addr, "/").await;
    assert_eq!(first.status, 200);
    assert_eq!(
        first.header("x-envoy-overloaded"),
        None,
        "a real answer is not overload"
    );
    let second = get(addr, "/").await;
    running.shutdown().await;
    second
}

#[tokio::test]
async fn overload_refusals_say_x_envoy_overloaded_when_envoy_compat_is_on() {
    let refused = second_answer(true).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("x-envoy-overloaded"), Some("true"));
    let refused = second_answer(false).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("x-envoy-overloaded"), None, "off by default");
}

#[tokio::test]
async fn upstream_failures_and_unrouted_requests_are_not_overload() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let text = format!(
        "[proxy]\nenvoy_compat = true\n\n{}",
        config(&[closed], "match = { path_prefix = \"/api\" }", "")
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let failed = get(addr, "/api").await;
    assert_eq!(failed.header("x-tripline-flag"), Some("UF"));
    assert_eq!(failed.header("x-envoy-overloaded"), None);
    let unrouted = get(addr, "/elsewhere").await;
    assert_eq!(unrouted.status, 404);
    assert_eq!(unrouted.header("x-envoy-overloaded"), None);
    running.shutdown().await;
}

#[tokio::test]
async fn no_healthy_endpoint_is_overload() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let cluster = r#"breaker = { window = { kind = "count", size = 1 }, minimum_calls = 1, open_duration = "30s" }"#;
    let text = format!(
        "[proxy]\nenvoy_compat = true\n\n{}",
        config(&[closed], "", cluster)
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    assert_eq!(get(addr, "/").await.header("x-tripline-flag"), Some("UF"));
    let refused = get(addr, "/").await;
    assert_eq!(
        refused.header("x-tripline-rejected"),
        Some("no_healthy_endpoint")
    );
    assert_eq!(refused.header("x-envoy-overloaded"), Some("true"));
    running.shutdown().await;
}
