//! Submitting, delivering due entries, and the background runner.

use std::fmt;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::record::DoneStatus;
use super::{
    DELIVERED_FIRST, DELIVERED_LATER, DeliveryReport, Failback, FailbackBuilder, FailbackConfig,
    FailbackError, FailbackStats, GAVE_UP, OpenReport, QUEUED, REFUSED, RETRIES_FAILED, Submitted,
    dead,
};
use crate::clock::{Clock, Timestamp};
use crate::cluster::balance::NONE_TRIED;
use crate::cluster::{Cluster, ClusterAttempt};
use crate::endpoint::DefaultEndpointClassifier;
use crate::sync::{Arc, lock};
use crate::timeout::SharedTimer;

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

    /// How long the oldest pending entry has waited since it was accepted
    /// (on the queue's clock), or `None` when nothing is pending: a queue
    /// whose oldest entry keeps ageing is not draining, whatever its depth
    /// says. Takes the queue's lock and scans the pending entries, so it
    /// is for monitoring (a scrape), not for the submit path.
    pub fn oldest_pending_age(&self) -> Option<Duration> {
        let q = lock(&self.inner.queue);
        let oldest = q.pending.values().map(|p| p.accepted_at).min()?;
        let now = self.inner.clock.now().as_nanos();
        Some(Duration::from_nanos(now.saturating_sub(oldest)))
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

    /// The payloads given up so far (the dead-letter file), oldest first,
    /// for an operator to inspect or replay by hand. Bytes that cannot be
    /// read (a dead letter torn by a crash since the queue was opened) are
    /// skipped: the dead letters on both sides of them are returned.
    pub fn dead_letters(&self) -> Result<Vec<Vec<u8>>, FailbackError> {
        dead::read(&self.inner.config.dir)
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
