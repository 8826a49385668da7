//! A cluster's overflow limits at run time (`limits`, `endpoint_limits`).
//!
//! One [`Overflow`] per cluster, shared by every route to it and kept by a
//! reload that leaves the cluster's limits as they were (so the requests
//! in flight stay counted). Admission is lock-free where nothing waits:
//! an atomic add against `max_requests` and `max_retries`, a semaphore's
//! `try_acquire` for connections and endpoints. Waiting (for a connection
//! among `max_connections`, or for an endpoint with a queue) is FIFO on a
//! tokio semaphore, bounded by the pending or queue limit and by the
//! request's time. Every slot is an RAII guard: a request that ends, fails
//! or is dropped while waiting gives back what it held.
//!
//! Refusals are the proxy's own: the caller answers 503
//! `upstream_overflow` (`UO`) and books it on no breaker. Each is counted
//! in `tripline_proxy_upstream_overflow_total{cluster, limit}`; what the
//! limits hold is on `/metrics` too ([`metrics`]).

mod metrics;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::metrics::counter::Counter;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::config::{ClusterLimits, EndpointLimits, ProxyConfig};

pub(crate) use metrics::OverflowMetrics;

/// The limits, as the `limit` label names them.
pub(crate) const LIMITS: [&str; 5] = [
    "max_requests",
    "max_connections",
    "max_pending_requests",
    "max_retries",
    "endpoint",
];

/// Refusals are logged at most once per cluster this often.
const LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Most endpoints whose slots are kept; past it, idle ones are forgotten
/// (endpoints come and go with DNS and registries).
const MAX_ENDPOINTS: usize = 4096;

type Labels = Vec<(&'static str, String)>;

/// Which limit refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Limit {
    // The discriminants index [`LIMITS`] and the counters.
    MaxRequests = 0,
    MaxConnections = 1,
    MaxPendingRequests = 2,
    MaxRetries = 3,
    Endpoint = 4,
}

/// One cluster's limits and what they hold now.
pub(crate) struct Overflow {
    limits: ClusterLimits,
    endpoint: Option<EndpointLimits>,
    requests: AtomicU32,
    retries: AtomicU32,
    connections: Option<Arc<Semaphore>>,
    pending: Arc<AtomicU32>,
    endpoints: Mutex<HashMap<String, Arc<EndpointSlots>>>,
    refused: [Counter; 5],
    cluster: String,
    /// When the last refusal was logged, and how many were not since.
    logged: Mutex<(Option<Instant>, u64)>,
}

/// One endpoint's slots and its queue.
struct EndpointSlots {
    slots: Arc<Semaphore>,
    waiting: Arc<AtomicU32>,
}

/// A request's hold on its cluster: its place among `max_requests` and
/// its connection among `max_connections`, to the end of its answer.
pub(crate) struct RequestSlot {
    overflow: Arc<Overflow>,
    counted: bool,
    _connection: Option<OwnedSemaphorePermit>,
}

/// A retry's place among `max_retries`, while it is in flight.
pub(crate) struct RetrySlot(Arc<Overflow>);

/// A try's place among its endpoint's `max_concurrent`.
pub(crate) type EndpointSlot = OwnedSemaphorePermit;

