//! Faults switched on at run time through the admin listener. Each has a
//! time to live: a drill whose driver dies never leaves one switched on.

use std::time::Duration;

use serde::Serialize;
use tripline::Timestamp;

use crate::config::FaultSection;

/// The longest a runtime fault may live: long enough for any drill,
/// short enough that a forgotten one ends the same hour.
pub const MAX_TTL: Duration = Duration::from_secs(3600);

/// A fault switched on through `POST /api/faults`.
#[derive(Clone, Debug)]
pub(crate) struct RuntimeFault {
    pub(crate) id: u64,
    pub(crate) route: String,
    pub(crate) fault: FaultSection,
    pub(crate) expires: Timestamp,
}

/// How `GET /api/faults` shows one fault.
#[derive(Serialize)]
pub(crate) struct Listed<'a> {
    id: u64,
    route: &'a str,
    #[serde(flatten)]
    fault: &'a FaultSection,
    remaining_ms: u128,
}

impl RuntimeFault {
    pub(crate) fn live(&self, now: Timestamp) -> bool {
        now < self.expires
    }

    pub(crate) fn listed(&self, now: Timestamp) -> Listed<'_> {
        Listed {
            id: self.id,
            route: &self.route,
            fault: &self.fault,
            remaining_ms: self.expires.saturating_duration_since(now).as_millis(),
        }
    }
}
