//! Clusters whose endpoints are Dubbo providers in ZooKeeper (Debian's
//! server, started on a free loopback port): providers join, leave and
//! keep their state; weights reach the balancer; a lost session keeps the
//! providers and says so; an unreadable registration is skipped and
//! counted; reloads start and stop watches; and a Triple (gRPC) call goes
//! end to end, moving off a provider that fails with UNAVAILABLE.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[allow(dead_code)] // the proxy tests' helpers; these tests use a few
#[path = "proxy/support.rs"]
mod support;

#[allow(dead_code)]
#[path = "../../tripline-discovery/tests/zookeeper/server.rs"]
mod server;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use tokio::net::TcpListener;
use tripline::State;
use tripline_discovery::ProviderUrl;
use zookeeper_client as zk;

use server::ZooKeeper;
use support::*;
use tripline_proxy::Proxy;

const PATH: &str = "/dubbo/com.example.OrderService/providers";

/// Polls `check` every 20 ms until it gives `Some`, or fails naming
/// `what` after 10 s.
async fn until<T, Fut: Future<Output = Option<T>>>(
    what: &str,
    mut check: impl FnMut() -> Fut,
) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not seen within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A provider's URL as Dubbo registers it.
fn provider(protocol: &str, address: SocketAddr, params: &[(&str, &str)]) -> ProviderUrl {
    let mut all: BTreeMap<String, String> = [("application", "orders"), ("side", "provider")]
        .iter()
        .chain(params)
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    all.insert("interface".into(), "com.example.OrderService".into());
    ProviderUrl {
        protocol: protocol.to_owned(),
        host: address.ip().to_string(),
        port: address.port(),
        interface: "com.example.OrderService".to_owned(),
        params: all,
    }
}

/// A client registering providers (ephemeral children), as Dubbo does.
async fn registrar(zk: &ZooKeeper) -> zk::Client {
    let client = zk::Client::connector()
        .with_session_timeout(Duration::from_secs(2))
        .connect(&zk.address())
        .await
        .expect("the registrar connects");
    let folder = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    client
        .mkdir(PATH, &folder)
        .await
        .expect("the providers folder");
    client
}

async fn register(client: &zk::Client, child: &str) {
    let options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
    client
        .create(&format!("{PATH}/{child}"), b"", &options)
        .await
        .expect("register");
}

async fn unregister(client: &zk::Client, child: &str) {
    client
        .delete(&format!("{PATH}/{child}"), None)
        .await
        .expect("unregister");
}

/// A proxy config: route `api` over cluster `orders`, whose endpoints
/// come from ZooKeeper (`cluster` adds lines to the cluster), and an
/// admin listener.
fn proxy_config(zk: &ZooKeeper, protocol: &str, cluster: &str) -> String {
    format!(
        "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[[routes]]\nname = \"api\"\ncluster = \"orders\"\n\n[clusters.orders]\ndiscovery = {{ zookeeper = \"{}\", path = \"{PATH}\", protocol = \"{protocol}\", session_timeout = \"2s\" }}\n{cluster}\n\n[admin]\naddress = \"127.0.0.1:0\"\n",
        zk.address()
    )
}

/// The cluster's endpoint ids, sorted.
fn endpoints(proxy: &Proxy) -> Vec<String> {
    let mut ids: Vec<String> = proxy
        .cluster("orders")
        .map(|c| c.endpoints().iter().map(|e| e.id().to_string()).collect())
        .unwrap_or_default();
    ids.sort();
    ids
}

/// An HTTP upstream answering with its own name.
async fn named(name: &'static str) -> Upstream {
    Upstream::start(move |_| respond(200, name)).await
}

