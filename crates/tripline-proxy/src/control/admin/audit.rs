//! `GET /api/audit`: what was done to the running proxy, newest last —
//! configs applied and refused (by `PUT /api/config` and by reloads such
//! as SIGHUP's) and operator actions (breaker overrides, faults).
//!
//! A local ring rather than `tripline_config::AuditLog`: that log records
//! breaker documents field by field and is appended only by its applier;
//! the proxy's entries are whole proxy configs and operator actions. With
//! a `[config_source]`, each record of its applier is copied here as it is
//! made (action `breakers_applied`, `breakers_rejected`,
//! `breakers_shadow_started`, …, with `version`, `revision`, `changes`).
//! Bounded at [`CAPACITY`] entries; the oldest go first.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use serde_json::{Value, json};

use tripline_config::{AuditAction, AuditRecord};

use super::hub::rfc3339;
use crate::config::ProxyConfig;

/// Entries kept.
pub(crate) const CAPACITY: usize = 256;

/// The ring.
#[derive(Default)]
pub(crate) struct Audit {
    ring: Mutex<VecDeque<Value>>,
}

/// One entry, before it gets its time.
pub(crate) struct Entry<'a> {
    /// `admin-api`, or `reload` (SIGHUP, or a library caller's reload).
    pub(crate) source: &'a str,
    /// `admin-api` for the token holder; `local` when no token is set.
    pub(crate) who: &'a str,
    /// `config_applied`, `config_refused`, `force_open`, `fault_added`, …
    pub(crate) action: &'a str,
    /// The breaker, route or fault acted on, if any.
    pub(crate) target: Option<&'a str>,
    /// What changed, or why it was refused.
    pub(crate) summary: String,
}

impl Audit {
    /// Appends `entry`, stamped with the wall-clock time.
    pub(crate) fn record(&self, entry: Entry<'_>) {
        let now = tripline::clock::system_time_after(std::time::Duration::ZERO);
        let value = json!({
            "at": rfc3339(now),
            "source": entry.source,
            "who": entry.who,
            "action": entry.action,
            "target": entry.target,
            "summary": entry.summary,
        });
        if entry.action.starts_with("config_") {
            // The reload logged its own line already.
            tracing::debug!(target: "tripline_proxy::audit", %value, "admin audit");
        } else {
            tracing::info!(target: "tripline_proxy::audit", %value, "admin audit");
        }
        self.push(value);
    }

    /// Appends a record of the `[config_source]` applier (a breaker
    /// document applied, refused, rolled back, or a rollout step) in the
    /// ring's shape, with its version, revision and field-by-field
    /// changes; returns the entry.
    pub(crate) fn record_config(&self, record: &AuditRecord) -> Value {
        let action = serde_json::to_value(&record.action).unwrap_or(Value::Null);
        let kind = action["kind"].as_str().unwrap_or("unknown").to_owned();
        let summary = config_summary(record);
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(record.unix_ms);
        let value = json!({
            "at": rfc3339(at),
            "source": record.source,
            "who": record.author.as_deref().unwrap_or("-"),
            "action": format!("breakers_{kind}"),
            "target": null,
            "summary": summary,
            "version": record.version,
            "revision": record.revision,
            "detail": action,
            "changes": record.changes,
            "warnings": record.warnings,
        });
        tracing::info!(target: "tripline_proxy::audit", %value, "admin audit");
        self.push(value.clone());
        value
    }

    fn push(&self, value: Value) {
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        if ring.len() >= CAPACITY {
            ring.pop_front();
        }
        ring.push_back(value);
    }

    /// `GET /api/audit`'s body.
    pub(crate) fn to_json(&self) -> Value {
        let ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        json!({ "capacity": CAPACITY, "records": ring.iter().collect::<Vec<_>>() })
    }
}

