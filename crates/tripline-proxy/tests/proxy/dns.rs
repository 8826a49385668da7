//! DNS re-resolution: a cluster endpoint written as `localhost:port`
//! becomes the addresses `localhost` resolves to, and an address that
//! stays in the answer keeps its breaker.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;
use tripline::State;
use tripline::cluster::{Cluster, EndpointConfig};
use tripline_proxy::config::ProxyConfig;

use crate::support::*;
use crate::tls::{Pki, tls_upstream_on, toml_path};

/// Waits (bounded) until the endpoints of the cluster `backend` satisfy `done`.
async fn until(proxy: &tripline_proxy::Proxy, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    until_in(&proxy.cluster("backend").unwrap(), done).await
}

/// The ids of `cluster`'s endpoints, in order.
fn ids(cluster: &Cluster) -> Vec<String> {
    cluster
        .endpoints()
        .iter()
        .map(|e| e.id().as_str().to_owned())
        .collect()
}

/// Waits (bounded) until `cluster`'s endpoints satisfy `done`.
async fn until_in(cluster: &Cluster, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    tokio::time::timeout(BOUND, async {
        loop {
            let ids = ids(cluster);
            if done(&ids) {
                return ids;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the cluster follows DNS in time")
}

/// `localhost` may also resolve to ::1: relays `[::1]:port` to
/// `127.0.0.1:port` when ::1 exists, so whichever address is picked answers.
async fn also_on_v6(port: u16) {
    if let Ok(v6) = TcpListener::bind(("::1", port)).await {
        tokio::spawn(async move {
            while let Ok((stream, _)) = v6.accept().await {
                let to = tokio::net::TcpStream::connect(("127.0.0.1", port)).await;
                if let Ok(mut to) = to {
                    tokio::spawn(async move {
                        let mut stream = stream;
                        let _ = tokio::io::copy_bidirectional(&mut stream, &mut to).await;
                    });
                }
            }
        });
    }
}

/// An endpoint list no DNS answer makes: a refresher that still follows
/// the cluster puts the resolved addresses back within an interval.
fn stray() -> Vec<EndpointConfig> {
    vec![EndpointConfig::new("stray.invalid:1", "stray.invalid:1")]
}

#[tokio::test]
async fn a_name_becomes_its_addresses_and_they_keep_their_breakers() {
    let upstream = Upstream::start(|_| respond(200, "by address")).await;
    let port = upstream.addr.port();
    also_on_v6(port).await;
    let text = format!(
        "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n\n[clusters.backend]\nendpoints = [\"localhost:{port}\"]\ndns_refresh = \"20ms\"\n"
    );
    let (proxy, running, addr, _clock) = start_proxy(&text).await;
    let v4: SocketAddr = ([127, 0, 0, 1], port).into();
    let ids = until(&proxy, |ids| ids.iter().any(|id| *id == v4.to_string())).await;
    assert!(
        !ids.iter().any(|id| id.starts_with("localhost")),
        "the name gave way to its addresses: {ids:?}"
    );
    let answer = get(addr, "/").await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "by address"));

    // Open the address's breaker; later refreshes find the same address
    // and must keep that endpoint (and so its open breaker).
    let cluster = proxy.cluster("backend").unwrap();
    let before = cluster.endpoint(&v4.to_string()).unwrap();
    before.breaker().force_open();
    tokio::time::sleep(Duration::from_millis(150)).await; // several refreshes
    let after = cluster.endpoint(&v4.to_string()).unwrap();
    assert!(after.ptr_eq(&before), "the endpoint survived the refreshes");
    assert_eq!(after.breaker().state(), State::ForcedOpen);
    running.shutdown().await;
}

#[tokio::test]
async fn a_tls_endpoint_reached_by_address_is_verified_against_its_name() {
    // The certificate names `localhost` only: verifying against the
    // address the name resolved to would fail.
    let pki = Pki::for_names(&["localhost"]);
    let v4 = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = v4.local_addr().unwrap().port();
    tls_upstream_on(&pki, &[b"http/1.1"], v4);
    if let Ok(v6) = TcpListener::bind(("::1", port)).await {
        tls_upstream_on(&pki, &[b"http/1.1"], v6);
    }
    let text = format!(
        "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n\n[clusters.backend]\nendpoints = [\"localhost:{port}\"]\ndns_refresh = \"20ms\"\ntls = {{ ca = {} }}\n",
        toml_path(&pki.path("ca.pem"))
    );
    let (proxy, running, addr, _clock) = start_proxy(&text).await;
    let v4: SocketAddr = ([127, 0, 0, 1], port).into();
    until(&proxy, |ids| ids.iter().any(|id| *id == v4.to_string())).await;
    for _ in 0..2 {
        let answer = get(addr, "/").await;
        assert_eq!((answer.status, answer.body.as_str()), (200, "HTTP/1.1"));
    }
    // A reload that changes the upstream clients' settings gives the kept
    // cluster a new client, which must still know the names.
    let changed = format!("[proxy]\nconnect_timeout = \"2s\"\n{text}");
    running
        .reload(tripline_proxy::config::ProxyConfig::from_toml(&changed).unwrap())
        .unwrap();
    let answer = get(addr, "/").await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "HTTP/1.1"));
    running.shutdown().await;
}

