//! The etcd source against a real etcd: changes reach running breakers
//! within a second with their state kept, invalid ones are refused, a
//! kill and restart of etcd loses no update, rollback restores, and a
//! 10 % rollout reaches about 10 % of 200 instances.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[path = "support/common.rs"]
mod common;
#[path = "support/etcd_server.rs"]
mod etcd_server;

use std::time::Duration;

use common::doc;
use etcd_server::Etcd;
use tokio::sync::mpsc;
use tripline::{ManualClock, State};
use tripline_config::etcd::{document_at, fleet_status, push_document};
use tripline_config::{Applier, AuditAction, AuditRecord, EtcdOptions, EtcdSource};

const PREFIX: &str = "/tripline/test";

fn options(etcd: &Etcd) -> EtcdOptions {
    let mut options = EtcdOptions::new(etcd.endpoint(), PREFIX);
    options.status_interval = Duration::from_millis(200);
    options.lease_ttl = Duration::from_secs(5);
    options.request_timeout = Duration::from_secs(2);
    options
}

fn watched(instance: &str) -> (Applier, mpsc::UnboundedReceiver<AuditRecord>) {
    let applier = Applier::builder()
        .instance_id(instance)
        .clock(ManualClock::new())
        .build();
    let (tx, rx) = mpsc::unbounded_channel();
    applier.subscribe(move |r| {
        let _ = tx.send(r.clone());
    });
    (applier, rx)
}

