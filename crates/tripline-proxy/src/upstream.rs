//! The clients that carry requests to a cluster's endpoints.
//!
//! Cleartext clusters share two clients (HTTP/1.1 and h2c): their pools
//! are keyed by endpoint address anyway. The HTTP/1.1 one is the proxy's
//! own per-thread pool on hyper's `conn::http1` ([`Http1Pool`]: the
//! common case, and the request path's largest cost under hyper-util's
//! pooled client); h2c and TLS use hyper-util's. A TLS cluster has a client of its
//! own, because its trust roots, server name and ALPN are its own; its
//! pool keeps HTTP/1.1 connections alive per endpoint, and an endpoint
//! that picks `h2` by ALPN gets one multiplexed HTTP/2 connection instead
//! (hyper's pool does that on its own when the connector reports `h2`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use http::request::Parts;
use http::uri::{Authority, PathAndQuery, Scheme, Uri};
use http::{Request, Response, header};
use hyper::body::Incoming;
use hyper_rustls::{HttpsConnector, ResolveServerName};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls_pki_types::ServerName;
use tripline::timeout::{Deadline, TokioClock};

use crate::config::{ConfigError, ProxyConfig, ProxySection, UpstreamProtocol};
use crate::http::body::{BoxError, ProxyBody};

pub(crate) mod connect_log;
pub(crate) mod h1;
pub(crate) mod health;
mod http1_pool;
mod outbound;
pub(crate) mod tls;

pub(crate) use http1_pool::Http1Pool;
pub(crate) use outbound::Outbound;

/// How one cluster's requests are sent: cheap to clone, clones share the pool.
#[derive(Clone)]
pub(crate) enum Upstream {
    /// Cleartext HTTP/1.1, on the proxy's own pool.
    Http1(Http1Pool),
    /// Cleartext h2c.
    H2c(Client<HttpConnector, ProxyBody>),
    /// HTTPS, HTTP/2 when ALPN picks it.
    Tls(Client<HttpsConnector<HttpConnector>, ProxyBody>),
}

/// Why a request got no answer from its endpoint.
#[derive(Debug)]
pub(crate) struct UpstreamError {
    connect: bool,
    source: BoxError,
}

impl UpstreamError {
    fn connect(source: impl Into<BoxError>) -> Self {
        UpstreamError {
            connect: true,
            source: source.into(),
        }
    }

    fn other(source: impl Into<BoxError>) -> Self {
        UpstreamError {
            connect: false,
            source: source.into(),
        }
    }

    /// A refusal a drill injects: a connect failure, as the endpoint's own
    /// refusal would be.
    pub(crate) fn refused_by_fault(source: std::io::Error) -> Self {
        UpstreamError::connect(source)
    }

    /// No connection could be made: nothing reached the endpoint.
    pub(crate) fn is_connect(&self) -> bool {
        self.connect
    }
}

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source.fmt(f)
    }
}

impl From<hyper_util::client::legacy::Error> for UpstreamError {
    fn from(e: hyper_util::client::legacy::Error) -> Self {
        UpstreamError {
            connect: e.is_connect(),
            source: e.into(),
        }
    }
}

impl Upstream {
    /// The URI of `parts`'s request at the endpoint `address`: the path
    /// and query are the client's own, shared rather than copied and
    /// parsed again. The own HTTP/1.1 pool takes it in origin form (the
    /// endpoint is given apart); hyper-util's clients find the endpoint
    /// in an absolute URI, so only they parse the `host:port`.
    pub(crate) fn uri(&self, address: &str, parts: &Parts) -> Result<Uri, http::Error> {
        let mut uri = http::uri::Parts::default();
        uri.path_and_query = Some(match parts.uri.path_and_query() {
            Some(p) => p.clone(),
            None => PathAndQuery::from_static("/"),
        });
        let scheme = match self {
            Upstream::Http1(_) => return Ok(Uri::from_parts(uri)?),
            Upstream::H2c(_) => Scheme::HTTP,
            Upstream::Tls(_) => Scheme::HTTPS,
        };
        uri.scheme = Some(scheme);
        uri.authority = Some(Authority::try_from(address)?);
        Ok(Uri::from_parts(uri)?)
    }