async fn outliers(admin: SocketAddr) -> Value {
    serde_json::from_str(&send(admin, "GET", "/api/outliers", &[]).await.body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn providers_join_and_leave_and_those_that_stay_keep_their_breaker() {
    let zk = ZooKeeper::start().await;
    let reg = registrar(&zk).await;
    let (a, b, c) = (named("a").await, named("b").await, named("c").await);
    let pa = provider("rest", a.addr, &[]).to_child();
    let pb = provider("rest", b.addr, &[]).to_child();
    register(&reg, &pa).await;
    register(&reg, &pb).await;
    // Latency per endpoint, to see a departed provider's series go.
    let detail = "\n[proxy]\nmetrics_detail = \"endpoint\"";
    let (proxy, running, addr, _clock) = start_proxy(&proxy_config(&zk, "rest", detail)).await;
    let admin = running.admin_addr().unwrap();
    let series_of = |e: SocketAddr| {
        format!(
            "tripline_proxy_upstream_endpoint_duration_seconds_count{{cluster=\"orders\",endpoint=\"{e}\"}}"
        )
    };
    let both = {
        let mut v = vec![a.addr.to_string(), b.addr.to_string()];
        v.sort();
        v
    };
    until("both providers", || async {
        (endpoints(&proxy) == both).then_some(())
    })
    .await;
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..10 {
        seen.insert(get(addr, "/").await.body);
    }
    assert_eq!(seen.len(), 2, "round robin over both: {seen:?}");
    assert_eq!(metric(admin, &series_of(b.addr)).await, Some(5.0));

    // `a`'s breaker is forced open; `b` leaves; `a` stays with its state.
    let breaker_a = endpoint_breaker_in(&proxy, a.addr);
    breaker_a.force_open();
    unregister(&reg, &pb).await;
    until("b gone", || async {
        (endpoints(&proxy) == vec![a.addr.to_string()]).then_some(())
    })
    .await;
    assert_eq!(
        endpoint_breaker_in(&proxy, a.addr).state(),
        State::ForcedOpen
    );
    // The provider that left takes its latency series with it.
    assert_eq!(metric(admin, &series_of(b.addr)).await, None);
    assert_eq!(metric(admin, &series_of(a.addr)).await, Some(5.0));

    // `c` joins and takes traffic within one watch round-trip.
    register(&reg, &provider("rest", c.addr, &[]).to_child()).await;
    let started = tokio::time::Instant::now();
    until("c takes traffic", || async {
        (get(addr, "/").await.body == "c").then_some(())
    })
    .await;
    println!(
        "a new provider took traffic {:?} after it registered",
        started.elapsed()
    );
    running.shutdown().await;
}

/// The breaker of the endpoint at `address` in cluster `orders`.
fn endpoint_breaker_in(proxy: &Proxy, address: SocketAddr) -> tripline::CircuitBreaker {
    let cluster = proxy.cluster("orders").unwrap();
    let endpoints = cluster.endpoints();
    let endpoint = endpoints
        .iter()
        .find(|e| e.address() == address.to_string())
        .expect("the endpoint");
    endpoint.breaker().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dubbo_weights_reach_the_weighted_balancers() {
    let zk = ZooKeeper::start().await;
    let reg = registrar(&zk).await;
    let light: SocketAddr = "127.0.0.1:50061".parse().unwrap();
    let heavy: SocketAddr = "127.0.0.1:50062".parse().unwrap();
    register(
        &reg,
        &provider("rest", light, &[("weight", "100")]).to_child(),
    )
    .await;
    register(
        &reg,
        &provider("rest", heavy, &[("weight", "300")]).to_child(),
    )
    .await;
    // Dubbo's `random` and `roundrobin`: 3 of 4 calls to the heavy one,
    // within 4 standard deviations (sqrt(n p q) ≈ 43) at random, exactly
    // in turn.
    for (balancer, bounds) in [
        ("weighted_random", 7_330..=7_670),
        ("weighted_round_robin", 7_500..=7_500),
    ] {
        let cluster_lines = format!("balancer = \"{balancer}\"");
        let (proxy, running, _addr, _clock) =
            start_proxy(&proxy_config(&zk, "rest", &cluster_lines)).await;
        until("both providers", || async {
            (endpoints(&proxy).len() == 2).then_some(())
        })
        .await;
        let cluster = proxy.cluster("orders").unwrap();
        let n = 10_000;
        let mut heavy_picks = 0;
        for _ in 0..n {
            let lease = cluster.select().expect("an endpoint");
            heavy_picks += u32::from(lease.endpoint().address() == heavy.to_string());
        }
        assert!(
            bounds.contains(&heavy_picks),
            "{balancer}: {heavy_picks} of {n}"
        );
        running.shutdown().await;
    }
}

// One thread: the captured log lines are the test thread's.
#[tokio::test]
async fn a_lost_zookeeper_keeps_the_providers_and_says_so_and_a_bad_registration_is_counted() {
    let mut zk = ZooKeeper::start().await;
    let reg = registrar(&zk).await;
    let a = named("a").await;
    register(&reg, &provider("rest", a.addr, &[]).to_child()).await;
    register(&reg, "not%20a%20provider%20url").await;
    let (logs, _guard) = capture_logs();
    let (proxy, running, addr, _clock) = start_proxy(&proxy_config(&zk, "rest", "")).await;
    let admin = running.admin_addr().unwrap();
    until("a", || async {
        (endpoints(&proxy) == vec![a.addr.to_string()]).then_some(())
    })
    .await;
    let skipped = r#"tripline_proxy_discovery_skipped{cluster="orders"}"#;
    until("the skipped registration counted", || async {
        (metric(admin, skipped).await? >= 1.0).then_some(())
    })
    .await;
    let connected = r#"tripline_proxy_discovery_connected{cluster="orders"}"#;
    assert_eq!(metric(admin, connected).await, Some(1.0));

    zk.kill();
    until("the loss seen", || async {
        (outliers(admin).await["clusters"][0]["discovery"]["connected"] == false).then_some(())
    })
    .await;
    assert_eq!(metric(admin, connected).await, Some(0.0));
    assert_eq!(
        get(addr, "/").await.body,
        "a",
        "the last providers serve on"
    );
    assert!(
        logged(&logs).contains("ZooKeeper connection lost for cluster orders"),
        "{}",
        logged(&logs)
    );

    zk.restart_with(false).await;
    until("reconnected", || async {
        (outliers(admin).await["clusters"][0]["discovery"]["connected"] == true).then_some(())
    })
    .await;
    assert_eq!(endpoints(&proxy), vec![a.addr.to_string()]);
    running.shutdown().await;
}

// One thread: the captured log lines are the test thread's.
#[tokio::test]
async fn a_path_listing_only_dubbo_providers_says_which_protocol_it_found() {
    let zk = ZooKeeper::start().await;
    let reg = registrar(&zk).await;
    let hessian: SocketAddr = "127.0.0.1:20880".parse().unwrap();
    register(&reg, &provider("dubbo", hessian, &[]).to_child()).await;
    let (logs, _guard) = capture_logs();
    let (proxy, running, _addr, _clock) = start_proxy(&proxy_config(&zk, "tri", "")).await;
    let admin = running.admin_addr().unwrap();
    let discovery = until("the other protocol counted", || async {
        let discovery = outliers(admin).await["clusters"][0]["discovery"].clone();
        (discovery["other_protocols"]["dubbo"] == 1).then_some(discovery)
    })
    .await;
    assert_eq!(discovery["protocol"], "tri");
    assert!(
        endpoints(&proxy).is_empty(),
        "a dubbo:// provider is never called"
    );
    let said = logged(&logs);
    assert!(
        said.contains("cluster orders wants tri:// providers")
            && said.contains("lists only 1 dubbo://"),
        "{said}"
    );
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_starts_and_stops_watches() {
    let zk = ZooKeeper::start().await;
    let reg = registrar(&zk).await;
    let a = named("a").await;
    let fixed = named("fixed").await;
    register(&reg, &provider("rest", a.addr, &[]).to_child()).await;
    let plain = config(&[fixed.addr], "", "");
    let (proxy, running, addr, _clock) = start_proxy(&plain).await;
    assert_eq!(get(addr, "/").await.body, "fixed");
    // A reload turns the route to a cluster followed in ZooKeeper.
    let followed =
        proxy_config(&zk, "rest", "").replace("[admin]\naddress = \"127.0.0.1:0\"\n", "");
    let listeners = proxy.config().listeners.clone();
    let mut next = tripline_proxy::config::ProxyConfig::from_toml(&followed).unwrap();
    next.listeners = listeners;
    proxy.reload(next).unwrap();
    until("a followed after the reload", || async {
        (get(addr, "/").await.body == "a").then_some(())
    })
    .await;
    // And back: the watch stops, the file's endpoint serves.
    let mut back = tripline_proxy::config::ProxyConfig::from_toml(&plain).unwrap();
    back.listeners = proxy.config().listeners.clone();
    proxy.reload(back).unwrap();
    assert_eq!(get(addr, "/").await.body, "fixed");
    running.shutdown().await;
}

/// An h2c gRPC provider: 200 with `grpc-status` (in the trailers) set to
/// what `status` holds, and its name in `x-provider`.
async fn grpc_provider(name: &'static str, status: Arc<AtomicU32>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let status = status.clone();
            let service = service_fn(move |_req: http::Request<hyper::body::Incoming>| {
                let code = status.load(Ordering::Relaxed).to_string();
                async move {
                    let mut trailers = http::HeaderMap::new();
                    trailers.insert("grpc-status", code.parse().unwrap());
                    let body = Full::new(Bytes::from_static(b"\0\0\0\0\0"))
                        .with_trailers(async move { Some(Ok(trailers)) })
                        .map_err(|n: std::convert::Infallible| match n {})
                        .boxed();
                    let mut response = http::Response::new(body);
                    let headers = response.headers_mut();
                    headers.insert("content-type", "application/grpc".parse().unwrap());
                    headers.insert("x-provider", name.parse().unwrap());
                    Ok::<_, std::convert::Infallible>(response)
                }
            });
            let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service);
            tokio::spawn(conn);
        }
    });
    addr
}

