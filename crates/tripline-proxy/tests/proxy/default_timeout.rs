//! A route that sets no timeout still has one: 15 s overall, enforced but
//! not told upstream; `timeout = "none"` turns it off on purpose.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{sleep, timeout};
use tripline_proxy::config::{DEFAULT_OVERALL, ProxyConfig};

use crate::support::*;

/// The status of a GET through the proxy, however long it takes (the
/// support's `get` gives up after its own bound, shorter than the default
/// limit).
async fn status_of_get(proxy: std::net::SocketAddr) -> u16 {
    let req = hyper::Request::get(format!("http://{proxy}/"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    client().request(req).await.unwrap().status().as_u16()
}

/// Paused time jumps to the next timer when the runtime idles; a loopback
/// byte the kernel has not delivered yet would let it jump too far. A
/// timer 1 ms ahead keeps the jumps small (as the parking tests do).
fn pace() -> tokio::task::JoinHandle<()> {
    tokio::spawn(async {
        loop {
            sleep(Duration::from_millis(1)).await;
            for _ in 0..20 {
                std::thread::yield_now();
            }
        }
    })
}

#[tokio::test(start_paused = true)]
async fn a_route_without_a_timeout_gives_up_on_a_hung_endpoint_after_fifteen_seconds() {
    let _pace = pace();
    let release = Arc::new(tokio::sync::Notify::new());
    let (upstream, mut arrivals) = held_upstream(release.clone()).await;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream], "", "")).await;
    let started = tokio::time::Instant::now();
    let answer = tokio::spawn(status_of_get(addr));
    arrivals
        .recv()
        .await
        .expect("the request reached the endpoint");
    let status = timeout(DEFAULT_OVERALL * 2, answer)
        .await
        .expect("the proxy gave up on its own, within twice its default limit")
        .expect("answered");
    let waited = started.elapsed();
    assert_eq!(status, 504);
    assert!(
        waited >= DEFAULT_OVERALL && waited < DEFAULT_OVERALL + Duration::from_secs(1),
        "{waited:?}"
    );
    release.notify_waiters();
    running.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn timeout_none_lets_a_request_wait_past_the_default() {
    let _pace = pace();
    let release = Arc::new(tokio::sync::Notify::new());
    let (upstream, mut arrivals) = held_upstream(release.clone()).await;
    let route = r#"timeout = "none""#;
    let (_proxy, running, addr, _clock) = start_proxy(&config(&[upstream], route, "")).await;
    let answer = tokio::spawn(status_of_get(addr));
    arrivals
        .recv()
        .await
        .expect("the request reached the endpoint");
    sleep(DEFAULT_OVERALL * 4).await;
    assert!(!answer.is_finished(), "no limit: still waiting after 60 s");
    release.notify_one();
    let answer = timeout(Duration::from_secs(5), answer)
        .await
        .expect("answered once released")
        .expect("joined");
    assert_eq!(answer, 200);
    running.shutdown().await;
}

#[test]
fn none_and_the_default_survive_a_round_trip_through_the_served_config() {
    let base = "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[clusters.c]\nendpoints = [\"127.0.0.1:1\"]\n\n";
    let text = format!(
        "{base}[[routes]]\nname = \"off\"\ncluster = \"c\"\ntimeout = \"none\"\n\n[[routes]]\nname = \"default\"\ncluster = \"c\"\n\n[[routes]]\nname = \"set\"\ncluster = \"c\"\ntimeout = {{ overall = \"3s\" }}\n"
    );
    let config = ProxyConfig::from_toml(&text).unwrap();
    let [off, default, set] = [0, 1, 2].map(|i| config.routes[i].timeout.clone());
    assert_eq!(off.overall_in_force(), None);
    assert_eq!(default.overall_in_force(), Some(DEFAULT_OVERALL));
    assert_eq!(set.overall_in_force(), Some(Duration::from_secs(3)));
    // What GET /api/config serves reads back the same, in JSON and TOML.
    let json = serde_json::to_string(&config).unwrap();
    let again: ProxyConfig = serde_json::from_str(&json).unwrap();
    assert_eq!(again, config, "{json}");
    let toml_text = toml::to_string(&config).unwrap();
    assert_eq!(
        ProxyConfig::from_toml(&toml_text).unwrap(),
        config,
        "{toml_text}"
    );
    // YAML says it the same way.
    let yaml = "listeners:\n  - address: 127.0.0.1:0\nroutes:\n  - name: off\n    cluster: c\n    timeout: none\nclusters:\n  c:\n    endpoints: [127.0.0.1:1]\n";
    let config = ProxyConfig::from_yaml(yaml).unwrap();
    assert_eq!(config.routes[0].timeout.overall_in_force(), None);
}

#[test]
fn a_timeout_that_is_neither_a_table_nor_none_is_refused_naming_the_field() {
    let text = "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[[routes]]\nname = \"a\"\ncluster = \"c\"\ntimeout = \"forever\"\n\n[clusters.c]\nendpoints = [\"127.0.0.1:1\"]\n";
    let e = ProxyConfig::from_toml(text).unwrap_err().to_string();
    assert!(e.contains("timeout"), "{e}");
    assert!(e.contains("none"), "says what is accepted: {e}");
}
