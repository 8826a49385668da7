//! A cluster's `health_check`: how the proxy probes each endpoint off the
//! request path, so that an endpoint that is down but idle is taken out
//! before a request finds it down.
//!
//! ```toml
//! health_check = { http = { path = "/healthz", expect = [200] }, interval = "5s",
//!                  timeout = "1s", jitter = "10%", unhealthy_threshold = 3, healthy_threshold = 2 }
//! ```
//!
//! Exactly one kind: `http` (a GET whose status must be in `expect`),
//! `tcp` (a connect) or `grpc` (`grpc.health.v1.Health/Check`, SERVING).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// One cluster's active health check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HealthCheckSection {
    /// A GET on the endpoint; passes when the status is expected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpCheck>,
    /// A TCP connect; passes when the endpoint accepts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpCheck>,
    /// The standard gRPC health service over h2c; passes on SERVING.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcCheck>,
    /// Time between two checks of one endpoint.
    #[serde(with = "tripline::clock::duration_serde")]
    pub interval: Duration,
    /// How long one check may take before it fails; at most `interval`,
    /// so checks of one endpoint never overlap.
    #[serde(with = "tripline::clock::duration_serde")]
    pub timeout: Duration,
    /// How much each wait is moved at random, as a share of `interval`
    /// (`"10%"`): endpoints checked in step would load a recovering
    /// service in bursts.
    pub jitter: String,
    /// Consecutive failed checks that take a healthy endpoint out.
    pub unhealthy_threshold: u32,
    /// Consecutive passed checks that bring an unhealthy endpoint back.
    pub healthy_threshold: u32,
}

impl Default for HealthCheckSection {
    /// Envoy's usual numbers: every 5 s, 1 s to answer, 3 failures out,
    /// 2 passes back.
    fn default() -> Self {
        HealthCheckSection {
            http: None,
            tcp: None,
            grpc: None,
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(1),
            jitter: "10%".to_owned(),
            unhealthy_threshold: 3,
            healthy_threshold: 2,
        }
    }
}

/// `http = { path, expect }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpCheck {
    /// The path (and query) requested.
    pub path: String,
    /// The statuses that pass.
    pub expect: Vec<u16>,
}

impl Default for HttpCheck {
    fn default() -> Self {
        HttpCheck {
            path: "/healthz".to_owned(),
            expect: vec![200],
        }
    }
}

/// `tcp = {}`: nothing to set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpCheck {}

/// `grpc = { service }`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrpcCheck {
    /// The service asked about; empty: the server as a whole.
    pub service: String,
}

/// The kind of check, once validated.
#[derive(Clone, Debug, PartialEq)]
pub enum CheckKind {
    /// See [`HttpCheck`].
    Http(HttpCheck),
    /// A TCP connect.
    Tcp,
    /// See [`GrpcCheck`].
    Grpc(GrpcCheck),
}

impl HealthCheckSection {
    /// The one kind set (validation refuses none or several).
    pub fn kind(&self) -> CheckKind {
        match (&self.http, &self.grpc) {
            (Some(h), _) => CheckKind::Http(h.clone()),
            (None, Some(g)) => CheckKind::Grpc(g.clone()),
            (None, None) => CheckKind::Tcp,
        }
    }

    /// `jitter` as a fraction of the interval (`"10%"` is 0.1).
    pub fn jitter_fraction(&self) -> Result<f64, String> {
        let number = self.jitter.trim().strip_suffix('%').ok_or_else(|| {
            format!(
                "must be a percentage such as \"10%\", got {:?}",
                self.jitter
            )
        })?;
        let percent: f64 = number.trim().parse().map_err(|_| {
            format!(
                "must be a percentage such as \"10%\", got {:?}",
                self.jitter
            )
        })?;
        if !(0.0..=100.0).contains(&percent) {
            return Err(format!(
                "must be between 0% and 100%, got {:?}",
                self.jitter
            ));
        }
        Ok(percent / 100.0)
    }

    /// Refuses a check that cannot run as written; `at` is the section's
    /// place in the file (`clusters.<name>.health_check`).
    pub(crate) fn validate(&self, at: &str) -> Result<(), ConfigError> {
        let kinds = [self.http.is_some(), self.tcp.is_some(), self.grpc.is_some()];
        if kinds.iter().filter(|k| **k).count() != 1 {
            return Err(ConfigError::invalid(
                at,
                "needs exactly one kind of check: `http = { path, expect }`, `tcp = {}` or `grpc = { service }`",
            ));
        }
        if self.interval.is_zero() {
            return Err(ConfigError::invalid(
                format!("{at}.interval"),
                "must be more than 0",
            ));
        }
        if self.timeout.is_zero() || self.timeout > self.interval {
            return Err(ConfigError::invalid(
                format!("{at}.timeout"),
                format!(
                    "must be more than 0 and at most the interval ({:?}), got {:?}",
                    self.interval, self.timeout
                ),
            ));
        }
        self.jitter_fraction()
            .map_err(|e| ConfigError::invalid(format!("{at}.jitter"), e))?;
        for (field, value) in [
            ("unhealthy_threshold", self.unhealthy_threshold),
            ("healthy_threshold", self.healthy_threshold),
        ] {
            if value == 0 {
                return Err(ConfigError::invalid(
                    format!("{at}.{field}"),
                    "must be at least 1",
                ));
            }
        }
        if let Some(http) = &self.http {
            if !http.path.starts_with('/') || http.path.chars().any(char::is_whitespace) {
                return Err(ConfigError::invalid(
                    format!("{at}.http.path"),
                    format!("must start with / and hold no spaces, got {:?}", http.path),
                ));
            }
            if http.expect.is_empty() || http.expect.iter().any(|s| !(100..=599).contains(s)) {
                return Err(ConfigError::invalid(
                    format!("{at}.http.expect"),
                    "must list at least one status, each from 100 to 599",
                ));
            }
        }
        Ok(())
    }
}
