//! Failback's durable queue: delivery with backoff, replay after a killed
//! process, the bounds, corrupt and foreign files, an unwritable
//! directory, giving up, tombstones and compaction, and the background
//! runner on paused tokio time.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tripline::clock::{ManualClock, SharedClock, Timestamp};
use tripline::cluster::{
    Cluster, EndpointConfig, Failback, FailbackConfig, FailbackError, FsyncPolicy, Submitted,
};
use tripline::retry::RetryBackoff;
use tripline::{CircuitBreakerConfig, WindowConfig};

/// A dependency that is up or down, and what it received.
#[derive(Clone, Default)]
struct Sink {
    up: Arc<AtomicBool>,
    calls: Arc<AtomicU32>,
    got: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Sink {
    fn set_up(&self, up: bool) {
        self.up.store(up, Ordering::SeqCst);
    }
    fn got(&self) -> Vec<Vec<u8>> {
        self.got.lock().unwrap().clone()
    }
}

fn cluster(clock: impl Into<SharedClock>) -> Cluster {
    Cluster::builder()
        .name("points")
        .endpoint(EndpointConfig::new("p1", "p1:80"))
        // Breakers that never trip: the queue is under test.
        .breaker(CircuitBreakerConfig {
            window: WindowConfig::Count { size: 30_000 },
            minimum_calls: 30_000,
            ..Default::default()
        })
        .clock(clock)
        .build()
        .unwrap()
}

fn config(dir: &Path) -> FailbackConfig {
    FailbackConfig {
        dir: dir.to_owned(),
        backoff: RetryBackoff::Exponential {
            initial: Duration::from_secs(1),
            multiplier: 2.0,
            max: Duration::from_secs(60),
        },
        ..Default::default()
    }
}

fn open_with(
    config: FailbackConfig,
    clock: &ManualClock,
    sink: &Sink,
) -> Result<Failback<&'static str>, FailbackError> {
    let s = sink.clone();
    Failback::builder(cluster(clock.clone()), config)
        .clock(clock.clone())
        .deliver(move |_, payload: &[u8]| {
            s.calls.fetch_add(1, Ordering::SeqCst);
            if s.up.load(Ordering::SeqCst) {
                s.got.lock().unwrap().push(payload.to_vec());
                Ok(())
            } else {
                Err("503")
            }
        })
        .open()
}

fn open(dir: &Path, clock: &ManualClock, sink: &Sink) -> Failback<&'static str> {
    open_with(config(dir), clock, sink).unwrap()
}

fn log(dir: &Path) -> PathBuf {
    dir.join("failback.log")
}

#[test]
fn a_failed_request_is_queued_then_delivered_with_backoff() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, sink) = (ManualClock::new(), Sink::default());
    let fb = open(dir.path(), &clock, &sink);
    assert_eq!(fb.submit(b"user=7").unwrap(), Submitted::Queued { id: 1 });
    assert_eq!(fb.pending(), 1);
    assert_eq!(fb.next_due(), Some(Timestamp::from_nanos(1_000_000_000)));
    assert_eq!(fb.run_due().retried, 0, "not due before its backoff");
    clock.advance(Duration::from_secs(1));
    let r = fb.run_due();
    assert_eq!(
        (r.delivered, r.retried, r.pending),
        (0, 1, 1),
        "still down: rescheduled"
    );
    assert_eq!(
        fb.next_due(),
        Some(Timestamp::from_nanos(3_000_000_000)),
        "then 2 s"
    );
    sink.set_up(true);
    clock.advance(Duration::from_secs(2));
    let r = fb.run_due();
    assert_eq!((r.delivered, r.pending), (1, 0));
    assert_eq!(sink.got(), [b"user=7".to_vec()]);
    let s = fb.stats();
    assert_eq!((s.queued, s.retries_failed, s.delivered_later), (1, 1, 1));
}

#[test]
fn a_request_delivered_at_once_is_not_queued() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, sink) = (ManualClock::new(), Sink::default());
    sink.set_up(true);
    let fb = open(dir.path(), &clock, &sink);
    assert_eq!(fb.submit(b"now").unwrap(), Submitted::Delivered);
    drop(fb);
    let fb = open(dir.path(), &clock, &sink);
    assert_eq!(fb.open_report().recovered, 0);
    assert_eq!(fb.stats().delivered_first, 0, "counts are per process");
}

