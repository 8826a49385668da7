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
use super::endpoint::{Endpoint, EndpointConfig, EndpointId};
use crate::pipeline::PolicyConfigError;

/// One version of a cluster's endpoints, with the weight table.
pub(crate) struct EndpointSet {
    pub(crate) endpoints: Box<[Endpoint]>,
    /// `cumulative[i]` = weights of endpoints `0..=i`.
    cumulative: Box<[u64]>,
    /// Whether every weight is equal (weighted draws become uniform).
    uniform: bool,
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
        EndpointSet {
            endpoints: endpoints.into_boxed_slice(),
            cumulative,
            uniform,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.endpoints.len()
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
