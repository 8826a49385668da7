//! Registry-wide counts and the policies around the breaker: retry,
//! retry budget, bulkhead, adaptive throttle.

use std::fmt;

use tripline::budget::BudgetStats;
use tripline::bulkhead::BulkheadStats;
use tripline::registry::RegistryStats;
use tripline::retry::{RetryRefusal, RetryStats};
use tripline::throttle::ThrottleMetrics;

use super::{Named, Out, each, flag};
use crate::names::f;

/// Registry-wide counts, one set per registry.
pub(crate) fn registries(out: &mut Out<'_, '_>, stats: &[RegistryStats]) -> fmt::Result {
    each(out, stats, &f::REG_BREAKERS, "family", |fam, l, s| {
        let b = &s.by_state;
        for (state, n) in [
            ("closed", b.closed),
            ("open", b.open),
            ("half_open", b.half_open),
            ("operator", b.operator),
        ] {
            fam.count(&l.with("state", state), n as u64)?;
        }
        Ok(())
    })?;
    each(out, stats, &f::REG_MAX, "family", |fam, l, s| {
        fam.count(&l, s.max_breakers as u64)
    })?;
    each(out, stats, &f::REG_CREATED, "family", |fam, l, s| {
        fam.counter(&l, s.created)
    })?;
    each(out, stats, &f::REG_DROPPED, "family", |fam, l, s| {
        fam.counter(&l.with("reason", "evicted"), s.evicted)?;
        fam.counter(&l.with("reason", "removed"), s.removed)
    })?;
    each(out, stats, &f::REG_OVERFLOW, "family", |fam, l, s| {
        fam.counter(&l.with("outcome", "shared"), s.overflowed)?;
        fam.counter(&l.with("outcome", "refused"), s.refused)
    })
}

/// Retry attempts, retries and refusals by reason.
pub(crate) fn retries(out: &mut Out<'_, '_>, retries: &[(String, RetryStats)]) -> fmt::Result {
    each(out, retries, &f::RETRY_ATTEMPTS, "name", |fam, l, r| {
        fam.counter(&l, r.1.attempts)
    })?;
    each(out, retries, &f::RETRY_RETRIES, "name", |fam, l, r| {
        fam.counter(&l, r.1.retries)
    })?;
    each(out, retries, &f::RETRY_REFUSALS, "name", |fam, l, r| {
        for reason in RetryRefusal::ALL {
            fam.counter(&l.with("reason", reason.as_str()), r.1.refused(reason))?;
        }
        Ok(())
    })
}

/// Retry budgets: level and counts. Items are (name, stats, available).
pub(crate) fn budgets(
    out: &mut Out<'_, '_>,
    budgets: &[(String, BudgetStats, u64)],
) -> fmt::Result {
    each(out, budgets, &f::BUDGET_AVAILABLE, "name", |fam, l, b| {
        fam.count(&l, b.2)
    })?;
    each(out, budgets, &f::BUDGET_REQUESTS, "name", |fam, l, b| {
        fam.counter(&l, b.1.deposits)
    })?;
    each(out, budgets, &f::BUDGET_WITHDRAWALS, "name", |fam, l, b| {
        fam.counter(&l, b.1.withdrawals)
    })?;
    each(out, budgets, &f::BUDGET_REFUSALS, "name", |fam, l, b| {
        fam.counter(&l, b.1.refused)
    })
}

/// Bulkheads: occupancy, bound and counts. Items are (name, stats, max).
pub(crate) fn bulkheads(
    out: &mut Out<'_, '_>,
    bulkheads: &[(String, BulkheadStats, u32)],
) -> fmt::Result {
    each(out, bulkheads, &f::BULKHEAD_IN_USE, "name", |fam, l, b| {
        fam.count(&l, b.1.in_flight)
    })?;
    each(out, bulkheads, &f::BULKHEAD_QUEUED, "name", |fam, l, b| {
        fam.count(&l, b.1.waiting)
    })?;
    each(out, bulkheads, &f::BULKHEAD_MAX, "name", |fam, l, b| {
        fam.count(&l, u64::from(b.2))
    })?;
    each(
        out,
        bulkheads,
        &f::BULKHEAD_ADMITTED,
        "name",
        |fam, l, b| fam.counter(&l, b.1.admitted),
    )?;
    each(
        out,
        bulkheads,
        &f::BULKHEAD_REJECTED,
        "name",
        |fam, l, b| fam.counter(&l, b.1.rejected),
    )
}

/// Adaptive throttles: drop probability, activity and totals.
pub(crate) fn throttles(out: &mut Out<'_, '_>, throttles: &[ThrottleMetrics]) -> fmt::Result {
    each(out, throttles, &f::THROTTLE_DROP, "name", |fam, l, t| {
        fam.gauge(&l, t.rejection_probability)
    })?;
    each(out, throttles, &f::THROTTLE_ACTIVE, "name", |fam, l, t| {
        fam.gauge(&l, flag(t.active))
    })?;
    each(
        out,
        throttles,
        &f::THROTTLE_REQUESTS,
        "name",
        |fam, l, t| fam.counter(&l, t.totals.requests),
    )?;
    each(out, throttles, &f::THROTTLE_ACCEPTS, "name", |fam, l, t| {
        fam.counter(&l, t.totals.accepts)
    })?;
    each(
        out,
        throttles,
        &f::THROTTLE_THROTTLED,
        "name",
        |fam, l, t| fam.counter(&l, t.totals.throttled),
    )
}

impl Named for RegistryStats {
    fn name(&self) -> &str {
        &self.family
    }
}

impl Named for ThrottleMetrics {
    fn name(&self) -> &str {
        &self.name
    }
}
