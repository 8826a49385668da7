//! The compatibility families: the names that dashboards built for other
//! circuit-breaker libraries already query, so they work unchanged.
//!
//! * `circuit_breaker_state` / `circuit_breaker_requests_total`: the
//!   generic pair many Grafana boards use (state 0 closed, 1 open, 2
//!   half-open; an operator's forced open reads 1, disabled and
//!   metrics-only read 0 because calls flow).
//! * Resilience4j's Micrometer names, with its conventions: rates in
//!   percent and −1 while the window holds fewer than the minimum number of
//!   calls; `kind` labels `successful`, `failed`, `ignored`, `not_permitted`.
//!   `calls_seconds` is written as a histogram with only the `+Inf` bucket
//!   (dashboards read its `_count` and `_sum`); its sum is the real
//!   duration for a [`TimedBreaker`](crate::TimedBreaker) and 0 otherwise,
//!   since a bare breaker keeps no durations.

use std::fmt;

use tripline::State;

use super::{Labels, Out, flag};
use crate::names::{MetricFamily, f};
use crate::sample::BreakerSample;

fn each(
    out: &mut Out<'_, '_>,
    samples: &[BreakerSample],
    fam: &MetricFamily,
    mut write: impl FnMut(&mut super::Family<'_>, Labels<'_>, &BreakerSample) -> fmt::Result,
) -> fmt::Result {
    if samples.is_empty() {
        return Ok(());
    }
    let base = out.labels();
    let mut family = out.compat_family(fam)?;
    for s in samples {
        write(&mut family, base.with("name", &s.name), s)?;
    }
    Ok(())
}

/// Resilience4j's rate: percent, or −1 below the minimum number of calls.
fn r4j_rate(s: &BreakerSample, rate: f64) -> f64 {
    let minimum = s.config.map_or(1, |c| u64::from(c.minimum_calls.max(1)));
    if s.window.calls < minimum {
        -1.0
    } else {
        rate * 100.0
    }
}

/// Writes every compatibility family for every sampled breaker.
pub(crate) fn compat(out: &mut Out<'_, '_>, samples: &[BreakerSample]) -> fmt::Result {
    each(out, samples, &f::COMPAT_STATE, |fam, l, s| {
        let code = match s.state {
            State::Open | State::ForcedOpen => 1,
            State::HalfOpen => 2,
            _ => 0,
        };
        fam.count(&l, code)
    })?;
    each(out, samples, &f::COMPAT_REQUESTS, |fam, l, s| {
        fam.counter(&l.with("result", "success"), s.calls.successful)?;
        fam.counter(&l.with("result", "failure"), s.calls.failed)?;
        fam.counter(&l.with("result", "short_circuited"), s.calls.rejected)
    })?;
    each(out, samples, &f::R4J_STATE, |fam, l, s| {
        for st in State::ALL {
            fam.gauge(&l.with("state", st.as_str()), flag(s.state == st))?;
        }
        Ok(())
    })?;
    each(out, samples, &f::R4J_CALLS, |fam, l, s| {
        let sums = s.histogram.as_ref().map_or([0.0; 3], |h| h.sums);
        let c = &s.calls;
        for (kind, n, sum) in [
            ("successful", c.successful, sums[0]),
            ("failed", c.failed, sums[1]),
            ("ignored", c.ignored, sums[2]),
        ] {
            fam.histogram(&l.with("kind", kind), sum, &[(f64::INFINITY, n)])?;
        }
        Ok(())
    })?;
    each(out, samples, &f::R4J_NOT_PERMITTED, |fam, l, s| {
        fam.counter(&l.with("kind", "not_permitted"), s.calls.rejected)
    })?;
    each(out, samples, &f::R4J_FAILURE_RATE, |fam, l, s| {
        fam.gauge(&l, r4j_rate(s, s.window.failure_rate()))
    })?;
    each(out, samples, &f::R4J_SLOW_RATE, |fam, l, s| {
        fam.gauge(&l, r4j_rate(s, s.window.slow_call_rate()))
    })?;
    each(out, samples, &f::R4J_BUFFERED, |fam, l, s| {
        let w = &s.window;
        fam.count(
            &l.with("kind", "successful"),
            w.calls.saturating_sub(w.failures),
        )?;
        fam.count(&l.with("kind", "failed"), w.failures)
    })
}
