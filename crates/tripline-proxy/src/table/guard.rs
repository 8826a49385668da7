//! The protections a route adds around its breaker and retries: rate
//! limit, keyed breakers, hedging, fallback and gRPC classification, built
//! once from the route's section.

use std::sync::Arc;

use tripline::clock::SharedClock;
use tripline::hedge::{Hedge, HedgeConfig, HedgeDelay};
use tripline::timeout::TokioTimer;

use crate::config::{ConfigError, RouteSection};
use crate::http::grpc::GrpcClassifier;
use crate::table::fallback::RouteFallback;
use crate::table::keyed_breaker::KeyedBreaker;
use crate::table::ratelimit::RouteRateLimit;

/// A route's extra protections; each absent unless configured.
pub(crate) struct Guard {
    pub(crate) rate_limit: Option<RouteRateLimit>,
    pub(crate) keyed_breaker: Option<KeyedBreaker>,
    /// The library's hedging policy, without a budget of its own: each
    /// hedge is paid from the route's retry budget by the proxy, which
    /// already deposited for the request (a hedge with the budget would
    /// deposit a second time per request).
    pub(crate) hedge: Option<Hedge>,
    /// Set once the proxy's clusters exist (a secondary cluster is one).
    pub(crate) fallback: Option<RouteFallback>,
    pub(crate) grpc: GrpcClassifier,
}

impl Guard {
    /// Builds what `section` configures, on `clock`; `at` locates it.
    pub(crate) fn build(
        at: &str,
        section: &RouteSection,
        clock: &SharedClock,
    ) -> Result<Guard, ConfigError> {
        let hedge = match &section.hedge {
            Some(h) => {
                let config = HedgeConfig {
                    delay: HedgeDelay::Fixed { delay: h.delay },
                    max_hedges: h.max_extra,
                    ..HedgeConfig::default()
                };
                // Hedge delays bound real I/O: they run on the runtime's
                // timer, like timeouts.
                let hedge = Hedge::builder()
                    .config(config)
                    .timer(Arc::new(TokioTimer))
                    .clock(TokioTimer.clock())
                    .build()
                    .map_err(|e| {
                        ConfigError::invalid(format!("{at}.hedge.{}", e.field), e.constraint)
                    })?;
                Some(hedge)
            }
            None => None,
        };
        Ok(Guard {
            rate_limit: section
                .rate_limit
                .as_ref()
                .map(|r| RouteRateLimit::new(r, clock)),
            keyed_breaker: KeyedBreaker::build(at, section, clock)?,
            hedge,
            fallback: None,
            grpc: GrpcClassifier::new(&section.grpc_failure_codes.0),
        })
    }
}