async fn next(records: &mut mpsc::UnboundedReceiver<AuditRecord>, within: Duration) -> AuditRecord {
    tokio::time::timeout(within, records.recv())
        .await
        .expect("no audit record in time")
        .expect("applier gone")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_pushes_apply_live_and_survive_an_etcd_restart() {
    let mut etcd = Etcd::start().await;
    let gateway = etcd.gateway();
    let first = push_document(&gateway, PREFIX, doc("", "payments", 4, 0.5).as_bytes())
        .await
        .unwrap();

    let (applier, mut records) = watched("web-1");
    let _source = EtcdSource::spawn(applier.clone(), options(&etcd));
    let record = next(&mut records, Duration::from_secs(5)).await;
    assert_eq!(
        (record.action, record.revision),
        (AuditAction::Applied, Some(first.to_string()))
    );

    // Trip the breaker, then change it: the change lands through the watch
    // (milliseconds, printed; bounded at 5 s for a busy CI machine, which
    // still fails a change that waits for a periodic re-read), state kept.
    let breaker = applier.breaker("payments").unwrap();
    for _ in 0..4 {
        let _ = breaker.call(|| Err::<(), _>("down"));
    }
    assert_eq!(breaker.state(), State::Open);
    let pushed = tokio::time::Instant::now();
    let second = push_document(&gateway, PREFIX, doc("", "payments", 8, 0.5).as_bytes())
        .await
        .unwrap();
    let record = next(&mut records, Duration::from_secs(5)).await;
    let latency = pushed.elapsed();
    println!("etcd put -> breaker reconfigured: {latency:?}");
    assert_eq!(record.action, AuditAction::Applied);
    assert_eq!(breaker.config().minimum_calls, 8);
    assert_eq!(breaker.state(), State::Open);

    // Invalid and non-UTF-8 values: refused, last good kept.
    push_document(&gateway, PREFIX, doc("", "payments", 0, 0.5).as_bytes())
        .await
        .unwrap();
    let record = next(&mut records, Duration::from_secs(5)).await;
    assert!(
        matches!(&record.action, AuditAction::Rejected { error } if error.contains("minimum_calls"))
    );
    push_document(&gateway, PREFIX, b"[[breaker]]\nname = \"pay\xffments\"\n")
        .await
        .unwrap();
    let record = next(&mut records, Duration::from_secs(5)).await;
    assert!(matches!(&record.action, AuditAction::Rejected { error } if error.contains("UTF-8")));
    assert_eq!(breaker.config().minimum_calls, 8);
    assert_eq!(applier.version(), 2);

    // The leased status key shows the version and the refusal.
    let mut status = Vec::new();
    for _ in 0..50 {
        status = fleet_status(&gateway, PREFIX).await.unwrap();
        if status
            .first()
            .is_some_and(|s| s.last_error.as_deref().is_some_and(|e| e.contains("UTF-8")))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status.len(), 1);
    assert_eq!(
        (status[0].instance.as_str(), status[0].version),
        ("web-1", 2)
    );
    assert!(status[0].last_error.as_deref().unwrap().contains("UTF-8"));

    // Kill etcd, restart it on the same data dir, push three updates at
    // once: the watch resumes from the last revision seen, so each one is
    // applied, in order — none is skipped.
    etcd.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    etcd.restart().await;
    let mut revisions = Vec::new();
    for min in [5, 6, 7] {
        let rev = push_document(&gateway, PREFIX, doc("", "payments", min, 0.5).as_bytes())
            .await
            .unwrap();
        revisions.push(rev.to_string());
    }
    let mut applied = Vec::new();
    while applied.len() < 3 {
        let record = next(&mut records, Duration::from_secs(15)).await;
        assert_eq!(record.action, AuditAction::Applied);
        applied.push(record.revision.unwrap());
    }
    assert_eq!(applied, revisions);
    assert_eq!(breaker.config().minimum_calls, 7);
    assert_eq!(breaker.state(), State::Open, "state kept across all of it");

    // Rollback, locally from the audit log…
    applier.rollback(2).unwrap();
    assert_eq!(breaker.config().minimum_calls, 8);
    // …and fleet-wide, by pushing the document etcd kept at an old revision.
    let old = document_at(&gateway, PREFIX, second)
        .await
        .unwrap()
        .unwrap();
    push_document(
        &gateway,
        PREFIX,
        &document_at(&gateway, PREFIX, first).await.unwrap().unwrap(),
    )
    .await
    .unwrap();
    let record = next(&mut records, Duration::from_secs(5)).await; // the local rollback
    assert_eq!(record.action, AuditAction::RolledBack { to: 2 });
    let record = next(&mut records, Duration::from_secs(5)).await;
    assert_eq!(record.action, AuditAction::Applied);
    assert_eq!(breaker.config().minimum_calls, 4);
    assert_eq!(old, doc("", "payments", 8, 0.5).into_bytes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_percent_rollout_reaches_about_ten_percent_of_200_instances() {
    let etcd = Etcd::start().await;
    let gateway = etcd.gateway();
    push_document(&gateway, PREFIX, doc("", "a", 10, 0.9).as_bytes())
        .await
        .unwrap();

    let mut fleet = Vec::new();
    for i in 0..200 {
        let (applier, records) = watched(&format!("instance-{i:03}"));
        let mut options = options(&etcd);
        options.status_interval = Duration::from_millis(500);
        let source = EtcdSource::spawn(applier.clone(), options);
        fleet.push((applier, records, source));
    }
    for (_, records, _) in &mut fleet {
        assert_eq!(
            next(records, Duration::from_secs(20)).await.action,
            AuditAction::Applied
        );
    }

    let plan = "rollout = { percent = 10, shadow = \"0s\", bake = \"5m\" }";
    push_document(&gateway, PREFIX, doc(plan, "a", 4, 0.5).as_bytes())
        .await
        .unwrap();
    let mut canaries = 0;
    for (applier, records, _) in &mut fleet {
        // Shadow started, its (empty) report, then applied or not selected.
        let mut last = next(records, Duration::from_secs(20)).await;
        while matches!(
            last.action,
            AuditAction::ShadowStarted | AuditAction::ShadowReport { .. }
        ) {
            last = next(records, Duration::from_secs(20)).await;
        }
        match last.action {
            AuditAction::Applied => canaries += 1,
            AuditAction::NotSelected { .. } => {}
            other => panic!("{}: unexpected {other:?}", applier.instance_id()),
        }
    }
    println!("a 10 % rollout selected {canaries} of 200 instances");
    assert!((10..=30).contains(&canaries), "{canaries} of 200");

    // The fleet's status keys agree: every instance reports, the same share canary.
    let mut reported = Vec::new();
    for _ in 0..60 {
        reported = fleet_status(&gateway, PREFIX).await.unwrap();
        if reported.len() == 200 && reported.iter().filter(|s| s.canary).count() == canaries {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(reported.len(), 200);
    assert_eq!(reported.iter().filter(|s| s.canary).count(), canaries);
    assert!(reported.iter().filter(|s| s.canary).all(|s| s.version == 2));
    assert!(
        reported
            .iter()
            .filter(|s| !s.canary)
            .all(|s| s.version == 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conditional_put_refuses_when_someone_wrote_the_key_meanwhile() {
    let etcd = Etcd::start().await;
    let gateway = etcd.gateway();
    let key = format!("{PREFIX}/config");
    // Absent: only a write expecting "no key" (0) goes through.
    assert_eq!(
        gateway
            .put_if_unchanged(key.as_bytes(), b"a", 5)
            .await
            .unwrap(),
        None
    );
    let first = gateway
        .put_if_unchanged(key.as_bytes(), b"a", 0)
        .await
        .unwrap()
        .unwrap();
    // Another operator writes; a write based on the first read is refused.
    let second = push_document(&gateway, PREFIX, b"b").await.unwrap();
    assert_eq!(
        gateway
            .put_if_unchanged(key.as_bytes(), b"c", first)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        document_at(&gateway, PREFIX, 0).await.unwrap().unwrap(),
        b"b"
    );
    assert!(
        gateway
            .put_if_unchanged(key.as_bytes(), b"c", second)
            .await
            .unwrap()
            .is_some()
    );
}
