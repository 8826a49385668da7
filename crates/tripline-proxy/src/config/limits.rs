//! A cluster's overflow limits: how much of the proxy one cluster may hold
//! at once, so that a slow dependency fills its own limits and is refused
//! there instead of taking every connection and task of the proxy.
//!
//! ```toml
//! limits = { max_requests = 1000, max_connections = 100, max_pending_requests = 50, max_retries = 3 }
//! endpoint_limits = { max_concurrent = 20, max_queue = 10, queue_timeout = "1s" }
//! ```
//!
//! Envoy's `circuit_breakers` thresholds, per cluster, and HAProxy's
//! per-server `maxconn` with its queue, per endpoint. Each field absent
//! sets no limit; none is 0. A request over a limit is answered 503
//! `upstream_overflow` (flag `UO`): the proxy's own refusal, booked on no
//! breaker and no outlier detector.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// `limits`: the cluster's thresholds (Envoy's semantics).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterLimits {
    /// Requests in flight to the cluster at once, from the first try to
    /// the end of the answer's body; one more is refused at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_requests: Option<u32>,
    /// Upstream HTTP/1.1 connections in use at once: one per request in
    /// flight, as HTTP/1.1 carries one request per connection at a time.
    /// A request that finds them all taken waits its turn (first come,
    /// first served, within its deadline) if fewer than
    /// `max_pending_requests` wait; else it is refused. HTTP/2 clusters
    /// multiplex every request over one connection per endpoint and take
    /// `max_requests` instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<u32>,
    /// Requests waiting for a connection at once (with
    /// `max_connections`); absent, any number wait, each within its
    /// deadline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pending_requests: Option<u32>,
    /// Retries in flight to the cluster at once; a retry over it is not
    /// sent, and the failed try's answer stands (as when the retry budget
    /// refuses).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
}

/// `endpoint_limits`: each endpoint's (HAProxy's server `maxconn`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EndpointLimits {
    /// Tries in flight to one endpoint at once, to the end of the
    /// answer's body.
    pub max_concurrent: u32,
    /// Tries that may wait for one endpoint at once (first come, first
    /// served); 0 refuses at once.
    pub max_queue: u32,
    /// How long a try may wait for its endpoint (cut by its deadline).
    #[serde(with = "tripline::clock::duration_serde")]
    pub queue_timeout: Duration,
}

impl Default for EndpointLimits {
    /// No queue; a second's wait when one is set.
    fn default() -> Self {
        EndpointLimits {
            max_concurrent: 0,
            max_queue: 0,
            queue_timeout: Duration::from_secs(1),
        }
    }
}

impl ClusterLimits {
    /// Refuses a limit of 0, and a pending limit without connections to
    /// wait for, naming the field.
    pub(super) fn validate(&self, at: &str, h2c: bool) -> Result<(), ConfigError> {
        for (field, value) in [
            ("max_requests", self.max_requests),
            ("max_connections", self.max_connections),
            ("max_pending_requests", self.max_pending_requests),
            ("max_retries", self.max_retries),
        ] {
            if value == Some(0) {
                return Err(ConfigError::invalid(
                    format!("{at}.{field}"),
                    "must be at least 1 (leave it out for no limit)",
                ));
            }
        }
        if self.max_pending_requests.is_some() && self.max_connections.is_none() {
            return Err(ConfigError::invalid(
                format!("{at}.max_pending_requests"),
                "bounds the requests waiting for a connection: set max_connections too",
            ));
        }
        if h2c && self.max_connections.is_some() {
            return Err(ConfigError::invalid(
                format!("{at}.max_connections"),
                "an h2c cluster multiplexes its requests over one connection per endpoint: bound them with max_requests",
            ));
        }
        Ok(())
    }
}

impl EndpointLimits {
    /// Refuses a concurrency of 0 and a queue that can never be waited
    /// in, naming the field.
    pub(super) fn validate(&self, at: &str) -> Result<(), ConfigError> {
        if self.max_concurrent == 0 {
            return Err(ConfigError::invalid(
                format!("{at}.max_concurrent"),
                "must be at least 1",
            ));
        }
        if self.max_queue > 0 && self.queue_timeout.is_zero() {
            return Err(ConfigError::invalid(
                format!("{at}.queue_timeout"),
                "must be more than 0 when max_queue lets tries wait",
            ));
        }
        Ok(())
    }
}
