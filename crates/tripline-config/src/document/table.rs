//! A document's `[[breaker]]` table: a patch of the fields it names, laid
//! on the config the instance started with.
//!
//! # Why a patch, not a whole config
//!
//! An operator who pushes `failure_rate_threshold = 0.2` asks for one
//! threshold. Read as a whole [`CircuitBreakerConfig`], the table would
//! also reset every field it leaves out to the library's default: a proxy
//! whose file says `window = { kind = "count", size = 20 }` and
//! `minimum_calls = 10` would silently run a 100-call window and 20
//! minimum calls. So a table keeps the fields it names and nothing else,
//! and [`BreakerTable::apply_to`] lays them on the instance's own config
//! (its *base*: the proxy file's, or the library's defaults for a breaker
//! an applier builds itself).
//!
//! The unit of a patch is a top-level field. A nested table (`window`,
//! `half_open`, `open_duration`, `cooldown`, `warm_up`, `slow_call`) is one
//! field and replaces the base's whole value: `window = { kind = "time",
//! length = "10s", buckets = 10 }` means that window, whatever the base's
//! was, so a patch never yields a mix of two window kinds. A table cannot
//! unset an optional field the base sets (TOML has no null); the file is
//! the place for that.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tripline::CircuitBreakerConfig;

use super::DocumentError;

/// One `[[breaker]]` table: the breaker's name and the fields it sets.
///
/// ```
/// use tripline::{CircuitBreakerConfig, WindowConfig};
/// use tripline_config::Document;
///
/// let doc = Document::parse(b"[[breaker]]\nname = \"payments\"\nfailure_rate_threshold = 0.2\n").unwrap();
/// let file = CircuitBreakerConfig {
///     name: "payments".into(),
///     window: WindowConfig::Count { size: 20 },
///     minimum_calls: 10,
///     ..Default::default()
/// };
/// let live = doc.breakers[0].apply_to(&file).unwrap();
/// assert_eq!(live.failure_rate_threshold, 0.2);
/// assert_eq!((live.window, live.minimum_calls), (WindowConfig::Count { size: 20 }, 10));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BreakerTable {
    /// The breaker (or registry family) the table configures.
    pub name: String,
    /// The fields it names, in their serde form (durations as `"5s"`),
    /// normalised by [`Document::parse`](super::Document::parse).
    #[serde(flatten)]
    pub fields: BTreeMap<String, Value>,
}

impl BreakerTable {
    /// A table naming every field of `config`: applied to any base, it
    /// gives `config` back (what an automatic rollback re-installs).
    pub fn whole(config: &CircuitBreakerConfig) -> BreakerTable {
        let mut fields = match serde_json::to_value(config) {
            Ok(Value::Object(map)) => map.into_iter().collect(),
            _ => BTreeMap::new(),
        };
        // Unset optional fields stay named (as null), so the base's
        // values for them do not come back.
        fields.remove("name");
        BreakerTable {
            name: config.name.clone(),
            fields,
        }
    }

    /// `base` with the fields this table names replaced, renamed to the
    /// table's name; not validated (see [`resolve`](Self::resolve)).
    pub fn apply_to(
        &self,
        base: &CircuitBreakerConfig,
    ) -> Result<CircuitBreakerConfig, DocumentError> {
        let mut merged = match serde_json::to_value(base) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        for (field, value) in &self.fields {
            merged.insert(field.clone(), value.clone());
        }
        merged.insert("name".into(), Value::String(self.name.clone()));
        serde_json::from_value(Value::Object(merged)).map_err(|e| DocumentError::Invalid {
            breaker: self.name.clone(),
            field: self.first_field_in(&e.to_string()),
            constraint: e.to_string(),
        })
    }

    /// [`apply_to`](Self::apply_to), then the library's validation: the
    /// config this instance would run, or the field it refuses.
    pub fn resolve(
        &self,
        base: &CircuitBreakerConfig,
    ) -> Result<(CircuitBreakerConfig, Vec<tripline::ConfigWarning>), DocumentError> {
        let config = self.apply_to(base)?;
        let warnings = config.validate().map_err(|e| DocumentError::Invalid {
            breaker: self.name.clone(),
            field: e.field,
            constraint: e.constraint,
        })?;
        Ok((config, warnings))
    }

    /// The library's defaults under this table's name: the base of a
    /// breaker an applier builds itself.
    pub fn default_base(&self) -> CircuitBreakerConfig {
        CircuitBreakerConfig {
            name: self.name.clone(),
            ..CircuitBreakerConfig::default()
        }
    }

    /// The named fields in the canonical form the typed `config` writes
    /// them (`"5000ms"` becomes `"5s"`), so a document read back from its
    /// own TOML is the same document.
    pub(crate) fn normalise(&mut self, config: &CircuitBreakerConfig) {
        if let Ok(Value::Object(typed)) = serde_json::to_value(config) {
            for (field, value) in &mut self.fields {
                if let Some(canonical) = typed.get(field) {
                    value.clone_from(canonical);
                }
            }
        }
    }

    /// The named field an error message mentions, else `"*"`.
    fn first_field_in(&self, message: &str) -> String {
        self.fields
            .keys()
            .find(|f| message.contains(f.as_str()))
            .cloned()
            .unwrap_or_else(|| "*".to_owned())
    }
}
