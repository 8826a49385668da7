//! Failback: on failure, record the request durably and retry it in the
//! background until it is delivered, or given up.
//!
//! For work that must happen eventually but not now: loyalty points after
//! a payment, audit-log shipping, asynchronous notifications (seed 003
//! §2.4). [`Failback::submit`] makes one attempt on a selected endpoint; if
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
//!   its offset on is moved to `failback.log.corrupt-<offset>` and reported
//!   ([`OpenReport::corrupt`]), and the log is truncated there. Nothing panics.
//!
//! The record format is documented in `failback/record.rs`.

mod config;
mod queue;
mod record;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use config::{CorruptTail, FailbackConfig, FailbackError, FsyncPolicy, OpenReport, WallClock};

use self::queue::Queue;
use self::record::DoneStatus;
use super::balance::NONE_TRIED;
use super::outcome::DefaultEndpointClassifier;
use super::{Cluster, ClusterAttempt, Endpoint};
use crate::clock::{Clock, SharedClock, Timestamp};
use crate::sync::{Arc, Mutex, lock};
use crate::timeout::SharedTimer;

type Deliver<E> = Arc<dyn Fn(&Endpoint, &[u8]) -> Result<(), E> + Send + Sync>;

/// What happened to a submitted request.
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
            return Err(crate::pipeline::PolicyConfigError::new(
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

impl<E> Failback<E> {
    /// A builder over `cluster` with `config`; set [`deliver`](FailbackBuilder::deliver).
    pub fn builder(cluster: Cluster, config: FailbackConfig) -> FailbackBuilder<E> {
        FailbackBuilder {
            cluster,
            config,
            clock: None,
            deliver: None,
            seed: 0x6661_696c_6261_636b,
        }
    }

    /// What opening the queue found (replayed entries, a corrupt tail).
    pub fn open_report(&self) -> &OpenReport {
        &self.inner.report
    }

    /// The config.
    pub fn config(&self) -> &FailbackConfig {
        &self.inner.config
    }

    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        &self.inner.cluster
    }

    /// Entries pending.
    pub fn pending(&self) -> usize {
        lock(&self.inner.queue).pending.len()
    }

    /// When the next pending entry is due, if any.
    pub fn next_due(&self) -> Option<Timestamp> {
        let q = lock(&self.inner.queue);
        q.pending
            .values()
            .filter(|p| !p.in_flight)
            .map(|p| Timestamp::from_nanos(p.next_due))
            .min()
    }

    /// Cumulative counts.
    pub fn stats(&self) -> FailbackStats {
        let c = |i: usize| self.inner.counters.0[i].load(Ordering::Relaxed);
        FailbackStats {
            delivered_first: c(DELIVERED_FIRST),
            queued: c(QUEUED),
            refused: c(REFUSED),
            delivered_later: c(DELIVERED_LATER),
            retries_failed: c(RETRIES_FAILED),
            gave_up: c(GAVE_UP),
        }
    }

    /// The payloads given up so far (the dead-letter file), oldest first.
    pub fn dead_letters(&self) -> Result<Vec<Vec<u8>>, FailbackError> {
        queue::dead_letters(&self.inner.config.dir)
    }

    /// One delivery attempt of `payload` on a selected endpoint.
    fn attempt(&self, payload: &[u8]) -> bool {
        let s = &*self.inner.cluster.shared;
        s.tick();
        let set = s.set.load();
        let Some((i, permit)) = s.pick(&set, &NONE_TRIED) else {
            return false;
        };
        let attempt = ClusterAttempt {
            number: 1,
            deadline: None,
        };
        let deliver = &self.inner.deliver;
        let (outcome, _) = s.attempt(
            &set.endpoints[i],
            permit,
            &attempt,
            &DefaultEndpointClassifier,
            |e, _| deliver(e, payload),
        );
        !outcome.is_failure()
    }

    /// The wait before background retry number `retry` (1-based).
    fn backoff(&self, retry: u32, previous: u64) -> u64 {
        let mut rng = self.inner.rng.load(Ordering::Relaxed);
        let d = self.inner.config.backoff.delay(
            retry.saturating_sub(1),
            Duration::from_nanos(previous),
            &mut rng,
        );
        self.inner.rng.store(rng, Ordering::Relaxed);
        crate::clock::duration_to_nanos(d)
    }

    /// Tries `payload` once now; if that fails, queues it durably for
    /// background retries. An error means it was *not* accepted (queue
    /// full, payload too large, disk error): the caller still owns it.
    pub fn submit(&self, payload: &[u8]) -> Result<Submitted, FailbackError> {
        if self.attempt(payload) {
            self.inner.counters.add(DELIVERED_FIRST, 1);
            return Ok(Submitted::Delivered);
        }
        let now = self.inner.clock.now().as_nanos();
        let next_due = now.saturating_add(self.backoff(1, 0));
        let c = &self.inner.config;
        let pushed =
            lock(&self.inner.queue).push(payload, now, next_due, c.max_entries, c.max_bytes);
        match pushed {
            Ok(id) => {
                self.inner.counters.add(QUEUED, 1);
                Ok(Submitted::Queued { id })
            }
            Err(e) => {
                self.inner.counters.add(REFUSED, 1);
                Err(e)
            }
        }
    }

    /// Delivers every entry that is due now, one attempt each: delivered
    /// entries are marked done, failed ones rescheduled with backoff, and
    /// those past `max_retries` or `max_age` given up. Call it from your
    /// scheduler, or let [`run`](Self::run) call it.
    pub fn run_due(&self) -> DeliveryReport {
        let inner = &*self.inner;
        let now = inner.clock.now().as_nanos();
        let due: Vec<(u64, Arc<[u8]>)> = {
            let mut q = lock(&inner.queue);
            q.pending
                .iter_mut()
                .filter(|(_, p)| !p.in_flight && p.next_due <= now)
                .map(|(&id, p)| {
                    p.in_flight = true;
                    (id, p.payload.clone())
                })
                .collect()
        };
        let mut report = DeliveryReport::default();
        for (id, payload) in due {
            let Some(entry) = lock(&inner.queue).pending.get(&id).cloned() else {
                continue;
            };
            let age = Duration::from_nanos(
                inner
                    .clock
                    .now()
                    .as_nanos()
                    .saturating_sub(entry.accepted_at),
            );
            let expired = age >= inner.config.max_age;
            let delivered = !expired && self.attempt(&payload);
            let now = inner.clock.now().as_nanos();
            let mut q = lock(&inner.queue);
            let written = if delivered {
                report.delivered += 1;
                inner.counters.add(DELIVERED_LATER, 1);
                q.done(id, DoneStatus::Delivered)
            } else {
                let attempts = entry.attempts + u32::from(!expired);
                if !expired {
                    inner.counters.add(RETRIES_FAILED, 1);
                }
                if expired || attempts >= inner.config.max_retries {
                    match q.bury(id, &entry) {
                        Ok(()) => {
                            report.gave_up += 1;
                            inner.counters.add(GAVE_UP, 1);
                            tracing::warn!(target: "tripline::cluster", id, attempts,
                                ?age, "failback: entry given up, dead-lettered");
                            q.done(id, DoneStatus::GaveUp)
                        }
                        Err(e) => {
                            // Never drop an entry that could not be dead-lettered.
                            q.release(id);
                            Err(e)
                        }
                    }
                } else {
                    report.retried += 1;
                    let wait = self.backoff(attempts + 1, entry.wait);
                    q.attempted(id, attempts, now.saturating_add(wait), wait)
                }
            };
            if let Err(e) = written {
                tracing::error!(target: "tripline::cluster", path = %q.path().display(),
                    error = %e, "failback: queue write failed");
            }
        }
        report.pending = lock(&inner.queue).pending.len();
        report
    }

    /// Runs [`run_due`](Self::run_due) forever, sleeping on `timer` until
    /// the next entry is due (at most `poll_interval`, so entries queued
    /// meanwhile are seen). Spawn it on your runtime; drop it to stop.
    /// Deliveries run on the polling thread: keep `deliver` short or
    /// non-blocking.
    pub async fn run(self, timer: SharedTimer) {
        let poll = self.inner.config.poll_interval;
        loop {
            self.run_due();
            let now = self.inner.clock.now();
            let wait = self
                .next_due()
                .map_or(poll, |t| t - now)
                .clamp(Duration::from_millis(1), poll);
            timer.sleep(wait).await;
        }
    }
}

impl<E> fmt::Debug for Failback<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Failback")
            .field("cluster", &self.inner.cluster.name())
            .field("dir", &self.inner.config.dir)
            .field("pending", &self.pending())
            .field("stats", &self.stats())
            .finish()
    }
}
