//! A cluster's `discovery` section against the rest of the cluster: the
//! registry's own checks, placed under the cluster, and what the proxy
//! cannot do with what it lists.

use tripline_discovery::Protocol;

use super::{ClusterSection, ConfigError};

/// Refuses a discovery section that cannot be followed, or a cluster that
/// says where its endpoints are twice.
pub(super) fn validate(at: &str, cluster: &ClusterSection) -> Result<(), ConfigError> {
    let Some(discovery) = &cluster.discovery else {
        return Ok(());
    };
    if !cluster.endpoints.is_empty() {
        return Err(ConfigError::invalid(
            format!("{at}.endpoints"),
            "a cluster takes its endpoints from `endpoints` or from `discovery`, not both",
        ));
    }
    if cluster.dns_refresh.is_some() {
        return Err(ConfigError::invalid(
            format!("{at}.dns_refresh"),
            "contradicts `discovery`: the registry lists addresses, not names to resolve",
        ));
    }
    discovery
        .validate()
        .map_err(|e| ConfigError::invalid(format!("{at}.{}", e.field), e.constraint))?;
    if discovery.protocol == Protocol::Dubbo {
        return Err(ConfigError::invalid(
            format!("{at}.discovery.protocol"),
            "\"dubbo\" providers speak Dubbo's binary protocol, which an HTTP proxy cannot forward: follow their \"tri\" (Triple, gRPC-compatible), \"grpc\" or \"rest\" registrations",
        ));
    }
    Ok(())
}
