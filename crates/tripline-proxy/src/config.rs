//! The proxy's configuration: one TOML or YAML file in the library's
//! vocabulary (YAML for `.yaml` and `.yml`, see [`FileFormat::of_path`]).
//!
//! A proxy config is a list of listeners, an ordered list of routes and a
//! table of clusters. Everything that protects a call is written exactly
//! as it is for the library: a route's `breaker` is a
//! [`CircuitBreakerConfig`](tripline::CircuitBreakerConfig), a cluster's
//! `outlier` an [`OutlierConfig`](tripline::outlier::OutlierConfig), a
//! retry `budget` a [`RetryBudgetConfig`](tripline::budget::RetryBudgetConfig),
//! so a breaker tuned with `tripline simulate` is pasted into the proxy
//! unchanged. Durations are written `"5s"`, `"250ms"`.
//!
//! Unknown keys are refused (a typo would otherwise silently keep a
//! default), and [`ProxyConfig::validate`] refuses contradictions — a
//! per-try timeout longer than the overall deadline, a route to a cluster
//! that does not exist — naming the field, so the error points at the line
//! to fix, in either format.
//!
//! ```
//! use tripline_proxy::config::ProxyConfig;
//!
//! let config = ProxyConfig::from_toml(r#"
//!     [[listeners]]
//!     address = "127.0.0.1:8080"
//!
//!     [[routes]]
//!     name = "api"
//!     cluster = "backend"
//!     match = { path_prefix = "/api" }
//!     retry = { attempts = 2 }
//!     timeout = { per_try = "1s", overall = "3s" }
//!
//!     [clusters.backend]
//!     endpoints = ["127.0.0.1:9000", "127.0.0.1:9001"]
//!     balancer = "p2c"
//! "#).unwrap();
//! assert_eq!(config.routes[0].retry.attempts, 2);
//! ```

mod access_log;
pub(crate) mod access_log_template;
mod advice;
mod cluster;
mod config_source;
mod error;
mod fault;
mod health;
mod limits;
mod locate;
mod protect;
mod retry_on;
mod route;

pub(crate) use retry_on::{RetryOn, TryEnd};
mod tls;
mod validate;
mod validate_admin;
mod validate_discovery;
mod validate_protect;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use access_log::{AccessLogFormat, AccessLogMode, AccessLogSection};
pub use cluster::{BalancerName, ClusterSection, UpstreamProtocol};
pub use config_source::{ConfigSourceKind, ConfigSourceSection};
pub use error::ConfigError;
pub use fault::{AbortSection, DelaySection, FaultSection, ShareSection};
pub use health::{CheckKind, GrpcCheck, HealthCheckSection, HttpCheck, TcpCheck};
pub use limits::{ClusterLimits, EndpointLimits};
pub(crate) use protect::FALLBACK_CAUSES;
pub use protect::{
    BreakerKeySection, FallbackSection, GrpcFailureCodes, HedgeSection, RateLimitKey,
    RateLimitSection, UPSTREAM_FAILURE,
};
pub use route::{
    DEFAULT_OVERALL, FailureStatuses, RetrySection, RouteMatch, RouteSection, TimeoutSection,
    Upgrades,
};
pub use tls::{AlpnProtocol, ClusterTls, ListenerTls};
pub(crate) use validate_protect::breaker_family;

/// A whole proxy config file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProxyConfig {
    /// Process-wide settings (drain, header read timeout, pools).
    pub proxy: ProxySection,
    /// The addresses the proxy accepts connections on.
    pub listeners: Vec<ListenerSection>,
    /// Routes, tried in order; the first that matches takes the request.
    pub routes: Vec<RouteSection>,
    /// Clusters by name, referred to by routes.
    pub clusters: BTreeMap<String, ClusterSection>,
    /// Where to serve `GET /metrics`, if anywhere: a listener of its own,
    /// so scrapes never share a port (or a route table) with the data plane.
    pub admin: Option<AdminSection>,
    /// One line per request (off by default).
    pub access_log: AccessLogSection,
    /// Where breaker parameters are pushed from at run time (a watched
    /// file or etcd), if anywhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_source: Option<ConfigSourceSection>,
}

/// The admin listener: Prometheus metrics of every breaker, cluster and
/// budget the proxy built, and its request and refusal counts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminSection {
    /// `ip:port`, e.g. `"127.0.0.1:9901"`; port 0 picks a free port (tests).
    /// Bind it to loopback or a private interface: metrics name routes,
    /// clusters and endpoints.
    pub address: String,
    /// The bearer token every mutating admin call (POST, PUT, DELETE)
    /// must carry; required when `address` is not loopback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// A file holding the token (read at start), to keep it out of the config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<std::path::PathBuf>,
}

