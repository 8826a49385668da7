//! Refusing contradictions before anything is bound or built.
//!
//! Each check names the field to fix. The library's own validation of
//! breaker, budget, bulkhead and outlier configs runs here too, with the
//! field prefixed by where the config sits in the file.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use tripline::CircuitBreakerConfig;
use tripline::pipeline::PolicyConfigError;

use super::{ConfigError, ProxyConfig, RouteSection};

impl ProxyConfig {
    /// Checks the whole config, returning the first contradiction.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.listeners.is_empty() {
            return Err(ConfigError::invalid(
                "listeners",
                "needs at least one listener",
            ));
        }
        for (i, l) in self.listeners.iter().enumerate() {
            l.address.parse::<SocketAddr>().map_err(|_| {
                ConfigError::invalid(
                    format!("listeners[{i}].address"),
                    format!("must be ip:port, got {:?}", l.address),
                )
            })?;
            if let Some(tls) = &l.tls {
                tls.validate(&format!("listeners[{i}]"))?;
            }
        }
        if let Some(admin) = &self.admin {
            let address = admin.address.parse::<SocketAddr>().map_err(|_| {
                ConfigError::invalid(
                    "admin.address",
                    format!("must be ip:port, got {:?}", admin.address),
                )
            })?;
            super::validate_admin::validate_section(admin, address)?;
        }
        self.access_log.validate()?;
        let p = &self.proxy;
        let timeouts = [
            ("proxy.drain_timeout", Some(p.drain_timeout)),
            ("proxy.header_read_timeout", Some(p.header_read_timeout)),
            ("proxy.keep_alive_timeout", Some(p.keep_alive_timeout)),
            ("proxy.connect_timeout", Some(p.connect_timeout)),
            ("proxy.tunnel_idle_timeout", Some(p.tunnel_idle_timeout)),
            ("proxy.client_body_timeout", Some(p.client_body_timeout)),
        ];
        let listeners = self.listeners.iter().enumerate().flat_map(|(i, l)| {
            [
                (
                    format!("listeners[{i}].header_read_timeout"),
                    l.header_read_timeout,
                ),
                (
                    format!("listeners[{i}].keep_alive_timeout"),
                    l.keep_alive_timeout,
                ),
            ]
        });
        let zero = timeouts
            .into_iter()
            .map(|(field, d)| (field.to_owned(), d))
            .chain(listeners)
            .find(|(_, d)| d.is_some_and(|d| d.is_zero()));
        if let Some((field, _)) = zero {
            return Err(ConfigError::invalid(field, "must be more than zero"));
        }
        if p.max_header_bytes == 0 || p.max_header_bytes > super::MAX_HEADER_BYTES_LIMIT {
            return Err(ConfigError::invalid(
                "proxy.max_header_bytes",
                format!(
                    "must be more than 0 and at most {} (1 MiB), got {}",
                    super::MAX_HEADER_BYTES_LIMIT,
                    p.max_header_bytes
                ),
            ));
        }
        // The socket option counts whole milliseconds, and 0 turns it off.
        if p.upstream_stall_timeout < Duration::from_millis(1) {
            return Err(ConfigError::invalid(
                "proxy.upstream_stall_timeout",
                "must be at least 1ms",
            ));
        }
        for (name, cluster) in &self.clusters {
            let at = format!("clusters.{name}");
            super::validate_discovery::validate(&at, cluster)?;
            if let Some(check) = &cluster.health_check {
                check.validate(&format!("{at}.health_check"))?;
            }
            if let Some(limits) = &cluster.limits {
                let h2c = cluster.protocol == super::UpstreamProtocol::H2c;
                limits.validate(&format!("{at}.limits"), h2c)?;
            }
            if let Some(limits) = &cluster.endpoint_limits {
                limits.validate(&format!("{at}.endpoint_limits"))?;
            }
            if cluster.endpoints.is_empty() && cluster.discovery.is_none() {
                return Err(ConfigError::invalid(
                    format!("{at}.endpoints"),
                    "needs at least one endpoint (or a `discovery` section)",
                ));
            }
            for (i, e) in cluster.endpoints.iter().enumerate() {
                let port = e
                    .rsplit_once(':')
                    .map(|(host, port)| (host, port.parse::<u16>()));
                if !matches!(port, Some((host, Ok(p))) if !host.is_empty() && p != 0) {
                    return Err(ConfigError::invalid(
                        format!("{at}.endpoints[{i}]"),
                        format!("must be host:port, got {e:?}"),
                    ));
                }
            }
            super::tls::validate_cluster(&at, cluster)?;
            let library = cluster.to_library(name);
            library.validate().map_err(|e| {
                let mut err = policy_error(&at, &e);
                // The endpoints' breaker template: say which breaker, as
                // every breaker error does.
                if e.field == "breaker" || e.field.starts_with("breaker.") {
                    let own = &library.breaker.name;
                    let unset = own.is_empty() || *own == CircuitBreakerConfig::default().name;
                    let breaker = if unset { name } else { own };
                    err.message = format!("{} (breaker {breaker:?})", err.message);
                }
                err
            })?;
        }
        let mut names = BTreeSet::new();
        let mut breakers = BTreeSet::new();
        for (i, route) in self.routes.iter().enumerate() {
            let at = format!("routes[{i}]");
            if !names.insert(route.name.as_str()) {
                return Err(ConfigError::invalid(
                    format!("{at}.name"),
                    format!("{:?} names two routes", route.name),
                ));
            }
            self.validate_route(&at, route)?;
            // Metrics tell breakers apart by name: two with one name
            // would be one series, so the exporter refuses the second.
            if let Some(name) = route.breaker_name()
                && !breakers.insert(name)
            {
                return Err(ConfigError::invalid(
                    format!("{at}.breaker.name"),
                    format!("{name:?} names two route breakers"),
                ));
            }
        }
        if let Some(source) = &self.config_source {
            source.validate()?;
            self.validate_managed_names()?;
        }
        Ok(())
    }

    /// With a `[config_source]`, a pushed `[[breaker]]` table finds its
    /// breaker by name: a route breaker (or keyed family) and a cluster's
    /// endpoint-breaker family must not share one, or a push would change
    /// whichever was registered last.
    fn validate_managed_names(&self) -> Result<(), ConfigError> {
        let mut owners: std::collections::BTreeMap<String, String> = self
            .routes
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((r.breaker_name()?.to_owned(), format!("routes[{i}]"))))
            .collect();
        for (name, cluster) in &self.clusters {
            let family = cluster.to_library(name).breaker.name;
            if let Some(route) = owners.insert(family.clone(), format!("clusters.{name}")) {
                return Err(ConfigError::invalid(
                    format!("clusters.{name}.breaker.name"),
                    format!(
                        "{family:?} also names the breaker of {route}: with [config_source] every managed breaker needs a name of its own"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn validate_route(&self, at: &str, route: &RouteSection) -> Result<(), ConfigError> {
        if route.name.is_empty() {
            return Err(ConfigError::invalid(
                format!("{at}.name"),
                "must not be empty",
            ));
        }
        if !self.clusters.contains_key(&route.cluster) {
            return Err(ConfigError::invalid(
                format!("{at}.cluster"),
                format!(
                    "names no cluster: {:?} is not a key of [clusters]",
                    route.cluster
                ),
            ));
        }
        if let Some(m) = &route.matches.method {
            http::Method::from_bytes(m.as_bytes()).map_err(|_| {
                ConfigError::invalid(
                    format!("{at}.match.method"),
                    format!("{m:?} is not an HTTP method"),
                )
            })?;
        }
        if let Some(prefix) = &route.matches.path_prefix
            && !prefix.starts_with('/')
        {
            return Err(ConfigError::invalid(
                format!("{at}.match.path_prefix"),
                format!("must start with '/', got {prefix:?}"),
            ));
        }
        for (name, value) in &route.matches.headers {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err()
                || http::HeaderValue::from_str(value).is_err()
            {
                return Err(ConfigError::invalid(
                    format!("{at}.match.headers.{name}"),
                    "is not a valid header name and value",
                ));
            }
        }
        if let Some(breaker) = &route.breaker {
            breaker.validate().map_err(|e| {
                ConfigError::invalid(
                    format!("{at}.breaker.{}", e.field),
                    format!("{} {}", e.constraint, route.breaker_label()),
                )
            })?;
        }
        if let Some(bulkhead) = &route.bulkhead {
            bulkhead
                .validate()
                .map_err(|e| policy_error(&format!("{at}.bulkhead"), &e))?;
        }
        if let Some(fault) = &route.fault {
            let endpoints = self.clusters.get(&route.cluster).map(|c| &c.endpoints[..]);
            fault.validate(&format!("{at}.fault"), endpoints.unwrap_or_default())?;
        }
        let retry = &route.retry;
        if retry.attempts == 0 {
            return Err(ConfigError::invalid(
                format!("{at}.retry.attempts"),
                "must be at least 1 (the first try counts)",
            ));
        }
        retry
            .budget
            .validate()
            .map_err(|e| policy_error(&format!("{at}.retry.budget"), &e))?;
        if let Some(names) = &retry.retry_on {
            super::RetryOn::parse(names, &retry.retriable_status_codes)
                .map_err(|e| ConfigError::invalid(format!("{at}.retry.retry_on"), e))?;
        }
        if retry.base > retry.max {
            return Err(ConfigError::invalid(
                format!("{at}.retry.base"),
                "must be at most retry.max",
            ));
        }
        let t = &route.timeout;
        for (field, d) in [("per_try", t.per_try), ("overall", t.overall)] {
            if d.is_some_and(|d| d.is_zero()) {
                return Err(ConfigError::invalid(
                    format!("{at}.timeout.{field}"),
                    "must be more than zero",
                ));
            }
        }
        if let (Some(per_try), Some(overall)) = (t.per_try, t.overall)
            && per_try > overall
        {
            return Err(ConfigError::invalid(
                format!("{at}.timeout.per_try"),
                format!(
                    "must not exceed timeout.overall ({} > {})",
                    humantime::format_duration(per_try),
                    humantime::format_duration(overall)
                ),
            ));
        }
        if let (Some(slow), Some(limit)) = (
            route.breaker.as_ref().and_then(|b| b.slow_call_duration),
            t.per_try.or(t.overall_in_force()),
        ) && slow >= limit
        {
            return Err(ConfigError::invalid(
                format!("{at}.breaker.slow_call_duration"),
                format!(
                    "must be below the timeout ({} >= {}): a call that slow times out before it can count as slow {}",
                    humantime::format_duration(slow),
                    humantime::format_duration(limit),
                    route.breaker_label()
                ),
            ));
        }
        if let Some(bad) = route
            .failure_statuses
            .0
            .iter()
            .find(|s| !(100..=599).contains(*s))
        {
            return Err(ConfigError::invalid(
                format!("{at}.failure_statuses"),
                format!("{bad} is not an HTTP status (100-599)"),
            ));
        }
        if route
            .failure_statuses
            .0
            .iter()
            .any(|s| (200..300).contains(s))
            && retry.attempts > 1
        {
            return Err(ConfigError::invalid(
                format!("{at}.failure_statuses"),
                "lists a 2xx status while retries are on: every success would be retried",
            ));
        }
        for (i, protocol) in route.upgrades.0.iter().enumerate() {
            let field = format!("{at}.upgrades[{i}]");
            // A protocol name is an HTTP token, as a header name is.
            if http::HeaderName::from_bytes(protocol.as_bytes()).is_err() {
                return Err(ConfigError::invalid(
                    field,
                    format!("{protocol:?} is not a protocol name (an HTTP token)"),
                ));
            }
            if protocol.eq_ignore_ascii_case("h2c") {
                return Err(ConfigError::invalid(
                    field,
                    "h2c cannot be passed: an HTTP/2 connection through the proxy would carry requests it never routes (h2c smuggling)",
                ));
            }
        }
        self.validate_protections(at, route)
    }
}

impl RouteSection {
    /// `(breaker "NAME")`, appended to every error about the route's
    /// breaker so that it names the breaker as metrics and events will.
    pub(crate) fn breaker_label(&self) -> String {
        format!("(breaker {:?})", self.breaker_name().unwrap_or(&self.name))
    }

    /// The name the route's breaker runs under, if it has a breaker: its
    /// own `name` when set, else the route's name.
    pub(crate) fn breaker_name(&self) -> Option<&str> {
        let config = self.breaker.as_ref()?;
        let default =
            config.name.is_empty() || config.name == tripline::CircuitBreakerConfig::default().name;
        Some(if default { &self.name } else { &config.name })
    }
}

fn policy_error(at: &str, e: &PolicyConfigError) -> ConfigError {
    ConfigError::invalid(format!("{at}.{}", e.field), e.constraint.clone())
}
