//! The fleet's breakers at a glance, summed from the instances' status
//! reports: for each breaker, each state it is in somewhere, on which
//! instances and since when; for each registry family, whether an
//! operator holds it whole, where, and since when. `tripline config status --breakers` prints
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
    /// `open`, `half_open`, `forced_open`, `closed`, …; for a registry
    /// family, the state an operator holds all its breakers in, or
    /// [`AUTOMATIC`] when none is.
    pub state: String,
    /// The instances in it, by id.
    pub instances: Vec<String>,
    /// Since when the longest of them has been in it (ms since the epoch).
    pub since_ms: u64,
}

/// A family's state in the fleet view when no operator holds it: its
/// breakers run by themselves, each in its own state.
pub const AUTOMATIC: &str = "automatic";

/// Whether a state needs no one's attention (closed, or a family in
/// automatic operation): listed last, and summed into one "on all" line.
fn calm(state: &str) -> bool {
    state == "closed" || state == AUTOMATIC
}

/// The fleet's breakers and registry families, by name.
pub fn fleet_view(fleet: &[InstanceStatus]) -> Vec<FleetBreaker> {
    let mut seen: BTreeMap<&str, BTreeMap<&str, FleetState>> = BTreeMap::new();
    for status in fleet {
        let breakers = status
            .breakers
            .iter()
            .map(|b| (b.name.as_str(), b.state.as_str(), b.since_ms));
        let families = status.families.iter().map(|f| {
            let held = f.held.as_deref().unwrap_or(AUTOMATIC);
            (f.name.as_str(), held, f.since_ms)
        });
        for (name, state_name, since_ms) in breakers.chain(families) {
            let state = seen
                .entry(name)
                .or_default()
                .entry(state_name)
                .or_insert_with(|| FleetState {
                    state: state_name.to_owned(),
                    instances: Vec::new(),
                    since_ms,
                });
            state.instances.push(status.instance.clone());
            state.since_ms = state.since_ms.min(since_ms);
        }
    }
    seen.into_iter()
        .map(|(name, states)| {
            let mut states: Vec<FleetState> = states.into_values().collect();
            // What needs looking at first: every state but the calm ones.
            states.sort_by_key(|s| calm(&s.state));
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
            && calm(&only.state)
        {
            return vec![format!("{name}: {} on all {total} instances", only.state)];
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