const CHILD: &str = "TRIPLINE_FAILBACK_CHILD_DIR";

/// Killed mid-flight: the child accepts three entries (each flushed
/// before it is acknowledged) and is killed before delivering any; the
/// parent reopens the queue as the restarted process and delivers them.
#[test]
fn the_queue_replays_after_the_process_is_killed() {
    if let Ok(dir) = std::env::var(CHILD) {
        // The child: accept, report, then wait to be killed.
        let (clock, sink) = (ManualClock::new(), Sink::default());
        let fb = open(Path::new(&dir), &clock, &sink);
        for i in 0..3 {
            let r = fb.submit(format!("order-{i}").as_bytes()).unwrap();
            assert!(matches!(r, Submitted::Queued { .. }));
        }
        println!("ACCEPTED 3");
        loop {
            std::thread::park();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "the_queue_replays_after_the_process_is_killed",
            "--exact",
            "--nocapture",
        ])
        .env(CHILD, dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let accepted = stdout
        .lines()
        .map_while(Result::ok)
        .any(|line| line.trim() == "ACCEPTED 3");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        accepted,
        "the child accepted its entries before it was killed"
    );

    // The restarted process, later.
    let (clock, sink) = (
        ManualClock::starting_at(Timestamp::from_nanos(10_000_000_000)),
        Sink::default(),
    );
    sink.set_up(true);
    let fb = open(dir.path(), &clock, &sink);
    assert_eq!(fb.open_report().recovered, 3);
    assert_eq!(fb.open_report().corrupt, None);
    assert_eq!(fb.run_due().delivered, 3);
    let mut got = sink.got();
    got.sort();
    assert_eq!(
        got,
        [
            b"order-0".to_vec(),
            b"order-1".to_vec(),
            b"order-2".to_vec()
        ]
    );
    drop(fb);
    // Delivered entries are marked done: a second restart delivers nothing.
    let fb = open(dir.path(), &clock, &sink);
    assert_eq!(fb.open_report().recovered, 0);
    assert_eq!(fb.run_due().delivered, 0);
}

#[test]
fn the_bounds_refuse_with_a_clear_error_and_accept_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, sink) = (ManualClock::new(), Sink::default());
    let fb = open_with(
        FailbackConfig {
            max_entries: 2,
            ..config(dir.path())
        },
        &clock,
        &sink,
    )
    .unwrap();
    fb.submit(b"a").unwrap();
    fb.submit(b"b").unwrap();
    let err = fb.submit(b"c").unwrap_err();
    assert_eq!(
        err.to_string(),
        "failback queue is full: 2 pending, `max_entries` is 2"
    );
    assert!(matches!(
        err,
        FailbackError::Full {
            bound: "max_entries",
            limit: 2,
            current: 2
        }
    ));
    assert_eq!(fb.stats().refused, 1);
    drop(fb);
    let fb = open(dir.path(), &clock, &sink);
    assert_eq!(
        fb.open_report().recovered,
        2,
        "the refused entry was never written"
    );
    drop(fb);

    let dir = tempfile::tempdir().unwrap();
    let fb = open_with(
        FailbackConfig {
            max_bytes: 10,
            ..config(dir.path())
        },
        &clock,
        &sink,
    )
    .unwrap();
    fb.submit(b"123456").unwrap();
    let err = fb.submit(b"123456").unwrap_err();
    assert_eq!(
        err.to_string(),
        "failback queue is full: 6 pending, `max_bytes` is 10"
    );
    let err = fb.submit(b"12345678901").unwrap_err();
    assert_eq!(
        err.to_string(),
        "failback payload of 11 bytes exceeds `max_bytes` (10)"
    );
}

/// Writes three entries with the dependency down and closes the queue.
fn three_entries(dir: &Path) -> u64 {
    let (clock, sink) = (ManualClock::new(), Sink::default());
    let fb = open(dir, &clock, &sink);
    for p in [b"first", b"secnd", b"third"] {
        fb.submit(p).unwrap();
    }
    std::fs::metadata(log(dir)).unwrap().len()
}