    /// Sends one try of `outbound` (at `uri`, from [`Upstream::uri`]) to
    /// the endpoint at `address` on a pooled connection, or a new one, the
    /// remaining `deadline` forwarded. A bodiless try on a cleartext
    /// HTTP/1.1 cluster is written straight from the client's head (no
    /// copy of its header map); the others are built as a `Request` first.
    pub(crate) async fn send(
        &self,
        address: &str,
        outbound: &Outbound,
        uri: Uri,
        body: ProxyBody,
        deadline: Option<Deadline>,
    ) -> Result<Response<ProxyBody>, UpstreamError> {
        if let Upstream::Http1(pool) = self
            && deadline.is_none()
            && !outbound.upgrade
            && h1::is_bodiless(&outbound.method, &body)
        {
            let host = match outbound.headers.contains_key(header::HOST) {
                true => None,
                false => Some(host_for(outbound, address)),
            };
            let head = h1::RequestHead {
                method: &outbound.method,
                path: uri.path_and_query().map_or("/", |p| p.as_str()),
                headers: &outbound.headers,
                forwarded: Some(&outbound.forwarded),
                host,
            };
            return pool.send_bodiless(address, &head).await;
        }
        let request = upstream_request(outbound, uri, address, body, deadline);
        match self {
            Upstream::Http1(pool) if outbound.upgrade => pool.send_on_hyper(address, request).await,
            _ => self.request(address, request).await,
        }
    }

    /// Sends `request` (its URI from [`Upstream::uri`]) to the endpoint at
    /// `address` on a pooled connection, or a new one.
    async fn request(
        &self,
        address: &str,
        request: Request<ProxyBody>,
    ) -> Result<Response<ProxyBody>, UpstreamError> {
        let boxed = |r: Response<Incoming>| r.map(crate::http::body::boxed);
        match self {
            Upstream::Http1(pool) => pool.send(address, request).await,
            Upstream::H2c(client) => Ok(boxed(client.request(request).await?)),
            Upstream::Tls(client) => Ok(boxed(client.request(request).await?)),
        }
    }
}

/// The request for the endpoint at `address`: same method, path, query
/// and (already cleaned) headers, this hop's forwarded elements appended,
/// the remaining deadline forwarded — in `tripline-timeout-ms`, and for a
/// gRPC request (one that came with `grpc-timeout`, or whose
/// `content-type` is `application/grpc*`) in `grpc-timeout` too: a gRPC
/// server reads only that one, and would otherwise go on working for a
/// caller that has given up.
fn upstream_request(
    outbound: &Outbound,
    uri: Uri,
    address: &str,
    body: ProxyBody,
    deadline: Option<Deadline>,
) -> Request<ProxyBody> {
    let mut request = Request::new(body);
    *request.method_mut() = outbound.method.clone();
    *request.uri_mut() = uri;
    *request.headers_mut() = outbound.headers.clone();
    outbound.forwarded.append_to(request.headers_mut());
    if !request.headers().contains_key(header::HOST)
        && let Ok(v) = http::HeaderValue::from_str(host_for(outbound, address))
    {
        request.headers_mut().insert(header::HOST, v);
    }
    if let Some(d) = deadline {
        // Judged only when a deadline is forwarded: a request without one
        // pays nothing for the gRPC check.
        d.write_headers_for_peer(request.headers_mut(), &TokioClock);
    }
    request
}

/// The `Host` of a request whose client sent none: an HTTP/2 client names
/// the host in the URI, not in `Host` (kept for the upstream); an
/// HTTP/1.0 client may name none (the endpoint's address is sent, as an
/// HTTP/1.1 request must carry one).
fn host_for<'a>(parts: &'a Parts, address: &'a str) -> &'a str {
    parts.uri.authority().map_or(address, |a| a.as_str())
}

/// The host name each resolved endpoint address (`ip:port`) was resolved
/// from, written by DNS re-resolution: a TLS endpoint reached by address
/// is still verified against — and sent SNI for — the name in the config.
pub(crate) type ResolvedNames = Arc<RwLock<HashMap<String, String>>>;

/// One cluster's client and the names its addresses came from (clones
/// share both).
#[derive(Clone)]
pub(crate) struct ClusterUpstream {
    pub(crate) upstream: Upstream,
    pub(crate) names: ResolvedNames,
}

