//! Failback's files after a crash: a dead letter torn mid-append does not
//! hide the dead letters given up after it, and quarantined bytes are
//! never overwritten by a later quarantine. Each crash is simulated by
//! writing the torn bytes into the files on disk.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::path::{Path, PathBuf};
use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::cluster::{
    Cluster, EndpointConfig, Failback, FailbackConfig, FailbackError, FsyncPolicy,
};
use tripline::retry::RetryBackoff;
use tripline::{CircuitBreakerConfig, WindowConfig};

/// A failback whose dependency is always down, giving an entry up at its
/// first background retry, one second after it was queued.
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

fn dead(dir: &Path) -> PathBuf {
    dir.join("failback.dead")
}

/// Queues `payload` and gives it up at its first retry.
fn give_up(fb: &Failback<&'static str>, clock: &ManualClock, payload: &[u8]) {
    fb.submit(payload).unwrap();
    clock.advance(Duration::from_secs(1));
    assert_eq!(fb.run_due().gave_up, 1);
}

/// Gives `payload` up, then puts the files back as a crash in the middle
/// of appending its dead letter leaves them: the log as before (the entry
/// never marked given up) and the dead-letter file cut to `keep(old, new)`
/// bytes, where `old` and `new` are its lengths before and after.
fn crash_while_burying(
    dir: &Path,
    clock: &ManualClock,
    payload: &[u8],
    keep: impl Fn(usize, usize) -> usize,
) {
    let fb = open(dir, clock).unwrap();
    fb.submit(payload).unwrap();
    let log_before = std::fs::read(log(dir)).unwrap();
    let old = std::fs::metadata(dead(dir)).map_or(0, |m| m.len() as usize);
    clock.advance(Duration::from_secs(1));
    assert_eq!(fb.run_due().gave_up, 1);
    drop(fb);
    let after = std::fs::read(dead(dir)).unwrap();
    std::fs::write(dead(dir), &after[..keep(old, after.len())]).unwrap();
    std::fs::write(log(dir), log_before).unwrap();
}

/// The quarantine files in `dir` whose names start with `prefix`, sorted.
fn quarantined(dir: &Path, prefix: &str) -> Vec<Vec<u8>> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(prefix))
        .collect();
    names.sort();
    names
        .iter()
        .map(|n| std::fs::read(dir.join(n)).unwrap())
        .collect()
}

#[test]
fn dead_letters_given_up_after_a_torn_dead_letter_are_readable() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let fb = open(dir.path(), &clock).unwrap();
    give_up(&fb, &clock, b"first");
    drop(fb);
    let before = std::fs::read(dead(dir.path())).unwrap();
    // Half of "second"'s dead letter reached the disk.
    crash_while_burying(dir.path(), &clock, b"second", |old, new| (old + new) / 2);
    let torn = std::fs::read(dead(dir.path())).unwrap();

    let fb = open(dir.path(), &clock).unwrap();
    assert_eq!(fb.pending(), 1, "second was never marked given up");
    assert_eq!(fb.run_due().gave_up, 1, "second is given up again");
    give_up(&fb, &clock, b"third");
    assert_eq!(
        fb.dead_letters().unwrap(),
        [b"first".to_vec(), b"second".to_vec(), b"third".to_vec()]
    );
    assert_eq!(
        quarantined(dir.path(), "failback.dead.corrupt-"),
        [torn[before.len()..].to_vec()],
        "the torn record is kept aside"
    );
}

#[test]
fn dead_letters_an_older_version_appended_behind_a_torn_one_are_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let fb = open(dir.path(), &clock).unwrap();
    for p in [b"one", b"two", b"six"] {
        give_up(&fb, &clock, p);
    }
    drop(fb);
    // The file an older version left: "two" torn in half, "six" appended
    // behind it, both acknowledged dead letters around the tear.
    let bytes = std::fs::read(dead(dir.path())).unwrap();
    let record = (bytes.len() - 8) / 3;
    let torn_end = 8 + record + record / 2;
    let mut damaged = bytes[..torn_end].to_vec();
    damaged.extend_from_slice(&bytes[8 + 2 * record..]);
    std::fs::write(dead(dir.path()), &damaged).unwrap();

    let fb = open(dir.path(), &clock).unwrap();
    assert_eq!(
        fb.dead_letters().unwrap(),
        [b"one".to_vec(), b"six".to_vec()]
    );
    give_up(&fb, &clock, b"ten");
    assert_eq!(
        fb.dead_letters().unwrap(),
        [b"one".to_vec(), b"six".to_vec(), b"ten".to_vec()]
    );
    assert_eq!(
        quarantined(dir.path(), "failback.dead.corrupt-"),
        [bytes[8 + record..torn_end].to_vec()]
    );
}

#[test]
fn a_crash_during_the_first_dead_letter_leaves_a_header_that_is_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    // Only the first 5 bytes of the new file reached the disk: part of
    // its magic bytes.
    crash_while_burying(dir.path(), &clock, b"lost", |_, _| 5);
    let fb = open(dir.path(), &clock).unwrap();
    assert_eq!(fb.run_due().gave_up, 1, "lost is given up again");
    give_up(&fb, &clock, b"later");
    assert_eq!(
        fb.dead_letters().unwrap(),
        [b"lost".to_vec(), b"later".to_vec()]
    );
}

#[test]
fn a_dead_letter_file_that_is_not_ours_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    std::fs::write(dead(dir.path()), b"somebody's notes").unwrap();
    let err = open(dir.path(), &clock).unwrap_err();
    assert!(
        matches!(&err, FailbackError::NotAQueue { path } if *path == dead(dir.path())),
        "{err}"
    );
    assert_eq!(
        std::fs::read(dead(dir.path())).unwrap(),
        b"somebody's notes"
    );
}

#[test]
fn torn_dead_letters_are_reported_and_each_kept_under_its_own_name() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    crash_while_burying(dir.path(), &clock, b"alpha", |old, new| (old + new) / 2);
    let torn = std::fs::read(dead(dir.path())).unwrap()[8..].to_vec();
    let fb = open(dir.path(), &clock).unwrap();
    let first = fb.open_report().corrupt_dead_letters.clone();
    assert_eq!(first.len(), 1);
    assert_eq!(
        (first[0].offset, first[0].len, first[0].reason),
        (8, torn.len() as u64, "truncated record")
    );
    assert_eq!(std::fs::read(&first[0].quarantined).unwrap(), torn);
    drop(fb);
    // Another crash tears a record at the same offset, shorter this time.
    let mut bytes = std::fs::read(dead(dir.path())).unwrap();
    assert_eq!(
        bytes.len(),
        8,
        "the repaired file holds its magic bytes alone"
    );
    bytes.extend_from_slice(&torn[..5]);
    std::fs::write(dead(dir.path()), &bytes).unwrap();
    let fb = open(dir.path(), &clock).unwrap();
    let second = fb.open_report().corrupt_dead_letters.clone();
    assert_eq!(
        (second[0].offset, second[0].reason),
        (8, "truncated record header")
    );
    assert_ne!(second[0].quarantined, first[0].quarantined);
    assert_eq!(std::fs::read(&first[0].quarantined).unwrap(), torn);
    assert_eq!(std::fs::read(&second[0].quarantined).unwrap(), &torn[..5]);
    assert_eq!(fb.run_due().gave_up, 1, "alpha is given up again");
    assert_eq!(fb.dead_letters().unwrap(), [b"alpha".to_vec()]);
    drop(fb);
    let fb = open(dir.path(), &clock).unwrap();
    assert!(fb.open_report().corrupt_dead_letters.is_empty());
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
