//! What the admin API remembers and streams: the recent transitions of
//! every breaker, outlier ejections, and a live feed for `/api/events`.
//!
//! The hub subscribes to every breaker the table holds — route breakers,
//! each keyed family (its present and future breakers), each cluster's
//! endpoint breakers — and to every cluster's outlier events. It follows
//! reloads: [`Hub::follow`] replaces the subscriptions with those of the
//! new table. A subscriber runs on whichever request thread caused the
//! event, so it only formats one JSON value, pushes it onto a bounded ring
//! and into a `tokio` broadcast channel: neither ever waits for a reader.
//! A reader that falls behind loses the oldest events (counted), it never
//! slows the proxy.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use prometheus_client::metrics::counter::Counter;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tripline::Timestamp;
use tripline::breaker::{Event, EventKind};
use tripline::outlier::{ClusterEvent, ClusterEventKind};

use crate::table::Table;

/// Transitions kept per breaker for `GET /api/breakers`.
pub(crate) const RING: usize = 20;
/// Breakers whose transitions are remembered; beyond it (a keyed family
/// with many keys) new names are streamed but not remembered.
const MAX_RINGS: usize = 4096;
/// Events buffered for `/api/events` readers before the slowest lags.
const FEED: usize = 1024;

/// One event for `/api/events`: its SSE name and JSON data.
#[derive(Clone, Debug)]
pub(crate) struct FeedEvent {
    pub(crate) name: &'static str,
    pub(crate) data: Arc<str>,
}

/// Where an endpoint's ejection stands, as the cluster's events told it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ejection {
    pub(crate) until: Option<SystemTime>,
    pub(crate) last_detector: Option<String>,
}

#[derive(Default)]
struct Memory {
    rings: HashMap<String, VecDeque<Value>>,
    /// Per breaker, its last transition's time on the breaker's clock and
    /// on the wall clock: what turns its monotonic open deadline into a
    /// wall-clock one that does not move between queries.
    anchors: HashMap<String, (Timestamp, SystemTime)>,
    /// By (cluster, endpoint id).
    ejections: BTreeMap<(String, String), Ejection>,
}

/// Shared by every subscription callback and the API.
pub(crate) struct Hub {
    memory: Mutex<Memory>,
    feed: broadcast::Sender<FeedEvent>,
    /// Held to stay subscribed; replaced whole by [`Hub::follow`].
    subscriptions: Mutex<Vec<Box<dyn std::any::Any + Send + Sync>>>,
    /// Events `/api/events` readers lost by falling behind, summed over
    /// readers: `tripline_proxy_events_dropped_total`.
    pub(crate) dropped: Counter,
}

impl Hub {
    pub(crate) fn new() -> Arc<Hub> {
        Arc::new(Hub {
            memory: Mutex::new(Memory::default()),
            feed: broadcast::channel(FEED).0,
            subscriptions: Mutex::new(Vec::new()),
            dropped: Counter::default(),
        })
    }

    /// A new reader of the live feed.
    pub(crate) fn listen(&self) -> broadcast::Receiver<FeedEvent> {
        self.feed.subscribe()
    }

