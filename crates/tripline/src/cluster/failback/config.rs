//! Failback's config, errors, reports and wall clock.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use crate::clock::{Clock, Timestamp, duration_to_nanos};
use crate::error::PolicyConfigError;
use crate::retry::RetryBackoff;

/// When an accepted entry is made durable.
///
/// An entry is acknowledged ([`Submitted::Queued`](super::Submitted::Queued))
/// only after its record is written under this policy.
///
/// ```
/// use tripline::cluster::FsyncPolicy;
/// assert_eq!(FsyncPolicy::default(), FsyncPolicy::EveryEntry);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum FsyncPolicy {
    /// `fdatasync` after every accepted entry, before acknowledging it: an
    /// acknowledged entry survives a crash of the process *and* of the
    /// machine (power loss). Costs one disk flush per failed call.
    #[default]
    EveryEntry,
    /// No flush: the record is in the OS page cache when acknowledged, so
    /// it survives a crash of the process but not of the machine. For
    /// tests, tmpfs, or payloads that another system can replay.
    Never,
}

/// How a [`Failback`](super::Failback) stores and retries.
///
/// ```
/// use std::time::Duration;
/// use tripline::cluster::FailbackConfig;
///
/// let config = FailbackConfig { dir: "/var/lib/app/failback".into(), ..Default::default() };
/// assert!(config.validate().is_ok());
/// let bad = FailbackConfig { max_entries: 0, ..config };
/// assert_eq!(bad.validate().unwrap_err().field, "max_entries");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct FailbackConfig {
    /// The queue's directory (created if missing); holds `failback.log`,
    /// `failback.dead` (entries given up) and any quarantined corrupt tail.
    /// One failback per directory.
    pub dir: PathBuf,
    /// Background retries of an entry before it is given up (moved to the
    /// dead-letter file), ≥ 1.
    pub max_retries: u32,
    /// An entry older than this is given up at its next turn. Positive.
    #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
    pub max_age: Duration,
    /// The wait before each background retry.
    pub backoff: RetryBackoff,
    /// Most entries pending at once, ≥ 1: a failed call beyond it is
    /// refused with [`FailbackError::Full`].
    pub max_entries: usize,
    /// Most payload bytes pending at once, ≥ 1.
    pub max_bytes: u64,
    /// When accepted entries are flushed to disk.
    pub fsync: FsyncPolicy,
    /// The background runner looks for due entries at least this often, ≥ 1 ms.
    #[cfg_attr(feature = "serde", serde(with = "crate::clock::duration_serde"))]
    pub poll_interval: Duration,
}

impl Default for FailbackConfig {
    /// No directory (it must be set), 10 retries, 1 h max age, backoff 1 s
    /// ×2 ≤ 5 min, 10 000 entries, 64 MiB, fsync per entry, 1 s poll.
    fn default() -> Self {
        FailbackConfig {
            dir: PathBuf::new(),
            max_retries: 10,
            max_age: Duration::from_secs(3600),
            backoff: RetryBackoff::Exponential {
                initial: Duration::from_secs(1),
                multiplier: 2.0,
                max: Duration::from_secs(300),
            },
            max_entries: 10_000,
            max_bytes: 64 << 20,
            fsync: FsyncPolicy::EveryEntry,
            poll_interval: Duration::from_secs(1),
        }
    }
}

impl FailbackConfig {
    /// Checks every field, naming the first that can never work.
    pub fn validate(&self) -> Result<(), PolicyConfigError> {
        let err = |field, c: &str| Err(PolicyConfigError::new("failback", field, c));
        if self.dir.as_os_str().is_empty() {
            return err("dir", "must be set to the queue's directory");
        }
        if self.max_retries == 0 {
            return err("max_retries", "must be at least 1, got 0");
        }
        if self.max_age.is_zero() {
            return err("max_age", "must be positive, got 0s");
        }
        if self.max_entries == 0 {
            return err("max_entries", "must be at least 1, got 0");
        }
        if self.max_bytes == 0 {
            return err("max_bytes", "must be at least 1, got 0");
        }
        if self.poll_interval < Duration::from_millis(1) {
            return err("poll_interval", "must be at least 1ms");
        }
        crate::retry::RetryConfig {
            backoff: self.backoff.clone(),
            ..Default::default()
        }
        .validate()
        .map_err(|e| PolicyConfigError::new("failback", "backoff", e.constraint))
    }
}