/// Whether `before` and `after` make the same upstream clients: a reload
/// keeps a cluster's client (and its pooled connections) only then, so
/// that a changed connect, stall or pool setting takes effect.
pub(crate) fn same_clients(before: &ProxySection, after: &ProxySection) -> bool {
    let settings = |p: &ProxySection| {
        (
            p.connect_timeout,
            p.upstream_stall_timeout,
            p.pool_idle_timeout,
            p.pool_max_idle_per_endpoint,
        )
    };
    settings(before) == settings(after)
}

/// Builds every cluster's client, taking the one `keep` gives for a name
/// instead when it gives one (a reload keeps the pool of a cluster whose
/// section changed at most in its endpoints, and the names its DNS
/// refresher writes). When `clients_changed` (the
/// settings [`same_clients`] compares), a kept cluster gets a new client
/// and keeps only its names, which its kept refresher goes on writing.
pub(crate) fn build(
    config: &ProxyConfig,
    keep: impl Fn(&str) -> Option<ClusterUpstream>,
    clients_changed: bool,
) -> Result<BTreeMap<String, ClusterUpstream>, ConfigError> {
    let p = &config.proxy;
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(p.connect_timeout));
    #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
    connector.set_tcp_user_timeout(Some(p.upstream_stall_timeout));
    let pooled = || {
        let mut builder = Client::builder(TokioExecutor::new());
        builder
            .pool_idle_timeout(p.pool_idle_timeout)
            .pool_max_idle_per_host(p.pool_max_idle_per_endpoint);
        builder
    };
    let http1 = Http1Pool::new(
        p.connect_timeout,
        p.upstream_stall_timeout,
        p.pool_idle_timeout,
        p.pool_max_idle_per_endpoint,
    );
    let h2c = pooled().http2_only(true).build(connector.clone());
    let mut all = BTreeMap::new();
    for (name, section) in &config.clusters {
        let kept = keep(name);
        let names = match kept {
            Some(kept) if !clients_changed => {
                all.insert(name.clone(), kept);
                continue;
            }
            Some(kept) => kept.names,
            None => ResolvedNames::default(),
        };
        let upstream = match (&section.tls, section.protocol) {
            (None, UpstreamProtocol::Http1) => Upstream::Http1(http1.clone()),
            (None, UpstreamProtocol::H2c) => Upstream::H2c(h2c.clone()),
            (Some(tls), _) => {
                let at = format!("clusters.{name}");
                let client_config = crate::upstream::tls::client_config(&at, tls)?;
                let resolver = NameResolver {
                    fixed: match &tls.server_name {
                        Some(n) => Some(ServerName::try_from(n.clone()).map_err(|_| {
                            ConfigError::invalid(
                                format!("{at}.tls.server_name"),
                                format!("{n:?} is not a DNS name or IP address"),
                            )
                        })?),
                        None => None,
                    },
                    names: names.clone(),
                };
                let mut http = connector.clone();
                // The URI says `https`; the TCP connector must not refuse it.
                http.enforce_http(false);
                let https = HttpsConnector::new(http, client_config, true, Arc::new(resolver));
                Upstream::Tls(pooled().build(https))
            }
        };
        all.insert(name.clone(), ClusterUpstream { upstream, names });
    }
    Ok(all)
}

/// The server name of a TLS endpoint: the configured `server_name`, else
/// the name the endpoint's address was resolved from, else its host.
struct NameResolver {
    fixed: Option<ServerName<'static>>,
    names: ResolvedNames,
}

impl ResolveServerName for NameResolver {
    fn resolve(
        &self,
        uri: &Uri,
    ) -> Result<ServerName<'static>, Box<dyn std::error::Error + Sync + Send>> {
        if let Some(name) = &self.fixed {
            return Ok(name.clone());
        }
        let resolved = uri.authority().and_then(|a| {
            let names = self.names.read().unwrap_or_else(|e| e.into_inner());
            names.get(a.as_str()).cloned()
        });
        let host = match resolved {
            Some(name) => name,
            None => {
                let host = uri.host().unwrap_or_default();
                let host = host
                    .strip_prefix('[')
                    .and_then(|h| h.strip_suffix(']'))
                    .unwrap_or(host);
                host.to_owned()
            }
        };
        Ok(ServerName::try_from(host)?)
    }
}