/// Process-wide settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProxySection {
    /// How long in-flight requests may take to finish after SIGTERM or
    /// Ctrl-C before their connections are closed anyway.
    #[serde(with = "tripline::clock::duration_serde")]
    pub drain_timeout: Duration,
    /// How long a client may take to send a request's headers: a slow
    /// client (slowloris) cannot hold a connection open for ever. A
    /// listener's own `header_read_timeout` overrides it.
    #[serde(with = "tripline::clock::duration_serde")]
    pub header_read_timeout: Duration,
    /// How long an HTTP/1 keep-alive connection may stay idle between
    /// requests before the proxy closes it: an idle connection costs a
    /// descriptor and a parked socket, and a client that went away
    /// without closing must not hold them for ever. Counted from the end
    /// of the last answer (an idle connection is parked meanwhile, see
    /// the README). An HTTP/2 connection (never parked) is closed with
    /// GOAWAY once it has had no open stream for as long (its PINGs do
    /// not count as use). A listener's own `keep_alive_timeout` overrides it.
    #[serde(with = "tripline::clock::duration_serde")]
    pub keep_alive_timeout: Duration,
    /// How long connecting to an endpoint may take; a connect that takes
    /// longer is a connect failure (it never sent the request).
    #[serde(with = "tripline::clock::duration_serde")]
    pub connect_timeout: Duration,
    /// How long an idle upstream keep-alive connection stays pooled.
    #[serde(with = "tripline::clock::duration_serde")]
    pub pool_idle_timeout: Duration,
    /// Idle keep-alive connections kept per endpoint.
    pub pool_max_idle_per_endpoint: usize,
    /// How long data the proxy sent to an endpoint may stay unacknowledged,
    /// or unread behind the endpoint's closed receive window, before the
    /// connection is given up (`TCP_USER_TIMEOUT` on every upstream
    /// socket, Linux). Without it a try to an endpoint that stopped reading
    /// waits as long as the request's deadline, if it has none for ever,
    /// and TCP keeps probing a vanished host for a quarter of an hour. At
    /// least a millisecond; set it above the longest pause a healthy
    /// endpoint takes while reading an upload.
    #[serde(with = "tripline::clock::duration_serde")]
    pub upstream_stall_timeout: Duration,
    /// How long a connection switched to another protocol (WebSocket) may
    /// relay nothing either way before the proxy closes it (HAProxy's
    /// `timeout tunnel`): a peer that vanished without closing must not
    /// hold two sockets for ever. Set it above the protocol's own
    /// keep-alive interval (WebSocket pings).
    #[serde(with = "tripline::clock::duration_serde")]
    pub tunnel_idle_timeout: Duration,
    /// Add `x-envoy-overloaded: true` to the proxy's own overload
    /// refusals, for clients and meshes written against Envoy.
    pub envoy_compat: bool,
    /// The largest request head (request line and header lines) a client
    /// may send, in bytes: every unfinished head holds up to this much
    /// memory until `header_read_timeout`, so it bounds what a flood of
    /// slow clients costs (HAProxy's `tune.bufsize` is 16 KiB, nginx's
    /// `large_client_header_buffers` 8 KiB). A longer request line is
    /// answered `414`, a longer head `431`, both labelled
    /// `x-tripline-rejected: protocol_error`. Also the HTTP/2 header list
    /// limit. More than 0, at most 1 MiB.
    pub max_header_bytes: usize,
    /// How long a request body may send nothing before the proxy gives
    /// up on it (nginx's `client_body_timeout`, HAProxy's `timeout
    /// client`): a stalled upload on a route without a timeout must not
    /// hold the client's socket and the endpoint's for ever. The upstream
    /// request is cancelled (neither the endpoint nor the route is
    /// charged) and the client answered `408` with
    /// `x-tripline-rejected: client_timeout` if no answer has begun.
    #[serde(with = "tripline::clock::duration_serde")]
    pub client_body_timeout: Duration,
    /// How fine the latency histograms are: `"cluster"` (per route and
    /// per cluster) or `"endpoint"` (also per endpoint: a series set per
    /// endpoint, for finding the slow one).
    pub metrics_detail: MetricsDetail,
}

/// How fine the proxy's latency histograms are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricsDetail {
    /// Per route and per cluster.
    #[default]
    Cluster,
    /// Per endpoint too.
    Endpoint,
}

/// The largest `[proxy] max_header_bytes` accepted: a head larger than
/// this is no request a service needs, and the limit is memory per
/// connection.
pub const MAX_HEADER_BYTES_LIMIT: usize = 1 << 20;

