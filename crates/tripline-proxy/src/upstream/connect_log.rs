//! One log line per endpoint that cannot be connected to, at most every
//! [`EVERY`].
//!
//! A dead endpoint fails every connection attempt; a line per attempt
//! would bury the log at the moment a person reads it. The first failure
//! is logged at once, naming the cluster, the endpoint and the error; the
//! next line for that endpoint comes [`EVERY`] later at the earliest and
//! says how many failures it left out (`suppressed`). The time is the
//! proxy's clock (a [`ManualClock`](tripline::ManualClock) in tests). Only
//! the failure path pays for it: one lock and one map look-up.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tripline::Timestamp;

/// The shortest interval between two lines about one endpoint.
pub(crate) const EVERY: Duration = Duration::from_secs(10);

/// Endpoints remembered at most; past it the memory starts over (a DNS
/// cluster whose addresses keep changing must not grow it forever).
const MAX_ENDPOINTS: usize = 4096;

/// When each endpoint's last line was written, and the failures since.
#[derive(Default)]
pub(crate) struct ConnectFailureLog {
    /// By (cluster, endpoint).
    last: Mutex<HashMap<(String, String), (Timestamp, u64)>>,
}

impl ConnectFailureLog {
    /// Notes a failed connection to `endpoint` of `cluster` at `now`, and
    /// logs it unless a line about that endpoint was written less than
    /// [`EVERY`] ago.
    pub(crate) fn connect_failed(
        &self,
        cluster: &str,
        endpoint: &str,
        route: &str,
        error: &dyn std::fmt::Display,
        now: Timestamp,
    ) {
        let suppressed = {
            let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
            if last.len() >= MAX_ENDPOINTS {
                last.clear();
            }
            let key = (cluster.to_owned(), endpoint.to_owned());
            match last.get_mut(&key) {
                Some((at, left_out)) if now.saturating_duration_since(*at) < EVERY => {
                    *left_out += 1;
                    return;
                }
                Some((at, left_out)) => {
                    *at = now;
                    std::mem::take(left_out)
                }
                None => {
                    last.insert(key, (now, 0));
                    0
                }
            }
        };
        tracing::warn!(
            target: "tripline_proxy::upstream",
            cluster,
            endpoint,
            route,
            error = %error,
            suppressed,
            "cannot connect to {endpoint} (cluster {cluster}): {error}"
        );
    }
}
