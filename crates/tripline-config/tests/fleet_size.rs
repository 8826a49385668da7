//! What a fleet costs etcd, measured against a real etcd (Debian package
//! `etcd-server`): the status-key bytes per instance for N breakers, and
//! 200 simulated instances (appliers with leased status keys, each
//! watching the document) taking one push. The figures are printed for
//! the docs' sizing table; the asserts only bound them loosely.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[path = "support/etcd_server.rs"]
mod etcd_server;

use std::time::Duration;

use etcd_server::Etcd;
use tokio::time::Instant;
use tripline::{CircuitBreaker, CircuitBreakerConfig};
use tripline_config::etcd::{fleet_status, push_document};
use tripline_config::{Applier, EtcdOptions, EtcdSource};

const PREFIX: &str = "/tripline/size";

fn instance(id: &str, breakers: usize) -> Applier {
    let mut builder = Applier::builder().instance_id(id);
    for i in 0..breakers {
        let breaker = CircuitBreaker::builder()
            .config(CircuitBreakerConfig {
                name: format!("upstream-{i:02}"),
                ..Default::default()
            })
            .build()
            .unwrap();
        builder = builder.manage(breaker);
    }
    builder.build()
}

#[test]
fn the_status_key_grows_by_about_sixty_bytes_a_breaker() {
    let mut sizes = Vec::new();
    for n in [0, 1, 10, 50] {
        let status = instance("edge-017.example.net:8080", n).status();
        sizes.push((n, serde_json::to_vec(&status).unwrap().len()));
    }
    println!("status key bytes by breakers: {sizes:?}");
    let per_breaker = (sizes[3].1 - sizes[2].1) / 40;
    println!("≈ {per_breaker} bytes a breaker");
    assert!((40..=100).contains(&per_breaker), "{sizes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_instances_report_and_take_a_push() {
    let etcd = Etcd::start().await;
    let gateway = etcd.gateway();
    push_document(
        &gateway,
        PREFIX,
        b"[[breaker]]\nname = \"upstream-00\"\nminimum_calls = 30\n",
    )
    .await
    .unwrap();
    let started = Instant::now();
    let mut fleet = Vec::new();
    for i in 0..200 {
        let applier = instance(&format!("edge-{i:03}"), 10);
        let mut options = EtcdOptions::new(etcd.endpoint(), PREFIX);
        options.status_interval = Duration::from_secs(1);
        options.lease_ttl = Duration::from_secs(5);
        let source = EtcdSource::spawn(applier.clone(), options);
        fleet.push((applier, source));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut reporting = 0;
    while Instant::now() < deadline {
        reporting = fleet_status(&gateway, PREFIX).await.unwrap().len();
        if reporting == 200 && fleet.iter().all(|(a, _)| a.version() == 1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(reporting, 200);
    println!("200 instances up and reporting in {:?}", started.elapsed());

    let read = Instant::now();
    let statuses = fleet_status(&gateway, PREFIX).await.unwrap();
    let bytes: usize = statuses
        .iter()
        .map(|s| serde_json::to_vec(s).unwrap().len())
        .sum();
    println!(
        "reading 200 status keys ({bytes} bytes, {} a key): {:?}",
        bytes / 200,
        read.elapsed()
    );

    let pushed = Instant::now();
    push_document(
        &gateway,
        PREFIX,
        b"[[breaker]]\nname = \"upstream-00\"\nminimum_calls = 40\n",
    )
    .await
    .unwrap();
    let mut slowest = Duration::ZERO;
    for (applier, _) in &fleet {
        while applier.version() < 2 {
            assert!(
                pushed.elapsed() < Duration::from_secs(30),
                "push not applied"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        slowest = slowest.max(pushed.elapsed());
    }
    println!("one push applied by all 200 instances in {slowest:?}");

    // Stale instances drop out by themselves: stop 50, wait out the lease.
    fleet.truncate(150);
    let gone = Instant::now();
    while fleet_status(&gateway, PREFIX).await.unwrap().len() > 150 {
        assert!(
            gone.elapsed() < Duration::from_secs(20),
            "leases did not expire"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("50 stopped instances dropped out in {:?}", gone.elapsed());
}
