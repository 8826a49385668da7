//! Failback: on failure, record the request durably and retry it in the
//! background until it is delivered, or given up.
//!
//! For work that must happen eventually but not now: loyalty points after
//! a payment, audit-log shipping, asynchronous notifications.
//! [`Failback::submit`] makes one attempt on a selected endpoint; if
//! it fails (or no endpoint can take it), the request's payload is appended
//! to an append-only log on disk and the caller is told it is
//! [`Queued`](Submitted::Queued). Delivery is then retried with backoff —
//! by [`Failback::run_due`] from your own scheduler, or by the future
//! [`Failback::run`] spawned on any runtime — until it succeeds, or until
//! `max_retries` retries or `max_age` are spent, when the entry is *given
//! up*: moved to a dead-letter file (`failback.dead`, readable with
//! [`Failback::dead_letters`]) and dropped from the queue.
//!
//! # Guarantees
//!
//! * **Acknowledged means durable.** `submit` returns `Queued` only once the
//!   entry's record is written under the [`FsyncPolicy`]: with the default
//!   `EveryEntry`, after `fdatasync`, so it survives a crash of the process
//!   or of the machine.
//! * **At least once.** A delivered entry is marked done in the log (a
//!   tombstone, not flushed); a restart replays only the entries not marked
//!   done. An entry delivered just before a crash may be delivered again if
//!   its tombstone had not reached the disk (machine crash) — the receiving
//!   side must be idempotent (an idempotency key in the payload).
//! * **Bounded.** At most `max_entries` entries and `max_bytes` payload
//!   bytes are pending; beyond, `submit` fails with [`FailbackError::Full`]
//!   and accepts nothing — the caller still holds the request.
//! * **Restart.** Opening replays the log (entries keep their retry count
//!   and next due time). A record that is cut short or fails its checksum
//!   ends the readable prefix: the entries before it are kept, the tail from
//!   its offset on is moved to a new file `failback.log.corrupt-<offset>`
//!   (`…corrupt-<offset>.<n>` if that name is taken: quarantined bytes are
//!   never overwritten) and reported ([`OpenReport::corrupt`]), and the log
//!   is truncated there. Nothing panics.
//! * **Dead letters stay readable.** An entry is marked given up only once
//!   its dead letter is flushed. A dead letter torn by a crash (its entry
//!   is then still pending, and is given up again) is moved aside on
//!   opening to `failback.dead.corrupt-<offset>` and reported
//!   ([`OpenReport::corrupt_dead_letters`]); the dead letters before and
//!   after it are kept, and new ones are appended to a clean file. A
//!   `failback.dead` that is not a dead-letter file is refused untouched.
//!
//! The record format is documented in `failback/record.rs`.

mod config;
mod dead;
mod deliver;
mod files;
mod queue;
mod record;
mod replay;

use std::sync::atomic::{AtomicU64, Ordering};

pub use config::{CorruptTail, FailbackConfig, FailbackError, FsyncPolicy, OpenReport, WallClock};

use self::queue::Queue;
use super::{Cluster, Endpoint};
use crate::clock::SharedClock;
use crate::sync::{Arc, Mutex};

type Deliver<E> = Arc<dyn Fn(&Endpoint, &[u8]) -> Result<(), E> + Send + Sync>;

/// What happened to a submitted request.
///
/// ```
/// use tripline::cluster::Submitted;
/// assert_ne!(Submitted::Delivered, Submitted::Queued { id: 1 });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Submitted {
    /// The first attempt succeeded.
    Delivered,
    /// The first attempt failed; the entry is durably queued for retry.
    Queued {
        /// The entry's id in the queue.
        id: u64,
    },
}

/// What one [`run_due`](Failback::run_due) pass did.
///
/// ```
/// let r = tripline::cluster::DeliveryReport::default();
/// assert_eq!((r.delivered, r.retried, r.gave_up, r.pending), (0, 0, 0, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeliveryReport {
    /// Entries delivered and marked done.
    pub delivered: usize,
    /// Entries that failed again and were rescheduled.
    pub retried: usize,
    /// Entries given up (dead-lettered).
    pub gave_up: usize,
    /// Entries still pending after the pass.
    pub pending: usize,
}

/// Cumulative counts of one failback queue.
///
/// ```
/// assert_eq!(tripline::cluster::FailbackStats::default().queued, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FailbackStats {
    /// Submissions delivered on the first attempt.
    pub delivered_first: u64,
    /// Submissions queued.
    pub queued: u64,
    /// Submissions refused (queue full, payload too large, I/O error).
    pub refused: u64,
    /// Queued entries delivered in the background.
    pub delivered_later: u64,
    /// Background retries that failed.
    pub retries_failed: u64,
    /// Entries given up.
    pub gave_up: u64,
}

#[derive(Default)]
struct Counters([AtomicU64; 6]);

