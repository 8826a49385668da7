//! The endpoint set: an immutable snapshot, replaced whole on every change.
//!
//! Readers (every call) load the current snapshot through an `ArcSwap`
//! without a lock; writers (service discovery, weight changes) build a new
//! snapshot and swap it in. Endpoints that stay are carried over as the
//! same handles, so their breakers and outlier state survive the change;
//! a call in flight keeps the snapshot it started with, so the indices it
//! remembers (endpoints already tried) stay meaningful.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use super::breakers::BreakerFamily;
use super::endpoint::{Endpoint, EndpointConfig};
use crate::endpoint::EndpointId;
use crate::error::PolicyConfigError;

/// One version of a cluster's endpoints, with the weight table.
pub(crate) struct EndpointSet {
    pub(crate) endpoints: Box<[Endpoint]>,
    /// `cumulative[i]` = weights of endpoints `0..=i`.
    cumulative: Box<[u64]>,
    /// Whether every weight is equal (weighted draws become uniform).
    uniform: bool,
    /// The weighted round robin's turns, by position (empty when every
    /// weight is equal: plain turns are the same).
    schedule: Box<[u32]>,
}

/// Most turns in a weighted round robin's schedule: larger weights are
/// scaled down to fit (each endpoint keeping at least one turn), so a set
/// of weights 1 and 10 000 costs 4 KiB, not 40 KiB.
pub(crate) const MAX_SCHEDULE: u64 = 1024;

/// Smooth weighted round robin (nginx's) over `weights`, scaled so that
/// the schedule has at most [`MAX_SCHEDULE`] turns: each turn, every
/// endpoint gains its weight, the richest is chosen and pays the total.
fn schedule(weights: &[u32]) -> Box<[u32]> {
    let sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    let scaled: Vec<i64> = weights
        .iter()
        .map(|&w| {
            let w = u64::from(w);
            let w = if sum > MAX_SCHEDULE {
                (w * MAX_SCHEDULE / sum).max(1)
            } else {
                w
            };
            i64::try_from(w).unwrap_or(i64::MAX)
        })
        .collect();
    let total: i64 = scaled.iter().sum();
    let mut current = vec![0i64; scaled.len()];
    let mut turns = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for _ in 0..total {
        let mut best = 0;
        for (i, w) in scaled.iter().enumerate() {
            current[i] += w;
            if current[i] > current[best] {
                best = i;
            }
        }
        current[best] -= total;
        turns.push(u32::try_from(best).unwrap_or(0));
    }
    turns.into_boxed_slice()
}

impl EndpointSet {
    pub(crate) fn empty() -> Self {
        Self::new(Vec::new())
    }

    pub(crate) fn new(endpoints: Vec<Endpoint>) -> Self {
        let mut sum = 0u64;
        let cumulative = endpoints
            .iter()
            .map(|e| {
                sum += u64::from(e.weight());
                sum
            })
            .collect();
        let uniform = endpoints.windows(2).all(|w| w[0].weight() == w[1].weight());
        let schedule = match uniform {
            true => Box::default(),
            false => schedule(&endpoints.iter().map(Endpoint::weight).collect::<Vec<_>>()),
        };
        EndpointSet {
            endpoints: endpoints.into_boxed_slice(),
            cumulative,
            uniform,
            schedule,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.endpoints.len()
    }

    /// The position whose turn `turn` is, in weighted round robin.
    #[inline]
    pub(crate) fn scheduled(&self, turn: usize) -> usize {
        match self.schedule.len() {
            0 => turn % self.endpoints.len(),
            len => self.schedule[turn % len] as usize,
        }
    }

    /// The index a weighted draw lands on, `r` being any random number.
    #[inline]
    pub(crate) fn weighted_index(&self, r: u64) -> usize {
        let n = self.endpoints.len();
        if self.uniform {
            return (r % n as u64) as usize;
        }
        let total = self.cumulative.last().copied().unwrap_or(1).max(1);
        let x = r % total;
        self.cumulative.partition_point(|&c| c <= x).min(n - 1)
    }

    /// The position of the endpoint named `id` (a linear scan: not on the
    /// call path).
    pub(crate) fn position(&self, id: &str) -> Option<usize> {
        self.endpoints.iter().position(|e| e.id().as_str() == id)
    }

    /// The set `configs` describe, reusing this set's endpoints where ids
    /// match (a changed weight is applied to the kept endpoint), making new
    /// ones with breakers from `family`. Returns the new set and the
    /// endpoints that left.
    pub(crate) fn rebuild(
        &self,
        configs: &[EndpointConfig],
        family: &BreakerFamily,
    ) -> Result<(EndpointSet, Vec<Endpoint>), PolicyConfigError> {
        validate_endpoints(configs)?;
        let mut old: HashMap<&str, &Endpoint> = self
            .endpoints
            .iter()
            .map(|e| (e.id().as_str(), e))
            .collect();
        let mut next: Vec<Endpoint> = Vec::with_capacity(configs.len());
        let mut created = Vec::new();
        for c in configs {
            let endpoint = match old.remove(c.id.as_str()) {
                Some(e) if *e.inner.address == *c.address => {
                    e.inner.weight.store(c.weight, Ordering::Relaxed);
                    e.clone()
                }
                // A new endpoint, or a known id at a new address: a new
                // instance deserves a fresh breaker and outlier record.
                replaced => {
                    if let Some(e) = replaced {
                        family.release(e.id(), e.breaker());
                    }
                    let id = EndpointId::from(c.id.as_str());
                    match family.breaker_for(&id) {
                        Ok(b) => {
                            let e = Endpoint::new(c, b);
                            created.push(e.clone());
                            e
                        }
                        Err(err) => {
                            for e in &created {
                                family.release(e.id(), e.breaker());
                            }
                            return Err(PolicyConfigError::new(
                                "cluster",
                                "breaker",
                                format!("for endpoint `{}`: {err}", c.id),
                            ));
                        }
                    }
                }
            };
            next.push(endpoint);
        }
        let gone = self
            .endpoints
            .iter()
            .filter(|e| !next.iter().any(|n| n.ptr_eq(e)))
            .cloned()
            .collect();
        Ok((EndpointSet::new(next), gone))
    }
}

/// Checks each endpoint and that ids are unique.
pub(crate) fn validate_endpoints(configs: &[EndpointConfig]) -> Result<(), PolicyConfigError> {
    let mut seen = std::collections::HashSet::with_capacity(configs.len());
    for c in configs {
        c.validate()?;
        if !seen.insert(c.id.as_str()) {
            return Err(PolicyConfigError::new(
                "cluster",
                "endpoints.id",
                format!("must be unique, `{}` appears twice", c.id),
            ));
        }
    }
    Ok(())
}

pub(crate) fn breaker_error(e: crate::breaker::ConfigError) -> PolicyConfigError {
    PolicyConfigError::new(
        "cluster",
        "breaker",
        format!("is invalid: `{}` {}", e.field, e.constraint),
    )
}
