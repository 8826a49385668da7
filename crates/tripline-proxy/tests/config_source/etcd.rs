//! `[config_source] kind = "etcd"`: documents written to a real etcd
//! reach the running proxy's breakers.

use std::time::Duration;

use tripline_config::etcd::{document_at, fleet_status, push_document};

use crate::etcd_server::Etcd;
use crate::support::{self, Upstream, respond, start_proxy};
use crate::{WATCH_BOUND, audit, breaker, proxy_config, until};

const PREFIX: &str = "/tripline/edge";

fn etcd_source(etcd: &Etcd, instance: &str) -> String {
    format!(
        "kind = \"etcd\"\nendpoint = \"{}\"\nprefix = \"{PREFIX}\"\ninstance_id = \"{instance}\"\nstatus_interval = \"200ms\"\nlease_ttl = \"2s\"\n",
        etcd.endpoint()
    )
}

const STRICT: &str = "author = \"ops@example.com\"\n[[breaker]]\nname = \"api\"\nminimum_calls = 7\nfailure_rate_threshold = 0.25\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_in_etcd_reconfigures_the_running_proxy_through_its_watch_with_state_kept() {
    let etcd = Etcd::start().await;
    let upstream = Upstream::start(|_| respond(200, "ok")).await;
    let (_proxy, running, addr, _clock) =
        start_proxy(&proxy_config(upstream.addr, &etcd_source(&etcd, "edge-1"))).await;
    let admin = running.admin_addr().unwrap();
    for _ in 0..3 {
        assert_eq!(support::get(addr, "/").await.status, 200);
    }
    let before = breaker(admin, "api").await;
    assert_eq!(before["window"]["calls"], 3);
    assert_eq!(before["minimum_calls"], 10);

    let pushed_at = tokio::time::Instant::now();
    push_document(&etcd.gateway(), PREFIX, STRICT.as_bytes())
        .await
        .unwrap();
    let after = until(WATCH_BOUND, "the pushed threshold", || async {
        let b = breaker(admin, "api").await;
        (b["failure_rate_threshold"] == 0.25).then_some(b)
    })
    .await;
    let took = pushed_at.elapsed();
    println!("etcd put -> proxy breaker reconfigured: {took:?}");
    assert!(took < WATCH_BOUND, "{took:?}");
    assert_eq!(after["minimum_calls"], 7);
    // State kept: the window still holds the calls made before the push.
    assert_eq!(after["window"]["calls"], 3);
    assert_eq!(after["state"], "closed");

    // The instance reports its version under its leased status key, where
    // `tripline config status` reads the fleet.
    let status = until(WATCH_BOUND, "edge-1's status key", || async {
        let fleet = fleet_status(&etcd.gateway(), PREFIX).await.ok()?;
        fleet
            .into_iter()
            .find(|s| s.instance == "edge-1" && s.version == 1)
    })
    .await;
    assert!(status.last_error.is_none());
    assert!(status.sample.requests >= 3);

    // The applier's record is in /api/audit, with the change field by field.
    let records = audit(admin).await;
    let applied = records
        .iter()
        .find(|r| r["action"] == "breakers_applied")
        .expect("an applied record");
    assert_eq!(applied["source"], "etcd");
    assert_eq!(applied["who"], "ops@example.com");
    assert_eq!(applied["version"], 1);
    let summary = applied["summary"].as_str().unwrap();
    assert!(
        summary.contains("api.failure_rate_threshold 0.5 → 0.25"),
        "{summary}"
    );
    assert_eq!(
        support::metric(admin, "tripline_config_applied_total{source=\"etcd\"}").await,
        Some(1.0)
    );
    assert_eq!(
        support::metric(admin, "tripline_config_version").await,
        Some(1.0)
    );
    // The admin listener's own loss counter is exported beside them.
    assert_eq!(
        support::metric(admin, "tripline_proxy_events_dropped_total").await,
        Some(0.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_document_is_refused_whole_and_the_proxy_keeps_serving_the_last_good() {
    let etcd = Etcd::start().await;
    let upstream = Upstream::start(|_| respond(200, "ok")).await;
    let (_proxy, running, addr, _clock) =
        start_proxy(&proxy_config(upstream.addr, &etcd_source(&etcd, "edge-2"))).await;
    let admin = running.admin_addr().unwrap();
    let gateway = etcd.gateway();
    push_document(&gateway, PREFIX, STRICT.as_bytes())
        .await
        .unwrap();
    until(Duration::from_secs(10), "the good document", || async {
        (breaker(admin, "api").await["failure_rate_threshold"] == 0.25).then_some(())
    })
    .await;

    // The first table is fine, the second is not: nothing of it applies.
    let invalid = "[[breaker]]\nname = \"api\"\nfailure_rate_threshold = 0.9\n\n[[breaker]]\nname = \"backend\"\nminimum_calls = 0\n";
    push_document(&gateway, PREFIX, invalid.as_bytes())
        .await
        .unwrap();
    let rejected = "tripline_config_rejected_total{source=\"etcd\"}";
    until(Duration::from_secs(10), "the refusal counted", || async {
        (support::metric(admin, rejected).await == Some(1.0)).then_some(())
    })
    .await;
    let b = breaker(admin, "api").await;
    assert_eq!(
        b["failure_rate_threshold"], 0.25,
        "the last good config stays"
    );
    assert_eq!(support::get(addr, "/").await.status, 200);
    let records = audit(admin).await;
    let refusal = records
        .iter()
        .find(|r| r["action"] == "breakers_rejected")
        .expect("a refusal record");
    let summary = refusal["summary"].as_str().unwrap();
    assert!(summary.contains("minimum_calls"), "{summary}");

    // Not UTF-8: refused, not a crash.
    gateway
        .put(
            format!("{PREFIX}/config").as_bytes(),
            &[0xff, 0xfe, 0x00],
            0,
        )
        .await
        .unwrap();
    until(Duration::from_secs(10), "the second refusal", || async {
        (support::metric(admin, rejected).await == Some(2.0)).then_some(())
    })
    .await;
    assert_eq!(support::get(addr, "/").await.status, 200);
    let status = until(WATCH_BOUND, "the refusal in the status key", || async {
        let fleet = fleet_status(&gateway, PREFIX).await.ok()?;
        fleet
            .into_iter()
            .find(|s| s.instance == "edge-2" && s.last_error.is_some())
    })
    .await;
    assert_eq!(status.version, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_force_open_outlasts_pushes_until_reset() {
    let etcd = Etcd::start().await;
    let upstream = Upstream::start(|_| respond(200, "ok")).await;
    let (_proxy, running, addr, _clock) =
        start_proxy(&proxy_config(upstream.addr, &etcd_source(&etcd, "edge-3"))).await;
    let admin = running.admin_addr().unwrap();
    let forced = support::admin_json(admin, "POST", "/api/breakers/api/force-open", "").await;
    assert_eq!(forced.status, 200, "{}", forced.body);
    assert_eq!(support::get(addr, "/").await.status, 503);

    push_document(&etcd.gateway(), PREFIX, STRICT.as_bytes())
        .await
        .unwrap();
    let b = until(Duration::from_secs(10), "the push", || async {
        let b = breaker(admin, "api").await;
        (b["failure_rate_threshold"] == 0.25).then_some(b)
    })
    .await;
    assert_eq!(b["state"], "forced_open", "a push never undoes an override");
    assert_eq!(support::get(addr, "/").await.status, 503);

    let reset = support::admin_json(admin, "POST", "/api/breakers/api/reset", "").await;
    assert_eq!(reset.status, 200, "{}", reset.body);
    let b = breaker(admin, "api").await;
    assert_eq!(b["state"], "closed");
    assert_eq!(b["failure_rate_threshold"], 0.25, "the pushed config stays");
    assert_eq!(support::get(addr, "/").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_rollback_to_an_earlier_revision_restores_its_parameters() {
    let etcd = Etcd::start().await;
    let upstream = Upstream::start(|_| respond(200, "ok")).await;
    let (_proxy, running, _addr, _clock) =
        start_proxy(&proxy_config(upstream.addr, &etcd_source(&etcd, "edge-4"))).await;
    let admin = running.admin_addr().unwrap();
    let gateway = etcd.gateway();
    let first = push_document(&gateway, PREFIX, STRICT.as_bytes())
        .await
        .unwrap();
    let looser = STRICT.replace("0.25", "0.75");
    push_document(&gateway, PREFIX, looser.as_bytes())
        .await
        .unwrap();
    until(Duration::from_secs(10), "the second document", || async {
        (breaker(admin, "api").await["failure_rate_threshold"] == 0.75).then_some(())
    })
    .await;

    // What `tripline config rollback --revision R` does: the document as
    // it was at R, pushed again.
    let earlier = document_at(&gateway, PREFIX, first).await.unwrap().unwrap();
    push_document(&gateway, PREFIX, &earlier).await.unwrap();
    until(
        Duration::from_secs(10),
        "the rolled-back document",
        || async { (breaker(admin, "api").await["failure_rate_threshold"] == 0.25).then_some(()) },
    )
    .await;
    until(WATCH_BOUND, "version 3 in the status key", || async {
        let fleet = fleet_status(&gateway, PREFIX).await.ok()?;
        fleet
            .into_iter()
            .find(|s| s.instance == "edge-4" && s.version == 3)
    })
    .await;
}
