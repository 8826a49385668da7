//! The config document: every breaker's config in the library's own
//! vocabulary, plus an optional rollout plan and who changed what.
//!
//! A document is parsed and validated in full before anything changes:
//! a fleet must never end up half-configured because the fifth breaker of
//! ten had a typo. Parsing refuses what a source should never hand over —
//! more than [`MAX_DOCUMENT_BYTES`], bytes that are not UTF-8 — with an
//! error rather than a crash, and names the breaker and field at fault.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tripline::{CircuitBreakerConfig, ConfigWarning};

use crate::rollout::Rollout;

/// Largest document accepted, in bytes: far above any real breaker set,
/// far below what would hurt a process that reads it whole.
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// A set of named breaker configs, applied as one.
///
/// TOML (a JSON object with the same keys works too):
///
/// ```
/// use tripline_config::Document;
///
/// let doc = Document::parse(br#"
///     author = "ops@example.com"
///     comment = "looser slow-call threshold for the evening peak"
///
///     [[breaker]]
///     name = "payments"
///     minimum_calls = 20
///     failure_rate_threshold = 0.5
///     slow_call_duration = "2s"
///     slow_call_rate_threshold = 0.8
///
///     [[breaker]]
///     name = "inventory"
///     window = { kind = "time", length = "10s", buckets = 10 }
/// "#).unwrap();
/// assert_eq!(doc.breakers.len(), 2);
/// assert!(doc.validate().unwrap().is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Document {
    /// One table per breaker, each a full [`CircuitBreakerConfig`] keyed by
    /// its `name` — the same tables a breaker config file holds.
    #[serde(rename = "breaker", default)]
    pub breakers: Vec<CircuitBreakerConfig>,
    /// Run the change in shadow, then on a share of the fleet, before it
    /// counts as done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
    /// Who made the change, for the audit log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// Why, for the audit log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// Why a document was refused. Every variant names what to fix.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DocumentError {
    /// The document is larger than the limit.
    #[error("document is {len} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// Its size.
        len: usize,
        /// The limit ([`MAX_DOCUMENT_BYTES`]).
        limit: usize,
    },
    /// The document is not UTF-8 text.
    #[error("document is not UTF-8: invalid byte at offset {offset}")]
    NotUtf8 {
        /// Where the first invalid byte is.
        offset: usize,
    },
    /// TOML or JSON syntax, an unknown key or a value of the wrong type;
    /// the message carries the line and key.
    #[error("document does not parse: {0}")]
    Syntax(String),
    /// One breaker's config fails validation.
    #[error("breaker {breaker:?}: `{field}` {constraint}")]
    Invalid {
        /// The breaker at fault.
        breaker: String,
        /// The field, dotted for nested values.
        field: String,
        /// What it must satisfy, and what it was.
        constraint: String,
    },
    /// Two tables share one name (metrics and events key breakers by name).
    #[error("breaker {0:?} appears twice")]
    Duplicate(String),
    /// The rollout plan is unusable.
    #[error("`rollout.{field}` {constraint}")]
    Rollout {
        /// The rollout field.
        field: &'static str,
        /// What it must satisfy.
        constraint: String,
    },
}

impl DocumentError {
    /// The breaker at fault, when one is.
    pub fn breaker(&self) -> Option<&str> {
        match self {
            DocumentError::Invalid { breaker, .. } | DocumentError::Duplicate(breaker) => {
                Some(breaker)
            }
            _ => None,
        }
    }
}

/// A warning of one breaker's config, as kept in the audit log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentWarning {
    /// The breaker it concerns.
    pub breaker: String,
    /// The field.
    pub field: String,
    /// What is likely wrong.
    pub message: String,
}

impl Document {
    /// Parses TOML, or JSON when the text starts with `{`, refusing
    /// oversize and non-UTF-8 input. Does not validate: see
    /// [`parse_and_validate`](Self::parse_and_validate).
    pub fn parse(bytes: &[u8]) -> Result<Document, DocumentError> {
        if bytes.len() > MAX_DOCUMENT_BYTES {
            return Err(DocumentError::TooLarge {
                len: bytes.len(),
                limit: MAX_DOCUMENT_BYTES,
            });
        }
        let text = std::str::from_utf8(bytes).map_err(|e| DocumentError::NotUtf8 {
            offset: e.valid_up_to(),
        })?;
        if text.trim_start().starts_with('{') {
            serde_json::from_str(text).map_err(|e| DocumentError::Syntax(e.to_string()))
        } else {
            toml::from_str(text).map_err(|e| DocumentError::Syntax(e.to_string()))
        }
    }

    /// Parses and validates: what every source does before anything changes.
    pub fn parse_and_validate(
        bytes: &[u8],
    ) -> Result<(Document, Vec<DocumentWarning>), DocumentError> {
        let doc = Document::parse(bytes)?;
        let warnings = doc.validate()?;
        Ok((doc, warnings))
    }

    /// Validates every breaker and the rollout plan; the first hard error
    /// refuses the whole document, soft ones come back as warnings.
    pub fn validate(&self) -> Result<Vec<DocumentWarning>, DocumentError> {
        let mut names = BTreeSet::new();
        let mut warnings = Vec::new();
        for config in &self.breakers {
            let found = config.validate().map_err(|e| DocumentError::Invalid {
                breaker: config.name.clone(),
                field: e.field,
                constraint: e.constraint,
            })?;
            if !names.insert(config.name.as_str()) {
                return Err(DocumentError::Duplicate(config.name.clone()));
            }
            warnings.extend(found.into_iter().map(|w: ConfigWarning| DocumentWarning {
                breaker: config.name.clone(),
                field: w.field,
                message: w.message,
            }));
        }
        if let Some(rollout) = &self.rollout {
            rollout.validate()?;
        }
        Ok(warnings)
    }

    /// The config of breaker `name`, if the document has one.
    pub fn breaker(&self, name: &str) -> Option<&CircuitBreakerConfig> {
        self.breakers.iter().find(|c| c.name == name)
    }

    /// The document as TOML, to store or push (what [`parse`](Self::parse) reads back).
    pub fn to_toml(&self) -> Result<String, DocumentError> {
        toml::to_string(self).map_err(|e| DocumentError::Syntax(e.to_string()))
    }
}

/// Refuses a zero duration where one would make a rollout step meaningless.
pub(crate) fn nonzero(field: &'static str, d: Duration) -> Result<(), DocumentError> {
    if d.is_zero() {
        return Err(DocumentError::Rollout {
            field,
            constraint: "must be longer than zero".into(),
        });
    }
    Ok(())
}
