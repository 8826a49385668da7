//! The failback queue's file reader: whatever bytes a crash, a full disk
//! or a stray editor left in `failback.log` and `failback.dead`, opening
//! the queue either refuses with an error or recovers what is readable
//! and sets the rest aside.

use std::path::Path;
use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::cluster::{
    Cluster, EndpointConfig, Failback, FailbackConfig, FailbackError, FsyncPolicy,
};
use tripline::retry::RetryBackoff;

/// Bit of the input's first byte: the rest is the dead-letter file
/// instead of the log.
pub const DEAD_LETTER_FILE: u8 = 1;
/// Bit of the input's first byte: rewrite every record's checksum before
/// writing the file. A fuzzer cannot forge CRC-32s, so without this it
/// would never get past the checksum to the replay of records that are
/// well-formed but mean something impossible (unknown ids, times at the
/// ends of the range, an entry done twice).
pub const FIX_CHECKSUMS: u8 = 2;

/// The log's and dead-letter file's first bytes (format version 1).
const MAGIC_LEN: usize = 8;

/// Rewrites the checksum of each `len:u32le crc:u32le body` record after
/// the magic bytes, up to the first record whose length runs past the end.
fn fix_checksums(file: &mut [u8]) {
    let mut at = MAGIC_LEN;
    while let Some(head) = file.get(at..at + 8) {
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let Some(body) = file.get(at + 8..at + 8 + len) else {
            return;
        };
        let crc = crc32fast::hash(body).to_le_bytes();
        file[at + 4..at + 8].copy_from_slice(&crc);
        at += 8 + len;
    }
}

/// About when this was written, as the failback's clock reads it (ns
/// since the Unix epoch): entries on disk carry wall-clock times.
const NOW_NANOS: u64 = 1_780_000_000_000_000_000;

fn open(dir: &Path, clock: &ManualClock) -> Result<Failback<&'static str>, FailbackError> {
    let cluster = Cluster::builder()
        .name("fuzz")
        .endpoint(EndpointConfig::new("e1", "e1:80"))
        .clock(clock.clone())
        .build()
        .unwrap_or_else(|e| panic!("a fixed cluster config is refused: {e}"));
    let config = FailbackConfig {
        dir: dir.to_owned(),
        max_retries: 2,
        max_age: Duration::from_secs(60),
        backoff: RetryBackoff::Constant {
            delay: Duration::from_secs(1),
        },
        fsync: FsyncPolicy::Never,
        ..Default::default()
    };
    Failback::builder(cluster, config)
        .clock(clock.clone())
        .deliver(|_, payload: &[u8]| {
            if payload.first() == Some(&b'!') {
                Err("refused")
            } else {
                Ok(())
            }
        })
        .open()
}

/// `data` is a flags byte ([`DEAD_LETTER_FILE`], [`FIX_CHECKSUMS`]) and
/// then the log's (or the dead-letter file's) bytes. When the queue opens, it must deliver or give up what it
/// recovered, and a second open of the same directory must find clean
/// files: the first open set every unreadable byte aside.
pub fn failback_log(data: &[u8]) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("no temp dir: {e}"));
    let Some((&flags, bytes)) = data.split_first() else {
        return;
    };
    let name = if flags & DEAD_LETTER_FILE != 0 {
        "failback.dead"
    } else {
        "failback.log"
    };
    let mut bytes = bytes.to_vec();
    if flags & FIX_CHECKSUMS != 0 {
        fix_checksums(&mut bytes);
    }
    std::fs::write(dir.path().join(name), &bytes).unwrap_or_else(|e| panic!("cannot write: {e}"));
    let clock = ManualClock::new();
    clock.advance(Duration::from_nanos(NOW_NANOS));
    let Ok(first) = open(dir.path(), &clock) else {
        return;
    };
    let _ = first.dead_letters();
    let _ = (first.stats(), first.next_due(), first.oldest_pending_age());
    for _ in 0..4 {
        clock.advance(Duration::from_secs(30));
        let _ = first.run_due();
    }
    let left = first.pending();
    drop(first);
    let again = open(dir.path(), &clock)
        .unwrap_or_else(|e| panic!("a queue that opened once does not open again: {e}"));
    let report = again.open_report();
    assert_eq!(report.corrupt, None, "the first open left a corrupt tail");
    assert!(
        report.corrupt_dead_letters.is_empty(),
        "the first open left corrupt dead letters: {:?}",
        report.corrupt_dead_letters
    );
    assert_eq!(
        report.recovered, left,
        "pending entries changed across reopen"
    );
    let _ = again.dead_letters();
}
