//! The transition timeline of one breaker, as table rows.
//!
//! During a long outage a breaker cycles `open → half_open → open` once per
//! open duration; listed one per row, nineteen failed probe rounds push the
//! trip and the recovery — the rows a reader wants — apart. So consecutive
//! failed rounds of one replica with one reason become one row:
//! `43.1s–98.03s  0  open → half_open → open  probe_failed ×19`.
//! Replicas are collapsed separately (their rounds interleave in time),
//! then rows are merged back in time order.

use tripline::State;

use super::{count, fmt_secs};
use crate::engine::TransitionRecord;
use crate::report::secs;

/// One row: a single transition, or `rounds` collapsed failed probe rounds.
struct Row<'a> {
    first: &'a TransitionRecord,
    last: &'a TransitionRecord,
    rounds: usize,
}

/// Whether `a` then `b` is one failed probe round: the open duration
/// elapsed, the round began, and it ended open again.
fn is_failed_round(a: &TransitionRecord, b: &TransitionRecord) -> bool {
    a.from == State::Open
        && a.to == State::HalfOpen
        && b.from == State::HalfOpen
        && b.to == State::Open
        && a.replica == b.replica
}

/// The rows of `transitions` (time order), collapsed unless `verbose`.
pub(super) fn rows(transitions: &[TransitionRecord], verbose: bool) -> Vec<Vec<String>> {
    let mut rows: Vec<Row<'_>> = Vec::new();
    if verbose {
        rows.extend(transitions.iter().map(|t| Row {
            first: t,
            last: t,
            rounds: 0,
        }));
    } else {
        let mut replicas: Vec<u32> = transitions.iter().map(|t| t.replica).collect();
        replicas.sort_unstable();
        replicas.dedup();
        for replica in replicas {
            let own: Vec<&TransitionRecord> = transitions
                .iter()
                .filter(|t| t.replica == replica)
                .collect();
            collapse(&own, &mut rows);
        }
        // Stable: rows of one instant keep replica order.
        rows.sort_by_key(|r| r.first.at);
    }
    rows.iter().map(render).collect()
}

/// Appends the rows of one replica's transitions.
fn collapse<'a>(own: &[&'a TransitionRecord], rows: &mut Vec<Row<'a>>) {
    let mut i = 0;
    while i < own.len() {
        let mut rounds = 0;
        while i + 2 * rounds + 1 < own.len()
            && is_failed_round(own[i + 2 * rounds], own[i + 2 * rounds + 1])
            && own[i + 2 * rounds + 1].reason == own[i + 1].reason
        {
            rounds += 1;
        }
        if rounds >= 2 {
            rows.push(Row {
                first: own[i],
                last: own[i + 2 * rounds - 1],
                rounds,
            });
            i += 2 * rounds;
        } else {
            rows.push(Row {
                first: own[i],
                last: own[i],
                rounds: 0,
            });
            i += 1;
        }
    }
}

fn render(row: &Row<'_>) -> Vec<String> {
    let t = row.first;
    if row.rounds == 0 {
        return vec![
            fmt_secs(secs(t.at)),
            t.replica.to_string(),
            format!("{} → {}", t.from, t.to),
            t.reason.to_string(),
            window(t),
        ];
    }
    vec![
        format!("{}–{}", fmt_secs(secs(t.at)), fmt_secs(secs(row.last.at))),
        t.replica.to_string(),
        "open → half_open → open".to_owned(),
        format!("{} ×{}", row.last.reason, row.rounds),
        format!(
            "{} failed in a row",
            count(row.rounds as u64, "probe round", "probe rounds")
        ),
    ]
}

fn window(t: &TransitionRecord) -> String {
    let w = &t.window;
    format!(
        "{}, {} failed, {} slow",
        count(w.calls, "call", "calls"),
        w.failures,
        w.slow
    )
}
