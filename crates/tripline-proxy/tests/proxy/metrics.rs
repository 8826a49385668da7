//! The admin listener serves the exporter's metrics of everything the
//! proxy built, and the proxy's own request and refusal counts.

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};

use tripline_proxy::config::ProxyConfig;

use crate::support::*;

const ROUTE: &str = r#"breaker = { window = { kind = "count", size = 4 }, minimum_calls = 4, failure_rate_threshold = 0.5, open_duration = "10s", half_open = { policy = "consecutive", successes = 1 } }"#;

const ADMIN: &str = "\n[admin]\naddress = \"127.0.0.1:0\"\n";

/// A GET to the admin listener, as a plain-text scraper asks.
async fn scrape(admin: SocketAddr, path: &str) -> Answer {
    send(admin, "GET", path, &[("accept", "text/plain")]).await
}

/// The value of the series whose line starts with `series`.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

#[tokio::test]
async fn admin_metrics_show_the_open_route_breaker_refusals_and_endpoint_breakers() {
    let upstream = Upstream::start(|_| respond(500, "boom")).await;
    let text = format!("{}{ADMIN}", config(&[upstream.addr], ROUTE, ""));
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().expect("an admin listener");
    assert!(
        !running.local_addrs().contains(&admin),
        "a listener of its own"
    );
    for _ in 0..4 {
        assert_eq!(get(addr, "/").await.status, 500);
    }
    for _ in 0..3 {
        assert_eq!(get(addr, "/").await.header("x-tripline-flag"), Some("CO"));
    }

    let m = scrape(admin, "/metrics").await;
    assert_eq!(m.status, 200);
    assert_eq!(
        m.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let body = &m.body;
    assert_eq!(
        value(body, r#"tripline_breaker_state{name="api",state="open"}"#),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        value(
            body,
            r#"tripline_proxy_refusals_total{route="api",flag="CO"}"#
        ),
        Some(3.0),
        "{body}"
    );
    assert_eq!(
        value(
            body,
            r#"tripline_proxy_requests_total{route="api",code_class="5xx"}"#
        ),
        Some(7.0),
        "{body}"
    );
    let endpoint = upstream.addr.to_string();
    assert!(
        body.lines()
            .any(|l| l.starts_with("tripline_breaker_state{")
                && l.contains(&endpoint)
                && l.contains(r#"state="closed""#)),
        "an endpoint breaker series: {body}"
    );
    assert!(
        body.contains(r#"cluster="backend""#),
        "cluster series: {body}"
    );
    assert!(
        body.contains("tripline_retry_budget"),
        "budget series: {body}"
    );

    assert_eq!(scrape(admin, "/metrics/x").await.status, 404);
    assert_eq!(scrape(admin, "/api").await.status, 404);
    assert!(running.shutdown().await.complete);
    assert!(
        tokio::net::TcpStream::connect(admin).await.is_err(),
        "the admin listener drains with the proxy"
    );
}

#[tokio::test]
async fn requests_are_counted_by_class_and_unrouted_ones_with_an_empty_route() {
    let upstream = Upstream::start(|_| respond(200, "fine")).await;
    let text = format!("{}{ADMIN}", config(&[upstream.addr], "", "")).replace(
        "name = \"api\"\n",
        "name = \"api\"\nmatch = { path_prefix = \"/api\" }\n",
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    assert_eq!(get(addr, "/api/x").await.status, 200);
    assert_eq!(get(addr, "/elsewhere").await.status, 404);
    let body = scrape(admin, "/metrics").await.body;
    let ok = r#"tripline_proxy_requests_total{route="api",code_class="2xx"}"#;
    assert_eq!(value(&body, ok), Some(1.0), "{body}");
    let nr = r#"tripline_proxy_refusals_total{route="",flag="NR"}"#;
    assert_eq!(value(&body, nr), Some(1.0), "{body}");
    let co = r#"tripline_proxy_refusals_total{route="api",flag="CO"}"#;
    assert_eq!(value(&body, co), Some(0.0), "series exist from the start");
    running.shutdown().await;
}

#[tokio::test]
async fn an_invalid_admin_address_is_refused_naming_the_field() {
    let text = format!(
        "{}\n[admin]\naddress = \"localhost\"\n",
        config(&["127.0.0.1:9".parse().unwrap()], "", "")
    );
    let err = ProxyConfig::from_toml(&text).unwrap_err();
    assert_eq!(err.field, "admin.address");
    let typo = format!(
        "{}\n[admin]\nadress = \"127.0.0.1:0\"\n",
        config(&["127.0.0.1:9".parse().unwrap()], "", "")
    );
    assert!(
        ProxyConfig::from_toml(&typo).is_err(),
        "unknown keys refused"
    );
}

#[tokio::test]
async fn the_scrape_passes_promtool_check_metrics() {
    let upstream = Upstream::start(|_| respond(500, "boom")).await;
    let text = format!("{}{ADMIN}", config(&[upstream.addr], ROUTE, ""));
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    for _ in 0..5 {
        get(addr, "/").await;
    }
    let body = scrape(running.admin_addr().unwrap(), "/metrics").await.body;
    running.shutdown().await;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool not found: install the Debian package `prometheus`");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(body.as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Lint remarks (e.g. on counter names) are warnings, not errors: only
    // a parse failure makes promtool exit non-zero.
    assert!(out.status.success(), "promtool: {report}\n{body}");
}
