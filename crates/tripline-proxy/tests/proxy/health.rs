//! Active health checks: an endpoint that fails its checks is taken out
//! before any request finds it down, comes back after its passes, keeps
//! its health through a reload, and says why it is out.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tripline_proxy::Proxy;
use tripline_proxy::config::ProxyConfig;

use crate::support::*;

/// Checks every 80 ms (a check may take all of it: a loaded machine must
/// not fail one by its slowness); 3 failures out, 2 passes back; no panic
/// mode.
const CHECKED: &str = r#"panic_threshold_percent = 0
health_check = { http = { path = "/healthz", expect = [200] }, interval = "80ms", timeout = "80ms", jitter = "10%", unhealthy_threshold = 3, healthy_threshold = 2 }
"#;

/// An upstream whose `/healthz` answers 200 while `up`, 503 otherwise,
/// counting checks and other requests apart.
struct Checked {
    upstream: Upstream,
    up: Arc<AtomicBool>,
    checks: Arc<AtomicUsize>,
}

impl Checked {
    async fn start() -> Checked {
        let up = Arc::new(AtomicBool::new(true));
        let checks = Arc::new(AtomicUsize::new(0));
        let (u, c) = (up.clone(), checks.clone());
        let upstream = Upstream::start(move |req| {
            if req.uri().path() == "/healthz" {
                c.fetch_add(1, Ordering::SeqCst);
                return if u.load(Ordering::SeqCst) {
                    respond(200, "ok")
                } else {
                    respond(503, "down")
                };
            }
            respond(200, "served")
        })
        .await;
        Checked {
            upstream,
            up,
            checks,
        }
    }

    /// Requests other than health checks.
    fn requests(&self) -> usize {
        self.upstream.hits() - self.checks.load(Ordering::SeqCst)
    }
}

/// Waits (bounded) until `cond` holds, polling every few milliseconds.
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + BOUND;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn marked(proxy: &Proxy, endpoint: &Checked) -> bool {
    proxy
        .cluster("backend")
        .unwrap()
        .endpoint(&endpoint.upstream.addr.to_string())
        .unwrap()
        .is_marked_unhealthy()
}

#[tokio::test]
async fn an_endpoint_failing_its_checks_is_out_before_any_request_reaches_it_and_comes_back() {
    let a = Checked::start().await;
    let b = Checked::start().await;
    let text = config(&[a.upstream.addr, b.upstream.addr], "", CHECKED) + ADMIN_SECTION;
    let (proxy, running, addr, _clock) = start_proxy(&text).await;
    until("a first check", || a.checks.load(Ordering::SeqCst) > 0).await;

    a.up.store(false, Ordering::SeqCst);
    let before = a.checks.load(Ordering::SeqCst);
    until("a taken out", || marked(&proxy, &a)).await;
    // Out at its third failed check, never sooner. A check in flight at
    // the flip may have passed, one may time out on a stalled machine
    // (and so fail), and one more may arrive before this thread looks:
    // a little slack above, none below.
    let failed = a.checks.load(Ordering::SeqCst) - before;
    assert!((3..=6).contains(&failed), "{failed} checks to take it out");
    assert_eq!(a.requests(), 0, "no request was sent to find it down");
    for _ in 0..10 {
        assert_eq!(get(addr, "/").await.body, "served");
    }
    assert_eq!((a.requests(), b.requests()), (0, 10));

    // /api/outliers says why it is out, with the last check's result.
    let admin = running.admin_addr().unwrap();
    let body = send(admin, "GET", "/api/outliers", &[]).await.body;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let e = &v["clusters"][0]["endpoints"][0];
    assert_eq!(e["endpoint"], a.upstream.addr.to_string());
    assert_eq!(e["out_because"], serde_json::json!(["health_check"]));
    assert_eq!(e["health_check"]["healthy"], false);
    assert_eq!(e["routable"], false);
    assert!(
        e["health_check"]["last_result"]
            .as_str()
            .unwrap()
            .contains("503")
    );
    let other = &v["clusters"][0]["endpoints"][1];
    assert_eq!(other["out_because"], serde_json::json!([]));
    assert_eq!(other["health_check"]["healthy"], true);
    let series = format!(
        "tripline_proxy_endpoint_healthy{{cluster=\"backend\",endpoint=\"{}\"}}",
        a.upstream.addr
    );
    assert_eq!(metric(admin, &series).await, Some(0.0));
    let failed = r#"tripline_proxy_health_checks_total{cluster="backend",result="fail"}"#;
    assert!(metric(admin, failed).await.unwrap() >= 3.0);

    a.up.store(true, Ordering::SeqCst);
    let before = a.checks.load(Ordering::SeqCst);
    until("a back", || !marked(&proxy, &a)).await;
    let passed = a.checks.load(Ordering::SeqCst) - before;
    // Back at its second passed check; the same slack above.
    assert!(
        (2..=5).contains(&passed),
        "{passed} checks to bring it back"
    );
    for _ in 0..10 {
        get(addr, "/").await;
    }
    assert!(a.requests() > 0, "routed again");
    assert_eq!(metric(admin, &series).await, Some(1.0));
    running.shutdown().await;
}