impl Default for ProxySection {
    /// 10 s drain, 10 s header read timeout, 60 s keep-alive timeout,
    /// 1 s connect timeout, 90 s pooled idle connections, 64 per endpoint,
    /// 30 s upstream stall timeout (HAProxy's usual `timeout server`),
    /// 1 h tunnel idle timeout, 64 KiB request heads, 60 s client body
    /// idle timeout (nginx's).
    fn default() -> Self {
        ProxySection {
            drain_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            keep_alive_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(1),
            pool_idle_timeout: Duration::from_secs(90),
            pool_max_idle_per_endpoint: 64,
            upstream_stall_timeout: Duration::from_secs(30),
            tunnel_idle_timeout: Duration::from_secs(3600),
            envoy_compat: false,
            max_header_bytes: 64 * 1024,
            client_body_timeout: Duration::from_secs(60),
            metrics_detail: MetricsDetail::Cluster,
        }
    }
}

/// One address to accept connections on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerSection {
    /// `ip:port`; port 0 picks a free port (tests).
    pub address: String,
    /// TLS, with HTTP/2 and HTTP/1.1 offered by ALPN; absent: cleartext
    /// (HTTP/1.1, and h2c with prior knowledge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ListenerTls>,
    /// This listener's `header_read_timeout` (absent: `[proxy]`'s): an
    /// internal listener may allow slower clients than a public one.
    #[serde(
        default,
        with = "tripline::clock::duration_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub header_read_timeout: Option<Duration>,
    /// This listener's `keep_alive_timeout` (absent: `[proxy]`'s): a
    /// listener behind a load balancer that reuses its connections keeps
    /// them longer than one facing browsers.
    #[serde(
        default,
        with = "tripline::clock::duration_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub keep_alive_timeout: Option<Duration>,
}

impl ListenerSection {
    /// A cleartext listener on `address` with `[proxy]`'s timeouts.
    pub fn new(address: impl Into<String>) -> ListenerSection {
        ListenerSection {
            address: address.into(),
            tls: None,
            header_read_timeout: None,
            keep_alive_timeout: None,
        }
    }

    /// The header read timeout this listener runs: its own, else `proxy`'s.
    pub fn header_read_timeout(&self, proxy: &ProxySection) -> Duration {
        self.header_read_timeout
            .unwrap_or(proxy.header_read_timeout)
    }

    /// The keep-alive timeout this listener runs: its own, else `proxy`'s.
    pub fn keep_alive_timeout(&self, proxy: &ProxySection) -> Duration {
        self.keep_alive_timeout.unwrap_or(proxy.keep_alive_timeout)
    }
}

/// The text formats a proxy config file can be written in, one vocabulary
/// for both: the same serde types read them, so validation is identical.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileFormat {
    /// The format of the examples and of `PUT /api/config`.
    Toml,
    /// For a config that lives beside Kubernetes manifests.
    Yaml,
}

impl FileFormat {
    /// The format of the file at `path`: `.yaml` and `.yml` (any case) are
    /// YAML; every other name is TOML, as every file was before YAML was
    /// read, so a `proxy.conf` that started a proxy still does (a YAML
    /// file under another name fails with a TOML syntax error that names
    /// its line).
    pub fn of_path(path: &Path) -> FileFormat {
        let yaml = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
        if yaml {
            FileFormat::Yaml
        } else {
            FileFormat::Toml
        }
    }
}

/// A config file's path, text and format, kept once it is read so that an
/// error found after parsing — building the proxy reads the TLS files and
/// the admin token, and checks what validation cannot — still names the
/// file and the line of its field, as a parse error does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigFile {
    /// Where the text was read from; every error names it.
    pub path: PathBuf,
    /// The file's text.
    pub text: String,
    /// How the text is written (by the path's extension).
    pub format: FileFormat,
}

impl ConfigFile {
    /// Reads the file at `path`, in the format its extension names
    /// ([`FileFormat::of_path`]); an unreadable file is an error naming it.
    pub fn read(path: &Path) -> Result<ConfigFile, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::read(path, &e))?;
        Ok(ConfigFile::from_text(path, text))
    }

    /// A file whose text the caller read already (`tripline check` reads
    /// the bytes itself, to place a byte that is not UTF-8).
    pub fn from_text(path: impl Into<PathBuf>, text: impl Into<String>) -> ConfigFile {
        let path = path.into();
        ConfigFile {
            format: FileFormat::of_path(&path),
            text: text.into(),
            path,
        }
    }

    /// Parses and validates the text; errors name the file, the line and
    /// the field.
    pub fn parse(&self) -> Result<ProxyConfig, ConfigError> {
        ProxyConfig::from_str_with_format(&self.text, self.format)
            .map_err(|e| e.in_file(&self.path))
    }

    /// `e` (an error of the config this file holds, from
    /// [`Proxy::try_new`](crate::Proxy::try_new) or a reload, which know the
    /// field but not the text) naming this file and the line of its field.
    pub fn place(&self, e: ConfigError) -> ConfigError {
        let position = match (e.line, e.field.as_str()) {
            (Some(_), _) | (None, "") => None,
            (None, field) => match self.format {
                FileFormat::Toml => locate::locate(&self.text, field),
                FileFormat::Yaml => locate::locate_yaml(&self.text, field),
            },
        };
        e.at(position).in_file(&self.path)
    }
}

