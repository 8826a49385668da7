//! What one cluster's health checks found, per endpoint: the streaks the
//! thresholds are judged on, the verdict, and the last check's result
//! (which `/api/outliers` shows). Written by the checker, read by the
//! admin API and `/metrics`; never by the request path.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

/// One endpoint's health as its checks found it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct EndpointHealth {
    /// The verdict: `false` once `unhealthy_threshold` checks failed in a
    /// row, until `healthy_threshold` pass in a row.
    pub(crate) healthy: bool,
    pub(crate) consecutive_failures: u32,
    pub(crate) consecutive_passes: u32,
    /// The last check: passed, what it found, when.
    pub(crate) last: Option<(bool, String, SystemTime)>,
}

impl Default for EndpointHealth {
    /// An endpoint not checked yet is healthy: a new endpoint is routed
    /// at once, as one without health checks would be.
    fn default() -> Self {
        EndpointHealth {
            healthy: true,
            consecutive_failures: 0,
            consecutive_passes: 0,
            last: None,
        }
    }
}

/// What a check changed.
#[derive(Debug, PartialEq)]
pub(crate) enum Verdict {
    /// Nothing: the endpoint keeps its verdict.
    Same,
    /// The endpoint just turned unhealthy after `failures` failures, the
    /// last for `reason`.
    Unhealthy { failures: u32, reason: String },
    /// The endpoint just turned healthy after `passes` passes.
    Healthy { passes: u32 },
}

/// One cluster's records, by endpoint id, and its check counts.
#[derive(Default)]
pub(crate) struct HealthBook {
    endpoints: Mutex<HashMap<String, EndpointHealth>>,
    /// Checks that passed, since the book was made.
    pub(crate) passed: AtomicU64,
    /// Checks that failed (timeouts included).
    pub(crate) failed: AtomicU64,
}

impl HealthBook {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, EndpointHealth>> {
        self.endpoints
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Records one check of `id` and judges it against the thresholds.
    pub(crate) fn record(
        &self,
        id: &str,
        result: Result<String, String>,
        unhealthy_threshold: u32,
        healthy_threshold: u32,
    ) -> Verdict {
        let counter = if result.is_ok() {
            &self.passed
        } else {
            &self.failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let mut book = self.lock();
        let e = book.entry(id.to_owned()).or_default();
        // Wall time, for people reading `/api/outliers`; nothing is timed by it.
        let now = tripline::clock::system_time_after(std::time::Duration::ZERO);
        match result {
            Ok(found) => {
                e.consecutive_failures = 0;
                e.consecutive_passes = e.consecutive_passes.saturating_add(1);
                e.last = Some((true, found, now));
                if !e.healthy && e.consecutive_passes >= healthy_threshold {
                    e.healthy = true;
                    return Verdict::Healthy {
                        passes: e.consecutive_passes,
                    };
                }
            }
            Err(reason) => {
                e.consecutive_passes = 0;
                e.consecutive_failures = e.consecutive_failures.saturating_add(1);
                e.last = Some((false, reason.clone(), now));
                if e.healthy && e.consecutive_failures >= unhealthy_threshold {
                    e.healthy = false;
                    return Verdict::Unhealthy {
                        failures: e.consecutive_failures,
                        reason,
                    };
                }
            }
        }
        Verdict::Same
    }

    /// Whether the checks found `id` unhealthy.
    pub(crate) fn is_unhealthy(&self, id: &str) -> bool {
        self.lock().get(id).is_some_and(|e| !e.healthy)
    }

    /// The record of `id`, if it was checked.
    pub(crate) fn get(&self, id: &str) -> Option<EndpointHealth> {
        self.lock().get(id).cloned()
    }

    /// Keeps the records of the endpoints `stays` keeps.
    pub(crate) fn retain(&self, stays: impl Fn(&str) -> bool) {
        self.lock().retain(|id, _| stays(id));
    }
}
