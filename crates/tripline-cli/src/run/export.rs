//! Prometheus visibility for a breaker that lives in a file.
//!
//! The gauges (state, window rates, thresholds) come from the rebuilt
//! breaker through `tripline-prometheus`'s rendering. Its counters would
//! restart in every process, so counter families are dropped from that
//! output and the run counters kept in the state file are written instead
//! (`tripline_run_total{outcome=…}`, `tripline_run_transitions_total`).

use std::path::PathBuf;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use tripline::CircuitBreaker;
use tripline_prometheus::http::Format;
use tripline_prometheus::{Detail, Exporter};

use super::state::Counters;
use crate::CliError;

/// Where this run publishes metrics.
pub(crate) struct Exports {
    textfile: Option<PathBuf>,
    push: Option<(String, String)>,
    name: String,
}

impl Exports {
    pub(crate) fn new(
        textfile: Option<PathBuf>,
        pushgateway: Option<String>,
        name: &str,
    ) -> Result<Self, CliError> {
        if let Some(dir) = &textfile
            && !dir.is_dir()
        {
            return Err(CliError::input(format!(
                "--textfile {}: not a directory",
                dir.display()
            )));
        }
        let push = match pushgateway {
            None => None,
            Some(url) => Some(parse_url(&url)?),
        };
        Ok(Exports {
            textfile,
            push,
            name: name.to_owned(),
        })
    }

    /// Publishes; a failure is a warning (metrics never fail the job).
    /// `store_errors`: with a shared store, this host's count of runs that
    /// could not reach it.
    pub(crate) fn publish(
        &self,
        breaker: &CircuitBreaker,
        counters: &Counters,
        store_errors: Option<u64>,
    ) {
        if self.textfile.is_none() && self.push.is_none() {
            return;
        }
        let mut text = match render(breaker, counters) {
            Ok(t) => t,
            Err(e) => return eprintln!("tripline: warning: metrics: {e}"),
        };
        if let Some(n) = store_errors {
            text.push_str(&store_errors_family(&self.name, n));
        }
        self.send(text);
    }

    /// When the shared store cannot be reached, the breaker's state is
    /// unknown: only the count of such runs is published.
    pub(crate) fn publish_store_errors(&self, n: u64) {
        if self.textfile.is_none() && self.push.is_none() {
            return;
        }
        self.send(store_errors_family(&self.name, n));
    }

    fn send(&self, text: String) {
        if let Some(dir) = &self.textfile
            && let Err(e) = write_textfile(dir, &self.name, &text)
        {
            eprintln!("tripline: warning: --textfile {}: {e}", dir.display());
        }
        if let Some((authority, base)) = &self.push {
            let path = format!("{base}/metrics/job/tripline_run/breaker/{}", self.name);
            if let Err(e) = push(authority, &path, text) {
                eprintln!("tripline: warning: --pushgateway: {e}");
            }
        }
    }
}

fn store_errors_family(name: &str, n: u64) -> String {
    format!(
        "# HELP tripline_run_store_errors_total Runs on this host that could not reach the shared store.\n\
         # TYPE tripline_run_store_errors_total counter\n\
         tripline_run_store_errors_total{{breaker=\"{name}\"}} {n}\n"
    )
}

fn render(breaker: &CircuitBreaker, c: &Counters) -> Result<String, String> {
    let exporter = Exporter::builder().build().map_err(|e| e.to_string())?;
    exporter
        .register_breaker(breaker, Detail::Full)
        .map_err(|e| e.to_string())?;
    let full = exporter
        .render(Format::PrometheusText)
        .map_err(|e| e.to_string())?;
    let mut out = gauges_only(&full);
    let name = breaker.name();
    out.push_str("# HELP tripline_run_total Runs of `tripline run`, by outcome.\n");
    out.push_str("# TYPE tripline_run_total counter\n");
    for (outcome, n) in [
        ("success", c.succeeded),
        ("failure", c.failed),
        ("ignored", c.ignored),
        ("cancelled", c.cancelled),
        ("rejected", c.rejected),
        ("stale", c.stale),
        ("reclaimed", c.reclaimed),
        ("abandoned", c.abandoned),
    ] {
        out.push_str(&format!(
            "tripline_run_total{{breaker=\"{name}\",outcome=\"{outcome}\"}} {n}\n"
        ));
    }
    out.push_str("# HELP tripline_run_transitions_total State changes of the breaker.\n");
    out.push_str("# TYPE tripline_run_transitions_total counter\n");
    out.push_str(&format!(
        "tripline_run_transitions_total{{breaker=\"{name}\"}} {}\n",
        c.transitions
    ));
    Ok(out)
}

/// Keeps the gauge families of a Prometheus text exposition.
fn gauges_only(text: &str) -> String {
    let mut out = String::new();
    let mut block = String::new();
    let mut keep = true;
    let flush = |block: &mut String, keep: bool, out: &mut String| {
        if keep {
            out.push_str(block);
        }
        block.clear();
    };
    for line in text.lines() {
        if line.starts_with("# HELP ") {
            flush(&mut block, keep, &mut out);
            keep = true;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            keep = rest.split_whitespace().nth(1) == Some("gauge");
        }
        if line.starts_with("# EOF") {
            continue;
        }
        block.push_str(line);
        block.push('\n');
    }
    flush(&mut block, keep, &mut out);
    out
}

fn write_textfile(dir: &std::path::Path, name: &str, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    // node_exporter skips files not ending in .prom, so the temp file is
    // invisible to it until the rename.
    let tmp = dir.join(format!(".{name}.prom.{}.tmp", std::process::id()));
    // Not fsynced: every run rewrites the whole file, so what a power loss
    // can cost is an older exposition — or, on filesystems that do not
    // order a replacing rename after its data, an empty or torn one that
    // node_exporter reports as an error — until the next run; an fsync
    // would cost a disk flush on every pipeline step.
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    std::fs::rename(&tmp, dir.join(format!("{name}.prom")))
}

/// `http://host:port[/base]` → (authority, base path).
fn parse_url(url: &str) -> Result<(String, String), CliError> {
    let bad = |why: &str| CliError::input(format!("--pushgateway {url:?}: {why}"));
    let uri: hyper::Uri = url.parse().map_err(|_| bad("not a URL"))?;
    if uri.scheme_str() != Some("http") {
        return Err(bad("only http:// URLs are supported"));
    }
    let authority = uri.authority().ok_or_else(|| bad("missing host"))?;
    let host_port = if authority.port().is_some() {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    Ok((host_port, uri.path().trim_end_matches('/').to_owned()))
}

/// PUT replaces the group's metrics, so a breaker's old series vanish.
fn push(authority: &str, path: &str, body: String) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), put(authority, path, body))
            .await
            .map_err(|_| "timed out after 10s".to_owned())?
    })
}

async fn put(authority: &str, path: &str, body: String) -> Result<(), String> {
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .map_err(|e| format!("{authority}: {e}"))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let req = hyper::Request::put(path)
        .header(hyper::header::HOST, authority)
        .header(
            hyper::header::CONTENT_TYPE,
            Format::PrometheusText.content_type(),
        )
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let _ = resp.into_body().collect().await;
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("{authority}{path}: HTTP {status}"))
    }
}
