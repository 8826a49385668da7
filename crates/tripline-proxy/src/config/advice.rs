//! What a route lacks that a production route should have: a time limit,
//! a breaker of its own, a retry budget sized for it. None of these is an
//! error — the proxy runs such a route — but each is a way an outage gets
//! through, so `tripline check` says so, one warning a gap, at the line
//! of the route.

use tripline::budget::RetryBudgetConfig;

use super::{ConfigError, DEFAULT_OVERALL, ProxyConfig};

impl ProxyConfig {
    /// The gaps of every route, each naming its field (place them in the
    /// file with [`ConfigFile::place`](super::ConfigFile::place)).
    pub fn advice(&self) -> Vec<ConfigError> {
        let mut advice = Vec::new();
        for (i, route) in self.routes.iter().enumerate() {
            let at = format!("routes[{i}]");
            let name = &route.name;
            let timeout = &route.timeout;
            if timeout.unlimited && timeout.per_try.is_none() {
                advice.push(ConfigError::invalid(
                    format!("{at}.timeout"),
                    format!(
                        "route {name} has no time limit (\"none\"): a hung endpoint holds its requests, and its clients, for as long as they wait"
                    ),
                ));
            } else if timeout.overall.is_none() && !timeout.unlimited {
                advice.push(ConfigError::invalid(
                    format!("{at}.timeout"),
                    format!(
                        "route {name} sets no overall timeout: the default of {} applies (set `timeout = {{ overall = \"…\" }}` to the route's own, or \"none\")",
                        humantime::format_duration(DEFAULT_OVERALL)
                    ),
                ));
            }
            if route.breaker.is_none() && route.breaker_key.is_none() {
                advice.push(ConfigError::invalid(
                    format!("{at}.breaker"),
                    format!(
                        "route {name} has no breaker of its own: only the endpoint breakers protect it, and they see each endpoint apart"
                    ),
                ));
            }
            if route.retry.attempts > 1 && route.retry.budget == RetryBudgetConfig::default() {
                advice.push(ConfigError::invalid(
                    format!("{at}.retry.budget"),
                    format!(
                        "route {name} retries on the default budget: size `retry.budget` to the route, so retries cannot multiply its load when its endpoints fail"
                    ),
                ));
            }
        }
        advice
    }
}
