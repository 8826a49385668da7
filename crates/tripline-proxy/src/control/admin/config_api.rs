//! `GET /api/config` and `PUT /api/config`, and what every reload tells
//! the admin side.
//!
//! `PUT` takes a whole proxy config as TOML (or as YAML, declared as
//! `Content-Type: application/yaml`) and goes exactly the way of a
//! SIGHUP reload: parsed and validated in full first (an error names the
//! field, line and column, and changes nothing: the last good config keeps
//! serving), then applied by [`Proxy::reload`]'s machinery, keeping breaker
//! state where identity did not change. The answer is the reload report.
//! Bodies over [`MAX_BODY`] are refused with 413 before any parsing.

use http::{Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use serde_json::{Value, json};

use super::audit::{Entry, diff_summary};
use super::respond::{AdminBody, error, json};
use crate::config::{ConfigError, FileFormat, ProxyConfig};
use crate::control::Control;
use crate::control::reload::ReloadReport;

/// The largest config `PUT /api/config` reads: 1 MiB.
pub(crate) const MAX_BODY: usize = 1024 * 1024;

/// `GET /api/config`: the config in force, its admin token redacted.
pub(crate) fn get(proxy: &Control) -> Response<AdminBody> {
    let config = proxy.config_in_force();
    let mut value = serde_json::to_value(&*config).unwrap_or(Value::Null);
    if let Some(admin) = value.get_mut("admin").and_then(Value::as_object_mut)
        && admin.get("token").is_some_and(|t| !t.is_null())
    {
        admin.insert("token".into(), "<redacted>".into());
    }
    json(StatusCode::OK, &value)
}

/// The format a `PUT /api/config` body is in: YAML when its content type
/// says so, else TOML (the format of the examples).
pub(crate) fn format_of(headers: &http::HeaderMap) -> FileFormat {
    let yaml = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| {
            let m = m.trim();
            m.eq_ignore_ascii_case("application/yaml")
                || m.eq_ignore_ascii_case("application/x-yaml")
        });
    if yaml {
        FileFormat::Yaml
    } else {
        FileFormat::Toml
    }
}

/// `PUT /api/config`.
pub(crate) async fn put<B>(
    proxy: &Control,
    body: B,
    format: FileFormat,
    who: &str,
) -> Response<AdminBody>
where
    B: http_body::Body,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let bytes = match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("a config is at most {MAX_BODY} bytes"),
                &[("limit", MAX_BODY.into())],
            );
        }
        Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string(), &[]),
    };
    let refused = |e: &ConfigError| {
        proxy.admin.audit.record(Entry {
            source: "admin-api",
            who,
            action: "config_refused",
            target: None,
            summary: e.to_string(),
        });
        config_error(e)
    };
    let Ok(text) = std::str::from_utf8(&bytes) else {
        let e = ConfigError::invalid(
            "",
            "the body is not UTF-8 text (a TOML or YAML proxy config)",
        );
        return refused(&e);
    };
    let config = match ProxyConfig::from_str_with_format(text, format) {
        Ok(c) => c,
        Err(e) => return refused(&e),
    };
    match proxy.reload_by(config, "admin-api", who) {
        Ok(report) => json(StatusCode::OK, &report_json(&report)),
        // The reload audited the refusal itself.
        Err(e) => config_error(&e),
    }
}

/// A refused config as 400: the message, field, line and column.
fn config_error(e: &ConfigError) -> Response<AdminBody> {
    error(
        StatusCode::BAD_REQUEST,
        &e.to_string(),
        &[
            ("field", e.field.clone().into()),
            ("line", e.line.into()),
            ("column", e.column.into()),
        ],
    )
}

fn report_json(r: &ReloadReport) -> Value {
    json!({
        "routes_added": r.routes_added,
        "routes_removed": r.routes_removed,
        "breakers_kept": r.breakers_kept,
        "keyed_breakers_kept": r.keyed_breakers_kept,
        "budgets_kept": r.budgets_kept,
        "clusters_kept": r.clusters_kept,
        "clusters_endpoints_changed": r.clusters_endpoints_changed,
        "clusters_built": r.clusters_built,
        "restart_required": r.restart_required,
    })
}

/// After every reload attempt: log it (one line: what changed, or why it
/// was refused), audit it, and on success follow the new table's breakers
/// and clusters for the event feed.
pub(crate) fn after_reload(
    proxy: &Control,
    old: &ProxyConfig,
    new: &ProxyConfig,
    source: &str,
    who: &str,
    result: &Result<ReloadReport, ConfigError>,
) {
    let admin = &proxy.admin;
    let (action, summary) = match result {
        Ok(report) => {
            admin.follow(&proxy.table.load());
            let mut summary = diff_summary(old, new);
            if !report.restart_required.is_empty() {
                summary.push_str(&format!(
                    "; needs a restart: {}",
                    report.restart_required.join(", ")
                ));
            }
            tracing::info!(
                target: "tripline_proxy::reload",
                source,
                who,
                restart_required = ?report.restart_required,
                "config reloaded: {summary}"
            );
            ("config_applied", summary)
        }
        Err(e) => {
            tracing::warn!(
                target: "tripline_proxy::reload",
                source,
                who,
                error = %e,
                "config reload refused, the last good config stays: {e}"
            );
            ("config_refused", e.to_string())
        }
    };
    admin.audit.record(Entry {
        source,
        who,
        action,
        target: None,
        summary,
    });
}
