//! Which breakers a proxy builds from its config, with the parameters in
//! force (defaults filled in).
//!
//! A config names route breakers, but every cluster also builds a breaker
//! per endpoint, and a route with `breaker_key` builds a family of breakers,
//! one per key, at run time: breakers a reader of the file does not see.
//! `tripline check --explain` prints them all, and `tripline proxy` lists
//! them when it starts, so none is hidden.

use tripline::CircuitBreakerConfig;
use tripline::breaker::WindowConfig;

use crate::proxy::Proxy;

/// What owns a breaker, or a family of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerKind {
    /// A route's own breaker.
    Route,
    /// A route's keyed family: one breaker per value of its key header.
    Keyed,
    /// A cluster's family: one breaker per endpoint.
    Endpoint,
}

impl BreakerKind {
    /// `route`, `keyed`, `endpoint`: as the admin API's `kind` says.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerKind::Route => "route",
            BreakerKind::Keyed => "keyed",
            BreakerKind::Endpoint => "endpoint",
        }
    }
}

/// One breaker, or one family of breakers sharing a config, a proxy built.
#[derive(Clone, Debug)]
pub struct BuiltBreakers {
    /// What kind of owner it has.
    pub kind: BreakerKind,
    /// The breaker's name (a family's: its breakers are `<name>:<key>` or
    /// `<cluster>:<endpoint>`).
    pub name: String,
    /// `route api`, `cluster backend`.
    pub owner: String,
    /// How many breakers it is now: 1 for a route breaker, the endpoints
    /// for a cluster, the keys seen so far for a keyed family.
    pub count: usize,
    /// The config in force, defaults filled in (a family's template).
    pub config: CircuitBreakerConfig,
}

impl BuiltBreakers {
    /// One line: "route breaker api (route api): trips at 50 % failures of
    /// at least 4 calls in a count window of 4, open 10s".
    pub fn summary(&self) -> String {
        let c = &self.config;
        let window = match &c.window {
            WindowConfig::Count { size } => format!("a count window of {size}"),
            WindowConfig::Time { length, .. } => {
                format!("a time window of {}", humantime::format_duration(*length))
            }
        };
        let count = match self.kind {
            BreakerKind::Route => String::new(),
            BreakerKind::Keyed => format!(", {} key(s) so far", self.count),
            BreakerKind::Endpoint => format!(", {} endpoint(s)", self.count),
        };
        format!(
            "{} breaker{} {} ({}{count}): trips at {} % failures of at least {} calls in {window}, open {}",
            self.kind.as_str(),
            if self.kind == BreakerKind::Route {
                ""
            } else {
                "s"
            },
            self.name,
            self.owner,
            c.failure_rate_threshold * 100.0,
            c.minimum_calls,
            c.open_duration,
        )
    }

    /// Every parameter in force ([`parameters`]).
    pub fn parameters(&self) -> Vec<String> {
        parameters(&self.config)
    }
}

/// Every parameter of `config`, one `key = value` line each, in the
/// config file's own vocabulary (TOML values), its name left out.
pub fn parameters(config: &CircuitBreakerConfig) -> Vec<String> {
    match toml::Value::try_from(config) {
        Ok(toml::Value::Table(table)) => table
            .iter()
            .filter(|(key, _)| key.as_str() != "name")
            .map(|(key, value)| format!("{key} = {value}"))
            .collect(),
        Ok(other) => vec![other.to_string()],
        Err(e) => vec![format!("(parameters cannot be shown: {e})")],
    }
}

impl Proxy {
    /// Every breaker and breaker family the proxy runs now: route
    /// breakers and keyed families in route order, then each cluster's
    /// endpoint breakers.
    pub fn breakers_built(&self) -> Vec<BuiltBreakers> {
        let table = self.inner.control.table.load();
        let mut built = Vec::new();
        for route in &table.routes {
            let owner = format!("route {}", route.name);
            if let Some(b) = &route.breaker {
                built.push(BuiltBreakers {
                    kind: BreakerKind::Route,
                    name: b.name().to_owned(),
                    owner: owner.clone(),
                    count: 1,
                    config: b.config(),
                });
            }
            if let Some(keyed) = &route.guard.keyed_breaker {
                built.push(BuiltBreakers {
                    kind: BreakerKind::Keyed,
                    name: keyed.registry.family().to_owned(),
                    owner,
                    count: keyed.registry.len(),
                    config: keyed.registry.family_config(),
                });
            }
        }
        for (name, cluster) in &table.clusters {
            built.push(BuiltBreakers {
                kind: BreakerKind::Endpoint,
                name: cluster.breakers().family().to_owned(),
                owner: format!("cluster {name}"),
                count: cluster.endpoints().len(),
                config: cluster.breakers().family_config(),
            });
        }
        built
    }
}
