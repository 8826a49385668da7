//! The proxy's admin API as a drill uses it: switch faults on and off,
//! and read the retry budgets' counters from `/metrics`.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::DrillError;
use crate::file::Phase;

/// How long one admin request may take: a target that does not answer
/// fails the drill fast instead of hanging it.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(3);

/// How much longer than its phase a fault lives in the proxy: enough for
/// the drill to switch it off itself, short enough that a drill killed
/// mid-phase leaves it on only briefly.
pub(crate) const TTL_MARGIN: Duration = Duration::from_secs(2);

pub(crate) type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// A client with keep-alive pools, for the admin API and for the load.
pub(crate) fn client(max_idle: usize) -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(Duration::from_secs(2)));
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(max_idle)
        .build(connector)
}

/// The admin listener of the target.
#[derive(Clone)]
pub(crate) struct Admin {
    base: String,
    client: HttpClient,
    /// The admin listener's bearer token, from `TRIPLINE_ADMIN_TOKEN`: a
    /// proxy whose admin listener is not on loopback requires one for
    /// every mutating call (a secret, so never in the drill file).
    token: Option<String>,
}

/// Where a drill finds the admin token of a remote proxy.
pub(crate) const TOKEN_VARIABLE: &str = "TRIPLINE_ADMIN_TOKEN";

impl Admin {
    pub(crate) fn new(base: String) -> Admin {
        Admin {
            base,
            client: client(4),
            token: std::env::var(TOKEN_VARIABLE).ok().filter(|t| !t.is_empty()),
        }
    }

    /// One request; the status and body, or why there is none.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: String,
    ) -> Result<(StatusCode, String), String> {
        let uri = format!("{}{path}", self.base);
        let mut req = Request::builder()
            .method(method.clone())
            .uri(&uri)
            .header(http::header::CONTENT_TYPE, "application/json");
        if let Some(token) = self.token.as_deref().filter(|_| method != Method::GET) {
            req = req.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("{uri}: {e}"))?;
        let answer = async {
            let res = self
                .client
                .request(req)
                .await
                .map_err(|e| format!("{method} {uri}: {e}"))?;
            let status = res.status();
            let bytes = res
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("{method} {uri}: {e}"))?
                .to_bytes();
            Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
        };
        tokio::time::timeout(ADMIN_TIMEOUT, answer)
            .await
            .map_err(|_| format!("{method} {uri}: no answer within {ADMIN_TIMEOUT:?}"))?
    }

    /// Fails fast unless the target's admin listener serves `/api/faults`.
    pub(crate) async fn check(&self) -> Result<(), DrillError> {
        match self.send(Method::GET, "/api/faults", String::new()).await {
            Ok((StatusCode::OK, _)) => Ok(()),
            Ok((status, body)) => Err(DrillError::Target(format!(
                "{}/api/faults answered {status}: {} (is this a tripline proxy's admin listener?)",
                self.base,
                body.trim()
            ))),
            Err(e) => Err(DrillError::Target(e)),
        }
    }

    /// Switches `phase`'s fault on for its length plus [`TTL_MARGIN`];
    /// `endpoint` is the phase's endpoint as the proxy knows it.
    pub(crate) async fn add_fault(
        &self,
        phase: &Phase,
        endpoint: Option<&str>,
    ) -> Result<u64, String> {
        let ttl = phase.to - phase.from + TTL_MARGIN;
        let mut body = serde_json::json!({
            "route": phase.route,
            "ttl": format!("{}ms", ttl.as_millis()),
        });
        if let Some(a) = &phase.abort {
            body["abort"] = serde_json::json!({"status": a.status, "percent": a.percent});
        }
        if let Some(d) = &phase.delay {
            body["delay"] = serde_json::json!({
                "duration": format!("{}ms", d.duration.as_millis().max(1)),
                "percent": d.percent,
            });
        }
        if let Some(e) = endpoint {
            body["endpoint"] = e.into();
        }
        if let Some(h) = &phase.header {
            body["header"] = h.as_str().into();
        }
        let (status, text) = self
            .send(Method::POST, "/api/faults", body.to_string())
            .await?;
        if status != StatusCode::CREATED {
            return Err(format!(
                "the proxy refused {:?}'s fault ({status}): {}",
                phase.name,
                text.trim()
            ));
        }
        serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["id"].as_u64())
            .ok_or_else(|| format!("POST /api/faults answered without an id: {text}"))
    }

    /// Switches one fault off; a fault already gone (its TTL ran out) is fine.
    pub(crate) async fn remove_fault(&self, id: u64) -> Result<(), String> {
        match self
            .send(Method::DELETE, &format!("/api/faults/{id}"), String::new())
            .await?
        {
            (StatusCode::NO_CONTENT | StatusCode::NOT_FOUND, _) => Ok(()),
            (status, body) => Err(format!(
                "DELETE /api/faults/{id} answered {status}: {}",
                body.trim()
            )),
        }
    }

    /// Retry budget deposits plus withdrawals, all routes: the tries the
    /// proxy made (a deposit per request past the route breaker, a
    /// withdrawal per retry or hedge).
    pub(crate) async fn tries(&self) -> Result<f64, String> {
        let (status, text) = self.send(Method::GET, "/metrics", String::new()).await?;
        if status != StatusCode::OK {
            return Err(format!("GET /metrics answered {status}"));
        }
        Ok(sum_counter(&text, "tripline_retry_budget_requests_total")
            + sum_counter(&text, "tripline_retry_budget_withdrawals_total"))
    }
}

/// The sum of every series of counter `name` in Prometheus text.
pub(crate) fn sum_counter(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            if !(rest.starts_with('{') || rest.starts_with(' ')) {
                return None;
            }
            l.rsplit(' ').next()?.parse::<f64>().ok()
        })
        .sum()
}
