//! The `discovery` section of a cluster: where its providers are listed.
//!
//! ```toml
//! discovery = { zookeeper = "127.0.0.1:2181", path = "/dubbo/com.example.OrderService/providers", protocol = "tri" }
//! ```
//!
//! Validation names the field and the constraint (`discovery.zookeeper:
//! expected host:port`), so the proxy can prefix its own place
//! (`clusters.orders.`) and a line number.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tripline::clock::duration_serde;

/// Where a cluster's endpoints come from in ZooKeeper, as Dubbo registers
/// its providers. Plain data: [`ZooKeeperDiscovery::validate`] checks it,
/// [`crate::spawn`] follows it.
///
/// ```
/// use tripline_discovery::{Protocol, ZooKeeperDiscovery};
///
/// let d: ZooKeeperDiscovery = toml::from_str(r#"
///     zookeeper = "127.0.0.1:2181"
///     path = "/dubbo/com.example.OrderService/providers"
///     protocol = "tri"
///     grace = "10s"
/// "#).unwrap();
/// d.validate().unwrap();
/// assert_eq!(d.protocol, Protocol::Tri);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZooKeeperDiscovery {
    /// The ensemble, `host:port[,host:port…]`, as ZooKeeper's own clients
    /// take it (no chroot: the path says where).
    pub zookeeper: String,
    /// The providers' folder: `/dubbo/<interface>/providers`.
    pub path: String,
    /// Which providers to keep: Dubbo registers one URL per protocol a
    /// provider serves, and the proxy can call only some of them.
    pub protocol: Protocol,
    /// How long a provider that left ZooKeeper stays an endpoint: a
    /// restart that re-registers within it keeps the endpoint's state. None
    /// (the default): it leaves at once.
    #[serde(
        default,
        with = "duration_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub grace: Option<Duration>,
    /// The ZooKeeper session's timeout: how long the ensemble keeps the
    /// session (and its watches) across a lost connection. Default 10 s.
    #[serde(default = "default_session_timeout", with = "duration_serde")]
    pub session_timeout: Duration,
}

fn default_session_timeout() -> Duration {
    Duration::from_secs(10)
}

/// The provider protocols a cluster can follow.
///
/// ```
/// use tripline_discovery::Protocol;
///
/// assert_eq!(Protocol::Tri.scheme(), "tri");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// Dubbo 3's Triple: gRPC-compatible HTTP/2, which the proxy forwards.
    Tri,
    /// Dubbo's binary protocol (Hessian over its own framing).
    Dubbo,
    /// Plain gRPC.
    Grpc,
    /// HTTP/REST.
    Rest,
}

impl Protocol {
    /// The URL scheme Dubbo writes for it.
    pub fn scheme(self) -> &'static str {
        match self {
            Protocol::Tri => "tri",
            Protocol::Dubbo => "dubbo",
            Protocol::Grpc => "grpc",
            Protocol::Rest => "rest",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.scheme())
    }
}

/// A discovery section that cannot be followed: which field, and why.
///
/// ```
/// use tripline_discovery::ZooKeeperDiscovery;
///
/// let section = ZooKeeperDiscovery::new("zk-1", "/dubbo/com.example.OrderService/providers");
/// let e = section.validate().unwrap_err();
/// assert_eq!(e.field, "discovery.zookeeper");
/// assert_eq!(e.to_string(), r#"discovery.zookeeper: expected host:port, got "zk-1""#);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {constraint}")]
pub struct ConfigError {
    /// Dotted, from `discovery` (`discovery.path`).
    pub field: String,
    /// What the value must be.
    pub constraint: String,
}

fn refuse(field: &str, constraint: impl Into<String>) -> ConfigError {
    ConfigError {
        field: format!("discovery.{field}"),
        constraint: constraint.into(),
    }
}

impl ZooKeeperDiscovery {
    /// A section for `zookeeper` and `path`, `tri`, no grace, 10 s session.
    pub fn new(zookeeper: impl Into<String>, path: impl Into<String>) -> Self {
        ZooKeeperDiscovery {
            zookeeper: zookeeper.into(),
            path: path.into(),
            protocol: Protocol::Tri,
            grace: None,
            session_timeout: default_session_timeout(),
        }
    }

    /// Checks every field, naming the first one that is wrong.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.zookeeper.trim().is_empty() {
            return Err(refuse(
                "zookeeper",
                "expected host:port[,host:port…], got nothing",
            ));
        }
        for server in self.zookeeper.split(',') {
            let ok = server.trim().rsplit_once(':').is_some_and(|(host, port)| {
                !host.is_empty() && !host.contains('/') && port.parse::<u16>().is_ok_and(|p| p > 0)
            });
            if !ok {
                return Err(refuse(
                    "zookeeper",
                    format!("expected host:port, got {:?}", server.trim()),
                ));
            }
        }
        let segments: Vec<&str> = self.path.split('/').collect();
        let providers_path = self.path.starts_with('/')
            && segments.last() == Some(&"providers")
            && segments.len() >= 3
            && segments[1..].iter().all(|s| !s.is_empty());
        if !providers_path {
            return Err(refuse(
                "path",
                format!(
                    "expected a providers path like /dubbo/<interface>/providers, got {:?}",
                    self.path
                ),
            ));
        }
        if self
            .grace
            .is_some_and(|g| g > Duration::from_secs(24 * 3600))
        {
            return Err(refuse("grace", "must be at most 24h"));
        }
        let session = self.session_timeout;
        if session < Duration::from_millis(100) || session > Duration::from_secs(600) {
            return Err(refuse("session_timeout", "must be between 100ms and 10m"));
        }
        Ok(())
    }
}
