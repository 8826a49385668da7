//! DNS re-resolution: a cluster endpoint written as `localhost:port`
//! becomes the addresses `localhost` resolves to, and an address that
//! stays in the answer keeps its breaker.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;
use tripline::State;

use crate::support::*;
use crate::tls::{Pki, tls_upstream_on, toml_path};

/// Waits (bounded) until `cluster`'s endpoints satisfy `done`.
async fn until(proxy: &tripline_proxy::Proxy, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    tokio::time::timeout(BOUND, async {
        loop {
            let ids: Vec<String> = proxy
                .cluster("backend")
                .unwrap()
                .endpoints()
                .iter()
                .map(|e| e.id().as_str().to_owned())
                .collect();
            if done(&ids) {
                return ids;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the cluster follows DNS in time")
}

#[tokio::test]
async fn a_name_becomes_its_addresses_and_they_keep_their_breakers() {
    let upstream = Upstream::start(|_| respond(200, "by address")).await;
    let port = upstream.addr.port();
    // `localhost` may also resolve to ::1: serve there too when it exists,
    // so whichever address is picked answers.
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
