//! Outlier detection: an endpoint that keeps failing is ejected and gets
//! no traffic until its ejection ends.

use std::time::Duration;

use crate::support::*;

const CLUSTER: &str = r#"
panic_threshold_percent = 0
breaker = { window = { kind = "count", size = 1000 }, minimum_calls = 1000 }
outlier = { interval = "1s", base_ejection_time = "30s", max_ejection_percent = 50, consecutive_failures = { threshold = 3 } }
"#;

#[tokio::test]
async fn an_endpoint_returning_errors_is_ejected_and_gets_no_traffic() {
    let bad = Upstream::start(|_| respond(500, "boom")).await;
    let good = Upstream::start(|_| respond(200, "fine")).await;
    let (proxy, running, addr, clock) =
        start_proxy(&config(&[bad.addr, good.addr], "", CLUSTER)).await;
    let mut failures = 0;
    for _ in 0..6 {
        if get(addr, "/").await.status == 500 {
            failures += 1;
        }
    }
    assert_eq!((failures, bad.hits()), (3, 3));
    let cluster = proxy.cluster("backend").unwrap();
    let endpoint = cluster.endpoint(&bad.addr.to_string()).unwrap();
    assert!(endpoint.is_ejected());
    assert_eq!(cluster.health().ejected, 1);

    for _ in 0..20 {
        assert_eq!(get(addr, "/").await.status, 200);
    }
    assert_eq!(bad.hits(), 3, "an ejected endpoint gets no traffic");

    // The ejection ends at the first analysis pass after 30 s.
    clock.advance(Duration::from_secs(31));
    for _ in 0..4 {
        get(addr, "/").await;
    }
    assert!(bad.hits() > 3, "back in rotation after its ejection");
    running.shutdown().await;
}

#[tokio::test]
async fn below_the_panic_threshold_traffic_spreads_over_every_endpoint_again() {
    let bad = Upstream::start(|_| respond(500, "boom")).await;
    let good = Upstream::start(|_| respond(200, "fine")).await;
    // One ejection of two endpoints leaves 50 % routable, under the 60 %
    // threshold: the cluster panics rather than pile everything on one.
    let cluster_text = CLUSTER.replace(
        "panic_threshold_percent = 0",
        "panic_threshold_percent = 60",
    );
    let (proxy, running, addr, _clock) =
        start_proxy(&config(&[bad.addr, good.addr], "", &cluster_text)).await;
    for _ in 0..6 {
        get(addr, "/").await;
    }
    let cluster = proxy.cluster("backend").unwrap();
    assert!(
        cluster
            .endpoint(&bad.addr.to_string())
            .unwrap()
            .is_ejected()
    );
    let health = cluster.health();
    assert_eq!(
        (health.ejected, health.routable, health.panic),
        (1, 1, true)
    );

    let before = bad.hits();
    let mut statuses = Vec::new();
    for _ in 0..20 {
        statuses.push(get(addr, "/").await.status);
    }
    assert_eq!(
        bad.hits() - before,
        10,
        "in panic mode the ejected endpoint takes its round-robin share"
    );
    assert_eq!(statuses.iter().filter(|s| **s == 500).count(), 10);
    running.shutdown().await;
}
