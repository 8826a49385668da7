//! Failback's files after a crash: quarantined bytes are never
//! overwritten by a later quarantine. Each crash is simulated by writing
//! the damaged bytes into the files on disk.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::path::{Path, PathBuf};
use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::cluster::{
    Cluster, EndpointConfig, Failback, FailbackConfig, FailbackError, FsyncPolicy,
};
use tripline::retry::RetryBackoff;
use tripline::{CircuitBreakerConfig, WindowConfig};

/// A failback whose dependency is always down.
fn open(dir: &Path, clock: &ManualClock) -> Result<Failback<&'static str>, FailbackError> {
    let cluster = Cluster::builder()
        .name("points")
        .endpoint(EndpointConfig::new("p1", "p1:80"))
        // A breaker that never trips: the files are under test.
        .breaker(CircuitBreakerConfig {
            window: WindowConfig::Count { size: 1000 },
            minimum_calls: 1000,
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    let config = FailbackConfig {
        dir: dir.to_owned(),
        max_retries: 1,
        backoff: RetryBackoff::Constant {
            delay: Duration::from_secs(1),
        },
        fsync: FsyncPolicy::Never,
        ..Default::default()
    };
    Failback::builder(cluster, config)
        .clock(clock.clone())
        .deliver(|_, _: &[u8]| Err("503"))
        .open()
}

fn log(dir: &Path) -> PathBuf {
    dir.join("failback.log")
}

/// Queues `payloads` and closes the queue, then flips the last byte of
/// the log (the last entry's payload) and reopens it: the last entry is
/// quarantined. Returns where its record began, the file it was moved to
/// and the bytes that were moved.
fn corrupt_last_entry(dir: &Path, payloads: &[&[u8]]) -> (u64, PathBuf, Vec<u8>) {
    let clock = ManualClock::new();
    let fb = open(dir, &clock).unwrap();
    for p in payloads {
        fb.submit(p).unwrap();
    }
    drop(fb);
    let mut bytes = std::fs::read(log(dir)).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x55;
    std::fs::write(log(dir), &bytes).unwrap();
    let fb = open(dir, &clock).unwrap();
    let corrupt = fb.open_report().corrupt.clone().unwrap();
    let tail = bytes[corrupt.offset as usize..].to_vec();
    (corrupt.offset, corrupt.quarantined, tail)
}

#[test]
fn two_corrupt_tails_at_the_same_offset_both_keep_their_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (at1, aside1, tail1) = corrupt_last_entry(dir.path(), &[b"kept", b"lost"]);
    // The reopened queue holds "kept" alone: the next entry is appended at
    // the same offset, and corrupted the same way.
    let (at2, aside2, tail2) = corrupt_last_entry(dir.path(), &[b"gone"]);
    assert_eq!(at1, at2, "both tails start at the same offset");
    assert_ne!(tail1, tail2);
    assert_ne!(
        aside1, aside2,
        "the second quarantine has a name of its own"
    );
    assert_eq!(std::fs::read(&aside1).unwrap(), tail1);
    assert_eq!(std::fs::read(&aside2).unwrap(), tail2);
}
