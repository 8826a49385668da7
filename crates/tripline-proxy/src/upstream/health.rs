//! Active health checks: each endpoint of a cluster with `health_check`
//! is probed on its own schedule, off the request path, and marked
//! unhealthy in the library's [`Cluster`] after `unhealthy_threshold`
//! consecutive failures (healthy again after `healthy_threshold` passes).
//! The request path only reads the endpoint's routability flag, which it
//! reads anyway; panic mode counts marked endpoints as out, so a cluster
//! whose endpoints all fail their checks still serves.
//!
//! Each endpoint starts at its own random phase within the interval and
//! waits `interval ± jitter` between checks: endpoints are never checked
//! in step, so a recovering service is not hit by every proxy at once.
//!
//! What each endpoint's checks found is kept in a [`HealthBook`] by
//! endpoint id, which outlives the checker: the control side hands the
//! same book to the checker of a cluster a reload keeps or rebuilds, so
//! an endpoint that stays keeps its health (and is marked again in a
//! rebuilt cluster).

mod book;
mod metrics;
pub(crate) mod probe;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::{AbortHandle, JoinSet};
use tripline::cluster::Cluster;

pub(crate) use book::{HealthBook, Verdict};
pub(crate) use metrics::HealthMetrics;
use probe::Probe;

use crate::config::HealthCheckSection;

/// How often a checker looks for endpoints that joined or left (DNS,
/// registry or reload changes), at most.
const MEMBERSHIP_EVERY: Duration = Duration::from_millis(250);

/// One cluster's checker: what it checks, how, and where it writes.
pub(crate) struct Checker {
    pub(crate) cluster: Cluster,
    pub(crate) section: HealthCheckSection,
    pub(crate) probe: Arc<Probe>,
    pub(crate) book: Arc<HealthBook>,
    pub(crate) metrics: HealthMetrics,
}

impl Checker {
    /// Runs one task per endpoint until aborted, following the cluster's
    /// membership: a new endpoint gets a task (and its phase), one that
    /// left has its task aborted and its record dropped.
    pub(crate) async fn run(self: Arc<Self>) {
        let mut tasks = JoinSet::new();
        let mut running: HashMap<String, AbortHandle> = HashMap::new();
        let every = MEMBERSHIP_EVERY.min(self.section.interval);
        loop {
            let endpoints = self.cluster.endpoints();
            running.retain(|id, task| {
                let stays = endpoints.iter().any(|e| e.id().as_str() == id);
                if !stays {
                    task.abort();
                    self.metrics.forget(self.cluster.name(), id);
                }
                stays
            });
            self.book
                .retain(|id| endpoints.iter().any(|e| e.id().as_str() == id));
            for e in &endpoints {
                let id = e.id().as_str();
                // A rebuilt cluster's endpoint starts unmarked: put back
                // what its checks found.
                if self.book.is_unhealthy(id) && !e.is_marked_unhealthy() {
                    self.cluster.mark_unhealthy(id, true);
                }
                if !running.contains_key(id) {
                    let task = tasks.spawn(
                        self.clone()
                            .check_endpoint(id.to_owned(), e.address().to_owned()),
                    );
                    running.insert(id.to_owned(), task);
                }
            }
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                Some(_) = tasks.join_next() => {}
            }
        }
    }

    /// Checks one endpoint forever: first at its phase, then every
    /// interval with jitter.
    async fn check_endpoint(self: Arc<Self>, id: String, address: String) {
        let s = &self.section;
        let jitter = s.jitter_fraction().unwrap_or(0.0);
        let mut rng = Spread::new(&self.cluster, &id);
        tokio::time::sleep(rng.phase(s.interval)).await;
        loop {
            let result = match tokio::time::timeout(s.timeout, self.probe.check(&address)).await {
                Ok(r) => r,
                Err(_) => Err(format!("no answer within {:?}", s.timeout)),
            };
            let passed = result.is_ok();
            let verdict = self
                .book
                .record(&id, result, s.unhealthy_threshold, s.healthy_threshold);
            self.apply(&id, &address, verdict);
            let healthy = !self.book.is_unhealthy(&id);
            self.metrics
                .checked(self.cluster.name(), &id, passed, healthy);
            tokio::time::sleep(rng.wait(s.interval, jitter)).await;
        }
    }

    /// Marks the endpoint, logs the transition (one line), counts it.
    fn apply(&self, id: &str, address: &str, verdict: Verdict) {
        let cluster = self.cluster.name();
        match verdict {
            Verdict::Same => {}
            // Logged first: whoever sees the mark can read why.
            Verdict::Unhealthy { failures, reason } => {
                tracing::warn!(
                    target: "tripline_proxy::health",
                    cluster, endpoint = id,
                    "endpoint {address} of cluster {cluster} unhealthy: {failures} checks failed ({reason})"
                );
                self.cluster.mark_unhealthy(id, true);
            }
            Verdict::Healthy { passes } => {
                tracing::info!(
                    target: "tripline_proxy::health",
                    cluster, endpoint = id,
                    "endpoint {address} of cluster {cluster} healthy again: {passes} checks passed"
                );
                self.cluster.mark_unhealthy(id, false);
            }
        }
    }
}

/// Where one endpoint's checks fall: a phase within the first interval
/// and jittered waits after it, from a small generator seeded by the
/// cluster, the endpoint and the process (so two endpoints, or two
/// proxies, do not share a schedule).
pub(crate) struct Spread(u64);

impl Spread {
    fn new(cluster: &Cluster, id: &str) -> Spread {
        use std::hash::{BuildHasher, Hash, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        cluster.name().hash(&mut h);
        id.hash(&mut h);
        Spread::seeded(h.finish())
    }

    /// A generator from `seed` (tests pick theirs).
    pub(crate) fn seeded(seed: u64) -> Spread {
        Spread(seed | 1)
    }

    /// A number in [0, 1) (xorshift64*).
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The wait before the first check: anywhere in the interval.
    pub(crate) fn phase(&mut self, interval: Duration) -> Duration {
        interval.mul_f64(self.next())
    }

    /// The wait between two checks: `interval` moved by up to `jitter`
    /// of it either way.
    pub(crate) fn wait(&mut self, interval: Duration, jitter: f64) -> Duration {
        let factor = 1.0 + jitter * (2.0 * self.next() - 1.0);
        interval.mul_f64(factor.max(0.0))
    }
}

#[cfg(test)]
mod tests;