#[test]
fn a_corrupt_tail_is_reported_and_quarantined_and_the_readable_entries_kept() {
    let dir = tempfile::tempdir().unwrap();
    let len = three_entries(dir.path());
    let entry = (len - 8) / 3; // magic, then three records of one size
    let mut bytes = std::fs::read(log(dir.path())).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x55; // the third record's payload
    std::fs::write(log(dir.path()), &bytes).unwrap();

    let (clock, sink) = (
        ManualClock::starting_at(Timestamp::from_nanos(5_000_000_000)),
        Sink::default(),
    );
    sink.set_up(true);
    let fb = open(dir.path(), &clock, &sink);
    let report = fb.open_report().clone();
    assert_eq!(report.recovered, 2);
    let corrupt = report.corrupt.unwrap();
    assert_eq!(
        (corrupt.offset, corrupt.len, corrupt.reason),
        (8 + 2 * entry, entry, "checksum mismatch")
    );
    assert_eq!(
        std::fs::read(&corrupt.quarantined).unwrap(),
        bytes[(8 + 2 * entry) as usize..]
    );
    assert_eq!(fb.run_due().delivered, 2);
    assert_eq!(sink.got(), [b"first".to_vec(), b"secnd".to_vec()]);
}

#[test]
fn a_torn_write_and_trailing_garbage_end_the_readable_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let len = three_entries(dir.path());
    // A crash in the middle of appending the third record.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(log(dir.path()))
        .unwrap();
    f.set_len(len - 3).unwrap();
    drop(f);
    let (clock, sink) = (ManualClock::new(), Sink::default());
    let fb = open(dir.path(), &clock, &sink);
    let corrupt = fb.open_report().corrupt.clone().unwrap();
    assert_eq!(
        (fb.open_report().recovered, corrupt.reason),
        (2, "truncated record")
    );
    drop(fb);
    // Garbage after valid records: an impossible length.
    let mut bytes = std::fs::read(log(dir.path())).unwrap();
    bytes.extend_from_slice(&[0xFF; 16]);
    std::fs::write(log(dir.path()), &bytes).unwrap();
    let fb = open(dir.path(), &clock, &sink);
    assert_eq!(fb.open_report().recovered, 2);
    assert_eq!(
        fb.open_report().corrupt.as_ref().unwrap().reason,
        "impossible record length"
    );
}

#[test]
fn a_file_that_is_not_a_queue_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(log(dir.path()), b"hello, I am somebody's notes").unwrap();
    let (clock, sink) = (ManualClock::new(), Sink::default());
    let err = open_with(config(dir.path()), &clock, &sink).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "failback queue: `{}` is not a failback queue file (bad magic bytes)",
            log(dir.path()).display()
        )
    );
    assert_eq!(
        std::fs::read(log(dir.path())).unwrap(),
        b"hello, I am somebody's notes"
    );
}

#[test]
fn an_unwritable_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let (clock, sink) = (ManualClock::new(), Sink::default());
    let bad = file.join("queue");
    let err = open_with(config(&bad), &clock, &sink).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "failback queue: cannot create directory `{}`: ",
            bad.display()
        )),
        "{msg}"
    );
    assert!(matches!(
        err,
        FailbackError::Io {
            op: "create directory",
            ..
        }
    ));
}

#[test]
fn bad_configs_name_the_field() {
    let (clock, sink) = (ManualClock::new(), Sink::default());
    let err = open_with(FailbackConfig::default(), &clock, &sink).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid failback config: `dir` must be set to the queue's directory"
    );
    let dir = tempfile::tempdir().unwrap();
    let err = Failback::<()>::builder(cluster(clock.clone()), config(dir.path()))
        .open()
        .unwrap_err();
    assert!(err.to_string().contains("`deliver` must be set"), "{err}");
    let err = open_with(
        FailbackConfig {
            max_retries: 0,
            ..config(dir.path())
        },
        &clock,
        &sink,
    )
    .unwrap_err();
    assert!(err.to_string().contains("`max_retries`"), "{err}");
}

