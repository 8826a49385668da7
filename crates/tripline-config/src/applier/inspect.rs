//! What the applier knows about one name it manages, for an operator's
//! view of a breaker (the proxy's `GET /api/breakers`): is it managed, did
//! a pushed document configure it and which one, is an override in force.

use serde::{Deserialize, Serialize};

use super::{Applier, OverrideHolder};
use crate::document::FleetOverride;

/// The document version that last installed a name's config.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushedAt {
    /// The applier's config version that document became (the version a
    /// rollback names).
    pub version: u64,
    /// The source it came from (`file`, `etcd`, `api`, `rollback`).
    pub source: String,
    /// The source's revision of the document, if it has one.
    pub revision: Option<String>,
}

/// One managed name as the applier sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManagedStatus {
    /// The name the applier manages it under (a family's name for each of
    /// its breakers).
    pub name: String,
    /// Whether the name is a registry family (every breaker on one
    /// template) rather than one breaker.
    pub family: bool,
    /// The document that last configured this name; `None` while it runs
    /// its owner's config because no document named it yet.
    pub pushed: Option<PushedAt>,
    /// Whether an operator override made through
    /// [`Applier::force_open`] is in force (pushes leave its state alone
    /// until [`Applier::clear_override`]).
    pub overridden: bool,
    /// Which override holds the breaker now: this instance's operator's,
    /// the fleet's, or none.
    pub holds: Option<OverrideHolder>,
    /// The fleet override that names it and has not expired, if any
    /// (held or not: a local override may hold over it).
    pub fleet_override: Option<FleetOverride>,
}

impl Applier {
    /// The configs this instance's breakers started with — their owners'
    /// (the proxy file's), or the library's defaults for those the applier
    /// built — by name: what a pushed table patches here.
    pub fn bases(&self) -> std::collections::BTreeMap<String, tripline::CircuitBreakerConfig> {
        let core = self.core();
        core.breakers
            .iter()
            .map(|(name, m)| (name.clone(), m.base.clone()))
            .collect()
    }

    /// A short digest of [`bases`](Self::bases): instances with the same
    /// one are of one kind, and a pushed document changes them alike.
    pub fn kind(&self) -> String {
        let bytes = serde_json::to_vec(&self.bases()).unwrap_or_default();
        format!("{:016x}", crate::rollout::fnv1a(&bytes))
    }

    /// What the applier knows about `name`; `None` if it does not manage
    /// it (its owner never handed it over, or released it).
    pub fn managed_status(&self, name: &str) -> Option<ManagedStatus> {
        let now = self.wall_now();
        let core = self.core();
        let managed = core.breakers.get(name)?;
        let holds = if managed.overridden {
            Some(OverrideHolder::Local)
        } else {
            managed.fleet.map(|_| OverrideHolder::Fleet)
        };
        Some(ManagedStatus {
            name: name.to_owned(),
            family: managed.breaker().is_none(),
            pushed: core.pushed_at.get(name).cloned(),
            overridden: managed.overridden,
            holds,
            fleet_override: core
                .fleet_overrides
                .iter()
                .find(|o| o.breaker == name && o.until > now)
                .cloned(),
        })
    }
}