#[tokio::test]
async fn a_reload_that_keeps_the_cluster_keeps_the_health_of_endpoints_that_stay() {
    let a = Checked::start().await;
    let b = Checked::start().await;
    let c = Checked::start().await;
    a.up.store(false, Ordering::SeqCst);
    let (proxy, running, addr, _clock) =
        start_proxy(&config(&[a.upstream.addr, b.upstream.addr], "", CHECKED)).await;
    until("a taken out", || marked(&proxy, &a)).await;

    // An added endpoint: the cluster is kept, its endpoints that stay too.
    let text = config(
        &[a.upstream.addr, b.upstream.addr, c.upstream.addr],
        "",
        CHECKED,
    );
    running
        .reload(ProxyConfig::from_toml(&text).unwrap())
        .unwrap();
    assert!(marked(&proxy, &a), "still out right after the reload");
    for _ in 0..12 {
        assert_eq!(get(addr, "/").await.body, "served");
    }
    assert_eq!(a.requests(), 0, "a fresh start would have routed to it");
    assert!(b.requests() > 0 && c.requests() > 0);
    until("c checked", || c.checks.load(Ordering::SeqCst) > 0).await;

    // A changed check keeps the cluster too: the endpoint stays out.
    let slower = CHECKED.replace("interval = \"80ms\"", "interval = \"120ms\"");
    let text = config(
        &[a.upstream.addr, b.upstream.addr, c.upstream.addr],
        "",
        &slower,
    );
    let report = running
        .reload(ProxyConfig::from_toml(&text).unwrap())
        .unwrap();
    assert_eq!(report.clusters_kept, ["backend"]);
    assert!(marked(&proxy, &a), "still out after the check changed");
    for _ in 0..6 {
        assert_eq!(get(addr, "/").await.body, "served");
    }
    assert_eq!(a.requests(), 0);

    // A cluster rebuilt (another balancer) starts with it out as well.
    let rebuilt = format!("{slower}balancer = \"least_outstanding\"\n");
    let text = config(
        &[a.upstream.addr, b.upstream.addr, c.upstream.addr],
        "",
        &rebuilt,
    );
    let report = running
        .reload(ProxyConfig::from_toml(&text).unwrap())
        .unwrap();
    assert_eq!(report.clusters_built, ["backend"]);
    assert!(
        marked(&proxy, &a),
        "out in the rebuilt cluster from the start"
    );
    for _ in 0..6 {
        assert_eq!(get(addr, "/").await.body, "served");
    }
    assert_eq!(a.requests(), 0);
    // The rebuilt cluster has a checker of its own: a recovers in it.
    a.up.store(true, Ordering::SeqCst);
    until("a back in the rebuilt cluster", || !marked(&proxy, &a)).await;
    running.shutdown().await;
}

#[tokio::test]
async fn when_every_endpoint_fails_its_checks_panic_mode_still_serves() {
    let a = Checked::start().await;
    let b = Checked::start().await;
    a.up.store(false, Ordering::SeqCst);
    b.up.store(false, Ordering::SeqCst);
    let cluster = CHECKED.replace(
        "panic_threshold_percent = 0",
        "panic_threshold_percent = 50",
    );
    let (proxy, running, addr, _clock) =
        start_proxy(&config(&[a.upstream.addr, b.upstream.addr], "", &cluster)).await;
    until("both out", || marked(&proxy, &a) && marked(&proxy, &b)).await;
    assert!(proxy.cluster("backend").unwrap().health().panic);
    for _ in 0..10 {
        assert_eq!(get(addr, "/").await.body, "served");
    }
    assert!(
        a.requests() > 0 && b.requests() > 0,
        "spread over all in panic"
    );
    running.shutdown().await;
}

