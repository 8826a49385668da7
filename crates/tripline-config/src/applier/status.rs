//! What an instance reports about itself to the fleet: its config
//! version and last refusal, its rollout step, its traffic for canary
//! comparison, and a compact summary of its breakers (the fleet view).

use serde::{Deserialize, Serialize};

use super::Applier;
use crate::rollout::TrafficSample;

/// What an instance reports about itself: under its leased etcd status
/// key, and to `tripline config status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InstanceStatus {
    /// The instance id.
    pub instance: String,
    /// The config version in force.
    pub version: u64,
    /// The source revision of the last document applied.
    pub revision: Option<String>,
    /// Whether this instance runs the latest rollout as a canary.
    pub canary: bool,
    /// The rollout step in progress (`shadow`, `bake`), if any.
    pub phase: Option<String>,
    /// Why the last document was refused, if the last one was.
    pub last_error: Option<String>,
    /// Cumulative traffic of the owned breakers, for canary comparison.
    pub sample: TrafficSample,
    /// Each owned single breaker's state and since when: what
    /// `tripline config status --breakers` sums over the fleet. (Registry
    /// families are left out: their members come and go with traffic.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub breakers: Vec<BreakerSummary>,
    /// The registry families it owns, and which of them an operator holds
    /// whole: an override may name a family, so the tools that write
    /// overrides accept these names too, and the fleet view shows holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub families: Vec<FamilySummary>,
    /// The instance's kind ([`Applier::kind`]): its breakers' own configs
    /// are under `<prefix>/kinds/<kind>`, for `config push --dry-run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// One breaker in an instance's status: compact, since every instance
/// rewrites its status every interval.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerSummary {
    /// The breaker's name.
    pub name: String,
    /// Its state (`closed`, `open`, `half_open`, `forced_open`, …).
    pub state: String,
    /// When it entered that state, in milliseconds since the Unix epoch.
    pub since_ms: u64,
}

/// One registry family in an instance's status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FamilySummary {
    /// The family's name.
    pub name: String,
    /// The operator state every breaker of it is held in (`forced_open`,
    /// `disabled`, `metrics_only`); `None` in automatic operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
    /// When the hold began, in milliseconds since the Unix epoch (0 when
    /// not held).
    #[serde(default)]
    pub since_ms: u64,
}

impl Applier {
    /// This instance's status, as reported to the fleet.
    pub fn status(&self) -> InstanceStatus {
        let core = self.core();
        InstanceStatus {
            instance: self.shared.instance.clone(),
            version: core.version,
            revision: core.revision.clone(),
            canary: core.canary,
            phase: core.rollout.as_ref().map(|r| r.phase().name().to_owned()),
            last_error: core.last_error.clone(),
            sample: core.sample(),
            breakers: core
                .breakers
                .iter()
                .filter_map(|(name, m)| {
                    let metrics = m.breaker()?.metrics();
                    Some(BreakerSummary {
                        name: name.clone(),
                        state: metrics.state.as_str().to_owned(),
                        since_ms: self.epoch_ms(metrics.state_since),
                    })
                })
                .collect(),
            families: core
                .breakers
                .iter()
                .filter(|(_, m)| m.breaker().is_none())
                .map(|(name, m)| {
                    let hold = m.family_hold();
                    FamilySummary {
                        name: name.clone(),
                        held: hold.map(|(state, _)| state.as_str().to_owned()),
                        since_ms: hold.map_or(0, |(_, since)| self.epoch_ms(since)),
                    }
                })
                .collect(),
            kind: None,
        }
    }

    /// A time on the applier's clock as milliseconds since the Unix epoch.
    fn epoch_ms(&self, t: tripline::clock::Timestamp) -> u64 {
        (self.shared.wall_epoch + t.as_duration())
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}
