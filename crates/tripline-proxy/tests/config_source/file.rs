//! `[config_source] kind = "file"`: a watched document file feeds the
//! proxy's breakers, and pushed parameters outlive reloads of the proxy
//! file.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tripline_proxy::config::ProxyConfig;

use crate::support::{self, Upstream, respond, start_proxy};
use crate::{WATCH_BOUND, audit, breaker, proxy_config, until};

fn file_source(path: &std::path::Path) -> String {
    format!(
        "kind = \"file\"\npath = \"{}\"\ndebounce = \"50ms\"\ninstance_id = \"edge-f\"\nstatus_interval = \"100ms\"\n",
        path.display()
    )
}

/// The first endpoint breaker in `GET /api/breakers`.
async fn endpoint_breaker(admin: SocketAddr) -> Value {
    let answer = support::send(admin, "GET", "/api/breakers", &[]).await;
    let list: Value = serde_json::from_str(&answer.body).unwrap();
    list["breakers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["kind"] == "endpoint")
        .cloned()
        .expect("an endpoint breaker")
}

/// Writes `text` to `path` through a rename, as editors do.
fn write(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

const DOCUMENT: &str = "[[breaker]]\nname = \"api\"\nminimum_calls = 7\nfailure_rate_threshold = 0.25\n\n[[breaker]]\nname = \"backend\"\nminimum_calls = 42\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_file_reconfigures_route_and_endpoint_breakers_and_survives_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("breakers.toml");
    write(
        &path,
        "[[breaker]]\nname = \"api\"\nminimum_calls = 10\nfailure_rate_threshold = 0.5\n",
    );
    let upstream = Upstream::start(|_| respond(200, "ok")).await;
    let text = proxy_config(upstream.addr, &file_source(&path));
    let (proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    for _ in 0..4 {
        assert_eq!(support::get(addr, "/").await.status, 200);
    }

    write(&path, DOCUMENT);
    until(WATCH_BOUND, "the file's document", || async {
        (breaker(admin, "api").await["failure_rate_threshold"] == 0.25).then_some(())
    })
    .await;
    let api = breaker(admin, "api").await;
    assert_eq!(api["window"]["calls"], 4, "state kept");
    // The cluster's endpoint breakers follow the table named like the cluster.
    until(
        Duration::from_secs(10),
        "the endpoint family's config",
        || async { (endpoint_breaker(admin).await["minimum_calls"] == 42).then_some(()) },
    )
    .await;

    // A reload whose file sets other parameters for the same breakers, and
    // rebuilds the cluster: the pushed parameters win and survive it.
    let reloaded = text
        .replace(
            "breaker = { minimum_calls = 10, failure_rate_threshold = 0.5 }",
            "breaker = { minimum_calls = 10, failure_rate_threshold = 0.6 }",
        )
        .replace(
            "breaker = { minimum_calls = 1000 }",
            "breaker = { minimum_calls = 999 }",
        );
    let report = proxy
        .reload(ProxyConfig::from_toml(&reloaded).unwrap())
        .unwrap();
    assert_eq!(report.breakers_kept, vec!["api".to_owned()]);
    assert_eq!(report.clusters_built, vec!["backend".to_owned()]);
    let api = breaker(admin, "api").await;
    assert_eq!(
        api["failure_rate_threshold"], 0.25,
        "pushed wins over the file"
    );
    assert_eq!(api["window"]["calls"], 4);
    assert_eq!(
        endpoint_breaker(admin).await["minimum_calls"],
        42,
        "the rebuilt cluster's breakers start on the pushed config"
    );

    // An invalid file is refused whole; the last good stays.
    write(
        &path,
        "[[breaker]]\nname = \"api\"\nfailure_rate_threshold = 7.0\n",
    );
    until(WATCH_BOUND, "the refusal counted", || async {
        let rejected = "tripline_config_rejected_total{source=\"file\"}";
        (support::metric(admin, rejected).await == Some(1.0)).then_some(())
    })
    .await;
    assert_eq!(breaker(admin, "api").await["failure_rate_threshold"], 0.25);
    assert_eq!(support::get(addr, "/").await.status, 200);
}

/// [`proxy_config`] with route `api` keyed by tenant (family `api`), fed
/// by the document file at `path`.
fn keyed_proxy_config(upstream: SocketAddr, path: &std::path::Path) -> String {
    proxy_config(upstream, &file_source(path)).replace(
        "breaker = { minimum_calls = 10, failure_rate_threshold = 0.5 }",
        "breaker = { minimum_calls = 10, failure_rate_threshold = 0.5 }\nbreaker_key = { header = \"x-tenant\", max_breakers = 16 }",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_route_family_follows_the_table_named_like_the_route_breaker() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("breakers.toml");
    let upstream = Upstream::start(|_| respond(200, "ok")).await;
    let text = keyed_proxy_config(upstream.addr, &path);
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    let tenant = support::send(addr, "GET", "/", &[("x-tenant", "acme")]).await;
    assert_eq!(tenant.status, 200);
    assert_eq!(breaker(admin, "api:acme").await["minimum_calls"], 10);

    write(&path, "[[breaker]]\nname = \"api\"\nminimum_calls = 33\n");
    until(WATCH_BOUND, "the family's new template", || async {
        (breaker(admin, "api:acme").await["minimum_calls"] == 33).then_some(())
    })
    .await;
    assert_eq!(
        breaker(admin, "api:acme").await["window"]["calls"],
        1,
        "state kept"
    );
    // A key seen for the first time gets the pushed template too.
    support::send(addr, "GET", "/", &[("x-tenant", "globex")]).await;
    assert_eq!(breaker(admin, "api:globex").await["minimum_calls"], 33);
}

/// A fleet override naming a keyed route holds its whole family: every
/// tenant's breaker, those first seen during the override included; the
/// document that lifts it gives them all back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_override_on_a_keyed_route_holds_every_key_present_and_future() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("breakers.toml");
    write(&path, "[[breaker]]\nname = \"api\"\nminimum_calls = 10\n");
    let upstream = Upstream::start(|_| respond(200, "ok")).await;
    let text = keyed_proxy_config(upstream.addr, &path);
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    let tenant = |name: &'static str| async move {
        support::send(addr, "GET", "/", &[("x-tenant", name)]).await
    };
    assert_eq!(tenant("acme").await.status, 200);

    let until_at = tripline::clock::system_time_after(Duration::from_secs(600));
    write(
        &path,
        &format!(
            "[[breaker]]\nname = \"api\"\nminimum_calls = 10\n\n[[override]]\nbreaker = \"api\"\n\
             state = \"forced_open\"\nuntil = \"{}\"\nreason = \"tenant database failover\"\n",
            humantime::format_rfc3339_seconds(until_at)
        ),
    );
    until(WATCH_BOUND, "the family held", || async {
        (breaker(admin, "api:acme").await["state"] == "forced_open").then_some(())
    })
    .await;
    let refused = tenant("acme").await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("x-tripline-rejected"), Some("circuit_open"));
    let newcomer = tenant("initech").await;
    assert_eq!(
        newcomer.status, 503,
        "a tenant first seen during the override"
    );
    assert_eq!(breaker(admin, "api:initech").await["state"], "forced_open");
    assert_eq!(upstream.hits(), 1);

    write(&path, "[[breaker]]\nname = \"api\"\nminimum_calls = 10\n");
    until(WATCH_BOUND, "the family lifted", || async {
        (breaker(admin, "api:initech").await["state"] == "closed").then_some(())
    })
    .await;
    assert_eq!(tenant("acme").await.status, 200);
    assert_eq!(tenant("initech").await.status, 200);
    assert_eq!(tenant("hooli").await.status, 200);
    let ended = audit(admin).await;
    assert!(
        ended
            .iter()
            .any(|r| r["action"] == "breakers_override_ended" && r["detail"]["breaker"] == "api"),
        "{ended:?}"
    );
}