#[tokio::test]
async fn a_tcp_check_takes_out_an_endpoint_that_refuses_connections() {
    let good = Checked::start().await;
    // Bound then closed: connections to it are refused.
    let gone = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gone_addr = gone.local_addr().unwrap();
    drop(gone);
    let cluster = CHECKED.replace(
        r#"http = { path = "/healthz", expect = [200] }"#,
        "tcp = {}",
    );
    let (proxy, running, addr, _clock) =
        start_proxy(&config(&[gone_addr, good.upstream.addr], "", &cluster)).await;
    let cluster = proxy.cluster("backend").unwrap();
    let out = || {
        cluster
            .endpoint(&gone_addr.to_string())
            .unwrap()
            .is_marked_unhealthy()
    };
    until("the refusing endpoint out", out).await;
    let good_endpoint = cluster.endpoint(&good.upstream.addr.to_string()).unwrap();
    assert!(!good_endpoint.is_marked_unhealthy());
    for _ in 0..6 {
        assert_eq!(get(addr, "/").await.status, 200);
    }
    running.shutdown().await;
}

/// An h2c server answering `grpc.health.v1.Health/Check` with SERVING
/// while `serving`, NOT_SERVING (2) otherwise.
async fn grpc_health_server(serving: Arc<AtomicBool>) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let serving = serving.clone();
            let service = service_fn(move |req: Request<Incoming>| {
                let status = if serving.load(Ordering::SeqCst) { 1 } else { 2 };
                let right = req.uri().path() == "/grpc.health.v1.Health/Check";
                async move {
                    let body = Bytes::from(vec![0, 0, 0, 0, 2, 0x08, status]);
                    let answer = Response::builder()
                        .header("content-type", "application/grpc")
                        .header("grpc-status", if right { "0" } else { "12" })
                        .body(Full::new(body))
                        .unwrap();
                    Ok::<_, std::convert::Infallible>(answer)
                }
            });
            tokio::spawn(
                hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    addr
}

#[tokio::test]
async fn a_grpc_check_follows_the_standard_health_service() {
    let serving = Arc::new(AtomicBool::new(true));
    let server = grpc_health_server(serving.clone()).await;
    let other = Checked::start().await;
    let cluster = CHECKED.replace(
        r#"http = { path = "/healthz", expect = [200] }"#,
        r#"grpc = { service = "api.Users" }"#,
    );
    let (proxy, running, _addr, _clock) =
        start_proxy(&config(&[server, other.upstream.addr], "", &cluster)).await;
    let cluster = proxy.cluster("backend").unwrap();
    let endpoint = cluster.endpoint(&server.to_string()).unwrap();
    // `other` speaks HTTP/1 only: its gRPC checks fail, it goes out.
    until("the HTTP/1 endpoint out", || {
        cluster
            .endpoint(&other.upstream.addr.to_string())
            .unwrap()
            .is_marked_unhealthy()
    })
    .await;
    assert!(!endpoint.is_marked_unhealthy(), "SERVING stays in");
    serving.store(false, Ordering::SeqCst);
    until("NOT_SERVING taken out", || endpoint.is_marked_unhealthy()).await;
    serving.store(true, Ordering::SeqCst);
    until("SERVING again", || !endpoint.is_marked_unhealthy()).await;
    running.shutdown().await;
}

#[test]
fn a_bad_health_check_is_refused_with_its_line_and_field() {
    let head = "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n\n[clusters.backend]\nendpoints = [\"127.0.0.1:9000\"]\n";
    let cases = [
        (
            "health_check = { tcp = {}, healthy_threshold = 0 }",
            "clusters.backend.health_check.healthy_threshold",
        ),
        (
            "health_check = { tcp = {}, interval = \"1s\", timeout = \"2s\" }",
            "clusters.backend.health_check.timeout",
        ),
        (
            "health_check = { udp = {} }",
            "clusters.backend.health_check",
        ),
        (
            "health_check = { tcp = {}, jitter = \"ten\" }",
            "clusters.backend.health_check.jitter",
        ),
    ];
    for (line, field) in cases {
        let text = format!("{head}{line}\n");
        let e = ProxyConfig::from_toml(&text).unwrap_err();
        assert!(e.field.starts_with(field), "{line}: {e}");
        assert_eq!(e.line, Some(10), "{line}: {e}");
    }
    // YAML alike, and a file names itself.
    let yaml = "listeners:\n  - address: 127.0.0.1:0\nroutes:\n  - name: api\n    cluster: backend\nclusters:\n  backend:\n    endpoints: [\"127.0.0.1:9000\"]\n    health_check:\n      tcp: {}\n      healthy_threshold: 0\n";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("proxy.yaml");
    std::fs::write(&path, yaml).unwrap();
    let e = ProxyConfig::load(&path).unwrap_err();
    assert_eq!(e.field, "clusters.backend.health_check.healthy_threshold");
    assert_eq!(e.line, Some(11), "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("{}:11: ", path.display())),
        "{e}"
    );
}

