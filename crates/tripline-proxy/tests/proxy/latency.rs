//! Latency histograms on `/metrics`: per route and per cluster by
//! default, per endpoint with `[proxy] metrics_detail = "endpoint"`,
//! classic buckets whose `+Inf` is the count, kept by a reload.

use crate::support::*;

const ROUTE_SERIES: &str = "tripline_proxy_request_duration_seconds";
const CLUSTER_SERIES: &str = "tripline_proxy_upstream_duration_seconds";
const ENDPOINT_SERIES: &str = "tripline_proxy_upstream_endpoint_duration_seconds";

async fn scrape(admin: std::net::SocketAddr) -> String {
    send(admin, "GET", "/metrics", &[]).await.body
}

/// The cumulative bucket counts of `name{labels,le=…}`, in order.
fn buckets(body: &str, name: &str, labels: &str) -> Vec<(String, f64)> {
    let prefix = format!("{name}_bucket{{{labels},le=\"");
    body.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|rest| {
            let (le, value) = rest.split_once("\"} ")?;
            Some((le.to_owned(), value.parse().ok()?))
        })
        .collect()
}

fn assert_histogram(body: &str, name: &str, labels: &str, count: f64) {
    let b = buckets(body, name, labels);
    assert_eq!(b.len(), 15, "{name}{{{labels}}}: {b:?}\n{body}");
    assert!(b.windows(2).all(|w| w[0].1 <= w[1].1), "cumulative: {b:?}");
    assert_eq!(b.last().map(|l| (l.0.as_str(), l.1)), Some(("+Inf", count)));
    let line = |suffix: &str| {
        let prefix = format!("{name}_{suffix}{{{labels}}} ");
        body.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.parse::<f64>().ok())
    };
    assert_eq!(line("count"), Some(count), "{body}");
    assert!(line("sum").is_some_and(|s| s >= 0.0), "{body}");
}

#[tokio::test]
async fn each_forwarded_request_and_try_lands_in_its_route_and_cluster_histogram() {
    let upstream = Upstream::start(|_| respond(200, "ok")).await;
    let text = config(&[upstream.addr], "", "") + ADMIN_SECTION;
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    for _ in 0..7 {
        assert_eq!(get(addr, "/").await.status, 200);
    }
    let body = scrape(admin).await;
    assert_histogram(&body, ROUTE_SERIES, "route=\"api\"", 7.0);
    assert_histogram(&body, CLUSTER_SERIES, "cluster=\"backend\"", 7.0);
    // A loopback try takes milliseconds: every one is within the 5 s
    // bucket, with room for a machine that stalls.
    let within = buckets(&body, CLUSTER_SERIES, "cluster=\"backend\"");
    assert_eq!(within.iter().find(|b| b.0 == "5").map(|b| b.1), Some(7.0));
    assert!(
        !body.contains(&format!("{ENDPOINT_SERIES}_count{{")),
        "off by default"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn endpoint_detail_adds_a_histogram_per_endpoint() {
    let a = Upstream::start(|_| respond(200, "a")).await;
    let b = Upstream::start(|_| respond(200, "b")).await;
    let text = with_proxy_section(
        &(config(&[a.addr, b.addr], "", "") + ADMIN_SECTION),
        "metrics_detail = \"endpoint\"",
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    for _ in 0..4 {
        get(addr, "/").await;
    }
    let body = scrape(running.admin_addr().unwrap()).await;
    for e in [a.addr, b.addr] {
        let labels = format!("cluster=\"backend\",endpoint=\"{e}\"");
        assert_histogram(&body, ENDPOINT_SERIES, &labels, 2.0);
    }
    running.shutdown().await;
}

#[tokio::test]
async fn a_reload_keeps_the_counts_of_a_route_that_stays() {
    let upstream = Upstream::start(|_| respond(200, "ok")).await;
    let text = config(&[upstream.addr], "", "") + ADMIN_SECTION;
    let (proxy, running, addr, _clock) = start_proxy(&text).await;
    for _ in 0..3 {
        get(addr, "/").await;
    }
    let changed = text.replace("[[routes]]", "[[routes]]\ntimeout = { overall = \"30s\" }");
    proxy
        .reload(tripline_proxy::config::ProxyConfig::from_toml(&changed).unwrap())
        .unwrap();
    get(addr, "/").await;
    let body = scrape(running.admin_addr().unwrap()).await;
    assert_histogram(&body, ROUTE_SERIES, "route=\"api\"", 4.0);
    assert_histogram(&body, CLUSTER_SERIES, "cluster=\"backend\"", 4.0);
    running.shutdown().await;
}

#[test]
fn an_unknown_detail_is_refused_naming_the_field() {
    let text = with_proxy_section(
        &config(&["127.0.0.1:9000".parse().unwrap()], "", ""),
        "metrics_detail = \"pod\"",
    );
    let error = tripline_proxy::config::ProxyConfig::from_toml(&text)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("metrics_detail") && error.contains("endpoint"),
        "{error}"
    );
}

#[tokio::test]
async fn every_proxy_family_the_grafana_dashboard_reads_is_in_the_scrape() {
    let dashboard = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/grafana/tripline.json"),
    )
    .unwrap();
    let upstream = Upstream::start(|_| respond(200, "ok")).await;
    // Health checks and limits, so that their families have series.
    let cluster = "health_check = { tcp = {}, interval = \"50ms\", timeout = \"50ms\" }\nlimits = { max_requests = 100 }";
    let text = config(&[upstream.addr], "", cluster) + ADMIN_SECTION;
    let (_proxy, running, _addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    let start = tokio::time::Instant::now();
    let body = loop {
        let body = scrape(admin).await;
        if body.contains("tripline_proxy_health_checks_total{") {
            break body;
        }
        assert!(start.elapsed() < BOUND, "no health check ran");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    running.shutdown().await;
    let mut rest = dashboard.as_str();
    let mut checked = 0;
    while let Some(i) = rest.find("tripline_proxy_") {
        let name: String = rest[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[i + name.len()..];
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(&name);
        assert!(
            body.contains(&format!("# TYPE {family} ")),
            "the dashboard reads {name}, which the proxy does not write"
        );
        checked += 1;
    }
    assert!(checked >= 6, "{checked}");
}
