//! The proxy's metrics: everything it built, exported by
//! `tripline-prometheus`, plus counters of its own.
//!
//! At build time every route breaker, every cluster (its endpoint
//! breakers, outlier ejections and panic mode) and every route's retry
//! budget is registered into one [`Exporter`], which reads their counts
//! when Prometheus scrapes: the request path pays nothing for them. The
//! names and labels are the exporter's (see [`tripline_prometheus::names`]);
//! breakers are labelled with their names, budgets with their route's name,
//! clusters with their config key, so every label value comes from the
//! config and the series are bounded.
//!
//! What only the proxy knows is counted on the request path, one
//! relaxed atomic add each per request:
//!
//! | metric | labels | meaning |
//! |---|---|---|
//! | `tripline_proxy_requests_total` | `route`, `code_class` (`1xx` … `5xx`) | answers sent, by route and status class |
//! | `tripline_proxy_refusals_total` | `route`, `flag` | answers carrying a [flag](crate::http::rejection): refusals (`CO`, `HF`, `NH`, `BF`, `RL`, `DX`, …), upstream failures (`UF`, `UT`, `UC`) and retries the budget refused (`BE`) |
//! | `tripline_proxy_fallbacks_total` | `route`, `reason` | [fallback](crate::table::fallback) answers sent, by the cause they replaced (a fallback answer is not also counted as a refusal) |
//! | `tripline_proxy_faults_injected_total` | `route`, `kind` (`abort`, `delay`) | tries a [fault](crate::table::fault) shaped |
//! | `tripline_proxy_access_log_dropped_total` | | access log lines dropped (queue full, write failed) |
//! | `tripline_proxy_upstream_overflow_total` | `cluster`, `limit` (`max_requests`, `max_connections`, `max_pending_requests`, `max_retries`, `endpoint`) | requests, retries and tries a cluster's overflow limits (`limits`, `endpoint_limits`) refused (`UO`); created with the cluster's limits |
//! | `tripline_proxy_http2_premature_reset_closes_total` | | HTTP/2 connections closed because their client cancelled most streams before the answer (rapid reset; Envoy's `downstream_rq_too_many_premature_resets`) |
//!
//! And two gauges, moved only when a connection parks, wakes or switches
//! protocols (never per request):
//!
//! | metric | labels | meaning |
//! |---|---|---|
//! | `tripline_proxy_parked_connections` | | idle HTTP/1 keep-alive connections parked on their bare socket (hyper's buffers freed) until the client sends again or `keep_alive_timeout` passes |
//! | `tripline_proxy_upgraded_connections` | | client connections switched to another protocol (`101`: WebSocket) and relayed to their endpoint |
//!
//! The overflow limits' gauges are read when Prometheus scrapes, from
//! the counts admission keeps (the `table::overflow` module):
//!
//! | metric | labels | meaning |
//! |---|---|---|
//! | `tripline_proxy_upstream_in_use` | `cluster`, `limit` (`max_requests`, `max_connections`, `max_pending_requests`, `max_retries`) | what each of a cluster's limits holds now: requests, connections, requests waiting for a connection, retries in flight |
//! | `tripline_proxy_upstream_limit` | `cluster`, `limit` | the limit as configured (with `in_use`, how close a cluster is to refusing) |
//!
//! A route's keyed breakers (`breaker_key`) are exported as their
//! registry's aggregate — breakers by state, creations, evictions,
//! overflows — never one series per key: the key is whatever clients send.
//!
//! `route` is empty for requests no route matched (`NR`) and for smuggling
//! attempts refused before routing (`DPE`). Every series exists from the
//! start at zero, so a rate over it is defined before the first refusal.

use std::sync::Arc;

use http::Response;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tripline_prometheus::http::MetricsHandler;
use tripline_prometheus::{Detail, Exporter};

use crate::config::{ConfigError, FALLBACK_CAUSES};
use crate::http::rejection::DEGRADED_HEADER;
use crate::http::rejection::{FLAG_HEADER, RETRY_REFUSED_HEADER, Reason};
use crate::table::latency::LatencyFamilies;
use crate::table::overflow::OverflowMetrics;
use crate::table::route::Route;