#[tokio::test]
async fn an_http_check_of_a_tls_cluster_goes_over_tls_and_checks_the_certificate() {
    use crate::tls::{Pki, tls_upstream_on, toml_path};
    let pki = Pki::new();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = tls_upstream_on(&pki, &[b"http/1.1"], listener);
    let ca = toml_path(&pki.path("ca.pem"));
    let check = r#"health_check = { http = { path = "/healthz", expect = [200] }, interval = "200ms", timeout = "200ms", unhealthy_threshold = 2, healthy_threshold = 1 }"#;
    for (server_name, healthy) in [("localhost", true), ("elsewhere.example", false)] {
        let cluster = format!("tls = {{ ca = {ca}, server_name = \"{server_name}\" }}\n{check}\n");
        let text = config(&[upstream], "", &cluster) + ADMIN_SECTION;
        let (proxy, running, _addr, _clock) = start_proxy(&text).await;
        let admin = running.admin_addr().unwrap();
        let cluster = proxy.cluster("backend").unwrap();
        let endpoint = cluster.endpoint(&upstream.to_string()).unwrap();
        let result = if healthy { "pass" } else { "fail" };
        let series = format!(
            "tripline_proxy_health_checks_total{{cluster=\"backend\",result=\"{result}\"}}"
        );
        let deadline = tokio::time::Instant::now() + BOUND;
        while metric(admin, &series).await.unwrap_or(0.0) < 3.0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{server_name}: no {result}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(endpoint.is_marked_unhealthy(), !healthy, "{server_name}");
        running.shutdown().await;
    }
}

#[tokio::test]
async fn an_http_check_of_an_h2c_cluster_speaks_http2() {
    // An HTTP/2-only server answering 200 to any path.
    let server = grpc_health_server(Arc::new(AtomicBool::new(true))).await;
    let other = Checked::start().await;
    let cluster = format!("protocol = \"h2c\"\n{CHECKED}");
    let (proxy, running, _addr, _clock) =
        start_proxy(&(config(&[server, other.upstream.addr], "", &cluster) + ADMIN_SECTION)).await;
    let cluster = proxy.cluster("backend").unwrap();
    // The HTTP/1-only endpoint fails an HTTP/2 check and goes out...
    until("the HTTP/1 endpoint out", || {
        cluster
            .endpoint(&other.upstream.addr.to_string())
            .unwrap()
            .is_marked_unhealthy()
    })
    .await;
    // ...while the HTTP/2 one passes its checks and stays in.
    let admin = running.admin_addr().unwrap();
    let passes = r#"tripline_proxy_health_checks_total{cluster="backend",result="pass"}"#;
    let deadline = tokio::time::Instant::now() + BOUND;
    while metric(admin, passes).await.unwrap_or(0.0) < 5.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the h2c endpoint never passed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let endpoint = cluster.endpoint(&server.to_string()).unwrap();
    assert!(!endpoint.is_marked_unhealthy());
    running.shutdown().await;
}

#[tokio::test]
async fn endpoints_that_dns_brings_are_checked_from_their_arrival() {
    let a = Checked::start().await;
    let port = a.upstream.addr.port();
    let text = format!(
        "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n\n[clusters.backend]\nendpoints = [\"localhost:{port}\"]\ndns_refresh = \"50ms\"\n{CHECKED}{ADMIN_SECTION}"
    );
    let (_proxy, running, _addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    // The name becomes its address, which the checker takes up and checks.
    let resolved = a.upstream.addr.to_string();
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let body = send(admin, "GET", "/api/outliers", &[]).await.body;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let endpoints = v["clusters"][0]["endpoints"].as_array().unwrap().clone();
        let checked = endpoints.iter().any(|e| {
            e["endpoint"] == resolved.as_str()
                && e["health_check"]["consecutive_passes"].as_u64() >= Some(2)
        });
        if checked {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{body}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(a.checks.load(Ordering::SeqCst) >= 2);
    running.shutdown().await;
}
