//! Field-by-field differences between two breaker configs, for the audit
//! log: an operator reading "payments: failure_rate_threshold 0.5 → 0.3"
//! learns more than from two whole documents.
//!
//! Both configs are turned into their serde form and flattened to dotted
//! keys (`half_open.calls`), so the diff speaks the vocabulary the
//! document was written in and follows new config fields without changes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tripline::CircuitBreakerConfig;

/// One field of one breaker that a change touched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldChange {
    /// The breaker.
    pub breaker: String,
    /// The dotted field (`"*"` when the whole breaker appears or leaves).
    pub field: String,
    /// The value before (`None`: unset or the breaker is new).
    pub old: Option<String>,
    /// The value after (`None`: unset or the breaker left the document).
    pub new: Option<String>,
}

/// The fields that differ between `old` and `new` for breaker `breaker`
/// (`old = None` for a breaker the document adds).
///
/// ```
/// use tripline::CircuitBreakerConfig;
/// use tripline_config::diff_configs;
///
/// let old = CircuitBreakerConfig::default();
/// let new = CircuitBreakerConfig { minimum_calls: 50, ..old.clone() };
/// let changes = diff_configs("payments", Some(&old), &new);
/// assert_eq!(changes.len(), 1);
/// assert_eq!(changes[0].field, "minimum_calls");
/// assert_eq!((changes[0].old.as_deref(), changes[0].new.as_deref()), (Some("20"), Some("50")));
/// ```
pub fn diff_configs(
    breaker: &str,
    old: Option<&CircuitBreakerConfig>,
    new: &CircuitBreakerConfig,
) -> Vec<FieldChange> {
    let before = old.map(flatten_config).unwrap_or_default();
    let after = flatten_config(new);
    let mut keys: Vec<&String> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| FieldChange {
            breaker: breaker.to_owned(),
            field: k.clone(),
            old: before.get(k).cloned(),
            new: after.get(k).cloned(),
        })
        .collect()
}

fn flatten_config(config: &CircuitBreakerConfig) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    // A config always serialises (plain data); a failure would only lose
    // the diff's detail, never the change itself.
    if let Ok(value) = serde_json::to_value(config) {
        flatten("", &value, &mut out);
    }
    out.remove("name");
    out
}

fn flatten(prefix: &str, value: &Value, out: &mut BTreeMap<String, String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        Value::Null => {}
        Value::String(s) => {
            out.insert(prefix.to_owned(), s.clone());
        }
        other => {
            out.insert(prefix.to_owned(), other.to_string());
        }
    }
}