#[test]
fn entries_are_given_up_after_max_retries_into_the_dead_letters() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, sink) = (ManualClock::new(), Sink::default());
    let c = FailbackConfig {
        max_retries: 2,
        backoff: RetryBackoff::Constant {
            delay: Duration::from_secs(1),
        },
        ..config(dir.path())
    };
    let fb = open_with(c, &clock, &sink).unwrap();
    fb.submit(b"doomed").unwrap();
    clock.advance(Duration::from_secs(1));
    assert_eq!(fb.run_due().retried, 1);
    clock.advance(Duration::from_secs(1));
    let r = fb.run_due();
    assert_eq!((r.gave_up, r.pending), (1, 0));
    assert_eq!(
        sink.calls.load(Ordering::SeqCst),
        3,
        "first attempt and two retries"
    );
    assert_eq!(fb.dead_letters().unwrap(), [b"doomed".to_vec()]);
    drop(fb);
    let fb = open(dir.path(), &clock, &sink);
    assert_eq!(fb.open_report().recovered, 0);
}

#[test]
fn entries_older_than_max_age_are_given_up_without_another_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, sink) = (ManualClock::new(), Sink::default());
    let c = FailbackConfig {
        max_age: Duration::from_secs(5),
        backoff: RetryBackoff::Constant {
            delay: Duration::from_secs(10),
        },
        ..config(dir.path())
    };
    let fb = open_with(c, &clock, &sink).unwrap();
    fb.submit(b"stale").unwrap();
    clock.advance(Duration::from_secs(10));
    sink.set_up(true);
    let r = fb.run_due();
    assert_eq!((r.gave_up, r.delivered), (1, 0));
    assert_eq!(
        sink.calls.load(Ordering::SeqCst),
        1,
        "only the first attempt"
    );
    assert_eq!(fb.stats().gave_up, 1);
}

#[test]
fn retry_counts_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, sink) = (ManualClock::new(), Sink::default());
    let c = FailbackConfig {
        max_retries: 3,
        backoff: RetryBackoff::Constant {
            delay: Duration::from_secs(1),
        },
        ..config(dir.path())
    };
    let fb = open_with(c.clone(), &clock, &sink).unwrap();
    fb.submit(b"x").unwrap();
    for _ in 0..2 {
        clock.advance(Duration::from_secs(1));
        fb.run_due();
    }
    drop(fb);
    let fb = open_with(c, &clock, &sink).unwrap();
    clock.advance(Duration::from_secs(1));
    assert_eq!(
        fb.run_due().gave_up,
        1,
        "two retries before the restart, the third after"
    );
}

#[test]
fn compaction_keeps_the_log_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, sink) = (ManualClock::new(), Sink::default());
    let c = FailbackConfig {
        fsync: FsyncPolicy::Never,
        ..config(dir.path())
    };
    let fb = open_with(c, &clock, &sink).unwrap();
    let payload = [7u8; 100];
    for _ in 0..3000 {
        sink.set_up(false);
        fb.submit(&payload).unwrap();
        sink.set_up(true);
        clock.advance(Duration::from_secs(1));
        assert_eq!(fb.run_due().delivered, 1);
    }
    let size = std::fs::metadata(log(dir.path())).unwrap().len();
    assert!(
        size < 150 * 1024,
        "3000 entries came and went, the log is {size} bytes"
    );
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn the_background_runner_delivers_on_its_own() {
    use tripline::timeout::TokioTimer;
    let dir = tempfile::tempdir().unwrap();
    let sink = Sink::default();
    let s = sink.clone();
    let clock = TokioTimer.clock();
    let fb = Failback::builder(cluster(clock.clone()), config(dir.path()))
        .clock(clock)
        .deliver(move |_, p: &[u8]| {
            if s.up.load(Ordering::SeqCst) {
                s.got.lock().unwrap().push(p.to_vec());
                Ok(())
            } else {
                Err("down")
            }
        })
        .open()
        .unwrap();
    let runner = tokio::spawn(fb.clone().run(Arc::new(TokioTimer)));
    assert!(matches!(
        fb.submit(b"later").unwrap(),
        Submitted::Queued { .. }
    ));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(sink.got().is_empty(), "still down at the first retry");
    sink.set_up(true);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(sink.got(), [b"later".to_vec()]);
    assert_eq!(fb.pending(), 0);
    runner.abort();
}
