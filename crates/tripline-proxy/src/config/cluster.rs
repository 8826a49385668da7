//! A cluster: the endpoints that serve routes, how calls are spread over
//! them, and their per-endpoint breakers and outlier detection.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tripline::CircuitBreakerConfig;
use tripline::cluster::Balancer;
use tripline::outlier::OutlierConfig;

/// One cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterSection {
    /// Endpoints, `host:port`: an IP address, or a name — resolved when
    /// connecting, or every `dns_refresh` into one endpoint per address.
    pub endpoints: Vec<String>,
    /// How often endpoint names are resolved again; the cluster's endpoints
    /// follow the answers (an address that stays keeps its breaker and
    /// outlier state). Absent: names are resolved by each new connection,
    /// and a name is one endpoint whatever it resolves to.
    #[serde(
        default,
        with = "tripline::clock::duration_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub dns_refresh: Option<Duration>,
    /// TLS to the endpoints (HTTPS, and HTTP/2 when ALPN picks `h2`);
    /// absent: cleartext.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<super::ClusterTls>,
    /// How requests are spread over the endpoints.
    pub balancer: BalancerName,
    /// The protocol spoken to the endpoints.
    pub protocol: UpstreamProtocol,
    /// Below this share of routable endpoints (percent), health is ignored
    /// and traffic spreads over every endpoint; 0 never panics.
    pub panic_threshold_percent: Option<u32>,
    /// The template of every endpoint's breaker (library vocabulary).
    pub breaker: Option<CircuitBreakerConfig>,
    /// Outlier detection (library vocabulary); absent: off.
    pub outlier: Option<OutlierConfig>,
    /// Endpoints from a registry instead of `endpoints`: Dubbo providers
    /// followed in ZooKeeper (`{ zookeeper = "host:port", path =
    /// "/dubbo/<interface>/providers", protocol = "tri" }`). Providers
    /// that stay keep their state; see the discovery module.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discovery: Option<tripline_discovery::ZooKeeperDiscovery>,
    /// Active health checks of every endpoint, off the request path; an
    /// endpoint that fails them is not routed (see the health module).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health_check: Option<super::HealthCheckSection>,
    /// Overflow limits of the whole cluster (Envoy's circuit-breaking
    /// thresholds); absent: none (see the limits module).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<super::ClusterLimits>,
    /// Each endpoint's concurrency limit and queue (HAProxy's `maxconn`);
    /// absent: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint_limits: Option<super::EndpointLimits>,
}

/// The protocol the proxy speaks to a cluster's endpoints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamProtocol {
    /// HTTP/1.1, a keep-alive pool of connections per endpoint.
    #[default]
    Http1,
    /// HTTP/2 over cleartext with prior knowledge: one multiplexed
    /// connection per endpoint (for gRPC and HTTP/2-only services).
    H2c,
}

/// The balancers a proxy cluster offers, by their config names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BalancerName {
    /// Each endpoint in turn.
    #[default]
    RoundRobin,
    /// The endpoint with the fewest requests in flight.
    LeastOutstanding,
    /// The less loaded of two random endpoints (power of two choices).
    #[serde(alias = "power_of_two_choices")]
    P2c,
    /// At random, in proportion to the endpoints' weights (a registry's,
    /// such as Dubbo's `weight`): Dubbo's default `random` balancer.
    WeightedRandom,
    /// In turn, as often as each endpoint's weight says, spread out:
    /// Dubbo's `roundrobin`.
    WeightedRoundRobin,
}

impl BalancerName {
    /// The library's balancer.
    pub fn balancer(self) -> Balancer {
        match self {
            BalancerName::RoundRobin => Balancer::RoundRobin,
            BalancerName::LeastOutstanding => Balancer::LeastOutstanding,
            BalancerName::P2c => Balancer::PowerOfTwoChoices,
            BalancerName::WeightedRandom => Balancer::WeightedRandom,
            BalancerName::WeightedRoundRobin => Balancer::WeightedRoundRobin,
        }
    }
}

impl ClusterSection {
    /// The library's cluster config: one endpoint per address, its id the
    /// address itself (so events and rejections name it).
    pub fn to_library(&self, name: &str) -> tripline::cluster::ClusterConfig {
        let defaults = tripline::cluster::ClusterConfig::default();
        let mut breaker = self.breaker.clone().unwrap_or_default();
        // Unnamed (or left at the library's default name): the cluster's
        // name, so endpoint breakers are `<cluster>:<endpoint>` and two
        // clusters' families never share a name.
        let unnamed = breaker.name.is_empty()
            || breaker.name == tripline::CircuitBreakerConfig::default().name;
        if unnamed || self.breaker.is_none() {
            breaker.name = name.to_owned();
        }
        tripline::cluster::ClusterConfig {
            name: name.to_owned(),
            balancer: self.balancer.balancer(),
            panic_threshold_percent: self
                .panic_threshold_percent
                .unwrap_or(defaults.panic_threshold_percent),
            breaker,
            outlier: self.outlier.clone(),
            endpoints: self
                .endpoints
                .iter()
                .map(|a| tripline::cluster::EndpointConfig::new(a.clone(), a.clone()))
                .collect(),
        }
    }
}
