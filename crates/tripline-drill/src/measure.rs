//! From samples and transitions to the measured values of the
//! expectation keys (their meaning is in the crate docs).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::events::TransitionSeen;
use crate::file::Drill;
use crate::load::{LoadTotals, Sample};
use crate::verdict::{Measured, Outcome, PhaseMeasure, Summary, judge};

pub(crate) fn measure(
    drill: &Drill,
    samples: Vec<Sample>,
    transitions: Vec<TransitionSeen>,
    totals: LoadTotals,
    tries: Option<f64>,
    aborted: Option<String>,
) -> Outcome {
    let watched: Vec<TransitionSeen> = transitions
        .into_iter()
        .filter(|t| drill.watch.is_empty() || drill.watch.contains(&t.breaker))
        .collect();
    let is_trip = |t: &TransitionSeen| t.from == "closed" && t.to == "open";
    let mut phases: Vec<PhaseMeasure> = drill
        .phases
        .iter()
        .map(|p| PhaseMeasure {
            name: p.name.clone(),
            expect_trip: p.expect_trip,
            trips: 0,
            detection_delay: None,
            recovery: None,
            probe_peak_per_second: None,
        })
        .collect();
    let mut false_trips = 0;
    let mut first_trip: Vec<Option<Duration>> = vec![None; drill.phases.len()];
    for t in watched.iter().filter(|t| is_trip(t)) {
        match drill.attributed_phase(t.at) {
            Some(i) => {
                phases[i].trips += 1;
                first_trip[i].get_or_insert(t.at);
                if !drill.phases[i].expect_trip {
                    false_trips += 1;
                }
            }
            None => false_trips += 1,
        }
    }
    for (i, p) in drill.phases.iter().enumerate() {
        let Some(trip) = first_trip[i] else { continue };
        phases[i].detection_delay = Some(trip.saturating_sub(p.from));
        phases[i].recovery = recovery(&watched, p.to);
        phases[i].probe_peak_per_second = probe_peak(&samples, trip, p.to);
    }
    let healthy_rejected = samples
        .iter()
        .filter(|s| drill.phase_at(s.start).is_none() && s.is_breaker_refusal())
        .count() as u64;
    let mut fault_latencies: Vec<Duration> = samples
        .iter()
        .filter(|s| drill.phase_at(s.start).is_some())
        .map(|s| s.latency)
        .collect();
    fault_latencies.sort();
    let fault_p99 = percentile(&fault_latencies, 0.99);
    let sent = samples.len() as u64;
    let retry_amplification = match tries {
        Some(t) if sent > 0 => Some(t / sent as f64),
        _ => None,
    };
    let summary = Summary {
        sent,
        skipped: totals.skipped,
        ok: samples
            .iter()
            .filter(|s| s.status.is_some_and(|c| c < 400))
            .count() as u64,
        errors: samples.iter().filter(|s| s.is_error()).count() as u64,
        refused: samples.iter().filter(|s| s.is_refused()).count() as u64,
        no_answer: samples.iter().filter(|s| s.status.is_none()).count() as u64,
    };
    let measured = Measured {
        phases,
        false_trips,
        healthy_rejected,
        retry_amplification,
        fault_p99,
    };
    let rows = judge(drill, &measured);
    Outcome {
        drill: drill.name.clone(),
        aborted,
        rows,
        measured,
        summary,
        transitions: watched,
    }
}

/// From `healed` until every watched breaker that has reported a state
/// is closed again; `None` if that never happened before the drill ended.
fn recovery(transitions: &[TransitionSeen], healed: Duration) -> Option<Duration> {
    let mut state: BTreeMap<&str, &str> = BTreeMap::new();
    let all_closed = |s: &BTreeMap<&str, &str>| s.values().all(|v| *v == "closed");
    let mut later = Vec::new();
    for t in transitions {
        if t.at <= healed {
            state.insert(&t.breaker, &t.to);
        } else {
            later.push(t);
        }
    }
    if all_closed(&state) {
        return Some(Duration::ZERO);
    }
    for t in later {
        state.insert(&t.breaker, &t.to);
        if all_closed(&state) {
            return Some(t.at - healed);
        }
    }
    None
}

/// The most requests not refused by the proxy in one whole second, from
/// the second after the trip up to the fault's end (the simulator's
/// window); `None` when no whole second fits.
fn probe_peak(samples: &[Sample], trip: Duration, end: Duration) -> Option<u64> {
    let from = trip.as_secs() + 1;
    let to = end.as_secs();
    if from >= to {
        return None;
    }
    let mut counts = vec![0u64; usize::try_from(to - from).unwrap_or(0)];
    for s in samples.iter().filter(|s| !s.is_refused()) {
        let second = s.start.as_secs();
        if (from..to).contains(&second) {
            counts[usize::try_from(second - from).unwrap_or(0)] += 1;
        }
    }
    counts.into_iter().max()
}

/// Nearest-rank percentile of sorted `values`.
fn percentile(values: &[Duration], q: f64) -> Option<Duration> {
    if values.is_empty() {
        return None;
    }
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    Some(values[rank - 1])
}
