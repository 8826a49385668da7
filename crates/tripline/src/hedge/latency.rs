//! Recent latencies and their moving quantile, for the hedge delay.
//!
//! A ring of the last `capacity` latencies; the quantile is a selection
//! (O(n)) over a copy, recomputed only after `capacity / 16` new samples,
//! so a hedged call usually pays one lock and a cached read.

use std::time::Duration;

use crate::clock::duration_to_nanos;

pub(super) struct Latencies {
    ring: Vec<u64>,
    capacity: usize,
    next: usize,
    seen: u64,
    since: u64,
    cached: Option<Duration>,
}

impl Latencies {
    pub(super) fn new(capacity: usize) -> Self {
        Latencies {
            ring: Vec::with_capacity(capacity),
            capacity: capacity.max(1),
            next: 0,
            seen: 0,
            since: 0,
            cached: None,
        }
    }

    pub(super) fn observe(&mut self, latency: Duration) {
        let v = duration_to_nanos(latency);
        if self.ring.len() < self.capacity {
            self.ring.push(v);
        } else {
            self.ring[self.next] = v;
        }
        self.next = (self.next + 1) % self.capacity;
        self.seen += 1;
        self.since += 1;
    }

    /// The `quantile` of the ring, or `None` below `min_samples`.
    pub(super) fn quantile(&mut self, quantile: f64, min_samples: u32) -> Option<Duration> {
        if self.seen < u64::from(min_samples) || self.ring.is_empty() {
            return None;
        }
        let refresh = (self.capacity as u64 / 16).max(1);
        if self.cached.is_none() || self.since >= refresh {
            let mut copy = self.ring.clone();
            let k = ((copy.len() as f64 * quantile).ceil() as usize).clamp(1, copy.len()) - 1;
            let (_, v, _) = copy.select_nth_unstable(k);
            self.cached = Some(Duration::from_nanos(*v));
            self.since = 0;
        }
        self.cached
    }
}