impl Counters {
    fn add(&self, i: usize, n: u64) {
        self.0[i].fetch_add(n, Ordering::Relaxed);
    }
}

struct Inner<E> {
    cluster: Cluster,
    config: FailbackConfig,
    clock: SharedClock,
    deliver: Deliver<E>,
    queue: Mutex<Queue>,
    rng: AtomicU64,
    counters: Counters,
    report: OpenReport,
}

/// A failback queue over a cluster; cheap to clone, clones share the queue.
///
/// ```
/// use tripline::clock::ManualClock;
/// use tripline::cluster::{Cluster, EndpointConfig, Failback, FailbackConfig, FsyncPolicy, Submitted};
///
/// let dir = tempfile::tempdir().unwrap();
/// let clock = ManualClock::new();
/// let cluster = Cluster::builder()
///     .endpoint(EndpointConfig::new("points", "points:80"))
///     .clock(clock.clone())
///     .build()
///     .unwrap();
/// let up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
/// let up2 = up.clone();
/// let failback = Failback::builder(cluster, FailbackConfig {
///         dir: dir.path().into(),
///         fsync: FsyncPolicy::Never,
///         ..Default::default()
///     })
///     .clock(clock.clone())
///     .deliver(move |_endpoint, _payload: &[u8]| {
///         if up2.load(std::sync::atomic::Ordering::SeqCst) { Ok(()) } else { Err("unavailable") }
///     })
///     .open()
///     .unwrap();
///
/// assert!(matches!(failback.submit(b"user=7;points=30").unwrap(), Submitted::Queued { .. }));
/// up.store(true, std::sync::atomic::Ordering::SeqCst);
/// clock.advance(std::time::Duration::from_secs(1)); // the first retry's backoff
/// assert_eq!(failback.run_due().delivered, 1);
/// assert_eq!(failback.pending(), 0);
/// ```
pub struct Failback<E> {
    inner: Arc<Inner<E>>,
}

impl<E> Clone for Failback<E> {
    fn clone(&self) -> Self {
        Failback {
            inner: self.inner.clone(),
        }
    }
}

/// Builds a [`Failback`].
///
/// ```
/// use tripline::cluster::{Cluster, EndpointConfig, Failback, FailbackConfig};
///
/// let dir = tempfile::tempdir().unwrap();
/// let cluster = Cluster::builder().endpoint(EndpointConfig::new("a", "a:80")).build().unwrap();
/// let failback = Failback::builder(cluster, FailbackConfig { dir: dir.path().into(), ..Default::default() })
///     .deliver(|_endpoint, _payload: &[u8]| Ok::<_, std::io::Error>(()))
///     .seed(1)
///     .open()
///     .unwrap();
/// assert_eq!(failback.open_report().recovered, 0);
/// ```
pub struct FailbackBuilder<E> {
    cluster: Cluster,
    config: FailbackConfig,
    clock: Option<SharedClock>,
    deliver: Option<Deliver<E>>,
    seed: u64,
}

impl<E> FailbackBuilder<E> {
    /// The clock entry times are kept on (default [`WallClock`], whose
    /// times survive a restart; a `ManualClock` in tests).
    pub fn clock(mut self, clock: impl Into<SharedClock>) -> Self {
        self.clock = Some(clock.into());
        self
    }

    /// How a payload is delivered to an endpoint: the first attempt and
    /// every retry, also of entries replayed after a restart. `Err` is a
    /// failure.
    pub fn deliver(
        mut self,
        f: impl Fn(&Endpoint, &[u8]) -> Result<(), E> + Send + Sync + 'static,
    ) -> Self {
        self.deliver = Some(Arc::new(f));
        self
    }

    /// Seeds the backoff jitter.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Validates the config, opens (or creates) the queue and replays it.
    pub fn open(self) -> Result<Failback<E>, FailbackError> {
        self.config.validate()?;
        let Some(deliver) = self.deliver else {
            return Err(crate::error::PolicyConfigError::new(
                "failback",
                "deliver",
                "must be set: the function that delivers a payload",
            )
            .into());
        };
        let (queue, report) = Queue::open(&self.config.dir, self.config.fsync)?;
        if report.recovered > 0 {
            tracing::info!(target: "tripline::cluster", dir = %self.config.dir.display(),
                entries = report.recovered, "failback queue replayed");
        }
        Ok(Failback {
            inner: Arc::new(Inner {
                clock: self.clock.unwrap_or_else(|| SharedClock::custom(WallClock)),
                cluster: self.cluster,
                config: self.config,
                deliver,
                queue: Mutex::new(queue),
                rng: AtomicU64::new(self.seed),
                counters: Counters::default(),
                report,
            }),
        })
    }
}

const DELIVERED_FIRST: usize = 0;
const QUEUED: usize = 1;
const REFUSED: usize = 2;
const DELIVERED_LATER: usize = 3;
const RETRIES_FAILED: usize = 4;
const GAVE_UP: usize = 5;