/// `v3 (etcd rev 42): api.failure_rate_threshold 0.5 → 0.2; …`, or the
/// refusal's reason.
fn config_summary(record: &AuditRecord) -> String {
    let head = match &record.revision {
        Some(rev) => format!("v{} ({} rev {rev})", record.version, record.source),
        None => format!("v{} ({})", record.version, record.source),
    };
    let body = match &record.action {
        AuditAction::Rejected { error } => format!("refused, last good config kept: {error}"),
        AuditAction::ShadowReport {
            would_trip,
            not_judged,
            families,
        } => {
            let trips: Vec<String> = would_trip.iter().map(|(b, n)| format!("{b} {n}")).collect();
            let mut text = format!(
                "shadow ended; trips the new rules would have made: {}",
                if trips.is_empty() {
                    "(no breaker judged)".to_owned()
                } else {
                    trips.join(", ")
                }
            );
            for f in families {
                text.push_str(&format!(
                    "; {}: {} of {} keys would trip",
                    f.family, f.keys_would_trip, f.keys_judged
                ));
                if !f.top_keys.is_empty() {
                    let top: Vec<String> =
                        f.top_keys.iter().map(|(k, n)| format!("{k} {n}")).collect();
                    text.push_str(&format!(" ({})", top.join(", ")));
                }
                if f.unjudged_outcomes > 0 {
                    text.push_str(&format!(
                        ", {} outcomes of further keys not judged",
                        f.unjudged_outcomes
                    ));
                }
            }
            if !not_judged.is_empty() {
                text.push_str(&format!(
                    "; not judged (no traffic reached them): {}",
                    not_judged.join(", ")
                ));
            }
            text
        }
        AuditAction::AutoRolledBack { to, reason } => format!("rolled back to v{to}: {reason}"),
        AuditAction::NotSelected { bucket } => format!("not a canary (bucket {bucket:.1})"),
        AuditAction::OverrideStarted {
            breaker,
            state,
            until,
        } => format!(
            "fleet override: {breaker} {} until {until}: {}",
            state.as_str(),
            record.comment.as_deref().unwrap_or("-")
        ),
        AuditAction::OverrideEnded {
            breaker,
            state,
            why,
        } => {
            format!(
                "fleet override {why}: {breaker} no longer {}",
                state.as_str()
            )
        }
        _ if record.changes.is_empty() => "no parameter changed".to_owned(),
        _ => record
            .changes
            .iter()
            .map(|c| {
                format!(
                    "{}.{} {} → {}",
                    c.breaker,
                    c.field,
                    c.old.as_deref().unwrap_or("-"),
                    c.new.as_deref().unwrap_or("-")
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    };
    format!("{head}: {body}")
}

/// A one-line summary of what `new` changes against `old`: routes and
/// clusters added, removed and changed, and the sections that need a restart.
pub(crate) fn diff_summary(old: &ProxyConfig, new: &ProxyConfig) -> String {
    let mut parts = Vec::new();
    let mut changes = |what: &str, added: Vec<&str>, removed: Vec<&str>, changed: Vec<&str>| {
        for (verb, names) in [("added", added), ("removed", removed), ("changed", changed)] {
            if !names.is_empty() {
                parts.push(format!("{what} {verb}: {}", names.join(", ")));
            }
        }
    };
    let route = |c: &ProxyConfig, n: &str| c.routes.iter().find(|r| r.name == n).cloned();
    changes(
        "routes",
        new.routes
            .iter()
            .filter(|r| route(old, &r.name).is_none())
            .map(|r| r.name.as_str())
            .collect(),
        old.routes
            .iter()
            .filter(|r| route(new, &r.name).is_none())
            .map(|r| r.name.as_str())
            .collect(),
        new.routes
            .iter()
            .filter(|r| route(old, &r.name).is_some_and(|o| o != **r))
            .map(|r| r.name.as_str())
            .collect(),
    );
    changes(
        "clusters",
        new.clusters
            .keys()
            .filter(|k| !old.clusters.contains_key(*k))
            .map(String::as_str)
            .collect(),
        old.clusters
            .keys()
            .filter(|k| !new.clusters.contains_key(*k))
            .map(String::as_str)
            .collect(),
        new.clusters
            .iter()
            .filter(|(k, c)| old.clusters.get(*k).is_some_and(|o| o != *c))
            .map(|(k, _)| k.as_str())
            .collect(),
    );
    if parts.is_empty() {
        "no route or cluster changed".to_owned()
    } else {
        parts.join("; ")
    }
}
