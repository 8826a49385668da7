//! Per-second time series of a run, for people who plot their own charts:
//! outcomes, load on the dependency, and how many replicas' breakers were
//! open or half-open, second by second.
//!
//! A replica's state in second `s` is its state at the end of that second
//! (after every transition up to `s + 1`); a breaker that opened and closed
//! within one second counts as closed there — the transitions list has
//! every change.

use serde::Serialize;
use tripline::State;

use crate::engine::{Counts, TransitionRecord};

/// One second of a run (all replicas).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Second {
    /// Seconds from the scenario start (the bucket `[t, t + 1)`).
    pub t: u64,
    /// Calls that started this second and succeeded.
    pub succeeded: u64,
    /// … failed.
    pub failed: u64,
    /// … were rejected by the breaker.
    pub rejected: u64,
    /// Calls that reached the dependency (succeeded + failed): its load.
    pub sent: u64,
    /// Replicas whose breaker was open (forced open included) at the end
    /// of the second.
    pub open: u32,
    /// Replicas whose breaker was half-open at the end of the second.
    pub half_open: u32,
}

/// The series of `per_second` counts and `transitions` over `replicas`.
pub fn build(
    per_second: &[Counts],
    transitions: &[TransitionRecord],
    replicas: u32,
) -> Vec<Second> {
    let mut state = vec![State::Closed; replicas as usize];
    let mut next = 0;
    per_second
        .iter()
        .enumerate()
        .map(|(t, c)| {
            let end = (t as u64 + 1).saturating_mul(1_000_000_000);
            while let Some(tr) = transitions.get(next).filter(|tr| tr.at < end) {
                if let Some(s) = state.get_mut(tr.replica as usize) {
                    *s = tr.to;
                }
                next += 1;
            }
            let count = |f: fn(State) -> bool| state.iter().filter(|s| f(**s)).count() as u32;
            Second {
                t: t as u64,
                succeeded: c.succeeded,
                failed: c.failed,
                rejected: c.rejected,
                sent: c.sent(),
                open: count(|s| matches!(s, State::Open | State::ForcedOpen)),
                half_open: count(|s| s == State::HalfOpen),
            }
        })
        .collect()
}

/// The series of every run as CSV: a header row, then one row per breaker
/// and second (fields with commas or quotes quoted, RFC 4180).
pub fn csv(runs: &[(&str, &[Second])]) -> String {
    let mut out = String::from("breaker,t,succeeded,failed,rejected,sent,open,half_open\n");
    for (breaker, series) in runs {
        let name = if breaker.contains([',', '"', '\n']) {
            format!("\"{}\"", breaker.replace('"', "\"\""))
        } else {
            (*breaker).to_owned()
        };
        for s in *series {
            out.push_str(&format!(
                "{name},{},{},{},{},{},{},{}\n",
                s.t, s.succeeded, s.failed, s.rejected, s.sent, s.open, s.half_open
            ));
        }
    }
    out
}
