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

use crate::document::Document;

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

/// What pushing `new` over `old` changes, table field by table field, for
/// any instance: `None` on either side stands for the instance's own value
/// (its file's, or the library's default), which the document does not
/// name. A breaker `new` adds shows the fields it names; one it drops
/// shows `"*"` with `new = None` (its breaker keeps running on what the
/// last document gave it until a reload or restart).
///
/// ```
/// use tripline_config::{Document, diff_documents};
///
/// let old = Document::parse(b"[[breaker]]\nname = \"p\"\nminimum_calls = 5\n").unwrap();
/// let new = Document::parse(b"[[breaker]]\nname = \"p\"\nfailure_rate_threshold = 0.2\n").unwrap();
/// let changes = diff_documents(Some(&old), &new);
/// let seen: Vec<_> = changes.iter()
///     .map(|c| (c.field.as_str(), c.old.as_deref(), c.new.as_deref())).collect();
/// assert_eq!(seen, [("failure_rate_threshold", None, Some("0.2")), ("minimum_calls", Some("5"), None)]);
/// ```
pub fn diff_documents(old: Option<&Document>, new: &Document) -> Vec<FieldChange> {
    let mut changes = Vec::new();
    for table in &new.breakers {
        let before = old.and_then(|d| d.breaker(&table.name));
        let mut fields: Vec<&String> = table
            .fields
            .keys()
            .chain(before.into_iter().flat_map(|b| b.fields.keys()))
            .collect();
        fields.sort();
        fields.dedup();
        for field in fields {
            let was = before.and_then(|b| b.fields.get(field)).map(show);
            let now = table.fields.get(field).map(show);
            if was != now {
                changes.push(FieldChange {
                    breaker: table.name.clone(),
                    field: field.clone(),
                    old: was,
                    new: now,
                });
            }
        }
    }
    for gone in old.into_iter().flat_map(|d| &d.breakers) {
        if new.breaker(&gone.name).is_none() {
            changes.push(FieldChange {
                breaker: gone.name.clone(),
                field: "*".into(),
                old: Some("named".into()),
                new: None,
            });
        }
    }
    changes
}

fn show(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
