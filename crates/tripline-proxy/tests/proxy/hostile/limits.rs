//! Heads larger than `[proxy] max_header_bytes` (64 KiB by default):
//! refused `414` while still on the request line, `431` after, labelled
//! and counted, on the fast path and on hyper's; the limit's own
//! validation.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tripline_proxy::config::ProxyConfig;

use super::*;

#[tokio::test]
async fn oversized_heads_are_refused_with_431() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], "", "")).await;
    let huge_value = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nx-huge: {}\r\n\r\n",
        "a".repeat(512 * 1024)
    );
    let many_names = format!(
        "GET / HTTP/1.1\r\nHost: x\r\n{}\r\n",
        (0..200)
            .map(|i| format!("x-h{i}: v\r\n"))
            .collect::<String>()
    );
    for (what, head) in [
        ("one huge value", huge_value),
        ("200 header lines", many_names),
    ] {
        let answer = raw(addr, head.as_bytes()).await;
        assert_refused(what.as_bytes(), &answer, 431);
    }
    assert_eq!(upstream.hits(), 0, "no oversized head reached the upstream");
    assert_eq!(get(addr, "/").await.status, 200);
    running.shutdown().await;
}

#[tokio::test]
async fn a_head_over_max_header_bytes_is_refused_414_on_its_request_line_and_431_after() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let text = config_with_admin(upstream.addr, "", "max_header_bytes = 4096");
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    let before = unrouted_refusals(admin).await;
    let long_url = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(5000));
    assert_refused(
        long_url.as_bytes(),
        &raw(addr, long_url.as_bytes()).await,
        414,
    );
    let long_head = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nx-big: {}\r\n\r\n",
        "a".repeat(5000)
    );
    assert_refused(
        long_head.as_bytes(),
        &raw(addr, long_head.as_bytes()).await,
        431,
    );
    // With a body (hyper's path), and unfinished: refused at the limit,
    // not when the client gives up.
    let unfinished = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nx-big: {}",
        "a".repeat(5000)
    );
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(unfinished.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(BOUND, stream.read_to_end(&mut answer))
        .await
        .expect("refused at the limit")
        .unwrap();
    assert_refused(b"unfinished", &String::from_utf8_lossy(&answer), 431);
    // Under the limit: served, with a body or without.
    let fits = format!("x-fits: {}", "a".repeat(3000));
    let (name, value) = fits.split_once(": ").unwrap();
    assert_eq!(send(addr, "GET", "/", &[(name, value)]).await.status, 200);
    let body = bytes::Bytes::from_static(b"hi");
    assert_eq!(
        send_body(addr, "POST", "/", &[(name, value)], body)
            .await
            .status,
        200
    );
    let after = unrouted_refusals(admin).await;
    assert_eq!((after.0 - before.0, after.1 - before.1), (3.0, 3.0));
    assert_eq!(upstream.hits(), 2);
    running.shutdown().await;
}

#[tokio::test]
async fn a_head_over_the_default_64_kib_is_refused() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream.addr], "", "")).await;
    for size in [80 * 1024, 200 * 1024] {
        let head = format!(
            "GET / HTTP/1.1\r\nHost: x\r\nx-big: {}\r\n\r\n",
            "a".repeat(size)
        );
        assert_refused(b"80 KiB head", &raw(addr, head.as_bytes()).await, 431);
    }
    let head = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nx-big: {}\r\n\r\n",
        "a".repeat(60 * 1024)
    );
    assert!(raw_request_is_served(addr, head.as_bytes()).await);
    assert_eq!(upstream.hits(), 1);
    running.shutdown().await;
}

/// Whether `head` (a keep-alive GET) is answered 200.
async fn raw_request_is_served(addr: std::net::SocketAddr, head: &[u8]) -> bool {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head).await.unwrap();
    let mut answer = [0u8; 64];
    let n = tokio::time::timeout(BOUND, stream.read(&mut answer))
        .await
        .expect("answered")
        .unwrap();
    answer[..n].starts_with(b"HTTP/1.1 200")
}

#[test]
fn max_header_bytes_and_client_body_timeout_out_of_range_are_refused_naming_the_field() {
    let base = config(&["127.0.0.1:9".parse().unwrap()], "", "");
    for (line, field) in [
        ("max_header_bytes = 0", "proxy.max_header_bytes"),
        ("max_header_bytes = 2000000", "proxy.max_header_bytes"),
        ("client_body_timeout = \"0s\"", "proxy.client_body_timeout"),
    ] {
        let err = ProxyConfig::from_toml(&with_proxy_section(&base, line)).unwrap_err();
        assert!(err.to_string().contains(field), "{line}: {err}");
    }
    let fine = with_proxy_section(
        &base,
        "max_header_bytes = 16384\nclient_body_timeout = \"30s\"",
    );
    let config = ProxyConfig::from_toml(&fine).unwrap();
    assert_eq!(config.proxy.max_header_bytes, 16384);
    assert_eq!(config.proxy.client_body_timeout, Duration::from_secs(30));
}