/// A Triple (gRPC over HTTP/2) call through the proxy: the provider that
/// answered and the call's grpc-status.
async fn triple_call(addr: SocketAddr) -> (String, String) {
    let h2: hyper_util::client::legacy::Client<_, Full<Bytes>> =
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .http2_only(true)
            .build_http();
    let req = http::Request::post(format!("http://{addr}/com.example.OrderService/Get"))
        .header("content-type", "application/grpc")
        .body(Full::new(Bytes::from_static(b"\0\0\0\0\0")))
        .unwrap();
    let response = tokio::time::timeout(BOUND, h2.request(req))
        .await
        .unwrap()
        .unwrap();
    let provider = response
        .headers()
        .get("x-provider")
        .map_or("-".to_owned(), |v| v.to_str().unwrap().to_owned());
    let body = tokio::time::timeout(BOUND, response.into_body().collect())
        .await
        .unwrap()
        .unwrap();
    let status = body
        .trailers()
        .and_then(|t| t.get("grpc-status"))
        .map_or("-".to_owned(), |v| v.to_str().unwrap().to_owned());
    (provider, status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_triple_call_moves_off_a_provider_failing_with_unavailable_and_follows_registrations() {
    let zk = ZooKeeper::start().await;
    let reg = registrar(&zk).await;
    let failing = Arc::new(AtomicU32::new(14)); // UNAVAILABLE
    let healthy = Arc::new(AtomicU32::new(0));
    let bad = grpc_provider("bad", failing).await;
    let good = grpc_provider("good", healthy.clone()).await;
    let bad_child = provider("tri", bad, &[]).to_child();
    register(&reg, &bad_child).await;
    register(&reg, &provider("tri", good, &[]).to_child()).await;
    let breaker = r#"protocol = "h2c"
breaker = { window = { kind = "count", size = 3 }, minimum_calls = 3, failure_rate_threshold = 0.5, open_duration = "60s" }"#;
    let (proxy, running, addr, _clock) = start_proxy(&proxy_config(&zk, "tri", breaker)).await;
    until("both providers", || async {
        (endpoints(&proxy).len() == 2).then_some(())
    })
    .await;
    // Calls alternate until the failing provider's breaker opens, then
    // every call goes to the good one.
    until("the bad provider's breaker open", || async {
        let _ = triple_call(addr).await;
        (endpoint_breaker_in(&proxy, bad).state() == State::Open).then_some(())
    })
    .await;
    for _ in 0..6 {
        assert_eq!(triple_call(addr).await, ("good".to_owned(), "0".to_owned()));
    }
    // The failing provider unregisters: it leaves the cluster.
    unregister(&reg, &bad_child).await;
    until("bad gone", || async {
        (endpoints(&proxy) == vec![good.to_string()]).then_some(())
    })
    .await;
    // A new provider registers: it takes traffic.
    let fresh = grpc_provider("fresh", Arc::new(AtomicU32::new(0))).await;
    register(&reg, &provider("tri", fresh, &[]).to_child()).await;
    until("fresh takes traffic", || async {
        (triple_call(addr).await.0 == "fresh").then_some(())
    })
    .await;
    running.shutdown().await;
}

#[test]
fn a_yaml_config_takes_the_same_discovery_section() {
    let yaml = "listeners:\n  - address: 127.0.0.1:0\nroutes:\n  - name: api\n    cluster: orders\nclusters:\n  orders:\n    balancer: weighted_round_robin\n    discovery:\n      zookeeper: 127.0.0.1:2181\n      path: /dubbo/com.example.OrderService/providers\n      protocol: tri\n      grace: 10s\n";
    let toml = r#"[[listeners]]
address = "127.0.0.1:0"

[[routes]]
name = "api"
cluster = "orders"

[clusters.orders]
balancer = "weighted_round_robin"
discovery = { zookeeper = "127.0.0.1:2181", path = "/dubbo/com.example.OrderService/providers", protocol = "tri", grace = "10s" }
"#;
    let from_yaml = tripline_proxy::config::ProxyConfig::from_yaml(yaml).expect("YAML");
    let from_toml = tripline_proxy::config::ProxyConfig::from_toml(toml).expect("TOML");
    assert_eq!(
        format!("{:?}", from_yaml.clusters),
        format!("{:?}", from_toml.clusters)
    );
    let bad = yaml.replace("protocol: tri", "protocol: thrift");
    let error = tripline_proxy::config::ProxyConfig::from_yaml(&bad)
        .unwrap_err()
        .to_string();
    assert!(error.contains("thrift"), "{error}");
}

#[test]
fn bad_discovery_sections_are_refused_naming_file_line_and_field() {
    let with = |discovery: &str, extra: &str| {
        format!(
            "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[[routes]]\nname = \"api\"\ncluster = \"orders\"\n\n[clusters.orders]\n{extra}discovery = {{ {discovery} }}\n"
        )
    };
    let ok = r#"zookeeper = "127.0.0.1:2181", path = "/dubbo/com.example.OrderService/providers", protocol = "tri""#;
    tripline_proxy::config::ProxyConfig::from_toml(&with(ok, "")).expect("a good section");
    for (text, field, says) in [
        (
            with(ok, "endpoints = [\"127.0.0.1:9000\"]\n"),
            "clusters.orders.endpoints",
            "not both",
        ),
        (
            with(r#"zookeeper = "127.0.0.1:2181", protocol = "tri""#, ""),
            "",
            "path",
        ),
        (
            with(
                r#"zookeeper = "127.0.0.1:2181", path = "/dubbo/x", protocol = "tri""#,
                "",
            ),
            "clusters.orders.discovery.path",
            "providers path",
        ),
        (
            with(
                r#"zookeeper = "127.0.0.1:2181", path = "/dubbo/a/providers", protocol = "thrift""#,
                "",
            ),
            "",
            "thrift",
        ),
        (
            with(
                r#"zookeeper = "127.0.0.1:2181", path = "/dubbo/a/providers", protocol = "dubbo""#,
                "",
            ),
            "clusters.orders.discovery.protocol",
            "binary",
        ),
    ] {
        let e = tripline_proxy::config::ProxyConfig::from_toml(&text).unwrap_err();
        if !field.is_empty() {
            assert_eq!(e.field, field, "{e}");
        }
        assert!(e.to_string().contains(says), "{says}: {e}");
        assert!(e.line.is_some(), "names the line: {e}");
    }
}