/// Why the failback queue refused, or could not be opened.
///
/// ```
/// use tripline::cluster::FailbackError;
/// let e = FailbackError::Full { bound: "max_entries", limit: 10, current: 10 };
/// assert_eq!(e.to_string(), "failback queue is full: 10 pending, `max_entries` is 10");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum FailbackError {
    /// A file operation failed (the directory is not writable, the disk is full…).
    #[error("failback queue: cannot {op} `{path}`: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which file or directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The log file exists but is not a failback queue (wrong magic bytes):
    /// refused rather than overwritten.
    #[error("failback queue: `{path}` is not a failback queue file (bad magic bytes)")]
    NotAQueue {
        /// The file.
        path: PathBuf,
    },
    /// The queue is at its bound: the entry was not accepted.
    #[error("failback queue is full: {current} pending, `{bound}` is {limit}")]
    Full {
        /// `max_entries` or `max_bytes`.
        bound: &'static str,
        /// Its value.
        limit: u64,
        /// Entries or payload bytes pending now.
        current: u64,
    },
    /// The payload alone is larger than the queue may ever hold.
    #[error("failback payload of {len} bytes exceeds `max_bytes` ({max_bytes})")]
    PayloadTooLarge {
        /// The payload's size.
        len: u64,
        /// The bound.
        max_bytes: u64,
    },
    /// A write failed and could not be rolled back: the queue refuses
    /// further writes until it is reopened (which recovers the readable prefix).
    #[error("failback queue `{path}` is unusable after a failed write; reopen it")]
    Poisoned {
        /// The log file.
        path: PathBuf,
    },
    /// The config is invalid.
    #[error(transparent)]
    Config(#[from] PolicyConfigError),
}

/// Unreadable bytes found when opening the queue, and where they were moved.
///
/// In the log, the corrupt tail: everything from the first unreadable
/// record on. In the dead-letter file, one unreadable stretch (a dead
/// letter torn by a crash): from there up to the next readable dead letter.
///
/// ```
/// use tripline::cluster::CorruptTail;
/// let tail = CorruptTail { offset: 8, len: 40, reason: "checksum mismatch", quarantined: "q/failback.log.corrupt-8".into() };
/// assert_eq!(tail.offset + tail.len, 48);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorruptTail {
    /// The first unreadable byte's offset in its file (in the log, where
    /// the readable prefix ends).
    pub offset: u64,
    /// Bytes moved aside from `offset` on.
    pub len: u64,
    /// Why reading stopped there (`checksum mismatch`, `truncated record`…).
    pub reason: &'static str,
    /// Where the bytes were moved: a new file `<file>.corrupt-<offset>`
    /// (`failback.log.corrupt-8`, `failback.dead.corrupt-46`), or
    /// `<file>.corrupt-<offset>.<n>` (the first free `n` from 1) when an
    /// earlier corruption at the same offset holds that name — quarantined
    /// bytes are never overwritten. The log itself was truncated at
    /// `offset`; the dead-letter file was rewritten without the stretch.
    pub quarantined: PathBuf,
}

/// What opening the queue found.
///
/// ```
/// let report = tripline::cluster::OpenReport::default();
/// assert_eq!((report.recovered, report.corrupt), (0, None));
/// assert!(report.corrupt_dead_letters.is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Entries pending, replayed from the file.
    pub recovered: usize,
    /// The log's corrupt tail, if it had one.
    pub corrupt: Option<CorruptTail>,
    /// The unreadable stretches of the dead-letter file, in file order:
    /// dead letters torn by a crash. The dead letters around them were
    /// kept, so [`Failback::dead_letters`](super::Failback::dead_letters)
    /// still returns every one that was given up.
    pub corrupt_dead_letters: Vec<CorruptTail>,
}

/// Wall-clock time as a [`Clock`]: nanoseconds since the Unix epoch.
///
/// The failback's default clock, because its entries' times are written to
/// disk and must mean the same after a restart (a monotonic clock restarts
/// with the process). Readings never decrease within a process; a wall
/// clock stepped backwards between processes only delays retries.
///
/// ```
/// use tripline::clock::Clock;
/// use tripline::cluster::WallClock;
/// let (a, b) = (WallClock.now(), WallClock.now());
/// assert!(b >= a && a.as_secs_f64() > 1.7e9); // seconds since 1970
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct WallClock;

static WALL_LAST: AtomicU64 = AtomicU64::new(0);

impl Clock for WallClock {
    fn now(&self) -> Timestamp {
        let t = crate::clock::system_time_after(Duration::ZERO)
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, duration_to_nanos);
        Timestamp::from_nanos(WALL_LAST.fetch_max(t, Ordering::Relaxed).max(t))
    }

    fn resolution(&self) -> Duration {
        Duration::from_micros(1)
    }
}
