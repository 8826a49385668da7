//! The config document: every breaker's config in the library's own
//! vocabulary, plus an optional rollout plan and who changed what.
//!
//! A document is parsed and validated in full before anything changes:
//! a fleet must never end up half-configured because the fifth breaker of
//! ten had a typo. Parsing refuses what a source should never hand over —
//! more than [`MAX_DOCUMENT_BYTES`], bytes that are not UTF-8 — with an
//! error rather than a crash, and names the breaker and field at fault.

mod overrides;
pub(crate) mod profiles;
mod table;

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use tripline::{CircuitBreakerConfig, ConfigWarning};

pub use crate::error::DocumentError;
use crate::rollout::Rollout;
pub use overrides::{FleetOverride, OverrideState};
pub use profiles::{Profile, When};
pub use table::BreakerTable;

/// Largest document accepted, in bytes: far above any real breaker set,
/// far below what would hurt a process that reads it whole.
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// A set of named breaker tables, applied as one. Each table patches: it
/// changes the fields it names on top of the config the instance started
/// with, and leaves every other field as that config set it (see
/// [`BreakerTable`]).
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
/// // Only the fields named: `inventory` keeps its base's thresholds.
/// assert_eq!(doc.breakers[1].fields.keys().collect::<Vec<_>>(), ["window"]);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Document {
    /// One table per breaker, keyed by its `name`, in the vocabulary of a
    /// breaker config file; each names only the fields it changes.
    #[serde(rename = "breaker", default)]
    pub breakers: Vec<BreakerTable>,
    /// Fleet-wide operator overrides (`[[override]]`), each ending by
    /// itself at its `until`.
    #[serde(rename = "override", default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<FleetOverride>,
    /// Scheduled parameter sets (`[[profile]]`), at most one holding at a
    /// time, laid over the tables above while it holds.
    #[serde(rename = "profile", default, skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<Profile>,
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
        let json = text.trim_start().starts_with('{');
        let mut doc: Document = read(text, json)?;
        // The same text read as typed configs names a field's wrong type
        // or a typo with its line; its values are the tables' canonical form.
        let typed: TypedTables = read(text, json)?;
        let profiles = doc.profiles.iter().flat_map(|p| &p.breakers);
        for table in doc.breakers.iter().chain(profiles) {
            if let Some((field, _)) = table.fields.iter().find(|(_, v)| v.is_null()) {
                return Err(DocumentError::Invalid {
                    breaker: table.name.clone(),
                    field: field.clone(),
                    constraint:
                        "must not be null: leave the field out to keep the instance's own value"
                            .into(),
                });
            }
        }
        for (table, config) in doc.breakers.iter_mut().zip(&typed.breakers) {
            table.normalise(config);
        }
        Ok(doc)
    }

    /// Parses and validates: what every source does before anything changes.
    pub fn parse_and_validate(
        bytes: &[u8],
    ) -> Result<(Document, Vec<DocumentWarning>), DocumentError> {
        let doc = Document::parse(bytes)?;
        let warnings = doc.validate()?;
        Ok((doc, warnings))
    }

    /// Validates every table on the library's defaults (what an applier
    /// that builds the breaker itself runs) and the rollout plan; the first
    /// hard error refuses the whole document, soft ones come back as
    /// warnings. An applier validates each table again on the config its
    /// own breaker started with ([`BreakerTable::resolve`]).
    pub fn validate(&self) -> Result<Vec<DocumentWarning>, DocumentError> {
        let mut names = BTreeSet::new();
        let mut warnings = Vec::new();
        for table in &self.breakers {
            if table.name.is_empty() {
                return Err(DocumentError::Invalid {
                    breaker: String::new(),
                    field: "name".into(),
                    constraint: "must not be empty".into(),
                });
            }
            let (_, found) = table.resolve(&table.default_base())?;
            if !names.insert(table.name.as_str()) {
                return Err(DocumentError::Duplicate(table.name.clone()));
            }
            warnings.extend(warnings_of(&table.name, found));
        }
        overrides::validate(&self.overrides)?;
        profiles::validate(self)?;
        if let Some(rollout) = &self.rollout {
            rollout.validate()?;
        }
        Ok(warnings)
    }

    /// The table of breaker `name`, if the document has one.
    pub fn breaker(&self, name: &str) -> Option<&BreakerTable> {
        self.breakers.iter().find(|c| c.name == name)
    }

    /// The document as TOML, to store or push (what [`parse`](Self::parse) reads back).
    pub fn to_toml(&self) -> Result<String, DocumentError> {
        toml::to_string(self).map_err(|e| DocumentError::Syntax(e.to_string()))
    }
}

/// A document's breaker tables read as whole typed configs: only to name
/// a wrong field with its line, and to normalise the tables' values.
#[derive(Deserialize)]
struct TypedTables {
    #[serde(rename = "breaker", default)]
    breakers: Vec<CircuitBreakerConfig>,
}

fn read<T: serde::de::DeserializeOwned>(text: &str, json: bool) -> Result<T, DocumentError> {
    if json {
        serde_json::from_str(text).map_err(|e| DocumentError::Syntax(e.to_string()))
    } else {
        toml::from_str(text).map_err(|e| DocumentError::Syntax(e.to_string()))
    }
}

/// A breaker's validation warnings, as the audit log keeps them.
pub(crate) fn warnings_of(breaker: &str, found: Vec<ConfigWarning>) -> Vec<DocumentWarning> {
    found
        .into_iter()
        .map(|w| DocumentWarning {
            breaker: breaker.to_owned(),
            field: w.field,
            message: w.message,
        })
        .collect()
}
