//! A pushed table patches the proxy file's breaker: one field pushed, every
//! other field as the file set it, also through a reload of the file.

use std::time::Duration;

use serde_json::Value;
use tripline_config::etcd::push_document;

use crate::etcd_server::Etcd;
use crate::support::{Upstream, respond, start_proxy};
use crate::{breaker, until};

const PREFIX: &str = "/tripline/patch";

/// Route `api` whose file config is far from the library's defaults.
fn config(upstream: std::net::SocketAddr, etcd: &Etcd, minimum_calls: u32) -> String {
    format!(
        r#"
[[listeners]]
address = "127.0.0.1:0"

[[routes]]
name = "api"
cluster = "backend"
breaker = {{ window = {{ kind = "count", size = 20 }}, minimum_calls = {minimum_calls}, failure_rate_threshold = 0.5, open_duration = "7s", half_open = {{ policy = "consecutive", successes = 3 }} }}

[clusters.backend]
endpoints = ["{upstream}"]
breaker = {{ minimum_calls = 1000 }}

[admin]
address = "127.0.0.1:0"

[config_source]
kind = "etcd"
endpoint = "{}"
prefix = "{PREFIX}"
instance_id = "edge-patch"
status_interval = "200ms"
"#,
        etcd.endpoint()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_field_changes_only_that_field_of_the_files_breaker() {
    let etcd = Etcd::start().await;
    let upstream = Upstream::start(|_| respond(200, "ok")).await;
    let (proxy, running, _addr, _clock) = start_proxy(&config(upstream.addr, &etcd, 10)).await;
    let admin = running.admin_addr().unwrap();
    let file: Value = breaker(admin, "api").await["config"].clone();
    assert_eq!(file["window"]["size"], 20, "{file}");
    assert_eq!(file["minimum_calls"], 10);

    push_document(
        &etcd.gateway(),
        PREFIX,
        b"[[breaker]]\nname = \"api\"\nfailure_rate_threshold = 0.2\n",
    )
    .await
    .unwrap();
    let pushed = until(Duration::from_secs(10), "the pushed threshold", || async {
        let b = breaker(admin, "api").await;
        (b["failure_rate_threshold"] == 0.2).then(|| b["config"].clone())
    })
    .await;

    let mut expected = file.clone();
    expected["failure_rate_threshold"] = 0.2.into();
    assert_eq!(pushed, expected, "every other field is the file's");

    // A reload of the file that changes another field: the pushed field
    // stays, the file's new value is taken.
    let reloaded = config(upstream.addr, &etcd, 12);
    let report = proxy
        .reload(tripline_proxy::config::ProxyConfig::from_toml(&reloaded).unwrap())
        .unwrap();
    assert!(
        report.breakers_kept.contains(&"api".to_owned()),
        "{report:?}"
    );
    let after = breaker(admin, "api").await["config"].clone();
    expected["minimum_calls"] = 12.into();
    assert_eq!(after, expected);
}
