//! Registering the policies around the breaker, clusters and failback
//! queues. Policies that have no name of their own (a budget, a bulkhead,
//! a retry policy) are exported under the name they are registered with;
//! each name is taken once per kind.

use std::sync::Arc;

use tripline::budget::RetryBudget;
use tripline::bulkhead::Bulkhead;
use tripline::cluster::{Cluster, Failback};
use tripline::retry::Retry;
use tripline::{AdaptiveThrottle, Pipeline};

use super::{Exporter, SourceKind, already};
use crate::error::ExportError;
use crate::source::{ClusterSource, Detail, FailbackSample, Sources};

fn taken<T>(list: &[(String, T)], name: &str) -> bool {
    list.iter().any(|(n, _)| n == name)
}

impl Exporter {
    /// Exports `retry`'s attempts, retries and refusals by reason as `name`.
    pub fn register_retry(&self, name: &str, retry: &Retry) -> Result<(), ExportError> {
        let mut s = self.shared.write();
        if taken(&s.retries, name) {
            return Err(already(SourceKind::Retry, name));
        }
        let retry = retry.clone();
        s.retries
            .push((name.into(), Box::new(move || Some(retry.stats()))));
        Ok(())
    }

    /// Exports what `pipeline` holds under `name`: its retry counts, retry
    /// budget and bulkhead, and its circuit breaker (at [`Detail::Full`],
    /// under the breaker's own name) unless that breaker is exported
    /// already. Nothing is registered if any of them is refused.
    pub fn register_pipeline(&self, name: &str, pipeline: &Pipeline) -> Result<(), ExportError> {
        let mut s = self.shared.write();
        let retry = pipeline.retry_stats().is_some();
        if retry && taken(&s.retries, name) {
            return Err(already(SourceKind::Retry, name));
        }
        self.check_budget(&s, name, pipeline.budget())?;
        self.check_bulkhead(&s, name, pipeline.bulkhead())?;
        if retry {
            let p = pipeline.clone();
            s.retries
                .push((name.into(), Box::new(move || p.retry_stats())));
        }
        if let Some(b) = pipeline.budget() {
            s.budgets.push((name.into(), b.clone()));
        }
        if let Some(b) = pipeline.bulkhead() {
            s.bulkheads.push((name.into(), b.clone()));
        }
        drop(s);
        if let Some(breaker) = pipeline.circuit_breaker() {
            // Already exported (by itself or in a registry) is fine here.
            let _ = self.register_breaker(breaker, Detail::Full);
        }
        Ok(())
    }

    fn check_budget(
        &self,
        s: &Sources,
        name: &str,
        budget: Option<&RetryBudget>,
    ) -> Result<(), ExportError> {
        match budget {
            Some(b) if taken(&s.budgets, name) || s.budgets.iter().any(|(_, o)| o.ptr_eq(b)) => {
                Err(already(SourceKind::Budget, name))
            }
            _ => Ok(()),
        }
    }

    fn check_bulkhead(
        &self,
        s: &Sources,
        name: &str,
        bulkhead: Option<&Bulkhead>,
    ) -> Result<(), ExportError> {
        match bulkhead {
            Some(b)
                if taken(&s.bulkheads, name) || s.bulkheads.iter().any(|(_, o)| o.ptr_eq(b)) =>
            {
                Err(already(SourceKind::Bulkhead, name))
            }
            _ => Ok(()),
        }
    }

    /// Exports `budget`'s level (retries it would grant now) and counts as
    /// `name`. Refused if the name or the budget is taken.
    pub fn register_budget(&self, name: &str, budget: &RetryBudget) -> Result<(), ExportError> {
        let mut s = self.shared.write();
        self.check_budget(&s, name, Some(budget))?;
        s.budgets.push((name.into(), budget.clone()));
        Ok(())
    }

    /// Exports `bulkhead`'s occupancy, queue and counts as `name`. Refused
    /// if the name or the bulkhead is taken.
    pub fn register_bulkhead(&self, name: &str, bulkhead: &Bulkhead) -> Result<(), ExportError> {
        let mut s = self.shared.write();
        self.check_bulkhead(&s, name, Some(bulkhead))?;
        s.bulkheads.push((name.into(), bulkhead.clone()));
        Ok(())
    }

    /// Exports `throttle`'s drop probability and counts under its name.
    pub fn register_throttle(&self, throttle: &AdaptiveThrottle) -> Result<(), ExportError> {
        let mut s = self.shared.write();
        if s.throttles.iter().any(|t| t.name() == throttle.name()) {
            return Err(already(SourceKind::Throttle, throttle.name()));
        }
        s.throttles.push(throttle.clone());
        Ok(())
    }

    /// Exports `cluster` under its name: endpoints, routable endpoints,
    /// outlier ejections (active and since registration, by detector),
    /// panic mode; and its endpoint breakers at `detail`, as the registry
    /// they live in (unregistered with the cluster).
    pub fn register_cluster(&self, cluster: &Cluster, detail: Detail) -> Result<(), ExportError> {
        let mut s = self.shared.write();
        if s.clusters
            .iter()
            .any(|c| c.cluster.name() == cluster.name())
        {
            return Err(already(SourceKind::Cluster, cluster.name()));
        }
        self.add_registry(&mut s, cluster.breakers(), detail)?;
        let tally = Arc::new(tripline::cluster::EjectionTally::default());
        let events = cluster.subscribe(tally.subscriber());
        s.clusters.push(ClusterSource {
            cluster: cluster.clone(),
            tally,
            _events: events,
        });
        Ok(())
    }

    /// Exports `failback`'s queue depth, the age of its oldest entry, and
    /// its submission and delivery counts as `name`.
    pub fn register_failback<E: 'static>(
        &self,
        name: &str,
        failback: &Failback<E>,
    ) -> Result<(), ExportError> {
        let mut s = self.shared.write();
        if taken(&s.failbacks, name) {
            return Err(already(SourceKind::Failback, name));
        }
        let q = failback.clone();
        s.failbacks.push((
            name.into(),
            Box::new(move || FailbackSample {
                depth: q.pending(),
                oldest_age_secs: q.oldest_pending_age().map_or(0.0, |d| d.as_secs_f64()),
                stats: q.stats(),
            }),
        ));
        Ok(())
    }
}