impl ProxyConfig {
    /// Parses a config from TOML text and validates it; an error names
    /// the line (and column) of the offending key.
    pub fn from_toml(text: &str) -> Result<ProxyConfig, ConfigError> {
        let config: ProxyConfig = toml::from_str(text).map_err(|e| match e.span() {
            Some(span) => {
                let mut err = ConfigError::parse(None, e.message().trim_end().to_owned())
                    .at(Some(locate::line_column(text, span.start)));
                // A parse error names the key it is about, as validation
                // errors do (`routes[0].retry.attempts`), and inside a
                // breaker table the breaker too.
                if let Some(path) = locate::path_at(text, span.start) {
                    let doc = toml::from_str(text).ok();
                    if let Some(name) = doc.and_then(|doc| locate::breaker_of(&doc, &path)) {
                        err.message = format!("{} (breaker {name:?})", err.message);
                    }
                    err.field = path;
                }
                err
            }
            None => ConfigError::parse(None, e.to_string()),
        })?;
        config.validate().map_err(|e| {
            let position = locate::locate(text, &e.field);
            e.at(position)
        })?;
        Ok(config)
    }

    /// Parses a config from YAML text — the same keys, nested as YAML
    /// mappings and sequences — and validates it; an error names the line
    /// (and column) of the offending key, as [`from_toml`](Self::from_toml)'s do.
    ///
    /// ```
    /// use tripline_proxy::config::ProxyConfig;
    ///
    /// let text = "listeners:\n  - address: 127.0.0.1:8080\nroutes:\n  - name: api\n    cluster: backend\n    retry: { attempts: 0 }\nclusters:\n  backend:\n    endpoints: [127.0.0.1:9000]\n";
    /// let e = ProxyConfig::from_yaml(text).unwrap_err();
    /// assert_eq!(e.to_string(), "line 6: routes[0].retry.attempts: must be at least 1 (the first try counts)");
    /// ```
    pub fn from_yaml(text: &str) -> Result<ProxyConfig, ConfigError> {
        let config: ProxyConfig =
            serde_yaml_ng::from_str(text).map_err(|e| locate::yaml_error(text, &e))?;
        config.validate().map_err(|e| {
            let position = locate::locate_yaml(text, &e.field);
            e.at(position)
        })?;
        Ok(config)
    }

    /// Parses and validates `text` written in `format`.
    pub fn from_str_with_format(
        text: &str,
        format: FileFormat,
    ) -> Result<ProxyConfig, ConfigError> {
        match format {
            FileFormat::Toml => Self::from_toml(text),
            FileFormat::Yaml => Self::from_yaml(text),
        }
    }

    /// Reads, parses and validates the config file at `path`, TOML or YAML
    /// by its extension ([`FileFormat::of_path`]); errors name the file.
    /// Keep the [`ConfigFile`] instead to place the errors of building the
    /// proxy from it too.
    pub fn load(path: &Path) -> Result<ProxyConfig, ConfigError> {
        ConfigFile::read(path)?.parse()
    }

    /// Whether `text` (TOML or YAML) looks like a proxy config rather than
    /// a breaker config (it has listeners, routes or clusters), so one
    /// `check` command accepts both.
    pub fn looks_like_proxy_config(text: &str) -> bool {
        const SECTIONS: [&str; 6] = [
            "listeners",
            "routes",
            "clusters",
            "proxy",
            "admin",
            "config_source",
        ];
        // YAML is tried only for text that is not TOML: TOML text is
        // never a YAML mapping with these keys, nor YAML text a TOML table.
        if let Ok(table) = toml::from_str::<toml::Table>(text) {
            return SECTIONS.iter().any(|k| table.contains_key(*k));
        }
        // Only the top-level keys are read, as far as the text parses: a
        // proxy config with a syntax error further down is still the
        // proxy's to report (read as a breaker config, its first key would
        // be "unknown").
        SECTIONS.iter().any(|k| locate::yaml_has_key(text, k))
    }
}