/// Counts one waiter while it waits, dropped or not.
struct Waiting(Arc<AtomicU32>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Drop for RequestSlot {
    fn drop(&mut self) {
        if self.counted {
            self.overflow.requests.fetch_sub(1, Ordering::Release);
        }
    }
}

impl Drop for RetrySlot {
    fn drop(&mut self) {
        self.0.retries.fetch_sub(1, Ordering::Release);
    }
}

/// Takes a place under `max` in `count`, or says there is none.
fn take(count: &AtomicU32, max: u32) -> bool {
    if count.fetch_add(1, Ordering::AcqRel) < max {
        return true;
    }
    count.fetch_sub(1, Ordering::Release);
    false
}

/// Waits for a permit of `semaphore` until `until` (no bound: `None`).
async fn wait_for(
    semaphore: &Arc<Semaphore>,
    until: Option<Instant>,
) -> Option<OwnedSemaphorePermit> {
    let acquire = semaphore.clone().acquire_owned();
    match until {
        Some(until) => tokio::time::timeout_at(until, acquire).await.ok()?.ok(),
        None => acquire.await.ok(),
    }
}

impl Overflow {
    /// Every cluster's limits in `config`, counted in `refused`; `keep`
    /// gives the running one of a cluster whose limits did not change.
    pub(crate) fn for_clusters(
        config: &ProxyConfig,
        metrics: &OverflowMetrics,
        keep: impl Fn(&str) -> Option<Arc<Overflow>>,
    ) -> HashMap<String, Arc<Overflow>> {
        let mut out = HashMap::new();
        for (name, section) in &config.clusters {
            if section.limits.is_none() && section.endpoint_limits.is_none() {
                continue;
            }
            let limits = section.limits.clone().unwrap_or_default();
            let kept =
                keep(name).filter(|o| o.limits == limits && o.endpoint == section.endpoint_limits);
            let overflow = kept.unwrap_or_else(|| {
                Overflow::new(name, limits, section.endpoint_limits.clone(), metrics)
            });
            out.insert(name.clone(), overflow);
        }
        out
    }

    /// A cluster's limits, counted and tracked in `metrics`.
    fn new(
        cluster: &str,
        limits: ClusterLimits,
        endpoint: Option<EndpointLimits>,
        metrics: &OverflowMetrics,
    ) -> Arc<Overflow> {
        let counter = |limit: &str| {
            metrics
                .refused
                .get_or_create(&vec![
                    ("cluster", cluster.to_owned()),
                    ("limit", limit.to_owned()),
                ])
                .clone()
        };
        let overflow = Arc::new(Overflow {
            connections: limits
                .max_connections
                .map(|n| Arc::new(Semaphore::new(n as usize))),
            limits,
            endpoint,
            requests: AtomicU32::new(0),
            retries: AtomicU32::new(0),
            pending: Arc::new(AtomicU32::new(0)),
            endpoints: Mutex::new(HashMap::new()),
            refused: LIMITS.map(counter),
            cluster: cluster.to_owned(),
            logged: Mutex::new((None, 0)),
        });
        metrics.track(&overflow);
        overflow
    }

    fn refuse<T>(&self, limit: Limit) -> Result<T, Limit> {
        self.refused[limit as usize].inc();
        self.log(limit);
        Err(limit)
    }

    /// One line per cluster per [`LOG_EVERY`] at most, saying how many
    /// were refused since the last: a cluster at its limit refuses
    /// thousands a second, and the counter has every one.
    fn log(&self, limit: Limit) {
        let now = Instant::now();
        let mut last = self.logged.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, suppressed) = &mut *last;
        if at.is_some_and(|at| now.saturating_duration_since(at) < LOG_EVERY) {
            *suppressed += 1;
            return;
        }
        let limit_name = LIMITS[limit as usize];
        tracing::warn!(
            target: "tripline_proxy::overflow",
            cluster = %self.cluster,
            limit = limit_name,
            refused_since_last_line = *suppressed,
            "overflow: cluster {} refused a request at its {limit_name} limit (503 UO); {} more refused since the last line",
            self.cluster,
            suppressed
        );
        *at = Some(now);
        *suppressed = 0;
    }

    /// A request's place in the cluster, waiting its turn for a connection
    /// until `until` when `max_connections` are taken.
    pub(crate) async fn admit_request(
        self: &Arc<Self>,
        until: Option<Instant>,
    ) -> Result<RequestSlot, Limit> {
        let counted = match self.limits.max_requests {
            Some(max) if !take(&self.requests, max) => return self.refuse(Limit::MaxRequests),
            Some(_) => true,
            None => false,
        };
        // From here the slot gives back the request's place if refused.
        let mut slot = RequestSlot {
            overflow: self.clone(),
            counted,
            _connection: None,
        };
        let Some(connections) = &self.connections else {
            return Ok(slot);
        };
        if let Ok(permit) = connections.clone().try_acquire_owned() {
            slot._connection = Some(permit);
            return Ok(slot);
        }
        let max_pending = self.limits.max_pending_requests.unwrap_or(u32::MAX);
        if !take(&self.pending, max_pending) {
            return self.refuse(Limit::MaxPendingRequests);
        }
        let waiting = Waiting(self.pending.clone());
        let permit = wait_for(connections, until).await;
        drop(waiting);
        match permit {
            Some(permit) => {
                slot._connection = Some(permit);
                Ok(slot)
            }
            None => self.refuse(Limit::MaxConnections),
        }
    }

    /// A retry's place, or `Ok(None)` when retries are not limited.
    pub(crate) fn admit_retry(self: &Arc<Self>) -> Result<Option<RetrySlot>, Limit> {
        match self.limits.max_retries {
            None => Ok(None),
            Some(max) if take(&self.retries, max) => Ok(Some(RetrySlot(self.clone()))),
            Some(_) => self.refuse(Limit::MaxRetries),
        }
    }

    /// A try's place on `endpoint`, waiting in its queue until
    /// `queue_timeout` or `until`; `Ok(None)` without endpoint limits.
    pub(crate) async fn admit_try(
        &self,
        endpoint: &str,
        until: Option<Instant>,
    ) -> Result<Option<EndpointSlot>, Limit> {
        let Some(limits) = &self.endpoint else {
            return Ok(None);
        };
        let slots = self.endpoint_slots(endpoint, limits);
        if let Ok(permit) = slots.slots.clone().try_acquire_owned() {
            return Ok(Some(permit));
        }
        if !take(&slots.waiting, limits.max_queue) {
            return self.refuse(Limit::Endpoint);
        }
        let waiting = Waiting(slots.waiting.clone());
        let queued = Instant::now() + limits.queue_timeout;
        let until = until.map_or(queued, |u| u.min(queued));
        let permit = wait_for(&slots.slots, Some(until)).await;
        drop(waiting);
        match permit {
            Some(permit) => Ok(Some(permit)),
            None => self.refuse(Limit::Endpoint),
        }
    }

    fn endpoint_slots(&self, endpoint: &str, limits: &EndpointLimits) -> Arc<EndpointSlots> {
        let mut map = self
            .endpoints
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(slots) = map.get(endpoint) {
            return slots.clone();
        }
        if map.len() >= MAX_ENDPOINTS {
            // Forget the idle ones: an endpoint with nothing in flight and
            // nobody waiting starts afresh if it comes back.
            let full = limits.max_concurrent as usize;
            map.retain(|_, s| {
                s.slots.available_permits() < full || s.waiting.load(Ordering::Relaxed) > 0
            });
        }
        let slots = Arc::new(EndpointSlots {
            slots: Arc::new(Semaphore::new(limits.max_concurrent as usize)),
            waiting: Arc::new(AtomicU32::new(0)),
        });
        map.insert(endpoint.to_owned(), slots.clone());
        slots
    }

    /// The limit's name, as in the config and the metric's label.
    pub(crate) fn name(limit: Limit) -> &'static str {
        LIMITS[limit as usize]
    }

    /// Connections in use, when `max_connections` is set.
    fn connections_in_use(&self) -> Option<u32> {
        let max = self.limits.max_connections?;
        let free = self.connections.as_ref()?.available_permits();
        Some(max.saturating_sub(u32::try_from(free).unwrap_or(u32::MAX)))
    }

    /// What each cluster-wide limit that counts holds now, with the limit
    /// when one is set: `(limit, in use, max)`. Requests and retries are
    /// counted only under their limit; waiters for a connection whenever
    /// connections are limited.
    fn held(&self) -> Vec<(&'static str, i64, Option<i64>)> {
        let load = |count: &AtomicU32| i64::from(count.load(Ordering::Relaxed));
        let l = &self.limits;
        let mut held = Vec::with_capacity(4);
        if let Some(max) = l.max_requests {
            held.push((
                Self::name(Limit::MaxRequests),
                load(&self.requests),
                Some(i64::from(max)),
            ));
        }
        if let Some(in_use) = self.connections_in_use() {
            let max = l.max_connections.map(i64::from);
            held.push((Self::name(Limit::MaxConnections), i64::from(in_use), max));
            let max_pending = l.max_pending_requests.map(i64::from);
            held.push((
                Self::name(Limit::MaxPendingRequests),
                load(&self.pending),
                max_pending,
            ));
        }
        if let Some(max) = l.max_retries {
            held.push((
                Self::name(Limit::MaxRetries),
                load(&self.retries),
                Some(i64::from(max)),
            ));
        }
        held
    }

    /// The limits and what they hold now, for `/api/outliers`.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "limits": self.limits,
            "endpoint_limits": self.endpoint,
            "requests": self.requests.load(Ordering::Relaxed),
            "connections": self.connections_in_use(),
            "pending": self.pending.load(Ordering::Relaxed),
            "retries": self.retries.load(Ordering::Relaxed),
            "refused": LIMITS
                .iter()
                .zip(&self.refused)
                .map(|(l, c)| ((*l).to_owned(), serde_json::json!(c.get())))
                .collect::<serde_json::Map<_, _>>(),
        })
    }
}
