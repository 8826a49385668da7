//! A fleet-wide override (`[[override]]` in the etcd document) reaches
//! three proxies on one etcd within a second, shows in each one's audit
//! with its author and reason, yields to a local admin action while that
//! lasts, and ends by itself at `until`.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;
use tripline::ManualClock;
use tripline_config::etcd::{fleet_status, push_document};

use crate::etcd_server::Etcd;
use crate::support::{self, Upstream, respond, start_proxy};
use crate::{WATCH_BOUND, audit, breaker, proxy_config, until};

const PREFIX: &str = "/tripline/fleet";

fn etcd_source(etcd: &Etcd, instance: &str) -> String {
    format!(
        "kind = \"etcd\"\nendpoint = \"{}\"\nprefix = \"{PREFIX}\"\ninstance_id = \"{instance}\"\nstatus_interval = \"100ms\"\nlease_ttl = \"2s\"\n",
        etcd.endpoint()
    )
}

struct Edge {
    _proxy: tripline_proxy::Proxy,
    _running: tripline_proxy::Running,
    addr: SocketAddr,
    admin: SocketAddr,
    clock: ManualClock,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_force_open_reaches_three_proxies_through_their_watches_and_ends_at_until() {
    let etcd = Etcd::start().await;
    let gateway = etcd.gateway();
    let upstream = Upstream::start(|_| respond(200, "ok")).await;
    let mut fleet = Vec::new();
    for i in 1..=3 {
        let config = proxy_config(upstream.addr, &etcd_source(&etcd, &format!("edge-{i}")));
        let (proxy, running, addr, clock) = start_proxy(&config).await;
        let admin = running.admin_addr().unwrap();
        fleet.push(Edge {
            _proxy: proxy,
            _running: running,
            addr,
            admin,
            clock,
        });
    }
    // Every watch is up once every instance reports.
    until(Duration::from_secs(10), "three status keys", || async {
        (fleet_status(&gateway, PREFIX).await.ok()?.len() == 3).then_some(())
    })
    .await;

    let until_at = tripline::clock::system_time_after(Duration::from_secs(600));
    let document = format!(
        "author = \"ops@example.com\"\n\n[[override]]\nbreaker = \"api\"\nstate = \"forced_open\"\n\
         until = \"{}\"\nreason = \"bank maintenance\"\nauthor = \"alice@example.com\"\n",
        humantime::format_rfc3339_seconds(until_at)
    );
    let pushed = Instant::now();
    push_document(&gateway, PREFIX, document.as_bytes())
        .await
        .unwrap();
    for edge in &fleet {
        until(WATCH_BOUND, "the fleet force-open", || async {
            (breaker(edge.admin, "api").await["state"] == "forced_open").then_some(())
        })
        .await;
    }
    let reached = pushed.elapsed();
    println!("fleet force-open reached all 3 proxies in {reached:?}");
    assert!(reached < WATCH_BOUND, "{reached:?}");

    for edge in &fleet {
        assert_eq!(support::get(edge.addr, "/").await.status, 503);
        let b = breaker(edge.admin, "api").await;
        assert_eq!(b["override_by"], "fleet", "{b}");
        assert_eq!(b["managed"]["fleet_override"]["reason"], "bank maintenance");
        let records = audit(edge.admin).await;
        let started = records
            .iter()
            .find(|r| r["action"] == "breakers_override_started")
            .expect("the override in the audit");
        assert_eq!(started["who"], "alice@example.com");
        let summary = started["summary"].as_str().unwrap();
        assert!(summary.contains("bank maintenance"), "{summary}");
    }

    // A local admin action still works on one proxy, and holds over the
    // fleet's while it lasts; reset hands the breaker back.
    let local = &fleet[0];
    let disabled = support::admin_json(local.admin, "POST", "/api/breakers/api/disable", "").await;
    assert_eq!(disabled.status, 200, "{}", disabled.body);
    let b = breaker(local.admin, "api").await;
    assert_eq!(
        (b["state"].clone(), b["override_by"].clone()),
        ("disabled".into(), "local".into())
    );
    assert_eq!(support::get(local.addr, "/").await.status, 200);
    let reset = support::admin_json(local.admin, "POST", "/api/breakers/api/reset", "").await;
    assert_eq!(reset.status, 200, "{}", reset.body);
    let b = breaker(local.admin, "api").await;
    assert_eq!(
        (b["state"].clone(), b["override_by"].clone()),
        ("forced_open".into(), "fleet".into())
    );

    // `until` comes (each proxy's clock moves past it): every proxy ends
    // the override by itself, with no new document.
    for edge in &fleet {
        edge.clock.advance(Duration::from_secs(700));
    }
    for edge in &fleet {
        until(Duration::from_secs(5), "the override's end", || async {
            (breaker(edge.admin, "api").await["state"] == "closed").then_some(())
        })
        .await;
        assert_eq!(support::get(edge.addr, "/").await.status, 200);
        let records = audit(edge.admin).await;
        let ended = records
            .iter()
            .find(|r| r["action"] == "breakers_override_ended")
            .expect("the end in the audit");
        assert_eq!(ended["detail"]["why"], "expired");
    }
}
