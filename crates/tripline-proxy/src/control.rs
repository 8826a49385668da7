//! The control side: what changes the proxy while it serves — the admin
//! API and dashboard, reloads, pushed breaker parameters and DNS
//! refreshes. Each acts through the table handle: it builds and publishes
//! a new [`Table`](crate::table::Table), or acts on the shared breakers and
//! clusters the table in force carries.

pub(crate) mod admin;
pub(crate) mod config_source;
pub(crate) mod discovery;
pub(crate) mod dns;
pub(crate) mod health;
pub(crate) mod reload;
pub(crate) mod supervise;

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use tripline::clock::SharedClock;

use crate::config::ProxyConfig;
use crate::http::drain::DrainSwitch;
use crate::table::Table;
use crate::table::fault::Faults;
use crate::table::metrics::ProxyMetrics;

/// What the control side holds: the table handle it publishes new tables
/// through, and the state it keeps across them.
pub(crate) struct Control {
    /// The config the proxy started with: its listeners, admin listener,
    /// process-wide settings and access log (a reload does not rebind;
    /// a change to them is reported as needing a restart).
    pub(crate) config: ProxyConfig,
    /// The table in force, which the data side loads per request.
    pub(crate) table: Arc<ArcSwap<Table>>,
    /// The clock of every breaker, budget, outlier detector and fault TTL.
    pub(crate) clock: SharedClock,
    /// Reloads one at a time.
    pub(crate) reloading: Mutex<()>,
    /// The exporter (served at `/metrics`) and the proxy's counters.
    pub(crate) metrics: Arc<ProxyMetrics>,
    /// Faults injected for drills: configured, and added at run time.
    pub(crate) faults: Arc<Faults>,
    /// The admin API's token, event hub and audit log.
    pub(crate) admin: admin::AdminState,
    /// The applier of pushed breaker parameters (`[config_source]`).
    pub(crate) config_source: Option<config_source::ConfigSource>,
    /// What the DNS refreshers follow: reloads update it (their clusters
    /// may be added, rebuilt or removed), the refreshers' supervisor runs it.
    pub(crate) dns: dns::Dns,
    /// The clusters whose endpoints come from a registry (ZooKeeper).
    pub(crate) discovery: discovery::Discoveries,
    /// What the health checkers found, by cluster (their supervisor
    /// writes it; the admin API and `/metrics` read it).
    pub(crate) health: health::Health,
    /// The operator's drain (`POST /api/drain`), read by the data side.
    pub(crate) drain: DrainSwitch,
}

impl Control {
    /// The config in force (the last one loaded: reloads replace it).
    pub(crate) fn config_in_force(&self) -> Arc<ProxyConfig> {
        self.table.load().config.clone()
    }
}