    /// The recent transitions of `breaker`, oldest first.
    pub(crate) fn transitions(&self, breaker: &str) -> Vec<Value> {
        let memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        memory
            .rings
            .get(breaker)
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The wall-clock time of `deadline` (on the clock of the breaker
    /// named `breaker`), anchored on the breaker's last transition, so the
    /// same deadline always reads the same; `None` when no transition of
    /// that breaker was heard.
    pub(crate) fn wall_time_of(&self, breaker: &str, deadline: Timestamp) -> Option<SystemTime> {
        let memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, wall) = *memory.anchors.get(breaker)?;
        Some(if deadline >= at {
            wall + deadline.saturating_duration_since(at)
        } else {
            wall - at.saturating_duration_since(deadline)
        })
    }

    /// The ejection record of `endpoint` of `cluster`.
    pub(crate) fn ejection(&self, cluster: &str, endpoint: &str) -> Ejection {
        let memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        memory
            .ejections
            .get(&(cluster.to_owned(), endpoint.to_owned()))
            .cloned()
            .unwrap_or_default()
    }

    /// Subscribes to every breaker and cluster of `table`, dropping the
    /// subscriptions to the previous table's.
    pub(crate) fn follow(self: &Arc<Self>, table: &Table) {
        let mut subs: Vec<Box<dyn std::any::Any + Send + Sync>> = Vec::new();
        for route in &table.routes {
            if let Some(b) = &route.breaker {
                let hub = Arc::downgrade(self);
                let name = b.name().to_owned();
                subs.push(Box::new(b.subscribe(move |e| {
                    if let Some(hub) = hub.upgrade() {
                        hub.breaker_event(&name, e);
                    }
                })));
            }
            if let Some(keyed) = &route.guard.keyed_breaker {
                let hub = Arc::downgrade(self);
                subs.push(Box::new(keyed.registry.subscribe(move |_, e| {
                    if let Some(hub) = hub.upgrade() {
                        hub.breaker_event(&e.breaker, e);
                    }
                })));
            }
        }
        for (cluster_name, cluster) in &table.clusters {
            let hub = Arc::downgrade(self);
            subs.push(Box::new(cluster.breakers().subscribe(move |_, e| {
                if let Some(hub) = hub.upgrade() {
                    hub.breaker_event(&e.breaker, e);
                }
            })));
            let hub = Arc::downgrade(self);
            let cname = cluster_name.clone();
            subs.push(Box::new(cluster.subscribe(move |e| {
                if let Some(hub) = hub.upgrade() {
                    hub.cluster_event(&cname, e);
                }
            })));
        }
        *self
            .subscriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = subs;
    }

    fn breaker_event(&self, name: &str, event: &Event) {
        let EventKind::Transition(t) = &event.kind else {
            return;
        };
        let data = json!({
            "breaker": name,
            "from": t.from.as_str(),
            "to": t.to.as_str(),
            "reason": t.reason.as_str(),
            "at": rfc3339(event.wall),
            "message": event.to_string(),
            "window": {
                "calls": t.window.calls,
                "failures": t.window.failures,
                "slow": t.window.slow,
            },
        });
        {
            let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
            let full = memory.rings.len() >= MAX_RINGS;
            if !full || memory.anchors.contains_key(name) {
                memory
                    .anchors
                    .insert(name.to_owned(), (event.at, event.wall));
            }
            if let Some(ring) = memory.rings.get_mut(name) {
                push_bounded(ring, data.clone());
            } else if !full {
                let mut ring = VecDeque::with_capacity(RING);
                ring.push_back(data.clone());
                memory.rings.insert(name.to_owned(), ring);
            }
        }
        self.publish("transition", &data);
    }

    fn cluster_event(&self, cluster: &str, event: &ClusterEvent) {
        // The event's own wall time: when the cluster decided, not when
        // the hub got round to it.
        let now = event.wall;
        let (endpoint, kind, message, until) = match &event.kind {
            ClusterEventKind::Ejected {
                endpoint,
                detector,
                duration,
                ejected,
                total,
                ..
            } => (
                endpoint.as_str().to_owned(),
                "ejected",
                format!(
                    "{cluster}/{endpoint}: ejected by {detector} for {} ({ejected} of {total} ejected)",
                    humantime::format_duration(*duration)
                ),
                Some(now + *duration),
            ),
            ClusterEventKind::Returned {
                endpoint,
                ejected_for,
            } => (
                endpoint.as_str().to_owned(),
                "returned",
                format!(
                    "{cluster}/{endpoint}: back in the pool after {}",
                    // Whole milliseconds: "30s 413ms", not "30s 413ms 209us 465ns".
                    humantime::format_duration(Duration::from_millis(
                        u64::try_from(ejected_for.as_millis()).unwrap_or(u64::MAX)
                    ))
                ),
                None,
            ),
            _ => return,
        };
        {
            let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
            if memory.ejections.len() < MAX_RINGS || until.is_none() {
                let record = memory
                    .ejections
                    .entry((cluster.to_owned(), endpoint.clone()))
                    .or_default();
                record.until = until;
                if let ClusterEventKind::Ejected { detector, .. } = &event.kind {
                    record.last_detector = Some(detector.to_string());
                }
            }
        }
        self.publish(
            "ejection",
            &json!({
                "cluster": cluster,
                "endpoint": endpoint,
                "kind": kind,
                "until": until.map(rfc3339),
                "at": rfc3339(now),
                "message": message,
            }),
        );
    }

    /// Sends one event to every `/api/events` reader.
    pub(crate) fn publish(&self, name: &'static str, data: &Value) {
        // No receiver is not an error: nobody is watching.
        let _ = self.feed.send(FeedEvent {
            name,
            data: data.to_string().into(),
        });
    }
}

fn push_bounded(ring: &mut VecDeque<Value>, value: Value) {
    if ring.len() >= RING {
        ring.pop_front();
    }
    ring.push_back(value);
}

/// RFC 3339 with milliseconds, UTC.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}
