//! The etcd source: one key holds the config document; every instance
//! watches it, applies each new revision, and reports what it applied
//! under a leased status key.
//!
//! Keys under a prefix `P`:
//!
//! - `P/config`: the document (TOML or JSON). Watched from the revision
//!   after the last one seen, so a dropped connection or an etcd restart
//!   loses no update: the watch is re-created from that revision after a
//!   backoff (100 ms doubling to 5 s). If etcd compacted it away, the key
//!   is read afresh instead.
//! - `P/kinds/<kind>`: the configs an instance's breakers started with
//!   (what pushed tables patch), written once per kind by the first
//!   instance of it (instances with the same own configs share a kind):
//!   what `tripline config push --dry-run` lays a document on.
//! - `P/status/<instance>`: this instance's [`InstanceStatus`](crate::InstanceStatus) as JSON,
//!   written every status interval under a lease that is kept alive, so a
//!   stopped instance disappears from `tripline config status` once its
//!   lease expires.
//!
//! Only the config key is watched, not all of `P`: watching the status
//! keys would send every instance every peer's heartbeat. A baking canary
//! reads the peers' status once per interval instead.
//!
//! A value that is not UTF-8, too large or invalid is refused by the
//! applier like any document; the watch carries on.

mod gateway;
mod status;
mod watch;

use std::time::Duration;

use tokio::task::JoinHandle;

pub use gateway::{EtcdError, Gateway, KeyValue, TxnOp, TxnOutcome};
pub use status::{document_at, fleet_status, kind_bases, push_document};

use crate::applier::Applier;

/// Where and how often an [`EtcdSource`] talks to etcd.
///
/// ```
/// use tripline_config::EtcdOptions;
///
/// let options = EtcdOptions::new("http://127.0.0.1:2379", "/tripline/payments/");
/// assert_eq!(options.config_key(), "/tripline/payments/config");
/// assert_eq!(options.status_key("web-1"), "/tripline/payments/status/web-1");
/// ```
#[derive(Clone, Debug)]
pub struct EtcdOptions {
    /// The gateway endpoint, `http://127.0.0.1:2379`.
    pub endpoint: String,
    /// The key prefix (`/tripline/payments`); the document is `<prefix>/config`.
    pub prefix: String,
    /// TTL of the status key's lease: how long a dead instance stays listed.
    pub lease_ttl: Duration,
    /// How often the status key is rewritten and rollout steps advance.
    pub status_interval: Duration,
    /// Limit of each unary call (and of connecting).
    pub request_timeout: Duration,
}

impl EtcdOptions {
    /// Options for `endpoint` and `prefix` with a 10 s lease, a 1 s status
    /// interval and 5 s call limit.
    pub fn new(endpoint: impl Into<String>, prefix: impl Into<String>) -> Self {
        EtcdOptions {
            endpoint: endpoint.into(),
            prefix: prefix.into().trim_end_matches('/').to_owned(),
            lease_ttl: Duration::from_secs(10),
            status_interval: Duration::from_secs(1),
            request_timeout: Duration::from_secs(5),
        }
    }

    /// The document's key.
    pub fn config_key(&self) -> String {
        config_key(&self.prefix)
    }

    /// This instance's status key.
    pub fn status_key(&self, instance: &str) -> String {
        format!("{}/status/{instance}", self.prefix)
    }
}

pub(crate) fn config_key(prefix: &str) -> String {
    format!("{}/config", prefix.trim_end_matches('/'))
}

pub(crate) fn status_prefix(prefix: &str) -> String {
    format!("{}/status/", prefix.trim_end_matches('/'))
}

/// The running watch, status and override-timer tasks; dropping it stops them.
///
/// ```no_run
/// # async fn run() {
/// use tripline_config::{Applier, EtcdOptions, EtcdSource};
///
/// let applier = Applier::builder().instance_id("web-1").build();
/// let _etcd = EtcdSource::spawn(applier.clone(),
///                               EtcdOptions::new("http://127.0.0.1:2379", "/tripline"));
/// // ... breakers follow `/tripline/config` until `_etcd` is dropped.
/// # }
/// ```
pub struct EtcdSource {
    watch: JoinHandle<()>,
    status: JoinHandle<()>,
    timer: JoinHandle<()>,
}

impl EtcdSource {
    /// Starts watching and reporting on the current tokio runtime.
    pub fn spawn(applier: Applier, options: EtcdOptions) -> EtcdSource {
        let gateway = Gateway::new(options.endpoint.clone(), options.request_timeout);
        let watch = tokio::spawn(watch::run(
            gateway.clone(),
            applier.clone(),
            options.clone(),
        ));
        let timer = tokio::spawn(applier.clone().run_override_timer());
        let status = tokio::spawn(status::run(gateway, applier, options));
        EtcdSource {
            watch,
            status,
            timer,
        }
    }
}

impl Drop for EtcdSource {
    fn drop(&mut self) {
        self.watch.abort();
        self.status.abort();
        self.timer.abort();
    }
}
