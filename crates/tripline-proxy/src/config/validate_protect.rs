//! Refusing contradictions in a route's rate limit, keyed breaker,
//! hedging, fallback and gRPC codes, naming the field.

use tripline::registry::RegistryConfig;

use super::protect::FALLBACK_CAUSES;
use super::{ConfigError, ProxyConfig, RouteSection};
use crate::http::method::is_idempotent;

impl ProxyConfig {
    pub(super) fn validate_protections(
        &self,
        at: &str,
        route: &RouteSection,
    ) -> Result<(), ConfigError> {
        let bad = |field: &str, message: String| {
            Err(ConfigError::invalid(format!("{at}.{field}"), message))
        };
        if let Some(r) = &route.rate_limit {
            for (field, v) in [("per_second", r.per_second), ("burst", r.burst)] {
                if v == 0 {
                    return bad(&format!("rate_limit.{field}"), "must be at least 1".into());
                }
            }
            if r.max_keys == 0 {
                return bad("rate_limit.max_keys", "must be at least 1".into());
            }
        }
        if let Some(k) = &route.breaker_key {
            let Some(template) = &route.breaker else {
                return bad(
                    "breaker_key",
                    "needs a `breaker` on the route: it is the template of every keyed breaker"
                        .into(),
                );
            };
            if http::HeaderName::from_bytes(k.header.as_bytes()).is_err() {
                return bad(
                    "breaker_key.header",
                    format!("{:?} is not a header name", k.header),
                );
            }
            breaker_family(template, k).validate().map_err(|e| {
                ConfigError::invalid(
                    format!("{at}.breaker_key.{}", e.field),
                    format!("{} {}", e.constraint, route.breaker_label()),
                )
            })?;
        }
        if let Some(h) = &route.hedge {
            if h.delay.is_zero() {
                return bad("hedge.delay", "must be more than zero".into());
            }
            if !(1..=10).contains(&h.max_extra) {
                return bad(
                    "hedge.max_extra",
                    format!("must be between 1 and 10, got {}", h.max_extra),
                );
            }
            if let Some(per_try) = route.timeout.per_try
                && h.delay >= per_try
            {
                return bad(
                    "hedge.delay",
                    format!(
                        "must be below timeout.per_try ({} >= {}): the try would time out before a hedge is sent",
                        humantime::format_duration(h.delay),
                        humantime::format_duration(per_try)
                    ),
                );
            }
            let method = route
                .matches
                .method
                .as_deref()
                .and_then(|m| http::Method::from_bytes(m.as_bytes()).ok());
            if let Some(m) = method
                && !is_idempotent(&m)
                && !route.retry.retryable
            {
                return bad(
                    "hedge",
                    format!(
                        "sends a request twice, but the route takes only {m}, which is not idempotent: set retry.retryable if the upstream deduplicates"
                    ),
                );
            }
            if route.retry.retryable && route.retry.max_buffered_body == 0 {
                return bad(
                    "hedge",
                    "cannot hedge requests with bodies when retry.max_buffered_body is 0: no body could be replayed".into(),
                );
            }
        }
        if let Some(f) = &route.fallback {
            match (&f.status, &f.cluster) {
                (Some(_), Some(_)) | (None, None) => {
                    return bad(
                        "fallback",
                        "needs exactly one of `status` (a fixed answer) and `cluster` (a secondary cluster)".into(),
                    );
                }
                (Some(s), None) if !(100..=599).contains(s) => {
                    return bad(
                        "fallback.status",
                        format!("{s} is not an HTTP status (100-599)"),
                    );
                }
                (None, Some(c)) if !self.clusters.contains_key(c) => {
                    return bad(
                        "fallback.cluster",
                        format!("names no cluster: {c:?} is not a key of [clusters]"),
                    );
                }
                (None, Some(c)) if *c == route.cluster => {
                    return bad(
                        "fallback.cluster",
                        format!("{c:?} is the route's own cluster: a fallback must go elsewhere"),
                    );
                }
                _ => {}
            }
            if f.cluster.is_some() && (!f.body.is_empty() || f.content_type.is_some()) {
                return bad(
                    "fallback.body",
                    "is for a fixed answer (`status`), not a secondary cluster".into(),
                );
            }
            if let Some(ct) = &f.content_type
                && http::HeaderValue::from_str(ct).is_err()
            {
                return bad(
                    "fallback.content_type",
                    format!("{ct:?} is not a header value"),
                );
            }
            if f.on.is_empty() {
                return bad("fallback.on", "must name at least one cause".into());
            }
            if let Some(unknown) = f.on.iter().find(|c| !FALLBACK_CAUSES.contains(&c.as_str())) {
                return bad(
                    "fallback.on",
                    format!(
                        "{unknown:?} is not a cause; one of {}",
                        FALLBACK_CAUSES.join(", ")
                    ),
                );
            }
        }
        if let Some(code) = route
            .grpc_failure_codes
            .0
            .iter()
            .find(|c| !(1..=16).contains(*c))
        {
            return bad(
                "grpc_failure_codes",
                format!("{code} is not a gRPC error code (1-16; 0 is OK)"),
            );
        }
        Ok(())
    }
}

/// The registry config of a keyed route breaker: the route's breaker as
/// the template, the key section's bounds.
pub(crate) fn breaker_family(
    template: &tripline::CircuitBreakerConfig,
    k: &super::BreakerKeySection,
) -> RegistryConfig {
    RegistryConfig {
        max_breakers: k.max_breakers,
        overflow: k.overflow,
        idle_ttl: k.idle_ttl.or(RegistryConfig::default().idle_ttl),
        breaker: template.clone(),
    }
}
