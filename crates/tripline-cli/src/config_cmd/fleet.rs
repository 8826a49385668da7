//! `tripline config status --breakers`: the fleet's breakers summed from
//! the instances' leased status keys, one line per breaker and state:
//!
//! ```text
//! payments: open on 3 of 5 instances (edge-2, edge-4, edge-5) for 42 s
//! inventory: closed on all 5 instances
//! ```
//!
//! "for" is how long the longest of them has been in that state. A stopped
//! instance drops out by itself when its lease expires.

use std::collections::BTreeMap;

use tripline_config::InstanceStatus;

/// For one breaker: each state, and the instances in it with since when.
type ByState<'a> = BTreeMap<&'a str, Vec<(&'a str, u64)>>;

/// The summary's lines, `now_ms` the wall clock in ms since the Unix epoch.
pub(super) fn summary(fleet: &[InstanceStatus], now_ms: u64) -> Vec<String> {
    let mut seen: BTreeMap<&str, ByState<'_>> = BTreeMap::new();
    for status in fleet {
        for b in &status.breakers {
            seen.entry(&b.name)
                .or_default()
                .entry(&b.state)
                .or_default()
                .push((&status.instance, b.since_ms));
        }
    }
    let mut lines = Vec::new();
    for (name, states) in &seen {
        let total: usize = states.values().map(Vec::len).sum();
        if states.len() == 1 && states.contains_key("closed") {
            lines.push(format!("{name}: closed on all {total} instances"));
            continue;
        }
        for (state, on) in states {
            let ids: Vec<&str> = on.iter().map(|(i, _)| *i).collect();
            let since = on.iter().map(|(_, s)| *s).min().unwrap_or(now_ms);
            let secs = now_ms.saturating_sub(since) / 1000;
            lines.push(format!(
                "{name}: {state} on {} of {total} instances ({}) for {secs} s",
                on.len(),
                ids.join(", ")
            ));
        }
    }
    if lines.is_empty() {
        lines.push("no instance reports a breaker".into());
    }
    lines
}