/// A config with route `api` over `backend` (`backend_lines` its
/// endpoints and the rest), and `extra` appended.
fn two_part(backend_lines: &str, extra: &str) -> String {
    format!(
        "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n\n[clusters.backend]\n{backend_lines}\n{extra}"
    )
}

#[tokio::test]
async fn a_cluster_a_reload_adds_with_a_name_is_re_resolved_on_its_interval() {
    let plain = Upstream::start(|_| respond(200, "plain")).await;
    let named = Upstream::start(|_| respond(200, "named")).await;
    let port = named.addr.port();
    also_on_v6(port).await;
    let backend = format!("endpoints = [\"{}\"]", plain.addr);
    let (proxy, running, addr, _clock) = start_proxy(&two_part(&backend, "")).await;

    let extra = format!(
        "\n[[routes]]\nname = \"named\"\ncluster = \"named\"\nmatch = {{ path_prefix = \"/named\" }}\n\n[clusters.named]\nendpoints = [\"localhost:{port}\"]\ndns_refresh = \"20ms\"\n"
    );
    // The new route must come first to match: put it before `api`.
    let text = two_part(&backend, "").replacen(
        "[[routes]]\nname = \"api\"",
        &format!("{extra}\n[[routes]]\nname = \"api\""),
        1,
    );
    let report = running
        .reload(ProxyConfig::from_toml(&text).unwrap())
        .unwrap();
    assert_eq!(report.clusters_built, ["named"]);
    let cluster = proxy.cluster("named").unwrap();
    let v4: SocketAddr = ([127, 0, 0, 1], port).into();
    let resolved = until_in(&cluster, |ids| ids.iter().any(|id| *id == v4.to_string())).await;
    assert!(
        !resolved.iter().any(|id| id.starts_with("localhost")),
        "the added cluster's name gave way to its addresses: {resolved:?}"
    );
    let answer = get(addr, "/named/x").await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "named"));

    // Not a one-off: on its interval the name is resolved again, and the
    // membership put back.
    cluster.set_endpoints(stray()).unwrap();
    until_in(&cluster, |ids| ids.iter().any(|id| *id == v4.to_string())).await;
    assert_eq!(get(addr, "/").await.body, "plain");
    running.shutdown().await;
}

