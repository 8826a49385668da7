//! `tripline config status --breakers`: the fleet's breakers summed from
//! the instances' leased status keys, one line per breaker and state:
//!
//! ```text
//! payments: open on 3 of 5 instances (edge-2, edge-4, edge-5) for 42 s
//! inventory: closed on all 5 instances
//! tenants: forced_open on 2 of 5 instances (edge-1, edge-3) for 90 s
//! tenants: automatic on 3 of 5 instances (edge-2, edge-4, edge-5) for 0 s
//! ```
//!
//! A registry family (`tenants`) shows the state an operator holds it in,
//! or `automatic`.
//!
//! "for" is how long the longest of them has been in that state. A stopped
//! instance drops out by itself when its lease expires.

use tripline_config::{InstanceStatus, fleet_view};

/// The summary's lines, `now_ms` the wall clock in ms since the Unix epoch.
pub(super) fn summary(fleet: &[InstanceStatus], now_ms: u64) -> Vec<String> {
    let lines: Vec<String> = fleet_view(fleet)
        .iter()
        .flat_map(|b| b.lines(now_ms))
        .collect();
    if lines.is_empty() {
        return vec!["no instance reports a breaker".into()];
    }
    lines
}
