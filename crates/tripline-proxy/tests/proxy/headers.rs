//! What the upstream sees: hop-by-hop headers gone, the client added to
//! `x-forwarded-for`, the remaining deadline forwarded (cut to the
//! per-try timeout; in `grpc-timeout` too for gRPC).

use crate::support::*;

fn echo(
    header: &'static str,
) -> impl Fn(&http::Request<hyper::body::Incoming>) -> http::Response<http_body_util::Full<bytes::Bytes>>
{
    move |req| {
        let seen = req
            .headers()
            .get_all(header)
            .iter()
            .map(|v| v.to_str().unwrap_or("?"))
            .collect::<Vec<_>>()
            .join("|");
        http::Response::new(http_body_util::Full::new(bytes::Bytes::from(seen)))
    }
}

#[tokio::test]
async fn hop_by_hop_headers_stay_and_the_client_is_named() {
    let upstream = Upstream::start(echo("x-forwarded-for")).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], "", "")).await;
    assert_eq!(get(addr, "/").await.body, "127.0.0.1");
    let chained = send(addr, "GET", "/", &[("x-forwarded-for", "203.0.113.7")]).await;
    assert_eq!(chained.body, "203.0.113.7, 127.0.0.1");
    running.shutdown().await;

    let upstream = Upstream::start(echo("x-session-hop")).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], "", "")).await;
    let headers = [("connection", "x-session-hop"), ("x-session-hop", "secret")];
    assert_eq!(
        send(addr, "GET", "/", &headers).await.body,
        "",
        "a header named by `connection` is not forwarded"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn the_remaining_deadline_is_forwarded_and_a_spent_one_refused() {
    let upstream = Upstream::start(echo("tripline-timeout-ms")).await;
    let route = r#"timeout = { overall = "2s" }"#;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], route, "")).await;
    let own: u64 = get(addr, "/").await.body.parse().unwrap();
    assert!((1000..=2000).contains(&own), "the route's own 2 s: {own}");
    let incoming = send(addr, "GET", "/", &[("tripline-timeout-ms", "500")]).await;
    let forwarded: u64 = incoming.body.parse().unwrap();
    assert!(
        (1..=500).contains(&forwarded),
        "the earlier of the caller's 500 ms and 2 s: {forwarded}"
    );
    let spent = send(addr, "GET", "/", &[("tripline-timeout-ms", "0")]).await;
    assert_eq!(spent.status, 503);
    assert_eq!(
        spent.header("x-tripline-rejected"),
        Some("deadline_exceeded")
    );
    assert_eq!(spent.header("x-tripline-flag"), Some("DX"));
    assert_eq!(upstream.hits(), 2);
    running.shutdown().await;
}

#[tokio::test]
async fn a_per_try_timeout_shorter_than_the_deadline_is_what_the_upstream_is_told() {
    let upstream = Upstream::start(echo("tripline-timeout-ms")).await;
    let route = r#"timeout = { per_try = "300ms" }"#;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], route, "")).await;
    let cut = send(addr, "GET", "/", &[("tripline-timeout-ms", "10000")]).await;
    let forwarded: u64 = cut.body.parse().unwrap();
    assert!(
        (1..=300).contains(&forwarded),
        "the proxy gives up on the try after 300 ms, of the caller's 10 s: {forwarded}"
    );
    let shorter = send(addr, "GET", "/", &[("tripline-timeout-ms", "200")]).await;
    let forwarded: u64 = shorter.body.parse().unwrap();
    assert!((1..=200).contains(&forwarded), "the earlier: {forwarded}");
    // A request without a deadline is sent without one: the per-try
    // timeout alone is not forwarded.
    assert_eq!(get(addr, "/").await.body, "");
    running.shutdown().await;
}

#[tokio::test]
async fn grpc_timeout_is_forwarded_only_on_requests_that_came_with_it_or_are_grpc() {
    let upstream = Upstream::start(echo("grpc-timeout")).await;
    let route = r#"timeout = { overall = "2s" }"#;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], route, "")).await;
    // Neither: the deadline travels in `tripline-timeout-ms` alone.
    assert_eq!(get(addr, "/").await.body, "");
    // The caller's `grpc-timeout` (here on HTTP/1.1, whatever its
    // content) is rewritten to the remaining budget, not dropped.
    let carried = send(addr, "GET", "/", &[("grpc-timeout", "5S")]).await;
    let budget = tripline::timeout::parse_grpc_timeout(&carried.body).unwrap();
    let two_seconds = std::time::Duration::from_secs(2);
    assert!(
        !budget.is_zero() && budget <= two_seconds,
        "the earlier of the caller's 5 s and the route's 2 s: {}",
        carried.body
    );
    let grpc = [("content-type", "application/grpc+proto")];
    let typed = send(addr, "POST", "/pkg.Service/Call", &grpc).await;
    let budget = tripline::timeout::parse_grpc_timeout(&typed.body).unwrap();
    assert!(!budget.is_zero() && budget <= two_seconds, "{}", typed.body);
    running.shutdown().await;
}

#[tokio::test]
async fn no_matching_route_is_a_404_that_says_so() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let route = r#"match = { path_prefix = "/api", method = "GET", headers = { x-tenant = "a" } }"#;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], route, "")).await;
    assert_eq!(
        send(addr, "GET", "/api/x", &[("x-tenant", "a")])
            .await
            .status,
        200
    );
    for (method, path, tenant) in [
        ("GET", "/other", "a"),
        ("POST", "/api/x", "a"),
        ("GET", "/api/x", "b"),
    ] {
        let answer = send(addr, method, path, &[("x-tenant", tenant)]).await;
        assert_eq!(answer.status, 404, "{method} {path} {tenant}");
        assert_eq!(answer.header("x-tripline-flag"), Some("NR"));
    }
    assert_eq!(upstream.hits(), 1);
    running.shutdown().await;
}

#[tokio::test]
async fn the_upstream_sees_a_forwarded_element_beside_x_forwarded_for() {
    let upstream = Upstream::start(echo("forwarded")).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], "", "")).await;
    assert_eq!(get(addr, "/").await.body, "for=127.0.0.1;proto=http");
    let chained = send(addr, "GET", "/", &[("forwarded", "for=\"[2001:db8::1]\"")]).await;
    assert_eq!(
        chained.body, "for=\"[2001:db8::1]\", for=127.0.0.1;proto=http",
        "earlier proxies' elements are kept"
    );
    running.shutdown().await;
}
