//! The per-breaker families, written from one scrape's samples.

use std::fmt;

use super::{Family, Labels, Out, flag};
use crate::names::{MetricFamily, f};
use crate::sample::{BreakerSample, state_code};
use crate::source::Detail;
use tripline::State;

/// Writes family `fam` with one `write` per breaker whose detail reaches
/// the family's; nothing at all (not even the descriptor) if none does.
fn each(
    out: &mut Out<'_, '_>,
    samples: &[BreakerSample],
    fam: &MetricFamily,
    write: impl FnMut(&mut Family<'_>, Labels<'_>, &BreakerSample) -> fmt::Result,
) -> fmt::Result {
    each_where(out, samples, fam, |_| true, write)
}

/// Like [`each`], for the breakers `shown` also accepts.
fn each_where(
    out: &mut Out<'_, '_>,
    samples: &[BreakerSample],
    fam: &MetricFamily,
    shown: impl Fn(&BreakerSample) -> bool,
    mut write: impl FnMut(&mut Family<'_>, Labels<'_>, &BreakerSample) -> fmt::Result,
) -> fmt::Result {
    let min = fam.detail.unwrap_or(Detail::Full);
    let shown = |s: &&BreakerSample| s.detail >= min && shown(s);
    if !samples.iter().any(|s| shown(&s)) {
        return Ok(());
    }
    let base = out.labels();
    let mut family = out.family(fam)?;
    for s in samples.iter().filter(shown) {
        write(&mut family, base.with("name", &s.name), s)?;
    }
    Ok(())
}

/// The call outcomes an `Essential` breaker shows, then the rest.
const ESSENTIAL_OUTCOMES: usize = 3;

fn outcomes(s: &BreakerSample) -> [(&'static str, u64); 7] {
    let c = &s.calls;
    [
        ("successful", c.successful),
        ("failed", c.failed),
        ("rejected", c.rejected),
        ("slow", c.slow),
        ("ignored", c.ignored),
        ("cancelled", c.cancelled),
        ("late", c.late),
    ]
}

/// Writes every per-breaker family.
pub(crate) fn breakers(out: &mut Out<'_, '_>, samples: &[BreakerSample]) -> fmt::Result {
    each(out, samples, &f::STATE, |fam, l, s| {
        for st in State::ALL {
            fam.gauge(&l.with("state", st.as_str()), flag(s.state == st))?;
        }
        Ok(())
    })?;
    each(out, samples, &f::STATE_CODE, |fam, l, s| {
        fam.count(&l, u64::from(state_code(s.state)))
    })?;
    each(out, samples, &f::CALLS, |fam, l, s| {
        let shown = if s.detail == Detail::Full {
            7
        } else {
            ESSENTIAL_OUTCOMES
        };
        for (outcome, n) in &outcomes(s)[..shown] {
            fam.counter(&l.with("outcome", outcome), *n)?;
        }
        Ok(())
    })?;
    each(out, samples, &f::FAILURE_RATE, |fam, l, s| {
        fam.gauge(&l, s.window.failure_rate())
    })?;
    let slow = |s: &BreakerSample| s.detects_slow;
    each_where(out, samples, &f::SLOW_RATE, slow, |fam, l, s| {
        fam.gauge(&l, s.window.slow_call_rate())
    })?;
    transitions(out, samples)?;
    each(out, samples, &f::FAILURE_THRESHOLD, |fam, l, s| {
        fam.gauge(&l, s.config.map_or(0.0, |c| c.failure_rate_threshold))
    })?;
    each_where(out, samples, &f::SLOW_THRESHOLD, slow, |fam, l, s| {
        fam.gauge(&l, s.config.map_or(0.0, |c| c.slow_call_rate_threshold))
    })?;
    each(out, samples, &f::WINDOW_CALLS, |fam, l, s| {
        fam.count(&l, s.window.calls)
    })?;
    each(out, samples, &f::MINIMUM_CALLS, |fam, l, s| {
        fam.count(&l, s.config.map_or(0, |c| u64::from(c.minimum_calls)))
    })?;
    each(out, samples, &f::TIME_IN_STATE, |fam, l, s| {
        fam.gauge(&l, s.time_in_state_secs)
    })?;
    each(out, samples, &f::PROBES_IN_FLIGHT, |fam, l, s| {
        fam.count(&l, s.probes_in_flight)
    })?;
    each(out, samples, &f::PROBES, |fam, l, s| {
        fam.counter(&l.with("result", "succeeded"), s.calls.probes_succeeded)?;
        fam.counter(&l.with("result", "failed"), s.calls.probes_failed)
    })?;
    each(out, samples, &f::PROBE_DUE, |fam, l, s| {
        fam.gauge(&l, flag(s.probe_due))
    })?;
    each(out, samples, &f::OPEN_UNTIL, |fam, l, s| {
        fam.gauge(&l, s.open_until_unix)
    })?;
    each(out, samples, &f::BACKOFF_ROUND, |fam, l, s| {
        fam.count(&l, s.backoff_round)
    })?;
    each(out, samples, &f::CONFIG_VERSION, |fam, l, s| {
        fam.count(&l, s.config_version)
    })?;
    max_half_open(out, samples)?;
    durations(out, samples)
}

/// Transitions: only the (from, to, reason) combinations that happened.
fn transitions(out: &mut Out<'_, '_>, samples: &[BreakerSample]) -> fmt::Result {
    let has = |s: &BreakerSample| s.detail >= Detail::Essential && !s.transitions.is_empty();
    if !samples.iter().any(has) {
        return Ok(());
    }
    let base = out.labels();
    let mut fam = out.family(&f::TRANSITIONS)?;
    for s in samples.iter().filter(|s| has(s)) {
        for t in &s.transitions {
            let l = base
                .with("name", &s.name)
                .with("from", t.from.as_str())
                .with("to", t.to.as_str())
                .with("reason", t.reason.as_str());
            fam.counter(&l, t.count)?;
        }
    }
    Ok(())
}

/// The half-open backstop, for the breakers that have one.
fn max_half_open(out: &mut Out<'_, '_>, samples: &[BreakerSample]) -> fmt::Result {
    let secs = |s: &BreakerSample| {
        (s.detail == Detail::Full)
            .then_some(s.config?.max_half_open_secs)
            .flatten()
    };
    if !samples.iter().any(|s| secs(s).is_some()) {
        return Ok(());
    }
    let base = out.labels();
    let mut fam = out.family(&f::MAX_HALF_OPEN)?;
    for s in samples {
        if let Some(v) = secs(s) {
            fam.gauge(&base.with("name", &s.name), v)?;
        }
    }
    Ok(())
}

/// Call durations of the breakers timed through a `TimedBreaker`.
fn durations(out: &mut Out<'_, '_>, samples: &[BreakerSample]) -> fmt::Result {
    if !samples.iter().any(|s| s.histogram.is_some()) {
        return Ok(());
    }
    let base = out.labels();
    let mut fam = out.family(&f::CALL_DURATION)?;
    for s in samples {
        if let Some(h) = &s.histogram {
            fam.histogram(&base.with("name", &s.name), h.sum(), &h.buckets)?;
        }
    }
    Ok(())
}
