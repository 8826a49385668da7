//! Failback logs no queue could have written, found by fuzzing the file
//! reader: opening the queue sets them aside instead of panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::path::Path;
use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::cluster::{
    Cluster, EndpointConfig, Failback, FailbackConfig, FsyncPolicy, Submitted,
};

const MAGIC: &[u8; 8] = b"TLFBQ\x00\x00\x01";

/// One `len crc body` record.
fn record(body: &[u8]) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&(body.len() as u32).to_le_bytes());
    r.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    r.extend_from_slice(body);
    r
}

/// An accepted entry with a well-formed, checksummed body.
fn entry(id: u64, payload: &[u8]) -> Vec<u8> {
    let mut body = vec![1u8];
    body.extend_from_slice(&id.to_le_bytes());
    body.extend_from_slice(&0u64.to_le_bytes()); // accepted_at
    body.extend_from_slice(&0u64.to_le_bytes()); // next_due
    body.extend_from_slice(payload);
    record(&body)
}

fn open(dir: &Path) -> Failback<&'static str> {
    let clock = ManualClock::new();
    let cluster = Cluster::builder()
        .name("points")
        .endpoint(EndpointConfig::new("p1", "p1:80"))
        .clock(clock.clone())
        .build()
        .unwrap();
    let config = FailbackConfig {
        dir: dir.to_owned(),
        fsync: FsyncPolicy::Never,
        poll_interval: Duration::from_millis(10),
        ..Default::default()
    };
    Failback::builder(cluster, config)
        .clock(clock)
        // The dependency is down: every submit is queued.
        .deliver(|_, _: &[u8]| Err("503"))
        .open()
        .unwrap()
}

#[test]
fn an_entry_with_the_largest_id_is_a_corrupt_tail_not_an_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = MAGIC.to_vec();
    log.extend(entry(1, b"kept"));
    let good_len = log.len() as u64;
    log.extend(entry(u64::MAX, b"impossible"));
    std::fs::write(dir.path().join("failback.log"), &log).unwrap();

    let fb = open(dir.path());
    let report = fb.open_report();
    assert_eq!(report.recovered, 1, "the entry before it is recovered");
    let tail = report
        .corrupt
        .as_ref()
        .expect("the impossible entry is set aside");
    assert_eq!(tail.offset, good_len);
    assert_eq!(tail.reason, "impossible entry id");
    // New entries get fresh ids after the recovered one.
    assert_eq!(fb.submit(b"new").unwrap(), Submitted::Queued { id: 2 });
    assert_eq!(fb.pending(), 2);
}
