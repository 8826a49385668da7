//! The fleet's breakers at a glance, summed from the instances' status
//! reports: for each breaker, each state it is in somewhere, on which
//! instances and since when. `tripline config status --breakers` prints
//! it as lines; the proxy's dashboard shows it as a table, live.
//!
//! An instance that stopped drops out by itself: its status key is
//! leased, and etcd removes it when the lease expires.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::applier::InstanceStatus;

/// One breaker across the fleet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FleetBreaker {
    /// The breaker's name.
    pub name: String,
    /// The instances that report it.
    pub instances: usize,
    /// Each state it is in somewhere, `closed` last.
    pub states: Vec<FleetState>,
}

/// A breaker's state on some of the fleet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FleetState {
    /// `open`, `half_open`, `forced_open`, `closed`, …
    pub state: String,
    /// The instances in it, by id.
    pub instances: Vec<String>,
    /// Since when the longest of them has been in it (ms since the epoch).
    pub since_ms: u64,
}

/// The fleet's breakers, by name.
pub fn fleet_view(fleet: &[InstanceStatus]) -> Vec<FleetBreaker> {
    let mut seen: BTreeMap<&str, BTreeMap<&str, FleetState>> = BTreeMap::new();
    for status in fleet {
        for b in &status.breakers {
            let state = seen
                .entry(&b.name)
                .or_default()
                .entry(&b.state)
                .or_insert_with(|| FleetState {
                    state: b.state.clone(),
                    instances: Vec::new(),
                    since_ms: b.since_ms,
                });
            state.instances.push(status.instance.clone());
            state.since_ms = state.since_ms.min(b.since_ms);
        }
    }
    seen.into_iter()
        .map(|(name, states)| {
            let mut states: Vec<FleetState> = states.into_values().collect();
            // What needs looking at first: every state but closed, then closed.
            states.sort_by_key(|s| s.state == "closed");
            FleetBreaker {
                name: name.to_owned(),
                instances: states.iter().map(|s| s.instances.len()).sum(),
                states,
            }
        })
        .collect()
}

impl FleetBreaker {
    /// One line per state: `payments: open on 3 of 5 instances (edge-2,
    /// edge-4, edge-5) for 42 s`, or `inventory: closed on all 5
    /// instances`; `now_ms` is the wall clock in ms since the epoch.
    pub fn lines(&self, now_ms: u64) -> Vec<String> {
        let (name, total) = (&self.name, self.instances);
        if let [only] = self.states.as_slice()
            && only.state == "closed"
        {
            return vec![format!("{name}: closed on all {total} instances")];
        }
        self.states
            .iter()
            .map(|s| {
                let secs = now_ms.saturating_sub(s.since_ms) / 1000;
                format!(
                    "{name}: {} on {} of {total} instances ({}) for {secs} s",
                    s.state,
                    s.instances.len(),
                    s.instances.join(", ")
                )
            })
            .collect()
    }
}
