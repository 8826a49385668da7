//! Clusters (health, outlier ejections, panic mode) and failback queues.

use std::fmt;

use super::{Named, Out, each, flag};
use crate::names::f;
use crate::outlier::{DETECTORS, OutlierSample, SKIP_REASONS};
use crate::source::FailbackSample;

/// Cluster health and outlier detection, one set per cluster.
pub(crate) fn clusters(out: &mut Out<'_, '_>, clusters: &[OutlierSample]) -> fmt::Result {
    each(
        out,
        clusters,
        &f::CLUSTER_ENDPOINTS,
        "cluster",
        |fam, l, c| fam.count(&l, c.endpoints as u64),
    )?;
    each(
        out,
        clusters,
        &f::CLUSTER_ROUTABLE,
        "cluster",
        |fam, l, c| fam.count(&l, c.routable as u64),
    )?;
    each(
        out,
        clusters,
        &f::EJECTIONS_ACTIVE,
        "cluster",
        |fam, l, c| {
            for (d, n) in DETECTORS.iter().zip(c.active) {
                fam.count(&l.with("detector", d), n)?;
            }
            Ok(())
        },
    )?;
    each(out, clusters, &f::EJECTIONS, "cluster", |fam, l, c| {
        // `unknown` is only ever a current state, never a counted ejection.
        for (d, n) in DETECTORS.iter().zip(c.ejections).take(DETECTORS.len() - 1) {
            fam.counter(&l.with("detector", d), n)?;
        }
        Ok(())
    })?;
    each(out, clusters, &f::SKIPPED, "cluster", |fam, l, c| {
        for (d, per_reason) in DETECTORS.iter().zip(c.skipped).take(DETECTORS.len() - 1) {
            for (r, n) in SKIP_REASONS.iter().zip(per_reason) {
                fam.counter(&l.with("detector", d).with("reason", r), n)?;
            }
        }
        Ok(())
    })?;
    each(out, clusters, &f::PANIC_MODE, "cluster", |fam, l, c| {
        fam.gauge(&l, flag(c.panic))
    })?;
    each(out, clusters, &f::PANIC_ENTERED, "cluster", |fam, l, c| {
        fam.counter(&l, c.panic_entered)
    })
}

/// Failback queues: depth, oldest entry's age, submissions and deliveries.
pub(crate) fn failbacks(out: &mut Out<'_, '_>, queues: &[(String, FailbackSample)]) -> fmt::Result {
    each(out, queues, &f::FAILBACK_DEPTH, "name", |fam, l, q| {
        fam.count(&l, q.1.depth as u64)
    })?;
    each(out, queues, &f::FAILBACK_AGE, "name", |fam, l, q| {
        fam.gauge(&l, q.1.oldest_age_secs)
    })?;
    each(
        out,
        queues,
        &f::FAILBACK_SUBMISSIONS,
        "name",
        |fam, l, q| {
            let s = &q.1.stats;
            fam.counter(&l.with("outcome", "delivered"), s.delivered_first)?;
            fam.counter(&l.with("outcome", "queued"), s.queued)?;
            fam.counter(&l.with("outcome", "refused"), s.refused)
        },
    )?;
    each(out, queues, &f::FAILBACK_DELIVERIES, "name", |fam, l, q| {
        let s = &q.1.stats;
        fam.counter(&l.with("outcome", "delivered"), s.delivered_later)?;
        fam.counter(&l.with("outcome", "retry_failed"), s.retries_failed)?;
        fam.counter(&l.with("outcome", "gave_up"), s.gave_up)
    })
}

impl Named for OutlierSample {
    fn name(&self) -> &str {
        &self.cluster
    }
}
