//! The data side: what a request goes through, from the listener to the
//! upstream and back. It reads the [`Table`](crate::table::Table) in
//! force, loaded once per request, and writes to the sinks its context
//! carries (the access log, the counters); it never imports the control
//! side, which changes its behaviour only by publishing a new table.

pub(crate) mod access_log;
pub(crate) mod forward;
pub(crate) mod server;
pub(crate) mod smuggling;

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::config::ProxySection;
use crate::data::access_log::AccessLog;
use crate::http::coarse_timer::CoarseTimers;
use crate::http::drain::DrainSwitch;
use crate::table::Table;
use crate::table::fault::Faults;
use crate::table::metrics::ProxyMetrics;
use crate::upstream::connect_log::ConnectFailureLog;

/// What the request path reads besides the request: the table in force
/// and the sinks it writes to. Nothing here changes what a request does
/// except the table, which the control side replaces whole.
pub(crate) struct Ctx {
    /// Routes, clusters and their clients; loaded once per request.
    pub(crate) table: Arc<ArcSwap<Table>>,
    /// `[proxy]`: process-wide settings, fixed at start.
    pub(crate) settings: ProxySection,
    /// The proxy's own counters (shared with the admin listener's
    /// `/metrics`).
    pub(crate) metrics: Arc<ProxyMetrics>,
    /// Faults injected for drills (shared with the admin API that adds
    /// them at run time).
    pub(crate) faults: Arc<Faults>,
    /// One line per request, written off the request path.
    pub(crate) access_log: AccessLog,
    /// Rate-limits the log lines of failed upstream connections.
    pub(crate) connect_log: ConnectFailureLog,
    /// The operator's drain: HTTP/1 connections close after their answer.
    pub(crate) drain: DrainSwitch,
    /// Ends tries at the default limit of a route that sets none, without
    /// a timer of the runtime's per try (see the coarse timer's docs).
    pub(crate) coarse: Arc<CoarseTimers>,
}
