//! Shadow rollouts on the request path: while a rollout's shadow period
//! runs, every outcome a route breaker (or a member of a breaker family)
//! records is handed to its twin in the applier as well. The route carries
//! the applier as a hook, set when the table is built; the data side only
//! calls it. Outside a shadow period the hook costs one relaxed atomic
//! load per request.

use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use tripline::Outcome;
use tripline::cluster::EndpointId;
use tripline_config::Applier;

use crate::table::route::Route;

/// A breaker's outcomes, on their way to its shadow twin.
pub(crate) struct ShadowFeed {
    applier: Applier,
    /// The breaker's name, or for a family member the family's.
    breaker: Arc<str>,
    /// The member's key within the family `breaker`, if it is one.
    member: Option<String>,
}

impl ShadowFeed {
    /// Judges `outcome` by the rollout's rules too.
    pub(crate) fn observe(&self, outcome: Outcome, elapsed: Duration) {
        match &self.member {
            Some(key) => self
                .applier
                .observe_member(&self.breaker, key, outcome, elapsed),
            None => self.applier.observe(&self.breaker, outcome, elapsed),
        }
    }
}

impl Route {
    /// What a request on this route hands its route breaker's outcome to,
    /// while a shadow runs; `None` (one atomic load) otherwise. A keyed
    /// route's outcome goes to the twin of the request's key.
    pub(crate) fn shadow_feed(&self, parts: &Parts) -> Option<ShadowFeed> {
        let applier = self.shadow.as_ref().filter(|a| a.is_shadowing())?;
        if let Some(keyed) = &self.guard.keyed_breaker {
            return Some(ShadowFeed {
                applier: applier.clone(),
                breaker: keyed.registry.family().into(),
                member: Some(keyed.member_key(parts)),
            });
        }
        let breaker = self.breaker.as_ref()?;
        Some(ShadowFeed {
            applier: applier.clone(),
            breaker: breaker.name().into(),
            member: None,
        })
    }

    /// What a try on `endpoint` of this route's cluster hands its endpoint
    /// breaker's outcome to, while a shadow runs: the twin of that
    /// endpoint within the cluster's family.
    pub(crate) fn endpoint_shadow_feed(&self, endpoint: &EndpointId) -> Option<ShadowFeed> {
        let applier = self.shadow.as_ref().filter(|a| a.is_shadowing())?;
        Some(ShadowFeed {
            applier: applier.clone(),
            breaker: self.cluster.breakers().family().into(),
            member: Some(endpoint.to_string()),
        })
    }
}