/// `POST /api/breakers/{name}/{action}` without a body, as JSON.
async fn act(admin: SocketAddr, name: &str, action: &str) -> Value {
    let path = format!("/api/breakers/{name}/{action}");
    let answer = support::send(admin, "POST", &path, &[]).await;
    assert_eq!(answer.status, 200, "{path}: {}", answer.body);
    serde_json::from_str(&answer.body).unwrap()
}

/// The version `GET /api/breakers/{name}` says the last pushed document
/// configuring `name` became, once one has.
async fn pushed_version(admin: SocketAddr, name: &str) -> Option<u64> {
    breaker(admin, name).await["managed"]["pushed"]["version"].as_u64()
}

/// `GET /api/breakers` tells an operator who decides each breaker: which
/// ones the applier manages and under which name (an endpoint breaker as
/// its cluster's family), which pushed version configured them, and
/// whether an operator override is in force, which pushes never lift.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breakers_say_who_manages_them_which_push_configured_them_and_the_override_in_force() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("breakers.toml");
    let upstream = Upstream::start(|_| respond(200, "ok")).await;
    let text = proxy_config(upstream.addr, &file_source(&path));
    let (_proxy, running, _addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();

    // Managed from the start, on the proxy file's config until a push.
    let api = breaker(admin, "api").await;
    assert_eq!(api["managed"]["as"], "api", "{api}");
    assert_eq!(api["managed"]["family"], false);
    assert_eq!(api["managed"]["pushed"], Value::Null);
    assert_eq!(api["override"], Value::Null);
    let endpoint = endpoint_breaker(admin).await;
    assert_eq!(endpoint["managed"]["as"], "backend", "{endpoint}");
    assert_eq!(endpoint["managed"]["family"], true);
    assert_eq!(endpoint["managed"]["pushed"], Value::Null);

    write(&path, DOCUMENT);
    let first = until(WATCH_BOUND, "the first push", || {
        pushed_version(admin, "api")
    })
    .await;
    let applied = audit(admin).await;
    let last = applied.last().expect("an audit record of the push");
    assert_eq!(last["action"], "breakers_applied", "{last}");
    assert_eq!(last["version"], first, "the version the audit log names");
    let api = breaker(admin, "api").await;
    assert_eq!(api["managed"]["pushed"]["source"], "file");
    // The file source's revision is the document's content hash.
    assert!(last["revision"].is_string(), "{last}");
    assert_eq!(api["managed"]["pushed"]["revision"], last["revision"]);
    let endpoint = endpoint_breaker(admin).await;
    assert_eq!(endpoint["managed"]["pushed"]["version"], first);

    // A force-open through the API is recorded by the applier ...
    let forced = act(admin, "api", "force-open").await;
    assert_eq!(forced["override"], "forced_open");
    assert_eq!(forced["managed"]["override_recorded"], true);
    // ... and outlives a push that changes the breaker's thresholds.
    write(
        &path,
        &DOCUMENT.replace("minimum_calls = 7", "minimum_calls = 8"),
    );
    let second = until(WATCH_BOUND, "the second push", || async {
        pushed_version(admin, "api").await.filter(|v| *v > first)
    })
    .await;
    let api = breaker(admin, "api").await;
    assert_eq!(api["minimum_calls"], 8, "the push applied");
    assert_eq!(api["managed"]["pushed"]["version"], second);
    assert_eq!(api["state"], "forced_open", "pushes never lift an override");
    assert_eq!(api["override"], "forced_open");
    assert_eq!(api["managed"]["override_recorded"], true);

    let reset = act(admin, "api", "reset").await;
    assert_eq!(reset["state"], "closed");
    assert_eq!(reset["override"], Value::Null);
    assert_eq!(reset["managed"]["override_recorded"], false);
    assert!(running.shutdown().await.complete);
}
