//! `[config_source]`: where the proxy's breaker parameters are pushed
//! from at run time — a watched file or an etcd key — through
//! `tripline-config`'s applier.
//!
//! The proxy file stays the source of routes, clusters and which breakers
//! exist; a pushed document (`[[breaker]]` tables, the library's
//! vocabulary) changes the parameters of the breakers it names, live and
//! with their state kept, and wins over the file's parameters for the
//! breakers it names, through reloads (the crate docs' "Pushed breaker
//! parameters" section says how the two combine).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// Which kind of source feeds the breakers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfigSourceKind {
    /// A document file, watched (`path`).
    File,
    /// An etcd key, `<prefix>/config`, watched through etcd's v3 JSON
    /// gateway (`endpoint`, `prefix`); the instance reports what it
    /// applied under `<prefix>/status/<instance_id>`.
    Etcd,
}

/// `[config_source]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigSourceSection {
    /// `"file"` or `"etcd"`.
    pub kind: ConfigSourceKind,
    /// kind = file: the document's path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// kind = file: one apply per burst of writes within this.
    #[serde(default = "default_debounce", with = "tripline::clock::duration_serde")]
    pub debounce: Duration,
    /// kind = etcd: the client URL, `http://127.0.0.1:2379`. One endpoint:
    /// the JSON gateway is plain HTTP, so several members go behind one
    /// address (an `etcd grpc-proxy` or a load balancer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// kind = etcd: the key prefix; the document is `<prefix>/config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// kind = etcd: TTL of the status key's lease (how long a stopped
    /// proxy stays listed by `tripline config status`).
    #[serde(
        default = "default_lease_ttl",
        with = "tripline::clock::duration_serde"
    )]
    pub lease_ttl: Duration,
    /// How often rollout steps advance (and, with etcd, the status key is
    /// rewritten).
    #[serde(
        default = "default_status_interval",
        with = "tripline::clock::duration_serde"
    )]
    pub status_interval: Duration,
    /// This proxy's id in rollouts and status keys; default
    /// `<hostname>:<port of the first listener>`, stable across restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
}

fn default_debounce() -> Duration {
    Duration::from_millis(200)
}

fn default_lease_ttl() -> Duration {
    Duration::from_secs(10)
}

fn default_status_interval() -> Duration {
    Duration::from_secs(1)
}

impl ConfigSourceSection {
    /// Each kind's own fields present, the other kind's absent, durations
    /// above zero.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let at = |f: &str| format!("config_source.{f}");
        // (field, present) of the kind's own fields, and of the other kind's.
        type Fields<'a> = &'a [(&'a str, bool)];
        let (needed, foreign): (Fields<'_>, Fields<'_>) = match self.kind {
            ConfigSourceKind::File => (
                &[("path", self.path.is_some())],
                &[
                    ("endpoint", self.endpoint.is_some()),
                    ("prefix", self.prefix.is_some()),
                ],
            ),
            ConfigSourceKind::Etcd => (
                &[
                    ("endpoint", self.endpoint.is_some()),
                    ("prefix", self.prefix.is_some()),
                ],
                &[("path", self.path.is_some())],
            ),
        };
        let kind = match self.kind {
            ConfigSourceKind::File => "file",
            ConfigSourceKind::Etcd => "etcd",
        };
        for (field, present) in needed {
            if !present {
                return Err(ConfigError::invalid(
                    at(field),
                    format!("is required with kind = \"{kind}\""),
                ));
            }
        }
        for (field, present) in foreign {
            if *present {
                return Err(ConfigError::invalid(
                    at(field),
                    format!("does not apply to kind = \"{kind}\""),
                ));
            }
        }
        if let Some(endpoint) = &self.endpoint
            && !(endpoint.starts_with("http://") && endpoint.len() > "http://".len())
        {
            return Err(ConfigError::invalid(
                at("endpoint"),
                format!("must be an http:// URL of etcd's client port, got {endpoint:?}"),
            ));
        }
        if let Some(prefix) = &self.prefix
            && !prefix.starts_with('/')
        {
            return Err(ConfigError::invalid(
                at("prefix"),
                format!("must start with '/', got {prefix:?}"),
            ));
        }
        if self.instance_id.as_deref().is_some_and(str::is_empty) {
            return Err(ConfigError::invalid(at("instance_id"), "must not be empty"));
        }
        for (field, d) in [
            ("debounce", self.debounce),
            ("lease_ttl", self.lease_ttl),
            ("status_interval", self.status_interval),
        ] {
            if d.is_zero() {
                return Err(ConfigError::invalid(at(field), "must be more than zero"));
            }
        }
        if self.kind == ConfigSourceKind::Etcd && self.lease_ttl < self.status_interval * 2 {
            return Err(ConfigError::invalid(
                at("lease_ttl"),
                "must be at least twice status_interval, or the status key expires between reports",
            ));
        }
        Ok(())
    }
}