#[tokio::test]
async fn the_refresher_of_a_rebuilt_or_removed_cluster_stops() {
    let named = Upstream::start(|_| respond(200, "named")).await;
    let port = named.addr.port();
    also_on_v6(port).await;
    let v4: SocketAddr = ([127, 0, 0, 1], port).into();
    let resolved = |ids: &[String]| ids.iter().any(|id| *id == v4.to_string());
    let dns = format!("endpoints = [\"localhost:{port}\"]\ndns_refresh = \"20ms\"");
    let (proxy, running, addr, _clock) = start_proxy(&two_part(&dns, "")).await;
    let first = proxy.cluster("backend").unwrap();
    until_in(&first, resolved).await;
    // What tells a running refresher: it repairs a stray membership.
    first.set_endpoints(stray()).unwrap();
    until_in(&first, resolved).await;

    // Rebuilt (another balancer): the new cluster has a refresher, the
    // old one's has stopped.
    let rebuilt = two_part(&format!("{dns}\nbalancer = \"p2c\""), "");
    let report = running
        .reload(ProxyConfig::from_toml(&rebuilt).unwrap())
        .unwrap();
    assert_eq!(report.clusters_built, ["backend"]);
    let second = proxy.cluster("backend").unwrap();
    until_in(&second, resolved).await;
    first.set_endpoints(stray()).unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await; // several intervals
    assert_eq!(ids(&first), ["stray.invalid:1"], "no refresher follows it");
    assert_eq!(get(addr, "/").await.body, "named");

    // Removed (the route moves to another cluster, without names): its
    // refresher stops too.
    let plain = Upstream::start(|_| respond(200, "plain")).await;
    let removed = two_part(&format!("endpoints = [\"{}\"]", plain.addr), "")
        .replace("cluster = \"backend\"", "cluster = \"plain\"")
        .replace("[clusters.backend]", "[clusters.plain]");
    let report = running
        .reload(ProxyConfig::from_toml(&removed).unwrap())
        .unwrap();
    assert_eq!(report.clusters_built, ["plain"]);
    assert!(proxy.cluster("backend").is_none());
    second.set_endpoints(stray()).unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(ids(&second), ["stray.invalid:1"], "no refresher follows it");
    assert_eq!(get(addr, "/").await.body, "plain");
    running.shutdown().await;
}

#[tokio::test]
async fn a_name_cluster_given_another_endpoint_keeps_its_resolved_addresses() {
    let named = Upstream::start(|_| respond(200, "named")).await;
    let second = Upstream::start(|_| respond(200, "second")).await;
    let port = named.addr.port();
    also_on_v6(port).await;
    let v4: SocketAddr = ([127, 0, 0, 1], port).into();
    let dns = |endpoints: &str| format!("endpoints = [{endpoints}]\ndns_refresh = \"20ms\"");
    let one = format!("\"localhost:{port}\"");
    let (proxy, running, addr, _clock) = start_proxy(&two_part(&dns(&one), "")).await;
    until(&proxy, |ids| ids.iter().any(|id| *id == v4.to_string())).await;
    let cluster = proxy.cluster("backend").unwrap();
    let before = cluster.endpoint(&v4.to_string()).unwrap();
    before.breaker().force_open();

    let two = format!("{one}, \"{}\"", second.addr);
    let report = running
        .reload(ProxyConfig::from_toml(&two_part(&dns(&two), "")).unwrap())
        .unwrap();
    assert_eq!(report.clusters_endpoints_changed, ["backend"]);
    // At once, not at the next refresh: the name's known addresses stand
    // for it, and the added address is an endpoint.
    let now = ids(&cluster);
    assert!(
        !now.iter().any(|id| id.starts_with("localhost")),
        "the name stays resolved: {now:?}"
    );
    assert!(now.contains(&second.addr.to_string()), "{now:?}");
    let after = cluster.endpoint(&v4.to_string()).unwrap();
    assert!(
        after.ptr_eq(&before),
        "the resolved address kept its endpoint"
    );
    assert_eq!(after.breaker().state(), State::ForcedOpen);
    tokio::time::sleep(Duration::from_millis(100)).await; // refreshes on the new list
    let later = cluster.endpoint(&v4.to_string()).unwrap();
    assert!(later.ptr_eq(&before));
    assert!(cluster.endpoint(&second.addr.to_string()).is_some());
    for _ in 0..4 {
        assert_eq!(get(addr, "/").await.status, 200);
    }
    assert!(second.hits() > 0, "the added endpoint serves");
    running.shutdown().await;
}