pub(crate) type Labels = Vec<(&'static str, String)>;

/// The status classes counted. The only 1xx the proxy answers with is
/// `101 Switching Protocols`, the last answer on its connection.
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// The exporter and the proxy's own counters, built once per proxy (a
/// reload registers and unregisters sources in the same exporter, and
/// takes its route counters from the same families).
pub(crate) struct ProxyMetrics {
    exporter: Exporter,
    handler: MetricsHandler,
    requests: Family<Labels, Counter>,
    refusals: Family<Labels, Counter>,
    fallbacks: Family<Labels, Counter>,
    /// For requests no route took.
    unrouted: RouteCounters,
    /// Idle connections parked on their bare socket, across every
    /// listener and runtime.
    pub(crate) parked: Gauge,
    /// HTTP/2 connections closed for their client's premature resets.
    pub(crate) premature_reset_closes: Counter,
    /// Connections a client and an endpoint switched to another protocol
    /// (`101`, WebSocket), relayed now.
    pub(crate) tunnels: Gauge,
    /// Requests, retries and tries refused by a cluster's overflow limits,
    /// by cluster and limit (see [`crate::table::overflow`]).
    pub(crate) overflow: OverflowMetrics,
    /// The latency histograms (see [`crate::table::latency`]).
    pub(crate) latency: LatencyFamilies,
}

/// Counters of one route, created up front so the request path only adds.
pub(crate) struct RouteCounters {
    classes: [Counter; 5],
    flags: Vec<(&'static str, Counter)>,
    fallbacks: Vec<(&'static str, Counter)>,
}

impl ProxyMetrics {
    /// Registers every route breaker, route budget, route bulkhead (by
    /// the route's name) and cluster into a new exporter, and the proxy's counters beside it; `extras` registers
    /// more families (faults, access log) under the exporter's prefix.
    pub(crate) fn build(
        routes: &[Route],
        clusters: &std::collections::BTreeMap<String, tripline::cluster::Cluster>,
        overflow: OverflowMetrics,
        latency: LatencyFamilies,
        extras: impl FnOnce(&mut Registry, &str),
    ) -> Result<ProxyMetrics, ConfigError> {
        let exporter = Exporter::default();
        for (name, cluster) in clusters {
            exporter
                .register_cluster(cluster, Detail::Full)
                .map_err(|e| ConfigError::invalid(format!("clusters.{name}"), e.to_string()))?;
        }
        for (i, route) in routes.iter().enumerate() {
            if let Some(keyed) = &route.guard.keyed_breaker {
                exporter
                    .register_registry(&keyed.registry, Detail::Aggregate)
                    .map_err(|e| {
                        ConfigError::invalid(format!("routes[{i}].breaker.name"), e.to_string())
                    })?;
            }
            if let Some(b) = &route.breaker {
                exporter.register_breaker(b, Detail::Full).map_err(|e| {
                    ConfigError::invalid(format!("routes[{i}].breaker.name"), e.to_string())
                })?;
            }
            exporter
                .register_budget(&route.name, &route.budget)
                .map_err(|e| ConfigError::invalid(format!("routes[{i}].name"), e.to_string()))?;
            if let Some(b) = &route.bulkhead {
                exporter.register_bulkhead(&route.name, b).map_err(|e| {
                    ConfigError::invalid(format!("routes[{i}].bulkhead"), e.to_string())
                })?;
            }
        }
        let requests = Family::<Labels, Counter>::default();
        let refusals = Family::<Labels, Counter>::default();
        let fallbacks = Family::<Labels, Counter>::default();
        let unrouted = RouteCounters::new(&requests, &refusals, &fallbacks, "");
        let mut registry = Registry::default();
        registry.register_collector(Box::new(exporter.clone()));
        let prefix = exporter.prefix();
        registry.register(
            format!("{prefix}_proxy_requests"),
            "Answers the proxy sent, by route and status class",
            requests.clone(),
        );
        registry.register(
            format!("{prefix}_proxy_refusals"),
            "Answers carrying a refusal or upstream-failure flag, by route and flag",
            refusals.clone(),
        );
        registry.register(
            format!("{prefix}_proxy_fallbacks"),
            "Fallback answers sent instead of a refusal or failure, by route and cause replaced",
            fallbacks.clone(),
        );
        let parked = Gauge::default();
        registry.register(
            format!("{prefix}_proxy_parked_connections"),
            "Idle HTTP/1 keep-alive connections parked on their bare socket (no HTTP buffers held)",
            parked.clone(),
        );
        let premature_reset_closes = Counter::default();
        registry.register(
            format!("{prefix}_proxy_http2_premature_reset_closes"),
            "HTTP/2 connections closed because their client cancelled most streams before the answer (rapid reset)",
            premature_reset_closes.clone(),
        );
        let tunnels = Gauge::default();
        registry.register(
            format!("{prefix}_proxy_upgraded_connections"),
            "Client connections switched to another protocol (101, WebSocket) and relayed to their endpoint",
            tunnels.clone(),
        );
        overflow.register(&mut registry, prefix);
        latency.register(&mut registry, prefix);
        extras(&mut registry, prefix);
        Ok(ProxyMetrics {
            overflow,
            latency,
            handler: MetricsHandler::with_registry(Arc::new(registry)),
            exporter,
            requests,
            refusals,
            fallbacks,
            unrouted,
            parked,
            premature_reset_closes,
            tunnels,
        })
    }

    /// The counters of `routes`, in route order (existing series carry on).
    pub(crate) fn route_counters(&self, routes: &[Route]) -> Vec<RouteCounters> {
        routes
            .iter()
            .map(|r| RouteCounters::new(&self.requests, &self.refusals, &self.fallbacks, &r.name))
            .collect()
    }

    /// Drops the series of a route a reload removed.
    pub(crate) fn forget_route(&self, route: &str) {
        self.latency.forget_route(route);
        for class in CLASSES {
            self.requests.remove(&vec![
                ("route", route.to_string()),
                ("code_class", class.to_string()),
            ]);
        }
        for r in Reason::ALL {
            self.refusals.remove(&vec![
                ("route", route.to_string()),
                ("flag", r.flag().into()),
            ]);
        }
        for cause in FALLBACK_CAUSES {
            self.fallbacks.remove(&vec![
                ("route", route.to_string()),
                ("reason", (*cause).into()),
            ]);
        }
    }

    /// The exporter every breaker, cluster and budget is registered in.
    pub(crate) fn exporter(&self) -> &Exporter {
        &self.exporter
    }

    /// The `/metrics` handler: the exporter and the proxy's counters.
    pub(crate) fn handler(&self) -> &MetricsHandler {
        &self.handler
    }

    /// Counts one answer of the route whose counters are `route` (`None`: unrouted).
    pub(crate) fn observe<B>(&self, route: Option<&RouteCounters>, response: &Response<B>) {
        let counters = route.unwrap_or(&self.unrouted);
        let class = usize::from(response.status().as_u16() / 100).wrapping_sub(1);
        if let Some(c) = counters.classes.get(class) {
            c.inc();
        }
        // One pass comparing the names an answer has (cheap: most are
        // standard names, which compare by tag) instead of three hashed
        // lookups for headers that only refusals and fallbacks carry.
        for (name, value) in response.headers() {
            if name == FLAG_HEADER {
                if let Ok(flag) = value.to_str() {
                    counters.count_flag(flag);
                }
            } else if name == RETRY_REFUSED_HEADER {
                counters.count_flag(Reason::of_retry_refused(value.as_bytes()).flag());
            } else if name == DEGRADED_HEADER
                && let Ok(cause) = value.to_str()
                && let Some((_, c)) = counters.fallbacks.iter().find(|(f, _)| *f == cause)
            {
                c.inc();
            }
        }
    }
}

impl RouteCounters {
    fn new(
        requests: &Family<Labels, Counter>,
        refusals: &Family<Labels, Counter>,
        fallbacks: &Family<Labels, Counter>,
        route: &str,
    ) -> RouteCounters {
        RouteCounters {
            classes: CLASSES.map(|class| {
                requests
                    .get_or_create(&vec![
                        ("route", route.to_string()),
                        ("code_class", class.to_string()),
                    ])
                    .clone()
            }),
            flags: Reason::ALL
                .iter()
                .map(|r| {
                    let labels = vec![("route", route.to_string()), ("flag", r.flag().into())];
                    (r.flag(), refusals.get_or_create(&labels).clone())
                })
                .collect(),
            fallbacks: FALLBACK_CAUSES
                .iter()
                .map(|c| {
                    let labels = vec![("route", route.to_string()), ("reason", (*c).into())];
                    (*c, fallbacks.get_or_create(&labels).clone())
                })
                .collect(),
        }
    }

    fn count_flag(&self, flag: &str) {
        if let Some((_, c)) = self.flags.iter().find(|(f, _)| *f == flag) {
            c.inc();
        }
    }
}
