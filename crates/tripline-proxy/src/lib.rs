//! `tripline-proxy`: an HTTP sidecar that gives any service, in any
//! language, the protection of tripline's breakers, retry budgets and
//! outlier detection.
//!
//! A request arrives on a listener, the first matching [route](config::RouteSection)
//! takes it, and the route's cluster of endpoints serves it:
//!
//! ```text
//! client ─▶ listener ─▶ route: rate limit ─▶ bulkhead ─▶ deadline ─▶ route breaker (or the key's) ─▶ retry loop (budget)
//!                                                                                                   └─▶ hedged tries ─▶ cluster: endpoint breaker + outlier ─▶ upstream
//!        ◀── fallback (fixed answer or secondary cluster) instead of a refusal or failure, marked x-tripline-degraded
//! ```
//!
//! Every protection is the library's own type, configured in the library's
//! vocabulary: the route's breaker is a [`tripline::CircuitBreaker`], the
//! endpoints live in a [`tripline::cluster::Cluster`] (per-endpoint
//! breakers, outlier ejection, panic mode, balancing), retries spend a
//! shared [`tripline::budget::RetryBudget`], deadlines are
//! [`tripline::timeout::Deadline`]s read from and forwarded in
//! `tripline-timeout-ms`.
//!
//! A request the proxy refuses says why, in headers a machine can read
//! and a body a human can: see [`rejection`] for the causes, their short
//! flags and their Envoy analogues.
//!
//! With an `[admin]` section the proxy serves `GET /metrics` on a listener
//! of its own: every route breaker, cluster and retry budget it built,
//! through `tripline-prometheus`, and its request and refusal counts by
//! route (see [`metrics`] for the names). The same listener serves the
//! admin API — breakers with their windows, rates, thresholds and recent
//! transitions; force-open, disable, metrics-only and reset; outlier
//! ejections; the config (`PUT` replaces it like a reload); an audit log;
//! Server-Sent Events of every transition — documented in
//! `docs/admin-api.yaml`, and at `GET /` a live dashboard. With
//! `[admin] token` mutating calls need it as a bearer token; without one
//! the admin address must be loopback.
//!
//! # Pushed breaker parameters
//!
//! With a `[config_source]` section ([`config::ConfigSourceSection`]) the
//! proxy's breakers — route breakers, keyed route families, each
//! cluster's endpoint breakers — are managed by a `tripline-config`
//! `Applier` fed by a watched file or an etcd key: a pushed document
//! (`[[breaker]]` tables named like the breakers) changes them live with
//! their state kept, or is refused whole and the last good stays; rollouts
//! run their shadow twins on the route breakers' real outcomes; the proxy
//! reports its applied version under its leased etcd status key
//! (`tripline config status`); `/api/audit`, `/api/events` and `/metrics`
//! (`tripline_config_*`) show what happened. A pushed table patches: the
//! fields it names win over the file's, through reloads (a reload lays
//! the last pushed table on the reloaded file's config of a kept breaker,
//! and of what it builds anew before the new table takes traffic); the
//! fields it leaves out stay as the file sets them. An operator's `force-open` through the admin API outlasts
//! every push until `reset`.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use tripline_proxy::{Proxy, config::ProxyConfig};
//!
//! let config = ProxyConfig::load(std::path::Path::new("proxy.toml"))?;
//! let running = Proxy::try_new(config)?.start().await?;
//! println!("listening on {:?}", running.local_addrs());
//! running.run_until_signal().await; // SIGTERM or Ctrl-C, then drain
//! # Ok(())
//! # }
//! ```
//!
//! # What this milestone covers
//!
//! HTTP/1.1 both ways with keep-alive pools per endpoint, h2c (HTTP/2 with
//! prior knowledge) from clients and to clusters marked `protocol = "h2c"`,
//! TLS (rustls on `ring`) on listeners with HTTP/2 and HTTP/1.1 chosen by
//! ALPN, and to clusters (private CA or built-in roots, server name, ALPN,
//! HTTP/2 when the endpoint picks it), DNS re-resolution of endpoint names
//! (`dns_refresh`; addresses that stay keep their state), streamed bodies,
//! graceful drain, request-smuggling refusal, route breakers, endpoint
//! breakers with outlier ejection, budgeted retries and deadlines,
//! Prometheus metrics on an admin listener; rate limits (`governor`, per
//! route, client IP or header, bounded keyed state), route breakers per
//! header value from a bounded [`BreakerRegistry`](tripline::registry::BreakerRegistry)
//! family ([`keyed_breaker`]), hedging paid from the retry budget,
//! [fallback] answers (fixed, or a secondary cluster) marked degraded,
//! gRPC status classification from trailers, `forwarded` (RFC 7239)
//! beside `x-forwarded-for`, an Envoy compatibility switch
//! (`x-envoy-overloaded`); [fault injection](fault) for
//! drills (per route in the config, and at run time through the admin
//! listener's `/api/faults`, each with a TTL); the admin API and live
//! dashboard; an access log (JSON, or text from an Envoy-style template)
//! written off the request path (`[access_log]`); [reload](Proxy::reload) keeping
//! breaker state where identity did not change (`tripline proxy` reloads
//! on SIGHUP); config errors naming file, line and field.; a choice of runtime
//! ([`Threading`]: work-stealing, or one single-threaded runtime per core
//! on `SO_REUSEPORT` listeners); mutual TLS both ways (client certificates
//! verified on listeners and told upstream in `x-forwarded-client-cert`,
//! the proxy's own certificate presented to clusters).
//!
//! # Layout: data flows one way
//!
//! ```text
//! http/      leaf: body wrappers (one generic inspecting wrapper), headers,
//!            gRPC status, the refusal vocabulary and the degraded header,
//!            HTTP/1 head spans, the drain levels every listener watches
//! config/    the file's sections and their validation; nothing at run time
//! upstream/  the clients and pools of the clusters, TLS, the request head
//!            they send (Outbound), the connect-failure log
//! table/     what a request consults: routes, guards (rate limit, keyed
//!            breakers, hedging, fallback), faults, counters; the
//!            shadow-rollout hook each route carries, set when built
//! data/      server → forward (attempt, hedge, fallback's answer) over a
//!            small Ctx: the table handle, [proxy] settings, counters,
//!            faults, the access log
//! control/   admin API and dashboard, reload, config source, DNS: they hold
//!            the table handle and publish new tables
//! proxy.rs   the composition root: builds both sides, binds the listeners,
//!            spawns the tasks; nothing imports it
//! ```
//!
//! Imports go one way: `proxy → {data, control} → table → upstream →
//! config → http`. The data side never imports the control side; the
//! control side changes what requests do only by publishing a new table,
//! or through what the table carries (breakers, clusters, the shadow
//! hook). `layout.toml` at the repository's root states the order, and
//! the workspace's layout test fails on an import against it or on any
//! circle between a crate's top-level modules.
//!
//! Before this layout, 20 of the crate's 27 top-level modules imported
//! each other in one circle (admin ↔ server, upstream → forward, config →
//! admin, metrics → fallback, every try → config source), and one
//! context carrying eleven parts went to every function on the request
//! path. After it, the graph between the seven top-level modules is:
//!
//! ```text
//! proxy    → config, control, data, http, table, upstream
//! control  → config, http, table, upstream
//! data     → config, http, table, upstream
//! table    → config, http, upstream
//! upstream → config, http
//! config   → http
//! http     → (nothing)
//! ```
//!
//! The request path costs what it did: 24 016 instructions a request under
//! `benches/proxy/instructions.sh`, against 23 965 before (+0.2 %).

#![forbid(unsafe_code)]

pub mod config;
mod control;
mod data;
mod http;
mod proxy;
mod table;
mod upstream;

pub use self::http::{body, rejection};
pub use proxy::explain;
pub use table::{fallback, fault, keyed_breaker, metrics};

pub use control::reload::ReloadReport;
pub use proxy::runtime::Threading;
pub use proxy::start::{Drained, Running};
pub use proxy::{Proxy, ProxyBuilder};
